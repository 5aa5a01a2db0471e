"""MirrorMaker 2's lag per mirrored partition, read from the two clusters it connects (read-only).

What is mirrored from site ``src`` to site ``dst``: ``src``'s own prefixed topics (``eqiad.*``), the way
the seed's ``eqiad.*``/``codfw.*`` layout is mirrored. The lag of a partition is its log end at the
source minus what MirrorMaker committed as mirrored in ``mm2-offsets.<src>.internal`` on ``dst``
(:mod:`kafkaops.facts.mirror`). Committed positions trail the records actually written by up to one
``offset.flush.interval.ms``, so the lag read here is never *less* than the truth: a switchover that
waits for zero has waited long enough.
"""

from __future__ import annotations

import re
import time
import uuid

from kafkaops.errors import UnreachableError
from kafkaops.facts.mirror import MirroredPosition, PartitionLag, lag_of, offsets_topic, parse_offsets_records
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin


def mirrored_topics(topics: list[str], source_dc: str) -> list[str]:
    """The topics a site mirrors to the others: its own DC prefix (``eqiad.`` for eqiad)."""
    prefix = re.compile(rf"^{re.escape(source_dc)}\.")
    return sorted(t for t in topics if prefix.match(t))


class MirrorLag:
    """The ``src -> dst`` flow of a multi-site inventory."""

    def __init__(self, sites: Cluster, src: str, dst: str, *, timeout: float = 10.0) -> None:
        self.sites, self.src, self.dst, self.timeout = sites, src, dst, timeout
        self.source = KafkaAdmin.look(sites.site(src), timeout=timeout)

    def _mirrored(self) -> dict[tuple[str, int], MirroredPosition]:
        """Read the whole offsets topic on the target (small and compacted) with a throwaway consumer."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        target = self.sites.site(self.dst)
        topic = offsets_topic(self.src)
        consumer = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": f"kafkaops-{uuid.uuid4()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "socket.timeout.ms": int(self.timeout * 1000), "log_level": 2})
        try:
            try:
                meta = consumer.list_topics(topic, timeout=self.timeout)
            except KafkaException as exc:
                raise UnreachableError(f"Kafka at {target.bootstrap_servers} did not answer metadata of {topic}: "
                                       f"{exc}", hint="check the site's brokers are up") from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise UnreachableError(f"{target.name} has no {topic}: MirrorMaker 2 has not run the "
                                       f"{self.src}->{self.dst} flow there",
                                       hint="check MirrorMaker 2 is running with that flow enabled")
            ends: dict[int, int] = {}
            for p in info.partitions:
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout)
                if high > 0:
                    ends[p] = high
            records: list[tuple[bytes | None, bytes | None]] = []
            if ends:
                consumer.assign([TopicPartition(topic, p, 0) for p in ends])
                seen: dict[int, int] = {}
                deadline = time.monotonic() + self.timeout
                while any(seen.get(p, -1) + 1 < end for p, end in ends.items()):
                    if time.monotonic() > deadline:
                        raise UnreachableError(f"reading {topic} on {target.name} took over {self.timeout:.0f}s",
                                               hint="check the site's brokers")
                    for msg in consumer.consume(500, timeout=0.5):
                        if msg.error():
                            continue
                        part, offset = msg.partition(), msg.offset()
                        if part is not None and offset is not None:
                            records.append((msg.key(), msg.value()))
                            seen[part] = offset
            return parse_offsets_records(records, self.src)
        finally:
            consumer.close()

    def partitions(self) -> list[PartitionLag]:
        """Lag of every partition of the source site's mirrored topics."""
        snap = self.source.metadata()
        topics = mirrored_topics(list(snap.topics), self.src)
        keys = [(t, p) for t in topics for p in snap.topics[t].partitions]
        offsets = self.source.list_offsets(keys)
        return lag_of(offsets, self._mirrored())

    def total(self) -> int:
        return sum(p.lag for p in self.partitions())
