"""Load generator: the lab's proof that maintenance loses nothing.

Like Kafka's own system tests: an idempotent producer with ``acks=all`` writes numbered messages while
a consumer reads the topic back from the offsets current at the start; afterwards every acknowledged
message must have been consumed, and none twice. In parallel, HTTP events go through the load
balancer's VIP and every failed request is counted — what the eventbus clients would see.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkaops.errors import UnreachableError
from kafkaops.model import Cluster, KafkaEndpoint
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops.systems.producing import WRITE_ONCE
from kafkaops_lab.security import LOAD_GROUP_PREFIX, LOAD_TOPIC, user_endpoint


@dataclass
class LoadReport:
    seconds: float
    topic: str
    produced_acked: int = 0
    produce_errors: int = 0
    consumed: int = 0
    lost: int = 0
    duplicated: int = 0
    http_sent: int = 0
    http_failed: int = 0
    http_errors: list[str] = field(default_factory=list)
    read_errors: list[str] = field(default_factory=list)  # what the reader's consumer was told, first 20

    @property
    def clean(self) -> bool:
        return (self.lost == 0 and self.duplicated == 0 and self.http_failed == 0 and self.produce_errors == 0
                and self.produced_acked > 0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean}


class _Reader(threading.Thread):
    def __init__(self, endpoint: KafkaEndpoint, topic: str, run_id: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.run_id = run_id.encode()
        self.seen: Counter[int] = Counter()
        self.lock = threading.Lock()  # the producer's thread reads ``seen`` while this one adds to it
        self.stop = threading.Event()
        self.consumer = Consumer({
            **librdkafka_config(endpoint), "group.id": f"{LOAD_GROUP_PREFIX}{run_id}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 2,
            "isolation.level": "read_committed",
        })
        self.errors: list[str] = []
        try:
            partitions = self._partitions(topic)
        except KafkaException as exc:
            raise UnreachableError(f"Kafka at {endpoint.bootstrap_servers} did not answer a metadata request: {exc}",
                                   hint="check the lab's brokers: `kafkaops lab status`") from exc
        self.consumer.assign([TopicPartition(topic, p, self._high_watermark(topic, p)) for p in partitions])

    def _partitions(self, topic: str, timeout: float = 60.0) -> list[int]:
        """The topic's partitions, asked again until a broker knows the topic.

        A broker whose metadata cache has not caught up with a topic just created answers
        UNKNOWN_TOPIC_OR_PART with no partitions; assigning that empty list reads nothing at all, and the
        load then reports every acked message lost (CI, on a stretch lab started a moment before).
        """
        deadline = time.monotonic() + timeout
        while True:
            described = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            if described is not None and described.error is None and described.partitions:
                return sorted(described.partitions)
            if time.monotonic() > deadline:
                raise UnreachableError(f"Kafka does not know the load's topic {topic}: "
                                       f"{described.error if described is not None else 'not in its metadata'}",
                                       hint="check the lab's topics: `kafkaops lab status`")
            time.sleep(0.5)

    def _high_watermark(self, topic: str, partition: int, timeout: float = 60.0) -> int:
        """Where this run starts reading a partition, retried while its leadership moves.

        The load runs during maintenance, and a leader election (a broker stopping, a preferred
        election just done) answers NOT_LEADER until the client's metadata catches up.
        """
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        while True:
            try:
                _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                return int(high)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def run(self) -> None:
        while not self.stop.is_set():
            for msg in self.consumer.consume(500, timeout=0.2):
                value = msg.value()
                if msg.error() is not None:
                    self._note(str(msg.error()))
                elif value is not None:
                    run, _, seq = value.partition(b":")
                    if run == self.run_id:
                        with self.lock:
                            self.seen[int(seq)] += 1
        self.consumer.close()

    def _note(self, error: str) -> None:
        """Keep what the consumer was told, so a load that read nothing says why."""
        if len(self.errors) < 20 and not any(e.endswith(f" {error}") for e in self.errors):
            self.errors.append(f"{time.strftime('%H:%M:%S')} {error}")

    def snapshot(self) -> Counter[int]:
        """A copy of what was read so far, safe to iterate while the reader goes on."""
        with self.lock:
            return Counter(self.seen)


def _http(vip: str, stop: threading.Event, rate: float, report: LoadReport, lock: threading.Lock) -> None:
    import requests

    interval = 1.0 / rate
    while not stop.is_set():
        started = time.monotonic()
        event = {"meta": {"stream": "test.event", "dt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                 "load": True}
        try:
            # A new connection per request (Connection: close), as short-lived clients do: this is
            # what a depool must steer away from a host.
            r = requests.post(f"http://{vip}/v1/events", json=event, timeout=15, headers={"Connection": "close"})
            failed = r.status_code != 201
            why = f"HTTP {r.status_code}"
        except requests.RequestException as exc:
            failed, why = True, type(exc).__name__
        with lock:
            report.http_sent += 1
            if failed:
                report.http_failed += 1
                if len(report.http_errors) < 20:
                    report.http_errors.append(f"{time.strftime('%H:%M:%S')} {why}")
        time.sleep(max(0.0, interval - (time.monotonic() - started)))



def producer_config(endpoint: KafkaEndpoint) -> dict[str, Any]:
    """The load's producer: every record acknowledged by the whole ISR and written once
    (:data:`~kafkaops.systems.producing.WRITE_ONCE`: one request in flight, so a leader move cannot make
    librdkafka resend a record the old leader had written — the kill sweep's point 20 duplicate, issue 42.3);
    retried for five minutes, so a roll's leader moves never turn into produce errors."""

    return {**librdkafka_config(endpoint), **WRITE_ONCE, "linger.ms": 5, "message.timeout.ms": 300000,
            "log_level": 2}

def run_load(cluster: Cluster, seconds: float, *, rate: float = 200.0, http_rate: float = 10.0,
             stop: threading.Event | None = None, topic: str = LOAD_TOPIC) -> LoadReport:
    """Produce for ``seconds`` (or until ``stop`` is set), then drain and compare."""
    from confluent_kafka import Producer

    run_id = uuid.uuid4().hex[:12]
    stop = stop or threading.Event()
    report = LoadReport(seconds=0.0, topic=topic)
    lock = threading.Lock()
    acked: set[int] = set()
    endpoint = user_endpoint(cluster, "load")
    reader = _Reader(endpoint, topic, run_id)
    reader.start()
    vip = next((f"{s.vip}:{s.port}" for h in cluster.hosts for s in h.services if s.vip), None)
    http_thread = None
    if vip and http_rate > 0:
        http_thread = threading.Thread(target=_http, args=(vip, stop, http_rate, report, lock), daemon=True)
        http_thread.start()
    producer = Producer(producer_config(endpoint))

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(int(msg.key()))
        else:
            report.produce_errors += 1

    started = time.monotonic()
    seq = 0
    while not stop.is_set() and time.monotonic() - started < seconds:
        target = int((time.monotonic() - started) * rate)
        while seq < target:
            try:
                producer.produce(topic, key=str(seq).encode(), value=run_id.encode() + b":" + str(seq).encode(),
                                 on_delivery=on_delivery)
                seq += 1
            except BufferError:
                break
        producer.poll(0.05)
    stop.set()
    report.seconds = time.monotonic() - started
    producer.flush(300)
    if http_thread is not None:
        http_thread.join()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not acked <= set(reader.snapshot()):
        time.sleep(0.2)
    reader.stop.set()
    reader.join(10)
    seen = reader.snapshot()
    report.produced_acked = len(acked)
    report.consumed = sum(seen.values())
    report.lost = len(acked - set(seen))
    report.duplicated = sum(n - 1 for n in seen.values() if n > 1)
    report.read_errors = list(reader.errors)
    return report
