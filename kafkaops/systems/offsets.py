"""Partition offsets (log start / log end / offset for a time), record deletion and test producing.

The post-check pins its data scan to exact offset ranges and compares log start/end offsets with the
baseline; ``kafkaops snapshot`` writes those offsets before a run changes anything. This adapter is
the only place besides :mod:`kafkaops.systems.kafka` that speaks the Kafka protocol for that:
``ListOffsets`` (EARLIEST, LATEST, a timestamp) through the AdminClient, ``DeleteRecords`` (to stage
data loss in the lab) and a producer (test data with explicit timestamps, benchmark load).

Every call is bounded by a timeout and failures become :class:`~kafkaops.errors.UnreachableError`;
a partition whose offsets cannot be read (leader down) gets ``None`` rather than failing the whole
snapshot, because the post-check must still report on the rest of the cluster. ``confluent_kafka``
is imported inside the functions so ``kafkaops --help`` stays instant.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.model import Cluster

__all__ = [
    "ProduceRecord",
    "delete_records",
    "list_offsets",
    "offsets_for_times",
    "offsets_snapshot",
    "produce",
]

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ProduceRecord:
    """One record to produce (tests and benchmarks).

    Attributes:
        value: Payload bytes (or text, encoded as UTF-8).
        partition: Target partition; ``None`` lets the partitioner choose.
        timestamp_ms: Explicit CreateTime in ms since the epoch; ``None`` means now.
        key: Optional key.
    """

    value: bytes | str
    partition: int | None = None
    timestamp_ms: int | None = None
    key: bytes | str | None = None


def _admin(bootstrap: str, timeout: float) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": int(timeout * 1000),
        "socket.connection.setup.timeout.ms": int(min(timeout, 5) * 1000),
        "reconnect.backoff.max.ms": 1000,
        "log_level": 2,
    })


def _unreachable(bootstrap: str, what: str, exc: BaseException) -> UnreachableError:
    return UnreachableError(f"Kafka at {bootstrap} did not answer {what}: {exc}",
                            hint="check the brokers are up and bootstrap_servers in the inventory")


def _list(admin: Any, bootstrap: str, request: Mapping[TopicPartitionKey, Any],
          timeout: float) -> dict[TopicPartitionKey, int | None]:
    """One batched ListOffsets call; partitions that fail map to ``None``."""
    from confluent_kafka import TopicPartition

    if not request:
        return {}
    try:
        futures = admin.list_offsets({TopicPartition(t, p): spec for (t, p), spec in request.items()},
                                     request_timeout=timeout)
    except Exception as exc:
        raise _unreachable(bootstrap, "ListOffsets", exc) from exc
    out: dict[TopicPartitionKey, int | None] = {}
    deadline = time.monotonic() + timeout + 5
    for tp, fut in futures.items():
        try:
            info = fut.result(timeout=max(0.1, deadline - time.monotonic()))
            out[(tp.topic, tp.partition)] = int(info.offset) if info.offset >= 0 else None
        except Exception:
            out[(tp.topic, tp.partition)] = None  # leader down, or unknown: reported as unknown
    return out


def list_offsets(bootstrap: str, partitions: Iterable[TopicPartitionKey], *,
                 timeout: float = 15.0) -> dict[TopicPartitionKey, tuple[int | None, int | None]]:
    """Log start and log end (high watermark) offsets of ``partitions``.

    Args:
        bootstrap: Bootstrap servers.
        partitions: ``(topic, partition)`` pairs.
        timeout: Seconds for each of the two batched requests.

    Returns:
        ``{(topic, partition): (log_start_offset, log_end_offset)}``; ``None`` where unreadable.

    Raises:
        UnreachableError: The request could not be sent at all.
    """
    from confluent_kafka.admin import OffsetSpec

    keys = list(dict.fromkeys(partitions))
    admin = _admin(bootstrap, timeout)
    starts = _list(admin, bootstrap, {k: OffsetSpec.earliest() for k in keys}, timeout)
    ends = _list(admin, bootstrap, {k: OffsetSpec.latest() for k in keys}, timeout)
    return {k: (starts.get(k), ends.get(k)) for k in keys}


def offsets_for_times(bootstrap: str, partitions: Iterable[TopicPartitionKey], timestamp_ms: int, *,
                      timeout: float = 15.0) -> dict[TopicPartitionKey, int | None]:
    """The first offset whose timestamp is >= ``timestamp_ms``, per partition.

    A partition with no record that recent maps to its log end offset (Kafka answers -1, which we
    resolve with a LATEST query), so the result is always a valid scan start.

    Args:
        bootstrap: Bootstrap servers.
        partitions: ``(topic, partition)`` pairs.
        timestamp_ms: Milliseconds since the epoch.
        timeout: Seconds per batched request.

    Returns:
        ``{(topic, partition): offset}``; ``None`` where unreadable.
    """
    from confluent_kafka.admin import OffsetSpec

    keys = list(dict.fromkeys(partitions))
    admin = _admin(bootstrap, timeout)
    found = _list(admin, bootstrap, {k: OffsetSpec.for_timestamp(timestamp_ms) for k in keys}, timeout)
    missing = [k for k, v in found.items() if v is None]
    if missing:
        ends = _list(admin, bootstrap, {k: OffsetSpec.latest() for k in missing}, timeout)
        found.update(ends)
    return found


def offsets_snapshot(cluster: Cluster, *, timeout: float = 15.0, topics: Sequence[str] | None = None) -> Any:
    """An :class:`~kafkaops.health.metadata.OffsetsSnapshot` of ``cluster`` now.

    Args:
        cluster: The inventory's cluster (bootstrap servers, broker DCs).
        timeout: Seconds per request.
        topics: Restrict offsets (not metadata) to these topics; ``None`` for all.

    Returns:
        The snapshot (replica state from metadata, log start/end offsets per partition, topic configs,
        broker DCs from the inventory).
    """
    from kafkaops.health.metadata import OffsetsSnapshot
    from kafkaops.systems.kafka import KafkaAdmin

    # One metadata try: `kafkaops check`/`snapshot` report a dead cluster in one timeout, not three;
    # inside a run (baseline, post-check) the runner's retry policy is the patience.
    admin = KafkaAdmin(cluster.bootstrap_servers, timeout=timeout, cluster=cluster.name, attempts=1)
    snap = admin.snapshot()
    wanted = set(topics) if topics is not None else None
    keys = [(p.topic, p.partition) for p in snap.partitions if wanted is None or p.topic in wanted]
    offsets = list_offsets(cluster.bootstrap_servers, keys, timeout=timeout)
    broker_dc = {h.broker_id: h.dc for h in cluster.hosts}
    return OffsetsSnapshot.from_cluster_snapshot(snap, offsets, broker_dc)


def delete_records(bootstrap: str, before: Mapping[TopicPartitionKey, int], *,
                   timeout: float = 15.0) -> dict[TopicPartitionKey, int]:
    """Delete every record below the given offset of each partition (Kafka ``DeleteRecords``).

    Destructive: used by the lab tests to stage data loss the post-check must catch.

    Args:
        bootstrap: Bootstrap servers.
        before: ``{(topic, partition): offset}``; records with a lower offset are deleted.
        timeout: Seconds to wait.

    Returns:
        The new log start offset (low watermark) per partition.

    Raises:
        UnreachableError: Kafka did not answer or refused the deletion.
    """
    from confluent_kafka import TopicPartition

    admin = _admin(bootstrap, timeout)
    try:
        futures = admin.delete_records([TopicPartition(t, p, o) for (t, p), o in before.items()],
                                       request_timeout=timeout, operation_timeout=timeout)
    except Exception as exc:
        raise _unreachable(bootstrap, "DeleteRecords", exc) from exc
    out: dict[TopicPartitionKey, int] = {}
    for tp, fut in futures.items():
        try:
            res = fut.result(timeout=timeout + 5)
        except Exception as exc:
            raise _unreachable(bootstrap, f"DeleteRecords({tp.topic}-{tp.partition})", exc) from exc
        out[(tp.topic, tp.partition)] = int(getattr(res, "low_watermark", getattr(res, "offset", -1)))
    return out


def produce(bootstrap: str, topic: str, records: Iterable[ProduceRecord], *, timeout: float = 60.0,
            config: Mapping[str, Any] | None = None) -> int:
    """Produce ``records`` to ``topic`` with ``acks=all`` and wait until every one is acknowledged.

    Args:
        bootstrap: Bootstrap servers.
        topic: Topic name.
        records: What to produce; explicit partitions and timestamps are honoured.
        timeout: Seconds for the final flush.
        config: Extra librdkafka producer settings (e.g. larger batches for benchmarks).

    Returns:
        How many records were acknowledged.

    Raises:
        KafkaOpsError: A record was not acknowledged.
        UnreachableError: The flush did not complete in time.
    """
    from confluent_kafka import Producer

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 20, "log_level": 2}
    conf.update(config or {})
    producer = Producer(conf)
    errors: list[str] = []
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            errors.append(str(err))
        else:
            acked += 1

    for r in records:
        kwargs: dict[str, Any] = {"value": r.value, "on_delivery": on_delivery}
        if r.partition is not None:
            kwargs["partition"] = r.partition
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        if r.key is not None:
            kwargs["key"] = r.key
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        raise UnreachableError(f"{remaining} records to {topic} not acknowledged within {timeout:.0f}s")
    if errors:
        raise KafkaOpsError(f"{len(errors)} records to {topic} failed: {errors[0]}")
    return acked
