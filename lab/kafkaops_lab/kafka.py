"""The lab's writes to Kafka: create its topics, produce test data, delete records to stage data loss.

Not the product's: a production command never creates a topic or deletes records, so
:class:`~kafkaops.systems.kafka.KafkaAdmin` does not carry them. The lab (and the tests and benchmarks
that stage data on it) use :class:`LabKafka`, the same AdminClient with these writes added — each still
marked :func:`~kafkaops.systems.guard.write`, so a dry-run's adapter refuses them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.systems.guard import write
from kafkaops.systems.kafka import KafkaAdmin, TopicPartitionKey
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops.systems.producing import WRITE_ONCE

_TOPIC_ALREADY_EXISTS = 36  # Kafka's error code (confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = 3
    config: tuple[tuple[str, str], ...] = ()


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


class LabKafka(KafkaAdmin):
    """:class:`KafkaAdmin` plus the lab's writes (topics, test data, staged data loss)."""

    @write
    def create_topics(self, specs: Sequence[TopicSpec]) -> list[str]:
        """Create the topics that do not exist yet (idempotent); return the names created."""
        from confluent_kafka.admin import NewTopic

        existing = set(self.metadata().topics)
        todo = [s for s in specs if s.name not in existing]
        if not todo:
            return []
        futures = self._admin.create_topics(
            [NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor,
                      config=dict(s.config)) for s in todo],
            request_timeout=self.timeout, operation_timeout=self.timeout,
        )
        created = []
        for name, fut in futures.items():
            try:
                fut.result(timeout=self.timeout)
                created.append(name)
            except Exception as exc:
                # librdkafka retries a CreateTopics whose answer timed out (a busy broker): the first try
                # may have created it. The topic exists as asked, so this is success, not an outage.
                error = exc.args[0] if exc.args else None
                if getattr(error, "code", lambda: None)() == _TOPIC_ALREADY_EXISTS:
                    continue
                raise self._unreachable(f"create_topics({name})", exc) from exc
        return created

    @write
    def delete_records(self, before: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Delete every record below the given offset of each partition (Kafka ``DeleteRecords``).

        Destructive: used by the lab tests to stage data loss the post-check must catch.

        Args:
            before: ``{(topic, partition): offset}``; records with a lower offset are deleted.

        Returns:
            The new log start offset (low watermark) per partition.

        Raises:
            UnreachableError: Kafka did not answer or refused the deletion.
        """
        from confluent_kafka import TopicPartition

        try:
            futures = self._admin.delete_records([TopicPartition(t, p, o) for (t, p), o in before.items()],
                                                 request_timeout=self.timeout, operation_timeout=self.timeout)
        except Exception as exc:
            raise self._unreachable("DeleteRecords", exc) from exc
        out: dict[TopicPartitionKey, int] = {}
        for tp, fut in futures.items():
            res = self._result(fut, f"DeleteRecords({tp.topic}-{tp.partition})", timeout=self.timeout + 5)
            out[(tp.topic, tp.partition)] = int(getattr(res, "low_watermark", getattr(res, "offset", -1)))
        return out

    @write
    def produce(self, topic: str, records: Iterable[ProduceRecord], *, timeout: float = 60.0,
                config: Mapping[str, Any] | None = None) -> int:
        """Produce ``records`` to ``topic`` with ``acks=all`` and wait until every one is acknowledged.

        Args:
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


        conf: dict[str, Any] = {**librdkafka_config(self.endpoint), **WRITE_ONCE, "linger.ms": 20, "log_level": 2}
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
