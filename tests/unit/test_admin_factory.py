"""One admin-client factory (issue 30): every adapter of a cluster is built from the inventory's cluster,
so none forgets what it is (bootstrap servers, name, KRaft). The post-check's adapter once forgot KRaft:
its baseline named a random live broker the controller (KIP-590)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from kafkaops.inventory import load_inventory
from kafkaops.systems.guard import DryRunViolation
from kafkaops.systems.kafka import KafkaAdmin

REPO = Path(__file__).resolve().parents[2]


class _Metadata:
    """A metadata answer as librdkafka gives it on KRaft: ``controller_id`` is some live broker."""

    def __init__(self, brokers: list[int]) -> None:
        self.brokers = {b: SimpleNamespace(id=b, host="127.0.0.1", port=9) for b in brokers}
        self.controller_id = brokers[1]
        part = SimpleNamespace(leader=brokers[0], replicas=list(brokers), isrs=list(brokers))
        self.topics = {"t": SimpleNamespace(error=None, partitions={0: part})}


def _done(value: Any) -> Future[Any]:
    fut: Future[Any] = Future()
    fut.set_result(value)
    return fut


class _AdminClient:
    """Answers metadata, topic configs and offsets from memory (no Kafka needed for this question)."""

    brokers: ClassVar[list[int]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def list_topics(self, timeout: float) -> _Metadata:
        return _Metadata(self.brokers)

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        entries = {"min.insync.replicas": SimpleNamespace(value="2"), "cleanup.policy": SimpleNamespace(value="delete")}
        return {r: _done(entries) for r in resources}

    def list_offsets(self, request: dict[Any, Any], request_timeout: float) -> dict[Any, Future[Any]]:
        return {tp: _done(SimpleNamespace(offset=0)) for tp in request}


@pytest.fixture
def fake_client(monkeypatch: pytest.MonkeyPatch, lab_secrets: Path) -> type[_AdminClient]:
    """The fake client (and the files the lab inventory's security names: checked before any client)."""
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", _AdminClient)
    return _AdminClient


def test_the_factory_takes_everything_from_the_cluster(fake_client: type[_AdminClient]) -> None:
    kraft = load_inventory(REPO / "inventory" / "lab-kraft.yaml")
    zk = load_inventory(REPO / "inventory" / "lab.yaml")
    assert kraft.kraft and not zk.kraft
    run = KafkaAdmin.for_cluster(zk, timeout=7.0)
    assert (run.bootstrap, run.cluster, run.kraft, run.timeout, run.attempts, run.dry_run) == (
        zk.bootstrap_servers, zk.name, False, 7.0, 3, False)
    conf = run._admin.conf  # the cluster's security reached the client too (issue 43)
    assert (conf["security.protocol"], conf["sasl.mechanisms"], conf["sasl.username"], conf["sasl.password"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "kafkaops", "lab-password")
    assert conf["ssl.ca.location"] == zk.kafka_security.ca_file
    look = KafkaAdmin.look(kraft)
    assert (look.bootstrap, look.cluster, look.kraft, look.timeout, look.attempts, look.dry_run) == (
        kraft.bootstrap_servers, kraft.name, True, 5.0, 1, True)
    with pytest.raises(DryRunViolation):  # a look never changes the cluster
        look.elect_preferred_leaders()


def test_the_post_check_baseline_names_no_controller_on_kraft(fake_client: type[_AdminClient]) -> None:
    """On KRaft the metadata's controller is a random broker: the baseline must not record it as one."""
    from kafkaops.health.check import take_snapshot

    kraft = load_inventory(REPO / "inventory" / "lab-kraft.yaml")
    fake_client.brokers = sorted(h.broker_id for h in kraft.hosts)
    assert take_snapshot(kraft, probes=False).controller is None
    zk = load_inventory(REPO / "inventory" / "lab.yaml")
    fake_client.brokers = sorted(h.broker_id for h in zk.hosts)
    assert take_snapshot(zk, probes=False).controller == fake_client.brokers[1]  # ZooKeeper's answer is the one
