"""Consumer groups on one cluster: committed offsets, whether anyone is consuming, record timestamps at
an offset, and the one write a switchover makes (``alter_consumer_group_offsets``).

Records are read with a throwaway ``read_committed`` consumer that assigns (never subscribes: it joins no
group and commits nothing), to its position, never to an offset it waits to see
(:mod:`kafkaops.systems.records`): ``ListOffsets`` answers offsets for a timestamp, not the timestamp of
an offset, and many offsets hold no record a consumer is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.model import KafkaEndpoint
from kafkaops.policy import kafka_acls as acls
from kafkaops.policy.kafka_acls import Acl
from kafkaops.policy.record_identity import RecordId, record_id
from kafkaops.systems.guard import write
from kafkaops.systems.kafka_auth import RefusalWatch, build, classify, librdkafka_config
from kafkaops.systems.records import RecordReader

TopicPartitionKey = tuple[str, int]

#: Group states in which nobody consumes: its offsets may be changed (Kafka refuses otherwise).
IDLE_STATES = ("EMPTY", "DEAD", "UNKNOWN")


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # STABLE, EMPTY, DEAD, PREPARING_REBALANCE...
    members: tuple[str, ...]  # client.id@host of each member

    @property
    def active(self) -> bool:
        return bool(self.members) or self.state not in IDLE_STATES


class ConsumerGroups:
    """The groups of the cluster at ``endpoint``; writes refuse themselves in a dry-run."""

    def __init__(self, endpoint: KafkaEndpoint, *, timeout: float = 10.0, dry_run: bool = False) -> None:
        from confluent_kafka.admin import AdminClient

        self.endpoint, self.bootstrap, self.cluster = endpoint, endpoint.bootstrap_servers, endpoint.cluster
        self.timeout, self.dry_run = timeout, dry_run
        self._refusals = RefusalWatch()
        conf: dict[str, Any] = {**librdkafka_config(endpoint), "socket.timeout.ms": int(timeout * 1000),
                                "log_level": 2, "error_cb": self._refusals}
        self._admin = build(AdminClient, conf, endpoint)

    def _unreachable(self, what: str, exc: BaseException, needs: Sequence[Acl] = ()) -> KafkaOpsError:
        refusal = classify(self.endpoint, what, exc, needs)
        if refusal is not None:
            return refusal
        self._refusals.check(self.endpoint, what, self._admin)
        return UnreachableError(f"Kafka at {self.bootstrap} ({self.cluster}) did not answer {what}: {exc}",
                                hint="check the site's brokers are up and bootstrap_servers in its inventory")

    def state(self, group: str) -> GroupState:
        try:
            desc = self._admin.describe_consumer_groups([group], request_timeout=self.timeout)[group].result(
                timeout=self.timeout + 5)
        except Exception as exc:
            raise self._unreachable(f"DescribeGroups({group})", exc, [acls.group("DESCRIBE", group)]) from exc
        state = getattr(desc.state, "name", str(desc.state)).upper()
        members = tuple(f"{m.client_id}@{m.host}" for m in desc.members or ())
        return GroupState(group, state, members)

    def committed(self, group: str) -> dict[TopicPartitionKey, int]:
        """Every partition the group has committed an offset for (its position: the next record to read)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        try:
            fut = self._admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                          request_timeout=self.timeout)[group]
            answer = fut.result(timeout=self.timeout + 5)
        except Exception as exc:
            raise self._unreachable(f"OffsetFetch({group})", exc,
                                     [acls.group("DESCRIBE", group), acls.topic("DESCRIBE")]) from exc
        return {(tp.topic, tp.partition): int(tp.offset) for tp in answer.topic_partitions or ()
                if tp.offset is not None and tp.offset >= 0}

    @write
    def set_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``offsets`` for ``group`` (Kafka refuses while the group has members)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        request = ConsumerGroupTopicPartitions(group, partitions)
        try:
            answer = self._admin.alter_consumer_group_offsets([request], request_timeout=self.timeout)[group].result(
                timeout=self.timeout + 5)
        except Exception as exc:
            raise self._unreachable(f"OffsetCommit({group})", exc,
                                    [acls.group("READ", group), acls.topic("READ")]) from exc
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in answer.topic_partitions or () if tp.error]
        if failed:
            raise UnreachableError(f"Kafka at {self.bootstrap} refused offsets of {group}: {'; '.join(failed[:3])}",
                                   hint="a group with members cannot be moved: stop its consumers")

    def _reader(self) -> RecordReader:
        return RecordReader(self.endpoint, timeout=self.timeout)

    def first_held(self, before: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, tuple[int, int | None]]:
        """Per partition, its log start and the offset of the first record a consumer is given from there,
        looked for only before the partition's ``before`` offset (None: none there, only markers or
        nothing): whether the log still holds a record before an offset (a deleted head shows here)."""
        out: dict[TopicPartitionKey, tuple[int, int | None]] = {}
        with self._reader() as reader:
            bounds = reader.bounds(before)
            for (topic, partition), stop in sorted(before.items()):
                start = bounds[(topic, partition)].start
                found = reader.first(topic, partition, start, min(stop, bounds[(topic, partition)].stable))
                out[(topic, partition)] = (start, None if found is None else found.offset)
        return out

    def anchors(self, positions: Iterable[tuple[str, int, int]]) -> dict[TopicPartitionKey, int | None]:
        """CreateTime (epoch ms) of the record each ``(topic, partition, committed)`` position is anchored to:
        the first record after the position a consumer is given, or — none there (the group at the end, or
        only markers and aborted records after it) — the last one before it. None: the partition holds no
        record a consumer is given at all.

        A committed position is often a commit marker's offset (a ``read_committed`` consumer that read a
        transaction's last record commits the marker's offset) and a log's last offset often is one: the
        record *at* an offset is not asked for, it may never come (:mod:`kafkaops.systems.records`).
        """
        wanted = sorted(set(positions))
        out: dict[TopicPartitionKey, int | None] = {}
        with self._reader() as reader:
            bounds = reader.bounds((t, p) for t, p, _ in wanted)
            for topic, partition, committed in wanted:
                b = bounds[(topic, partition)]
                at = max(committed, b.start)
                found = reader.first(topic, partition, at, b.stable)
                if found is None:
                    before = reader.last(topic, partition, min(at, b.stable), b.start)
                    found = before[-1] if before else None
                out[(topic, partition)] = None if found is None else found.timestamp
        return out

    def tails(self, positions: Iterable[tuple[str, int, int]], n: int) -> dict[TopicPartitionKey, list[RecordId]]:
        """The last ``n`` records before each ``(topic, partition, committed)`` position a consumer is given,
        oldest first, as identities (:mod:`kafkaops.policy.record_identity`); fewer where the log holds
        fewer (an empty list: nothing before the position)."""
        out: dict[TopicPartitionKey, list[RecordId]] = {}
        with self._reader() as reader:
            wanted = sorted(set(positions))
            bounds = reader.bounds((t, p) for t, p, _ in wanted)
            for topic, partition, committed in wanted:
                b = bounds[(topic, partition)]
                records = reader.last(topic, partition, min(committed, b.stable), b.start, n)
                out[(topic, partition)] = [record_id(r.timestamp, r.key, r.value) for r in records]
        return out

    def record_ids(self, spans: Mapping[TopicPartitionKey, int], *, limit: int
                   ) -> dict[TopicPartitionKey, tuple[list[tuple[int, RecordId]], bool]]:
        """The records of each partition from its ``start`` offset to its last stable offset as of now, at
        most ``limit`` of them, as ``(offset, identity)`` (:mod:`kafkaops.policy.record_identity`).

        Returns:
            ``{(topic, partition): (records, complete)}``; ``complete`` is False when ``limit`` cut the read.
        """
        out: dict[TopicPartitionKey, tuple[list[tuple[int, RecordId]], bool]] = {}
        with self._reader() as reader:
            bounds = reader.bounds(spans)
            for (topic, partition), start in sorted(spans.items()):
                records, complete = reader.read(topic, partition, start, bounds[(topic, partition)].stable,
                                                limit=limit)
                out[(topic, partition)] = ([(r.offset, record_id(r.timestamp, r.key, r.value)) for r in records],
                                           complete)
        return out

    def checkpoints(self, source_alias: str, group: str) -> dict[TopicPartitionKey, int]:
        """MirrorMaker 2's own translation of ``group`` (what Kafka's ``RemoteClusterUtils.translateOffsets``
        answers): the last checkpoint per partition in ``<source_alias>.checkpoints.internal`` on this
        cluster. Empty when MirrorMaker emits no checkpoints (``emit.checkpoints.enabled = false``, no topic).
        Read for comparison only: the translation never uses it (nor fails when this read does)."""
        topic = f"{source_alias}.checkpoints.internal"
        out: dict[TopicPartitionKey, int] = {}
        try:
            with self._reader() as reader:
                described = self._admin.list_topics(topic, timeout=self.timeout).topics.get(topic)
                if described is None or described.error is not None:
                    return out
                for r in reader.whole(topic, sorted(described.partitions)):
                    parsed = parse_checkpoint(r.key, r.value)
                    if parsed is not None and parsed[0] == group:
                        out[(parsed[1], parsed[2])] = parsed[3]
        except Exception as exc:
            raise self._unreachable(f"a read of {topic}", exc, [acls.topic("READ", topic)]) from exc
        return out


def parse_checkpoint(key: bytes | str | None, value: bytes | str | None) -> tuple[str, str, int, int] | None:
    """``(group, topic, partition, downstream offset)`` of one record of MirrorMaker 2's checkpoints topic
    (Kafka's ``Checkpoint``: key = group, topic (int16-length strings), partition (int32); value = version
    (int16), upstream offset, downstream offset (int64), metadata). None for what is not one."""
    import struct

    if not isinstance(key, bytes) or not isinstance(value, bytes):
        return None
    try:
        strings: list[str] = []
        at = 0
        for _ in range(2):
            (n,) = struct.unpack_from(">h", key, at)
            strings.append(key[at + 2:at + 2 + n].decode())
            at += 2 + n
        (partition,) = struct.unpack_from(">i", key, at)
        _version, _upstream, downstream = struct.unpack_from(">hqq", value, 0)
    except (struct.error, UnicodeDecodeError):
        return None
    return strings[0], strings[1], int(partition), int(downstream)
