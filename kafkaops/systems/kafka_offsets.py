"""Partition offsets through the Kafka adapter: log start, log end, the offset for a time (``ListOffsets``).

The topic-health post-check pins its data scan to these and compares them with the baseline; the switchover
translates consumer offsets with them. A partition whose offsets cannot be read (leader down) maps to
``None`` rather than failing the whole read: the post-check must still report on the rest of the cluster.

Its own module, mixed into :class:`~kafkaops.systems.kafka.KafkaAdmin`, because offsets are read two ways: as
one list through a consumer's ``offsets_for_times`` (what a check of 10,000 partitions can afford), and
partition by partition through the AdminClient when that fails, or when the answer needs what only the
AdminClient gives (a record's timestamp, ``max_timestamp``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkaops.policy import kafka_acls as acls
from kafkaops.systems.kafka_auth import RefusalWatch, build, librdkafka_config

if TYPE_CHECKING:
    from kafkaops.errors import KafkaOpsError
    from kafkaops.model import KafkaEndpoint
    from kafkaops.policy.kafka_acls import Acl

TopicPartitionKey = tuple[str, int]
#: ListOffsets' own "timestamps" for a partition's first and next offset (log start, high watermark).
EARLIEST, LATEST = -2, -1
#: The group id librdkafka requires of the consumer :meth:`KafkaAdmin._offsets_fast` asks offsets with; it never
#: joins the group nor commits to it.
OFFSETS_GROUP = "kafkaops-offsets"
#: Seconds :meth:`KafkaAdmin._offsets_fast` waits before the partition-by-partition fallback: 10,000 partitions
#: answered in 0.3 s on the bench lab; a partition without a leader holds the call until this deadline.
FAST_OFFSETS_TIMEOUT = 5.0


class OffsetReads:
    """The offset reads of :class:`~kafkaops.systems.kafka.KafkaAdmin` (see the module docstring)."""

    endpoint: KafkaEndpoint
    timeout: float
    _admin: Any
    _refusals: RefusalWatch
    _offsets_consumer: Any = None  # built on the first ListOffsets (:meth:`_offsets_fast`)

    if TYPE_CHECKING:
        def _unreachable(self, what: str, exc: BaseException, needs: Sequence[Acl] = ()) -> KafkaOpsError: ...

    def _list_offsets(self, request: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int | None]:
        """One batched ListOffsets; ``request`` maps each partition to :data:`EARLIEST`, :data:`LATEST` or a
        timestamp in epoch ms. Partitions that fail map to ``None``.

        Asked first through a consumer's ``offsets_for_times`` (:meth:`_offsets_fast`), else through the
        AdminClient, which answers each partition on its own."""
        if not request:
            return {}
        fast = self._offsets_fast(request)
        if fast is not None:
            return fast
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        def spec(value: int) -> Any:
            if value == EARLIEST:
                return OffsetSpec.earliest()
            return OffsetSpec.latest() if value == LATEST else OffsetSpec.for_timestamp(value)

        try:
            futures = self._admin.list_offsets({TopicPartition(t, p): spec(v) for (t, p), v in request.items()},
                                               request_timeout=self.timeout)
        except Exception as exc:
            raise self._unreachable("ListOffsets", exc, [acls.topic("DESCRIBE")]) from exc
        out: dict[TopicPartitionKey, int | None] = {}
        deadline = time.monotonic() + self.timeout + 5
        for tp, fut in futures.items():
            try:
                info = fut.result(timeout=max(0.1, deadline - time.monotonic()))
                out[(tp.topic, tp.partition)] = int(info.offset) if info.offset >= 0 else None
            except Exception:
                out[(tp.topic, tp.partition)] = None  # leader down, or unknown: reported as unknown
        return out

    def _offsets_fast(self, request: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int | None] | None:
        """The same ListOffsets through librdkafka's ``offsets_for_times``, answered as one list; None when it
        fails as a whole (a partition without a leader makes it time out), so the caller asks partition by
        partition instead.

        Why: the AdminClient's ``list_offsets`` makes a Python future per partition and completes each
        separately; at 10,000 partitions that was most of ``kafkaops check --no-scan`` (four such calls, 2.9 of
        its 3.0 s). ListOffsets takes -2 and -1 as the earliest and the latest offset, so one call serves
        every kind the check asks; ``read_uncommitted``, as the AdminClient's default: the log end is the high
        watermark, not the last stable offset."""
        from confluent_kafka import TopicPartition

        try:
            if self._offsets_consumer is None:
                from confluent_kafka import Consumer

                self._offsets_consumer = build(Consumer, {
                    **librdkafka_config(self.endpoint), "error_cb": self._refusals, "log_level": 6,
                    # required by the client, never joined: no subscribe, no commit
                    "group.id": OFFSETS_GROUP, "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",
                    "socket.timeout.ms": int(self.timeout * 1000),
                    "socket.connection.setup.timeout.ms": int(min(self.timeout, 5) * 1000),
                }, self.endpoint)
            # bounded apart from the request timeout: a failure here costs the fallback's time on top
            answered = self._offsets_consumer.offsets_for_times(
                [TopicPartition(t, p, v) for (t, p), v in request.items()],
                timeout=min(self.timeout, FAST_OFFSETS_TIMEOUT))
        except Exception:
            return None
        out: dict[TopicPartitionKey, int | None] = {}
        for tp in answered:
            out[(tp.topic, tp.partition)] = int(tp.offset) if tp.error is None and tp.offset >= 0 else None
        return out if len(out) == len(request) else None

    def list_offsets(self, partitions: Iterable[TopicPartitionKey]
                     ) -> dict[TopicPartitionKey, tuple[int | None, int | None]]:
        """Log start and log end (high watermark) offsets of ``partitions``, in two batched requests.

        Returns:
            ``{(topic, partition): (log_start_offset, log_end_offset)}``; ``None`` where unreadable.

        Raises:
            UnreachableError: The request could not be sent at all.
        """
        keys = list(dict.fromkeys(partitions))
        starts = self._list_offsets(dict.fromkeys(keys, EARLIEST))
        ends = self._list_offsets(dict.fromkeys(keys, LATEST))
        return {k: (starts.get(k), ends.get(k)) for k in keys}

    def offsets_for_times(self, partitions: Iterable[TopicPartitionKey], timestamp_ms: int, *,
                          log_ends: Mapping[TopicPartitionKey, int | None] | None = None
                          ) -> dict[TopicPartitionKey, int | None]:
        """The first offset whose timestamp is >= ``timestamp_ms``, per partition.

        A partition with no record that recent maps to its log end offset (Kafka answers -1, which is
        resolved with a LATEST query, or from ``log_ends`` when the caller read them already: the check's
        "now"), so the result is always a valid scan start.

        Returns:
            ``{(topic, partition): offset}``; ``None`` where unreadable.
        """
        keys = list(dict.fromkeys(partitions))
        found = self._list_offsets(dict.fromkeys(keys, int(timestamp_ms)))
        missing = [k for k, v in found.items() if v is None]
        if log_ends is not None:
            found.update({k: log_ends[k] for k in missing if log_ends.get(k) is not None})
            missing = [k for k in missing if found[k] is None]
        if missing:
            found.update(self._list_offsets(dict.fromkeys(missing, LATEST)))
        return found

    def offsets_at(self, timestamps: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int | None]:
        """:meth:`offsets_for_times` with a timestamp of its own per partition (one batched request)."""
        found = self._list_offsets({k: int(ts) for k, ts in timestamps.items()})
        missing = [k for k, v in found.items() if v is None]
        if missing:
            found.update(self._list_offsets(dict.fromkeys(missing, LATEST)))
        return found

    def offset_timestamps(self, request: Mapping[TopicPartitionKey, int | str]
                          ) -> dict[TopicPartitionKey, tuple[int, int] | None]:
        """Which record answers a timestamp query, with that record's own timestamp (read-only).

        ``ListOffsets`` by timestamp finds the first record whose timestamp is >= the given epoch ms
        (searching from the log start; records without a timestamp never match), and ``"max"`` the
        record with the largest timestamp (Kafka 3.0+). The post-check reads the timestamps around a
        partition's log start with it, to tell retention from other removals.

        Args:
            request: ``{(topic, partition): epoch ms >= 0, or "max"}``.

        Returns:
            ``{(topic, partition): (offset, timestamp)}``; ``None`` when no record matches (none that
            recent, an empty log). Partitions that could not be read are left out.

        Raises:
            UnreachableError: The request could not be sent at all.
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if not request:
            return {}
        specs = {TopicPartition(t, p): OffsetSpec.max_timestamp() if v == "max" else OffsetSpec.for_timestamp(int(v))
                 for (t, p), v in request.items()}
        try:
            futures = self._admin.list_offsets(specs, request_timeout=self.timeout)
        except Exception as exc:
            raise self._unreachable("ListOffsets", exc, [acls.topic("DESCRIBE")]) from exc
        out: dict[TopicPartitionKey, tuple[int, int] | None] = {}
        deadline = time.monotonic() + self.timeout + 5
        for tp, fut in futures.items():
            try:
                info = fut.result(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:
                continue  # leader down, or unknown: left out
            offset, ts = int(info.offset), int(getattr(info, "timestamp", -1))
            out[(tp.topic, tp.partition)] = (offset, ts) if offset >= 0 else None
        return out
