"""KafkaAdmin: the one AdminClient of kafkaops — dry-run guards on its writes, and the offsets reads
folded in from the former ``systems/offsets.py`` (ListOffsets batching, unreadable partitions, the
offset for a time falling back to the log end)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from kafkaops.model import KafkaEndpoint
from kafkaops.systems.guard import DryRunViolation, write_methods
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops_lab.kafka import LabKafka, ProduceRecord, TopicSpec


@dataclass
class _Offset:
    offset: int


class FakeAdminClient:
    """Answers ListOffsets from a table: ``{(topic, partition): {"earliest": n, "latest": n, ts: n}}``;
    a missing entry fails that partition's future (leader down)."""

    table: ClassVar[dict[tuple[str, int], dict[Any, int]]] = {}
    calls: ClassVar[list[str]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def list_offsets(self, request: dict[Any, Any], request_timeout: float) -> dict[Any, Future[Any]]:
        out = {}
        for tp, spec in request.items():
            kind = _spec_name(spec)
            self.calls.append(kind)
            fut: Future[Any] = Future()
            answer = self.table.get((tp.topic, tp.partition), {}).get(kind)
            if answer is None:
                fut.set_exception(RuntimeError("NOT_LEADER_OR_FOLLOWER"))
            else:
                fut.set_result(_Offset(answer))
            out[tp] = fut
        return out


def _spec_name(spec: Any) -> str:
    return {"EarliestSpec": "earliest", "LatestSpec": "latest"}.get(type(spec).__name__, "time")


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdminClient]:
    import confluent_kafka.admin

    FakeAdminClient.table = {}
    FakeAdminClient.calls = []
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", FakeAdminClient)
    return FakeAdminClient


def test_every_write_is_guarded_and_refused_in_a_dry_run(fake_admin: type[FakeAdminClient]) -> None:
    # The product's writes are those production commands make; the lab's (topics, test data, staged loss)
    # are the lab's adapter's, guarded the same way.
    assert write_methods(KafkaAdmin) == ["alter_configs", "elect_preferred_leaders"]
    assert write_methods(LabKafka) == ["alter_configs", "create_topics", "delete_records", "elect_preferred_leaders",
                                       "produce"]
    admin = LabKafka(KafkaEndpoint("127.0.0.1:9"), dry_run=True)
    calls = {
        "alter_configs": lambda: admin.alter_configs(brokers={1001: {"leader.replication.throttled.rate": "1"}}),
        "create_topics": lambda: admin.create_topics([TopicSpec("t", 1, 1)]),
        "delete_records": lambda: admin.delete_records({("t", 0): 10}),
        "elect_preferred_leaders": lambda: admin.elect_preferred_leaders(),
        "produce": lambda: admin.produce("t", [ProduceRecord("x")]),
    }
    for name, call in calls.items():
        with pytest.raises(DryRunViolation, match=f"LabKafka.{name} called in a dry-run"):
            call()
    assert fake_admin.calls == []  # nothing was asked of Kafka


def test_one_admin_client_configuration(fake_admin: type[FakeAdminClient]) -> None:
    admin = KafkaAdmin(KafkaEndpoint("127.0.0.1:9092"), timeout=15)
    conf = admin._admin.conf  # type: ignore[attr-defined]
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert conf["socket.timeout.ms"] == 15000 and conf["reconnect.backoff.ms"] == 20


def test_list_offsets_reads_start_and_end_and_marks_unreadable_partitions(
    fake_admin: type[FakeAdminClient],
) -> None:
    fake_admin.table = {("a", 0): {"earliest": 5, "latest": 100}, ("a", 1): {"earliest": 0, "latest": 7}}
    offsets = KafkaAdmin(KafkaEndpoint("127.0.0.1:9")).list_offsets([("a", 0), ("a", 1), ("a", 0), ("b", 0)])
    assert offsets == {("a", 0): (5, 100), ("a", 1): (0, 7), ("b", 0): (None, None)}
    assert sorted(fake_admin.calls) == ["earliest"] * 3 + ["latest"] * 3  # duplicates asked once


def test_offsets_for_times_falls_back_to_the_log_end(fake_admin: type[FakeAdminClient]) -> None:
    # ("a", 1) has nothing that recent: Kafka answers -1, and the scan starts at its log end; ("a", 2) is unreadable
    fake_admin.table = {("a", 0): {"time": 42, "latest": 100}, ("a", 1): {"time": -1, "latest": 7}, ("a", 2): {}}
    admin = KafkaAdmin(KafkaEndpoint("127.0.0.1:9"))
    found = admin.offsets_for_times([("a", 0), ("a", 1), ("a", 2)], 1_700_000_000_000)
    assert found == {("a", 0): 42, ("a", 1): 7, ("a", 2): None}


def test_a_topic_that_exists_by_the_time_its_creation_answers_is_success(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka retries a CreateTopics whose answer timed out; the first try may have created it."""
    import confluent_kafka.admin
    from confluent_kafka import KafkaError, KafkaException

    class Admin:
        def __init__(self, conf: dict[str, Any]) -> None:
            pass

        def list_topics(self, timeout: float) -> Any:
            return type("Md", (), {"topics": {}, "brokers": {1: None}, "controller_id": 1})()

        def create_topics(self, topics: list[Any], **kw: Any) -> dict[str, Future[Any]]:
            out: dict[str, Future[Any]] = {}
            for t in topics:
                fut: Future[Any] = Future()
                if t.topic == "raced":
                    fut.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists")))
                elif t.topic == "broken":
                    fut.set_exception(KafkaException(KafkaError(KafkaError.POLICY_VIOLATION, "no")))
                else:
                    fut.set_result(None)
                out[t.topic] = fut
            return out

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", Admin)
    admin = LabKafka(KafkaEndpoint("127.0.0.1:9"), timeout=1)
    assert admin.create_topics([TopicSpec("new", 1, 1), TopicSpec("raced", 1, 1)]) == ["new"]
    from kafkaops.errors import UnreachableError

    with pytest.raises(UnreachableError, match=r"create_topics\(broken\)"):
        admin.create_topics([TopicSpec("broken", 1, 1)])
