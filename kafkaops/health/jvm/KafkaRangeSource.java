/*
 * The post-check's Kafka reader for Spark: exact offset ranges, read in columnar batches.
 *
 * Why not Spark's own Kafka source: it turns every record into a row of seven columns (topic string,
 * key, value, headers, a java.sql.Timestamp...) one at a time, and measured ~0.3M records/s per core
 * here, where Kafka's Java consumer reads ~3M/s. The scan needs three longs per record (four columns
 * and the value for event topics), so this source hands Spark column vectors filled straight from
 * the consumer's records, no shuffle, no per-record objects of its own. One task per group of
 * ranges (the caller makes one group per core, balanced by record count), one consumer per task:
 * creating a consumer per partition and fetching one partition at a time cost more than the reading.
 * Built by kafkaops/health/scan_jar.py (scripts/install.sh) against the Spark jars pyspark ships and
 * the cached kafka-clients; shipped to executors with spark.jars.
 *
 * Options: "ranges" = groups separated by "|", each "topic:partition:start:end:key;..." (key: the scan
 * kernel's int64 topic id and partition, emitted per record), "withValue" = "true" to add ts_type and
 * value (event topics), and any "kafka.*" consumer setting ("kafka.bootstrap.servers" is required).
 *
 * Records below a range's start (a reset after retention deleted the start) and from its end on are
 * skipped; a range whose records are gone ends when the consumer's position reaches the end, so
 * deleted or compacted records show up in the kernel as holes instead of failing the job.
 */
package org.kafkaops.scan;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

public final class KafkaRangeSource implements TableProvider, DataSourceRegister {

    static final int BATCH_ROWS = 65536;

    @Override
    public String shortName() {
        return "kafkaops-ranges";
    }

    static StructType schema(boolean withValue) {
        StructType s = new StructType()
                .add("key", DataTypes.LongType, false)
                .add("offset", DataTypes.LongType, false)
                .add("ts", DataTypes.LongType, false);
        return withValue ? s.add("ts_type", DataTypes.IntegerType, false).add("value", DataTypes.BinaryType, true) : s;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return schema(options.getBoolean("withValue", false));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new RangeTable(schema, new CaseInsensitiveStringMap(properties));
    }

    /** One offset range of one partition. */
    static final class Range implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String topic;
        final int partition;
        final long start;
        final long end;
        final long key;

        Range(String spec) {
            String[] f = spec.split(":");
            if (f.length != 5) {
                throw new IllegalArgumentException("bad range '" + spec + "': want topic:partition:start:end:key");
            }
            topic = f[0];
            partition = Integer.parseInt(f[1]);
            start = Long.parseLong(f[2]);
            end = Long.parseLong(f[3]);
            key = Long.parseLong(f[4]);
        }
    }

    /** The ranges one Spark task reads with one consumer (the caller balances groups by record count). */
    static final class Group implements InputPartition {
        private static final long serialVersionUID = 1L;
        final List<Range> ranges = new ArrayList<>();
    }

    static final class RangeTable implements Table, SupportsRead, ScanBuilder, Scan, Batch {
        private final StructType schema;
        private final CaseInsensitiveStringMap options;

        RangeTable(StructType schema, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.options = options;
        }

        @Override public String name() { return "kafkaops-ranges"; }
        @SuppressWarnings("deprecation")
        @Override public StructType schema() { return schema; }
        @Override public Set<TableCapability> capabilities() { return Set.of(TableCapability.BATCH_READ); }
        @Override public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) { return this; }
        @Override public Scan build() { return this; }
        @Override public StructType readSchema() { return schema; }
        @Override public Batch toBatch() { return this; }

        @Override
        public InputPartition[] planInputPartitions() {
            List<InputPartition> out = new ArrayList<>();
            for (String group : options.getOrDefault("ranges", "").split("\\|")) {
                Group g = new Group();
                for (String spec : group.split(";")) {
                    if (!spec.isEmpty()) {
                        g.ranges.add(new Range(spec));
                    }
                }
                if (!g.ranges.isEmpty()) {
                    out.add(g);
                }
            }
            return out.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            HashMap<String, String> kafka = new HashMap<>();
            for (Map.Entry<String, String> e : options.entrySet()) {
                if (e.getKey().startsWith("kafka.")) {
                    kafka.put(e.getKey().substring("kafka.".length()), e.getValue());
                }
            }
            if (!kafka.containsKey(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
                throw new IllegalArgumentException("option kafka.bootstrap.servers is required");
            }
            return new Readers(kafka, schema.length() > 3, options.getLong("pollTimeoutMs", 120_000L));
        }
    }

    static final class Readers implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final HashMap<String, String> kafka;
        private final boolean withValue;
        private final long pollTimeoutMs;

        Readers(HashMap<String, String> kafka, boolean withValue, long pollTimeoutMs) {
            this.kafka = kafka;
            this.withValue = withValue;
            this.pollTimeoutMs = pollTimeoutMs;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("kafkaops-ranges reads columnar batches only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new GroupReader((Group) partition, kafka, withValue, pollTimeoutMs);
        }
    }

    /**
     * One consumer for a group of ranges: partitions led by different brokers are fetched in
     * parallel and one consumer is created per task, not per partition (both dominated the time
     * of one-partition-per-task reads here).
     */
    static final class GroupReader implements PartitionReader<ColumnarBatch> {
        private final Map<TopicPartition, Range> open = new HashMap<>();
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final long pollTimeoutMs;
        private final OnHeapColumnVector[] vectors;
        private final ColumnarBatch batch;
        private ConsumerRecords<byte[], byte[]> polled = null;
        private ArrayDeque<TopicPartition> partitions = new ArrayDeque<>();
        private Iterator<ConsumerRecord<byte[], byte[]>> pending = Collections.emptyIterator();
        private TopicPartition currentTp = null;
        private Range current = null;
        private long currentKey;
        private long idleSince = -1;

        GroupReader(Group group, Map<String, String> kafka, boolean withValue, long pollTimeoutMs) {
            this.pollTimeoutMs = pollTimeoutMs;
            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100000");
            props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(4 << 20));
            props.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(32 << 20));
            props.putAll(kafka);
            for (Range r : group.ranges) {
                if (r.start < r.end) {
                    open.put(new TopicPartition(r.topic, r.partition), r);
                }
            }
            this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.consumer.assign(new ArrayList<>(open.keySet()));
            for (Map.Entry<TopicPartition, Range> e : open.entrySet()) {
                consumer.seek(e.getKey(), e.getValue().start);
            }
            this.vectors = OnHeapColumnVector.allocateColumns(BATCH_ROWS, schema(withValue));
            this.batch = new ColumnarBatch(vectors);
        }

        private void close(TopicPartition tp) {
            open.remove(tp);
            consumer.pause(List.of(tp));
        }

        /** The next record inside an open range (its range in {@code current}), or null when all are read. */
        private ConsumerRecord<byte[], byte[]> nextRecord() {
            while (true) {
                while (pending.hasNext()) {
                    ConsumerRecord<byte[], byte[]> r = pending.next();
                    if (current == null || r.offset() < current.start) {
                        continue;  // a closed range's prefetched records, or before a reset start
                    }
                    if (r.offset() >= current.end - 1) {
                        close(currentTp);
                        Range range = current;
                        current = null;
                        if (r.offset() >= range.end) {
                            continue;
                        }
                        currentKey = range.key;
                        return r;
                    }
                    currentKey = current.key;
                    return r;
                }
                if (polled != null && !partitions.isEmpty()) {
                    currentTp = partitions.removeFirst();
                    current = open.get(currentTp);
                    pending = polled.records(currentTp).iterator();
                    continue;
                }
                // Ranges whose remaining records are gone (compaction, deletion, transaction markers).
                for (TopicPartition tp : new ArrayList<>(open.keySet())) {
                    if (consumer.position(tp) >= open.get(tp).end) {
                        close(tp);
                    }
                }
                if (open.isEmpty()) {
                    return null;
                }
                polled = consumer.poll(Duration.ofMillis(500));
                partitions = new ArrayDeque<>(polled.partitions());
                long now = System.currentTimeMillis();
                if (!polled.isEmpty()) {
                    idleSince = -1;
                } else if (idleSince < 0) {
                    idleSince = now;
                } else if (now - idleSince > pollTimeoutMs) {
                    throw new IllegalStateException("no record for " + pollTimeoutMs + " ms from " + open.keySet());
                }
            }
        }

        @Override
        public boolean next() {
            for (OnHeapColumnVector v : vectors) {
                v.reset();
            }
            int n = 0;
            ConsumerRecord<byte[], byte[]> r;
            while (n < BATCH_ROWS && (r = nextRecord()) != null) {
                vectors[0].putLong(n, currentKey);
                vectors[1].putLong(n, r.offset());
                vectors[2].putLong(n, r.timestamp());
                if (vectors.length > 3) {
                    vectors[3].putInt(n, r.timestampType() == TimestampType.LOG_APPEND_TIME ? 1 : 0);
                    byte[] value = r.value();
                    if (value == null) {
                        vectors[4].putNull(n);
                    } else {
                        vectors[4].putByteArray(n, value);
                    }
                }
                n++;
            }
            batch.setNumRows(n);
            return n > 0;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() {
            batch.close();
            consumer.close(Duration.ofSeconds(5));
        }
    }
}
