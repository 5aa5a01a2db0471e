"""Benchmark the post-check's Spark data scan against kcat and a single-process confluent-kafka consumer.

Produces N small records (default 10M) across >= 24 partitions of a dedicated topic with kcat (large
batches, lz4), then reads exactly the same offset ranges three ways:

* ``kcat -C ... -e`` to /dev/null (librdkafka in C, the floor for "just read it"),
* one Python process with confluent-kafka's ``Consumer.consume(10000)`` (what a naive checker does),
* the post-check's Spark scan (``kafkaops.health.spark_job.run_scan``) with each reader of
  ``--readers`` (``fast``: ours, ``builtin``: Spark's ``kafka`` source; both by default), with a new
  session (its start included; for the first size also the JVM's), and again warm (session reused: the
  per-scan cost on a long-lived driver). Both readers must count the same records.

Two floors explain where the scan's time goes (``--skip floors`` leaves them out):

* Kafka's own Java consumer (``org.apache.kafka.tools.ConsumerPerformance``, JVM start included): what
  the JVM's Kafka client costs, i.e. the floor for the scan's reader;
* Spark's own Kafka source alone (``spark.read.format("kafka")...count()``, warm session, connector
  jars from ``scripts/install.sh``): the reader the scan replaced, and why.

With ``--sizes 10000000,50000000`` it tops the topic up to each size and reports whether the scan time
grows near-linearly. The driver-side metadata checks have their own benchmark:
``bench/bench_metadata_checks.py`` (100,000 partitions).

Run against your own lab (never a production cluster)::

    KAFKAOPS_LAB_DIR=/tmp/kafkaops-spark-lab python bench/bench_spark_scan.py \
        --inventory /tmp/spark-lab.yaml --sizes 10000000,50000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafkaops.health import scan_jar  # noqa: E402
from kafkaops.health.data import ScanRange  # noqa: E402
from kafkaops.health.spark_job import ScanSpec, run_scan  # noqa: E402
from kafkaops.health.spark_job import spark_session as scan_session  # noqa: E402
from kafkaops.inventory import load_inventory  # noqa: E402
from kafkaops.model import KafkaEndpoint  # noqa: E402
from kafkaops_lab.kafka import LabKafka as KafkaAdmin  # noqa: E402
from kafkaops_lab.kafka import TopicSpec  # noqa: E402


def spark_session() -> Any:
    """The scan's session: it carries both readers (ours and Spark's Kafka connector, our kafka-clients
    first), which the source floor uses too."""
    scan_jar.spark_jars()  # the fast reader must be built: this bench measures it
    return scan_session()


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    offs = KafkaAdmin(KafkaEndpoint(bootstrap), timeout=15).list_offsets([(topic, p) for p in range(partitions)])
    return {p: int(offs[(topic, p)][1] or 0) for p in range(partitions)}


def lines(start: int, n: int, chunk: int = 200_000) -> Iterator[bytes]:
    for i in range(start, start + n, chunk):
        yield b"".join(b"m%011d\n" % j for j in range(i, min(i + chunk, start + n)))


def produce(bootstrap: str, topic: str, start: int, n: int) -> float:
    """Produce ``n`` 12-byte records with kcat (keyless: spread over partitions); return seconds."""
    t = time.monotonic()
    proc = subprocess.Popen(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-z", "lz4", "-X", "linger.ms=50",
         "-X", "batch.num.messages=100000", "-X", "batch.size=4000000", "-X", "queue.buffering.max.messages=2000000",
         "-X", "queue.buffering.max.kbytes=2000000", "-X", "acks=1", "-X", "sticky.partitioning.linger.ms=5"],
        stdin=subprocess.PIPE)
    assert proc.stdin is not None
    for block in lines(start, n):
        proc.stdin.write(block)
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"kcat producer failed with {proc.returncode}")
    return time.monotonic() - t


def time_kcat(bootstrap: str, topic: str, end: dict[int, int]) -> float:
    """kcat reading every partition from offset 0 to its end (exit at end), output to /dev/null."""
    total = sum(end.values())
    t = time.monotonic()
    subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-c", str(total)],
                   stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t


def time_confluent(bootstrap: str, topic: str, end: dict[int, int]) -> tuple[float, int]:
    """One Python process, confluent-kafka Consumer.consume(10000) until every partition is at its end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                  "queued.max.messages.kbytes": 512 << 10, "log_level": 2})
    c.assign([TopicPartition(topic, p, 0) for p, e in end.items() if e > 0])
    remaining = {p for p, e in end.items() if e > 0}
    n = 0
    t = time.monotonic()
    while remaining:
        for m in c.consume(10000, timeout=1.0):
            if m.error():
                continue
            n += 1
            p, offset = m.partition(), m.offset()
            if p is not None and offset is not None and offset >= end[p] - 1:
                remaining.discard(p)
    elapsed = time.monotonic() - t
    c.close()
    return elapsed, n


def time_java_consumer(bootstrap: str, topic: str, end: dict[int, int]) -> float:
    """Kafka's ConsumerPerformance tool reading the same records (JVM start included)."""
    from kafkaops_lab.dirs import kafka_jars

    with tempfile.TemporaryDirectory(prefix="kafkaops-bench-") as tmp:
        props = Path(tmp) / "consumer.properties"
        props.write_text("max.poll.records=100000\n")
        t = time.monotonic()
        subprocess.run(["java", "-cp", f"{kafka_jars()}/*", "org.apache.kafka.tools.ConsumerPerformance",
                        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(sum(end.values())),
                        "--timeout", "60000", "--consumer.config", str(props)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return time.monotonic() - t


def time_spark_source(bootstrap: str, topic: str, end: dict[int, int], spark: Any) -> float:
    """Spark's Kafka source alone: ``count()`` over the same ranges, tuned as the scan once tuned it."""
    import json

    t = time.monotonic()
    n = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("assign", json.dumps({topic: sorted(end)}))
         .option("startingOffsets", json.dumps({topic: {str(p): 0 for p in end}}))
         .option("endingOffsets", json.dumps({topic: {str(p): e for p, e in end.items()}}))
         .option("failOnDataLoss", "false").option("kafka.max.poll.records", "100000")
         .option("kafka.max.partition.fetch.bytes", str(4 << 20)).option("kafka.fetch.max.bytes", str(16 << 20))
         .load().count())
    elapsed = time.monotonic() - t
    assert n == sum(end.values()), (n, sum(end.values()))
    return elapsed


def time_spark(bootstrap: str, topic: str, end: dict[int, int], spark: Any = None,
               reader: str = "fast") -> tuple[float, int]:
    ranges = tuple(ScanRange(topic, p, 0, e, 0) for p, e in sorted(end.items()))
    t = time.monotonic()
    res = run_scan(ScanSpec(bootstrap, ranges, reader=reader), spark=spark)
    elapsed = time.monotonic() - t
    bad = [s for s in res.partitions.values() if s.missing]
    assert not bad, f"the {reader} reader missed records: {bad[:2]}"
    assert res.records == sum(end.values()), (reader, res.records, sum(end.values()))
    return elapsed, res.records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default=os.environ.get("KAFKAOPS_TEST_INVENTORY", str(REPO / "inventory/lab.yaml")))
    ap.add_argument("--topic", default="bench.scan")
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--sizes", default="10000000", help="comma-separated record counts to scan")
    ap.add_argument("--replication", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated: kcat,confluent,floors,spark")
    ap.add_argument("--readers", default="fast,builtin", help="the scan's readers to measure (fast, builtin)")
    args = ap.parse_args()
    if not shutil.which("kcat"):
        raise SystemExit("kcat is not installed")
    cluster = load_inventory(Path(args.inventory))
    b = cluster.bootstrap_servers
    admin = KafkaAdmin(cluster.kafka, timeout=30)
    admin.create_topics([TopicSpec(args.topic, args.partitions, args.replication)])
    skip = set(filter(None, args.skip.split(",")))
    rows: list[tuple[int, str, float, float]] = []
    spark = None
    for size in [int(s) for s in args.sizes.split(",")]:
        end = ends(b, args.topic, args.partitions)
        have = sum(end.values())
        if have < size:
            secs = produce(b, args.topic, have, size - have)
            print(f"produced {size - have:,} records in {secs:.1f} s ({(size - have) / secs:,.0f}/s)", flush=True)
            end = ends(b, args.topic, args.partitions)
        total = sum(end.values())
        print(f"--- {total:,} records in {args.partitions} partitions", flush=True)
        results: dict[str, float] = {}
        runs: list[tuple[str, Callable[[], float]]] = []
        if "kcat" not in skip:
            def read_kcat(e: dict[int, int] = end) -> float:
                return time_kcat(b, args.topic, e)

            runs.append(("kcat -C to /dev/null", read_kcat))
        if "confluent" not in skip:
            def confluent(e: dict[int, int] = end) -> float:
                return time_confluent(b, args.topic, e)[0]

            runs.append(("confluent-kafka, 1 process", confluent))
        for reader in [r for r in args.readers.split(",") if r] if "spark" not in skip else []:
            def cold(e: dict[int, int] = end, reader: str = reader) -> float:
                # A fresh session: getOrCreate would hand back the warm one of an earlier size.
                nonlocal spark
                if spark is not None:
                    spark.stop()
                    spark = None
                t = time.monotonic()
                s = spark_session()
                time_spark(b, args.topic, e, s, reader)
                s.stop()
                return time.monotonic() - t

            def warm(e: dict[int, int] = end, reader: str = reader) -> float:
                nonlocal spark
                if spark is None:
                    spark = spark_session()
                time_spark(b, args.topic, {0: min(e[0], 1000)}, spark, reader)  # warm up the JVM and the reader
                return time_spark(b, args.topic, e, spark, reader)[0]

            runs.append((f"Spark scan local[2], {reader} reader, new session (start incl.)", cold))
            runs.append((f"Spark scan local[2], {reader} reader, warm session", warm))
        if "floors" not in skip:
            def java(e: dict[int, int] = end) -> float:
                return time_java_consumer(b, args.topic, e)

            def source(e: dict[int, int] = end) -> float:
                nonlocal spark
                if spark is None:
                    spark = spark_session()
                    time_spark(b, args.topic, {0: min(e[0], 1000)}, spark)
                return time_spark_source(b, args.topic, e, spark)

            runs.append(("floor: Java consumer (ConsumerPerformance)", java))
            runs.append(("floor: Spark's Kafka source count(), warm", source))
        for name, fn in runs:
            secs = fn()
            results[name] = secs
            print(f"{name:<50} {secs:8.1f} s  {total / secs:>12,.0f} records/s", flush=True)
            rows.append((total, name, secs, total / secs))
    if spark is not None:
        spark.stop()
    # An RF-1 topic below the lab's min.insync.replicas would make every later pre-flight refuse.
    from confluent_kafka.admin import AdminClient

    deleter = AdminClient({"bootstrap.servers": b})  # kept alive until its futures resolve
    for fut in deleter.delete_topics([args.topic]).values():
        fut.result(30)
    print("\n| records | reader | seconds | records/s | vs kcat |\n|---|---|---|---|---|")
    kcat = {r[0]: r[2] for r in rows if r[1].startswith("kcat")}
    for total, name, secs, rate in rows:
        ratio = f"{secs / kcat[total]:.2f}x" if total in kcat else ""
        print(f"| {total:,} | {name} | {secs:.1f} | {rate:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
