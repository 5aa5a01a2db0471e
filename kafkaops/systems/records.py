"""Reading a partition's records between two offsets, when offsets are not records (read-only).

A partition's offsets are not all records a consumer is given. A transaction's commit or abort marker takes
an offset and is never delivered; so are the records of an aborted transaction (to a ``read_committed``
consumer, which every reader here is), and the records compaction removed leave holes. A read that waits
until it has *seen* the record at offset ``stop - 1`` waits forever when that offset is a marker: the last
offset of every partition a transactional producer (MirrorMaker 2 with exactly-once, Kafka Connect's
offsets) wrote to. Issue 42: the switchover's tail read, its target scan and its caught-up anchor all timed
out that way, *after* the depool, with no site serving.

So every read here ends on the consumer's **position**, the offset it will fetch next, which the client
moves past markers, aborted records and holes even when it delivers nothing; and it ends at the partition's
**last stable offset** (LSO), not its high watermark: a ``read_committed`` consumer is never given a record
of a transaction still open, so a read to the high watermark would wait for that transaction to end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.model import KafkaEndpoint
from kafkaops.policy import kafka_acls as acls
from kafkaops.policy.kafka_acls import Acl
from kafkaops.systems.kafka_auth import RefusalWatch, build, classify, librdkafka_config

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Record:
    """One delivered record: what the readers of this module give back."""

    offset: int
    timestamp: int  # epoch ms (CreateTime, as MirrorMaker 2 keeps it)
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Bounds:
    """A partition's offsets as a ``read_committed`` consumer sees them."""

    start: int  # log start offset
    stable: int  # last stable offset: records below it are committed (or not transactional)
    end: int  # high watermark: records in [stable, end) belong to transactions still open


class RecordReader:
    """A throwaway ``read_committed`` consumer of the cluster at ``bootstrap`` that assigns (never subscribes:
    it joins no group and commits nothing). Use as a context manager."""

    def __init__(self, endpoint: KafkaEndpoint, *, timeout: float = 10.0) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        self.endpoint, self.bootstrap, self.cluster = endpoint, endpoint.bootstrap_servers, endpoint.name
        self.timeout = timeout
        self._refusals = RefusalWatch()
        common: dict[str, Any] = {**librdkafka_config(endpoint), "socket.timeout.ms": int(timeout * 1000),
                                  "log_level": 2, "error_cb": self._refusals}
        self._consumer = build(Consumer, {**common, "group.id": f"kafkaops-read-{uuid.uuid4()}",
                                          "enable.auto.commit": False, "isolation.level": "read_committed",
                                          "fetch.wait.max.ms": 100}, endpoint)
        self._admin = build(AdminClient, common, endpoint)

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._consumer.close()

    def _unreachable(self, what: str, exc: BaseException | str, needs: Sequence[Acl] = ()) -> KafkaOpsError:
        refusal = classify(self.endpoint, what, exc, needs) if isinstance(exc, BaseException) else None
        if refusal is not None:
            return refusal
        self._refusals.check(self.endpoint, what, self._admin)
        return UnreachableError(f"Kafka at {self.bootstrap} ({self.cluster}) did not answer {what}: {exc}",
                                hint="check the site's brokers are up and bootstrap_servers in its inventory")

    def bounds(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, Bounds]:
        """Log start, last stable offset and high watermark of each partition (two batched requests)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        keys = sorted(set(partitions))
        if not keys:
            return {}
        answers: dict[str, dict[TopicPartitionKey, int]] = {}
        for name, spec, isolation in (("start", OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                                      ("stable", OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
                                      ("end", OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)):
            try:
                futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in keys},
                                                   isolation_level=isolation, request_timeout=self.timeout)
                answers[name] = {(tp.topic, tp.partition): int(f.result(timeout=self.timeout + 5).offset)
                                 for tp, f in futures.items()}
            except Exception as exc:
                raise self._unreachable(f"ListOffsets ({name}) of {len(keys)} partition(s)", exc,
                                        [acls.topic("DESCRIBE", keys[0][0])]) from exc
        return {k: Bounds(answers["start"][k], answers["stable"][k], answers["end"][k]) for k in keys}

    def metadata(self, topic: str) -> Any:
        """The cluster's metadata of ``topic`` (``ClusterMetadata``; raises ``KafkaException``)."""
        return self._consumer.list_topics(topic, timeout=self.timeout)

    def offsets_at(self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int) -> dict[TopicPartitionKey, int]:
        """The first offset of each partition whose record's timestamp is at or after ``timestamp_ms``: the
        partition's last stable offset where no record is that recent (nothing to read there)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        keys = sorted(set(partitions))
        if not keys:
            return {}
        bounds = self.bounds(keys)
        try:
            futures = self._admin.list_offsets({TopicPartition(t, p): OffsetSpec.for_timestamp(int(timestamp_ms))
                                                for t, p in keys}, request_timeout=self.timeout)
            found = {(tp.topic, tp.partition): int(f.result(timeout=self.timeout + 5).offset)
                     for tp, f in futures.items()}
        except Exception as exc:
            raise self._unreachable(f"ListOffsets (by timestamp) of {len(keys)} partition(s)", exc,
                                    [acls.topic("DESCRIBE", keys[0][0])]) from exc
        return {k: found[k] if found[k] >= 0 else bounds[k].stable for k in keys}

    def _position(self, topic: str, partition: int) -> int:
        from confluent_kafka import TopicPartition

        return int(self._consumer.position([TopicPartition(topic, partition)])[0].offset)

    def read(self, topic: str, partition: int, start: int, stop: int, *, limit: int | None = None
             ) -> tuple[list[Record], bool]:
        """The records delivered from ``start`` up to ``stop`` (exclusive; at most the last stable offset, see
        the module docstring), at most ``limit`` of them, in offset order.

        Returns:
            ``(records, complete)``: ``complete`` is False when ``limit`` cut the read before ``stop``.

        Raises:
            UnreachableError: the consumer's position did not move for ``timeout`` seconds.
        """
        from confluent_kafka import TopicPartition

        records: list[Record] = []
        if start >= stop:
            return records, True
        self._consumer.assign([TopicPartition(topic, partition, start)])
        deadline, at = time.monotonic() + self.timeout, start
        while at < stop:
            if limit is not None and len(records) >= limit:
                return records, False
            if time.monotonic() > deadline:
                raise UnreachableError(f"Kafka at {self.bootstrap} ({self.cluster}) gave {topic}-{partition} only "
                                       f"up to offset {at} of {start}..{stop - 1} within {self.timeout:.0f}s",
                                       hint="check the site's brokers; a transaction left open holds readers "
                                            "back until it times out (transaction.timeout.ms)")
            for msg in self._consumer.consume(500, timeout=0.3):
                offset = msg.offset()
                if msg.error() is not None or offset is None or offset >= stop:
                    continue
                if limit is not None and len(records) >= limit:
                    return records, False
                records.append(Record(offset, int(msg.timestamp()[1]), msg.key(), msg.value()))
            position = self._position(topic, partition)
            if position > at:  # past records, markers, aborted records and holes alike
                at, deadline = position, time.monotonic() + self.timeout
        return records, True

    def first(self, topic: str, partition: int, start: int, stop: int) -> Record | None:
        """The first record delivered in ``[start, stop)``: None when that range holds only markers,
        aborted records or holes."""
        records, _ = self.read(topic, partition, start, stop, limit=1)
        return records[0] if records else None

    def last(self, topic: str, partition: int, before: int, start: int, n: int = 1) -> list[Record]:
        """The last ``n`` records delivered before offset ``before`` (not below ``start``), oldest first: read
        backwards in widening windows, since how many offsets before ``before`` are markers is unknown."""
        window = max(8, 2 * n)
        while True:
            lo = max(start, before - window)
            records, _ = self.read(topic, partition, lo, before)
            if len(records) >= n or lo <= start:
                return records[-n:] if n else []
            window *= 8

    def whole(self, topic: str, partitions: Iterable[int]) -> list[Record]:
        """Every record of ``topic``'s ``partitions`` to their last stable offsets, each partition in offset
        order: for small topics (MirrorMaker's offsets and checkpoints)."""
        out: list[Record] = []
        for (t, p), b in sorted(self.bounds([(topic, p) for p in partitions]).items()):
            out += self.read(t, p, b.start, b.stable)[0]
        return out

    def count(self, topic: str, partition: int, start: int, stop: int) -> int:
        """How many records a consumer is given in ``[start, stop)``: a lag in records, not in offsets."""
        return len(self.read(topic, partition, start, stop)[0])
