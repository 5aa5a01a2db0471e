"""Partition offsets through the Kafka adapter: log start, log end, the offset for a time (``ListOffsets``).

The topic-health post-check pins its data scan to these and compares them with the baseline; the switchover
translates consumer offsets with them. A partition whose offsets cannot be read (leader down) maps to
``None`` rather than failing the whole read: the post-check must still report on the rest of the cluster.

Its own module, mixed into :class:`~kafkaops.systems.kafka.KafkaAdmin`: the reads of one request kind (three
forms of ``ListOffsets``), and why they go through the AdminClient (:meth:`OffsetReads._list_offsets`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkaops.policy import kafka_acls as acls

if TYPE_CHECKING:
    from kafkaops.errors import KafkaOpsError
    from kafkaops.model import KafkaEndpoint
    from kafkaops.policy.kafka_acls import Acl

TopicPartitionKey = tuple[str, int]
#: ListOffsets' own "timestamps" for a partition's first and next offset (log start, high watermark).
EARLIEST, LATEST = -2, -1


class OffsetReads:
    """The offset reads of :class:`~kafkaops.systems.kafka.KafkaAdmin` (see the module docstring)."""

    endpoint: KafkaEndpoint
    timeout: float
    _admin: Any

    if TYPE_CHECKING:
        def _unreachable(self, what: str, exc: BaseException, needs: Sequence[Acl] = ()) -> KafkaOpsError: ...

    def _list_offsets(self, request: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int | None]:
        """One batched ListOffsets; ``request`` maps each partition to :data:`EARLIEST`, :data:`LATEST` or a
        timestamp in epoch ms. Partitions that fail map to ``None``.

        Through the AdminClient, which makes a Python future per partition: at 10,000 partitions that is most
        of ``kafkaops check --no-scan``. Not through a consumer's ``offsets_for_times`` (one list: the check
        1.47 s against 1.88 s there): librdkafka's consumer needs a ``group.id``, and with one it looks up the
        group's coordinator, which makes Kafka create ``__consumer_offsets`` on a cluster that has none — a
        read-only check must not change the cluster (found by the stretch lab's layout test, whose check then
        flagged the new topic).
        """
        if not request:
            return {}
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
