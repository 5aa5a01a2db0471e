"""Sending events again (Kafka producer, eventbus HTTP) and finding them in a topic: the replay's adapters.

A failed-events replay writes to production, so the writes here are marked :func:`write` and refuse
themselves in a dry-run, like every adapter's. Two ways out, as the runbook describes:

* :class:`EventProducer`: produce to ``<dc>.<stream>`` directly, as ``eventlogging-replay`` does —
  ``acks=all`` and an idempotent producer (no duplicate from librdkafka's own retries), one producer
  for the whole replay, each batch waited for so that the caller can record what was acknowledged.
* :class:`EventPoster`: POST each event to eventbus's own endpoint on one host (the runbook's curl loop),
  so that eventbus validates and produces it.

The idempotent producer cannot help across processes: a replay killed between a send and its record
restarts with a new producer id. So the caller records its intent first, and on resume asks
:func:`find_values` whether the destination already holds the event — a read-only scan from the time of
the intent to the end of each partition.

Outcomes are classified, not raised: ``sent`` (acknowledged), ``rejected`` (Kafka or eventbus refused
*this event*: unknown topic, too large, HTTP 4xx — sending it again cannot help, it goes to the report)
and ``uncertain`` (a timeout, a broken connection, HTTP 5xx: it may or may not have been written, so the
caller leaves its intent open and the resume checks the topic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import UnreachableError
from kafkaops.model import KafkaEndpoint
from kafkaops.systems.guard import write
from kafkaops.systems.kafka_auth import build, librdkafka_config
from kafkaops.systems.producing import WRITE_ONCE
from kafkaops.systems.records import RecordReader

SENT, REJECTED, UNCERTAIN = "sent", "rejected", "uncertain"

#: librdkafka error names that say the event itself (or its topic) is refused: never retried.
_REJECTING = {"_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART", "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE",
              "INVALID_RECORD", "CORRUPT_MESSAGE", "TOPIC_AUTHORIZATION_FAILED", "INVALID_TOPIC_EXCEPTION",
              "_INVALID_ARG", "RECORD_LIST_TOO_LARGE", "POLICY_VIOLATION"}


@dataclass(frozen=True)
class Outcome:
    """What became of one event: :data:`SENT`, :data:`REJECTED` or :data:`UNCERTAIN`, and why."""

    status: str
    detail: str = ""


class EventProducer:
    """One idempotent ``acks=all`` producer for a replay (built lazily, closed by :meth:`close`)."""

    def __init__(self, endpoint: KafkaEndpoint, *, timeout: float = 30.0, dry_run: bool = False) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.dry_run = dry_run
        self._producer: Any = None

    def _get(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer


            self._producer = build(Producer, {
                **librdkafka_config(self.endpoint), **WRITE_ONCE,
                "linger.ms": 5, "message.timeout.ms": int(self.timeout * 1000),
                "client.id": "kafkaops-failed-events-replay", "log_level": 2,
            }, self.endpoint)
        return self._producer

    @write
    def produce(self, batch: Sequence[tuple[str, bytes]]) -> list[Outcome]:
        """Produce each ``(topic, value)`` and wait for every acknowledgement (or its error).

        Returns:
            One :class:`Outcome` per record, in order.
        """
        from confluent_kafka import KafkaException

        producer = self._get()
        outcomes: list[Outcome | None] = [None] * len(batch)

        def delivered(i: int) -> Callable[[Any, Any], None]:
            def on_delivery(err: Any, _msg: Any) -> None:
                outcomes[i] = Outcome(SENT) if err is None else _classify(err)
            return on_delivery

        for i, (topic, value) in enumerate(batch):
            while True:
                try:
                    producer.produce(topic, value, on_delivery=delivered(i))
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as exc:
                    outcomes[i] = _classify(exc.args[0] if exc.args else exc)
                    break
            producer.poll(0)
        deadline = time.monotonic() + self.timeout + 5
        while any(o is None for o in outcomes) and time.monotonic() < deadline:
            producer.poll(0.1)
        return [o if o is not None else Outcome(UNCERTAIN, "no acknowledgement in time") for o in outcomes]

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None


def _classify(err: Any) -> Outcome:
    name = err.name() if hasattr(err, "name") else type(err).__name__
    text = err.str() if hasattr(err, "str") else str(err)
    if name in _REJECTING or (hasattr(err, "fatal") and err.fatal()):
        return Outcome(REJECTED, f"Kafka refused it: {name}: {text}")
    return Outcome(UNCERTAIN, f"Kafka: {name}: {text}")


class EventPoster:
    """POSTs events to one eventbus instance (its own address, never the VIP: the replay from a host's
    log goes back through that host, as the runbook's curl loop does)."""

    def __init__(self, *, timeout: float = 15.0, dry_run: bool = False) -> None:
        self.timeout = timeout
        self.dry_run = dry_run
        self._session: Any = None

    @write
    def post(self, url: str, body: bytes) -> Outcome:
        """POST one event; 2xx: sent, 4xx: rejected (eventbus refused the event), else uncertain."""
        import requests

        if self._session is None:
            self._session = requests.Session()
        try:
            r = self._session.post(url, data=body, timeout=self.timeout,
                                   headers={"Content-Type": "application/json"})
        except requests.RequestException as exc:
            return Outcome(UNCERTAIN, f"POST {url}: {type(exc).__name__}")
        text = r.text[:200].replace("\n", " ")
        if 200 <= r.status_code < 300:
            return Outcome(SENT, f"HTTP {r.status_code}")
        if 400 <= r.status_code < 500:
            return Outcome(REJECTED, f"eventbus answered HTTP {r.status_code}: {text}")
        return Outcome(UNCERTAIN, f"eventbus answered HTTP {r.status_code}: {text}")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def replay_adapters(env: Any) -> tuple[EventProducer, EventPoster]:
    """The producer and the poster of a replay, built for the run's environment: its cluster's bootstrap
    servers, and its dry-run switch (steps never read it; the adapters refuse writes themselves)."""
    dry = bool(env.dry_run)
    return EventProducer(env.cluster.kafka, dry_run=dry), EventPoster(dry_run=dry)


def find_values(endpoint: KafkaEndpoint, topics: Sequence[str], since_ms: int, *, timeout: float = 60.0
                ) -> Iterator[tuple[str, bytes]]:
    """Every record value of ``topics`` written since ``since_ms`` (record timestamp), up to the last stable
    offset each partition had when the scan started: read to the consumer's position, so a partition that
    ends on a transaction's marker ends the scan too (:mod:`kafkaops.systems.records`). Read-only: an
    assigned consumer of a throw-away group, nothing committed.

    Raises:
        UnreachableError: Kafka did not answer, or a partition's read stalled for ``timeout``.
    """
    from confluent_kafka import KafkaException


    with RecordReader(endpoint, timeout=min(timeout, 10)) as reader:
        try:
            keys = []
            for topic in topics:
                tmeta = reader.metadata(topic).topics.get(topic)
                if tmeta is None or tmeta.error is not None:
                    continue  # no such topic: nothing of ours can be in it
                keys += [(topic, p) for p in tmeta.partitions]
            if not keys:
                return
            starts, bounds = reader.offsets_at(keys, since_ms), reader.bounds(keys)
        except KafkaException as exc:
            raise UnreachableError(f"Kafka at {endpoint.bootstrap_servers} did not answer while looking for replayed "
                                   f"events: {exc}", hint="check the brokers are up; then resume") from exc
        for topic, partition in keys:
            records, _ = reader.read(topic, partition, starts[(topic, partition)], bounds[(topic, partition)].stable)
            for r in records:
                yield topic, r.value or b""
