"""env.reachable: one check per system the run touches, and ZooKeeper, Kafka and the inventory agree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kafkaops.engine.context import RunContext
from kafkaops.errors import ConfigError, HostKeyError, UnreachableError
from kafkaops.steps.env import Reachable


class FakeEnv:
    """Just what the step asks of an environment; each system answers or raises as told."""

    def __init__(self, *, kafka: Any = (1, 2, 3), zookeeper: Any = (1, 2, 3), conftool: Any = "yes",
                 ssh: dict[str, Exception] | None = None, migrating: bool = False) -> None:
        hosts = [SimpleNamespace(name=f"k{i}", fqdn=f"k{i}.x", broker_id=i, conftool_tags={"service": "s"})
                 for i in (1, 2, 3)]
        self.cluster = SimpleNamespace(hosts=hosts, zookeeper="zk:2181", conftool_config="/c.yaml",
                                       deploy_host=None, migrating=migrating)
        self._kafka, self._zk, self._conftool, self._ssh = kafka, zookeeper, conftool, ssh or {}
        self.kafka = SimpleNamespace(metadata=self._metadata)
        self.conftool = SimpleNamespace(get=self._pool)

    def _answer(self, value: Any) -> Any:
        if isinstance(value, Exception):
            raise value
        return value

    def _metadata(self, attempts: int) -> Any:
        return SimpleNamespace(brokers={b: None for b in self._answer(self._kafka)})

    def _pool(self, fqdn: str, tags: Any) -> Any:
        return SimpleNamespace(pooled=self._answer(self._conftool))

    @contextmanager
    def zookeeper(self) -> Iterator[Any]:
        yield SimpleNamespace(registered_brokers=lambda: list(self._answer(self._zk)))

    def host(self, name: str) -> Any:
        return next(h for h in self.cluster.hosts if h.name == name)

    def ssh(self, host: Any) -> Any:
        return SimpleNamespace(connect=lambda: self._answer(self._ssh.get(host.name, "ok")))


def _plan(env: FakeEnv, **params: Any) -> Any:
    step = Reachable({"systems": ["kafka", "zookeeper", "conftool", "ssh", "spark"], "timeout": 5.0,
                      "scan": True, "spark_master": "local[2]", **params})
    ctx = RunContext(run_id="", operator="o", reason="r", task=None, target="k1", params=step.params, env=env,
                     targets=("k1", "k2", "k3"))
    import kafkaops.steps.env as reach

    original = reach.environment
    reach.environment = lambda ctx: ctx.env  # type: ignore[assignment]
    original_target = reach.target_host
    reach.target_host = lambda ctx: ctx.env.host(ctx.target)  # type: ignore[assignment]
    try:
        return step.plan(step.observe(ctx))
    finally:
        reach.environment, reach.target_host = original, original_target  # type: ignore[assignment]


def test_everything_answering_and_agreeing_passes_and_says_what_it_checked() -> None:
    decision = _plan(FakeEnv())
    assert "kafka (brokers [1, 2, 3])" in decision.reason and "ssh k3 (answers)" in decision.reason


@pytest.mark.parametrize(("env", "error", "said"), [
    (FakeEnv(kafka=UnreachableError("Kafka at b did not answer")), UnreachableError, "kafka: Kafka at b"),
    (FakeEnv(zookeeper=UnreachableError("ZooKeeper zk did not answer")), UnreachableError, "zookeeper: ZooKeeper"),
    (FakeEnv(conftool=UnreachableError("etcd did not answer")), UnreachableError, "conftool: etcd"),
    (FakeEnv(ssh={"k3": UnreachableError("ssh to k3 refused")}), UnreachableError, "ssh k3: ssh to k3 refused"),
    (FakeEnv(ssh={"k2": HostKeyError("host key of k2 changed")}), HostKeyError, "ssh k2"),
    (FakeEnv(zookeeper=()), ConfigError, "lists brokers [] under /brokers/ids but Kafka's metadata reports"),
    (FakeEnv(kafka=(1, 2, 3, 9), zookeeper=(1, 2, 3, 9)), ConfigError, "brokers [9] that the inventory does not"),
])
def test_a_failed_or_disagreeing_system_refuses_naming_it(env: FakeEnv, error: type[Exception], said: str) -> None:
    with pytest.raises(error, match="before any change") as exc:
        _plan(env)
    assert said in str(exc.value)


def test_a_spark_master_that_does_not_listen_refuses_unless_no_scan() -> None:
    with pytest.raises(UnreachableError, match=r"Spark master spark://127\.0\.0\.1:9 does not accept"):
        _plan(FakeEnv(), spark_master="spark://127.0.0.1:9")
    assert "spark" not in _plan(FakeEnv(), spark_master="spark://127.0.0.1:9", scan=False).reason


def test_during_a_migration_only_a_zookeeper_registration_the_metadata_lacks_is_a_mismatch() -> None:
    """A broker in KRaft mode is in the metadata only (seen on the migration lab): /brokers/ids holding fewer
    brokers is the migration under way, not a wrong chroot; one the metadata does not know still refuses."""
    assert "kafka (brokers [1, 2, 3])" in _plan(FakeEnv(zookeeper=(1,), migrating=True)).reason
    assert "kafka (brokers [1, 2, 3])" in _plan(FakeEnv(zookeeper=(), migrating=True)).reason
    with pytest.raises(ConfigError, match="lists brokers \\[1, 4\\] under /brokers/ids"):
        _plan(FakeEnv(zookeeper=(1, 4), migrating=True))
    with pytest.raises(ConfigError, match="lists brokers \\[1\\] under /brokers/ids"):
        _plan(FakeEnv(zookeeper=(1,)))  # the same view outside a migration still refuses
