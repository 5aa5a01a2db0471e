"""Consumer groups on one cluster: committed offsets, whether anyone is consuming, record timestamps at
an offset, and the one write a switchover makes (``alter_consumer_group_offsets``).

Timestamps are read with a throwaway consumer that assigns (never subscribes: it joins no group and
commits nothing) and reads the one record at an offset: ``ListOffsets`` answers offsets for a timestamp,
not the timestamp of an offset.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkaops.errors import UnreachableError
from kafkaops.policy.record_identity import RecordId, record_id
from kafkaops.systems.guard import write

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
    """The groups of the cluster at ``bootstrap``; writes refuse themselves in a dry-run."""

    def __init__(self, bootstrap: str, *, cluster: str = "", timeout: float = 10.0, dry_run: bool = False) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap, self.cluster, self.timeout, self.dry_run = bootstrap, cluster, timeout, dry_run
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
                                   "log_level": 2})

    def _unreachable(self, what: str, exc: BaseException) -> UnreachableError:
        return UnreachableError(f"Kafka at {self.bootstrap} ({self.cluster}) did not answer {what}: {exc}",
                                hint="check the site's brokers are up and bootstrap_servers in its inventory")

    def state(self, group: str) -> GroupState:
        try:
            desc = self._admin.describe_consumer_groups([group], request_timeout=self.timeout)[group].result(
                timeout=self.timeout + 5)
        except Exception as exc:
            raise self._unreachable(f"DescribeGroups({group})", exc) from exc
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
            raise self._unreachable(f"OffsetFetch({group})", exc) from exc
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
            raise self._unreachable(f"OffsetCommit({group})", exc) from exc
        failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in answer.topic_partitions or () if tp.error]
        if failed:
            raise UnreachableError(f"Kafka at {self.bootstrap} refused offsets of {group}: {'; '.join(failed[:3])}",
                                   hint="a group with members cannot be moved: stop its consumers")

    def timestamps(self, at: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int, int], int]:
        """CreateTime (epoch ms) of the record at each ``(topic, partition, offset)``.

        A record that is gone (compaction) answers the next one's: its timestamp still bounds the ones
        after it from below, which is all the translation uses it for.
        """
        from confluent_kafka import Consumer, TopicPartition

        wanted = sorted(set(at))
        if not wanted:
            return {}
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"kafkaops-ts-{uuid.uuid4()}",
                             "enable.auto.commit": False, "socket.timeout.ms": int(self.timeout * 1000),
                             "fetch.wait.max.ms": 100, "log_level": 2})
        out: dict[tuple[str, int, int], int] = {}
        try:
            for topic, partition, offset in wanted:
                consumer.assign([TopicPartition(topic, partition, offset)])
                deadline = time.monotonic() + self.timeout
                while (topic, partition, offset) not in out:
                    if time.monotonic() > deadline:
                        raise UnreachableError(f"Kafka at {self.bootstrap} gave no record at {topic}-{partition}@"
                                               f"{offset} within {self.timeout:.0f}s",
                                               hint="check the site's brokers are up")
                    msg = consumer.poll(0.5)
                    if msg is None or msg.error():
                        continue
                    _kind, ts = msg.timestamp()
                    out[(topic, partition, offset)] = int(ts)
        finally:
            consumer.close()
        return out

    def record_ids(self, spans: Mapping[TopicPartitionKey, tuple[int, int | None]], *, limit: int
                   ) -> dict[TopicPartitionKey, tuple[list[tuple[int, RecordId]], bool]]:
        """The records of each partition from ``start`` to ``stop`` (exclusive; None: the log end as of now),
        at most ``limit`` of them, as ``(offset, identity)`` (:mod:`kafkaops.policy.record_identity`).

        Returns:
            ``{(topic, partition): (records, complete)}``; ``complete`` is False when ``limit`` cut the read
            before ``stop``.
        """
        from confluent_kafka import Consumer, TopicPartition

        out: dict[TopicPartitionKey, tuple[list[tuple[int, RecordId]], bool]] = {}
        if not spans:
            return out
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"kafkaops-ids-{uuid.uuid4()}",
                             "enable.auto.commit": False, "socket.timeout.ms": int(self.timeout * 1000),
                             "fetch.wait.max.ms": 100, "log_level": 2})
        try:
            for (topic, partition), (start, stop) in sorted(spans.items()):
                try:
                    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                timeout=self.timeout)
                except Exception as exc:
                    raise self._unreachable(f"ListOffsets({topic}-{partition})", exc) from exc
                end = high if stop is None else min(stop, high)
                records: list[tuple[int, RecordId]] = []
                complete = True
                if start < end:
                    consumer.assign([TopicPartition(topic, partition, start)])
                    deadline = time.monotonic() + self.timeout
                    last = start - 1
                    while last < end - 1:
                        if len(records) >= limit:
                            complete = False
                            break
                        if time.monotonic() > deadline:
                            raise UnreachableError(f"Kafka at {self.bootstrap} ({self.cluster}) gave {topic}-"
                                                   f"{partition} only up to offset {last} of {start}..{end - 1} "
                                                   f"within {self.timeout:.0f}s", hint="check the site's brokers")
                        for msg in consumer.consume(500, timeout=0.5):
                            offset = msg.offset()
                            if msg.error() is not None or offset is None or offset >= end:
                                continue
                            last = max(last, offset)
                            if len(records) < limit:
                                records.append((offset, record_id(msg.timestamp()[1], msg.key(), msg.value())))
                            deadline = time.monotonic() + self.timeout
                out[(topic, partition)] = (records, complete)
        finally:
            consumer.close()
        return out

    def checkpoints(self, source_alias: str, group: str) -> dict[TopicPartitionKey, int]:
        """MirrorMaker 2's own translation of ``group`` (what Kafka's ``RemoteClusterUtils.translateOffsets``
        answers): the last checkpoint per partition in ``<source_alias>.checkpoints.internal`` on this
        cluster. Empty when MirrorMaker emits no checkpoints (``emit.checkpoints.enabled = false``, no topic).
        Read for comparison only: the translation never uses it."""
        from confluent_kafka import Consumer, TopicPartition

        topic = f"{source_alias}.checkpoints.internal"
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"kafkaops-cp-{uuid.uuid4()}",
                             "enable.auto.commit": False, "socket.timeout.ms": int(self.timeout * 1000),
                             "fetch.wait.max.ms": 100, "log_level": 2})
        out: dict[TopicPartitionKey, int] = {}
        try:
            described = consumer.list_topics(topic, timeout=self.timeout).topics.get(topic)
            if described is None or described.error is not None:
                return out
            for partition in sorted(described.partitions):
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout)
                if high <= 0:
                    continue
                consumer.assign([TopicPartition(topic, partition, 0)])
                deadline, last = time.monotonic() + self.timeout, -1
                while last < high - 1 and time.monotonic() < deadline:
                    for msg in consumer.consume(500, timeout=0.5):
                        offset = msg.offset()
                        if msg.error() is not None or offset is None:
                            continue
                        last = max(last, offset)
                        parsed = parse_checkpoint(msg.key(), msg.value())
                        if parsed is not None and parsed[0] == group:
                            out[(parsed[1], parsed[2])] = parsed[3]
        except Exception as exc:
            raise self._unreachable(f"a read of {topic}", exc) from exc
        finally:
            consumer.close()
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
