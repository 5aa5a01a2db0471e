"""MirrorMaker 2's lag per mirrored partition, read from the two clusters it connects (read-only).

What is mirrored from site ``src`` to site ``dst``: ``src``'s own prefixed topics (``eqiad.*``), the way
the seed's ``eqiad.*``/``codfw.*`` layout is mirrored. The lag of a partition is the records at the
source after what MirrorMaker committed as mirrored in ``mm2-offsets.<src>.internal`` on ``dst``
(:mod:`kafkaops.facts.mirror`), counted in records where offsets hold none (:meth:`MirrorLag.partitions`).
Committed positions trail the records actually written by up to one
``offset.flush.interval.ms``, so the lag read here is never *less* than the truth: a switchover that
waits for zero has waited long enough.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kafkaops.errors import UnreachableError
from kafkaops.facts.mirror import MirroredPosition, PartitionLag, lag_of, offsets_topic, parse_offsets_records
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.records import RecordReader

#: Offsets behind past which a partition's lag is not counted in records (the offsets stand: an upper bound).
COUNT_LIMIT = 10_000


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
        """Read the whole offsets topic on the target (small and compacted), to its position: under
        exactly-once MirrorMaker writes it in transactions, so its last offset is a commit marker."""
        from confluent_kafka import KafkaException

        target = self.sites.site(self.dst)
        topic = offsets_topic(self.src)
        with RecordReader(target.kafka, timeout=self.timeout) as reader:
            try:
                meta = reader.metadata(topic)
            except KafkaException as exc:
                raise UnreachableError(f"Kafka at {target.bootstrap_servers} did not answer metadata of {topic}: "
                                       f"{exc}", hint="check the site's brokers are up") from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise UnreachableError(f"{target.name} has no {topic}: MirrorMaker 2 has not run the "
                                       f"{self.src}->{self.dst} flow there",
                                       hint="check MirrorMaker 2 is running with that flow enabled")
            records = reader.whole(topic, sorted(info.partitions))
        return parse_offsets_records(((r.key, r.value) for r in records), self.src)

    def partitions(self) -> list[PartitionLag]:
        """Lag of every partition of the source site's mirrored topics, in records.

        Offsets overstate it: a transactional producer's commit markers take offsets MirrorMaker never
        copies (a source written in transactions would lag one offset per partition for ever). So where the
        offsets say a partition is behind, the records a consumer is given there are counted (up to
        :data:`COUNT_LIMIT`; past it the offsets stand, an upper bound), and records of transactions still
        open count as lag until they end.
        """
        snap = self.source.metadata()
        topics = mirrored_topics(list(snap.topics), self.src)
        keys = [(t, p) for t in topics for p in snap.topics[t].partitions]
        lags = lag_of(self.source.list_offsets(keys), self._mirrored())
        behind = {(x.topic, x.partition) for x in lags if x.lag > 0}
        if not behind:
            return lags
        site = self.sites.site(self.src)
        out = []
        with RecordReader(site.kafka, timeout=self.timeout) as reader:
            bounds = reader.bounds(behind)
            for x in lags:
                b = bounds.get((x.topic, x.partition))
                if b is None:
                    out.append(x)
                    continue
                records, complete = reader.read(x.topic, x.partition, x.mirrored_to, b.stable, limit=COUNT_LIMIT)
                out.append(replace(x, lag=len(records) + max(0, b.end - b.stable)) if complete else x)
        return out

    def total(self) -> int:
        return sum(p.lag for p in self.partitions())
