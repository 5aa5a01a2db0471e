"""Every write of every adapter refuses itself in a dry-run: the second line of defence behind the planner.

The adapters are found by introspection — every class of every module under ``kafkaops/systems`` with a
method marked ``@write`` — so a new adapter cannot be missed: one without a builder here fails the test,
naming it. Each is built in a dry-run as the run's environment builds it, then every marked method is
called (with placeholder arguments: the guard must refuse before looking at them, let alone before
connecting anywhere). The expected writes are listed per adapter, so removing a mark — or adding a write
without one that this list names — fails here.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

import pytest

import kafkaops.systems
from kafkaops.environment import Environment
from kafkaops.model import Cluster, Host, KafkaEndpoint, Monitoring, SshEndpoint
from kafkaops.systems.guard import DryRunViolation, write_methods

# Loopback, and a port nothing listens on (discard): a guard that let a call through would be refused
# at once (or time out) — never reach a real system — and the test fails because DryRunViolation was
# not raised.
NOWHERE = "127.0.0.1"
CLOSED_PORT = 9

EXPECTED_WRITES = {
    # Only what production commands write: the lab's writes (topics, test data, pool objects, discovery
    # records) are the lab's adapters' (kafkaops_lab.kafka, kafkaops_lab.pools), never a production one's.
    "KafkaAdmin": {"alter_configs", "elect_preferred_leaders"},
    "Conftool": {"set_pooled"},
    "Discovery": {"set_pooled", "set"},
    "SshClient": {"change"},
    "Reassigner": {"execute", "cancel"},
    "ConsumerGroups": {"set_offsets"},
    "EventProducer": {"produce"},
    "EventPoster": {"post"},
    "Alertmanager": {"create_silence", "extend_silence", "expire_silence", "end_run_silences"},
    "ZooKeeper": {"delete_migration_state"},
    "LoadBench": {"send"},  # `kafkaops service bench`: real load and real events on the service
}


def _cluster() -> Cluster:
    host = Host(name="kafka9001", fqdn="kafka9001.example", address=NOWHERE, broker_id=9001, dc="x", rack="a",
                ssh=SshEndpoint(address=NOWHERE, port=CLOSED_PORT),
                conftool_tags={"dc": "x", "cluster": "c", "service": "s"},
                commands={"kafka_stop": "true", "kafka_reassign": "kafka-reassign-partitions"})
    site = Cluster(name="nowhere", bootstrap_servers=f"{NOWHERE}:{CLOSED_PORT}", hosts=(host,),
                   zookeeper=f"{NOWHERE}:{CLOSED_PORT}", conftool_config="/nonexistent/conftool.yaml",
                   monitoring=Monitoring(alertmanager=f"http://{NOWHERE}:{CLOSED_PORT}",
                                         host_matchers=(("instance", "{host.fqdn}:.*"),)))
    return dataclasses.replace(site, sites={"x": site})  # one site of itself: what ConsumerGroups needs


def adapter_classes() -> dict[str, type]:
    """Every class defined under ``kafkaops/systems`` that has a method marked ``@write``."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kafkaops.systems.__path__, prefix="kafkaops.systems."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and write_methods(cls):
                found[name] = cls
    return found


def _reassigner(env: Environment) -> Any:
    # Which broker runs the tool is asked of ZooKeeper; here the inventory's only broker is registered.
    env.registered_brokers = lambda: [9001]  # type: ignore[method-assign]
    return env.reassigner()


def _zookeeper(env: Environment) -> Any:
    # As env.zookeeper() builds it, not opened (its context manager connects first: the port is closed).
    from kafkaops.systems.zookeeper import ZooKeeper

    return ZooKeeper(str(env.cluster.zookeeper), timeout=env.kafka_timeout, dry_run=env.dry_run)


def _replay(env: Environment, index: int) -> Any:
    from kafkaops.systems.events import replay_adapters

    return replay_adapters(env)[index]


def _load_bench(env: Environment) -> Any:
    # Not a run's adapter: `kafkaops service bench` builds it itself, as here.
    from kafkaops.systems.load_bench import LoadBench

    return LoadBench(dry_run=env.dry_run)


#: How the run's environment hands out each adapter (the same paths a run takes).
BUILDERS: dict[str, Callable[[Environment], Any]] = {
    "KafkaAdmin": lambda env: env.kafka,
    "Conftool": lambda env: env.conftool,
    "Discovery": lambda env: env.discovery,
    "SshClient": lambda env: env.ssh(env.cluster.hosts[0]),
    "Reassigner": _reassigner,
    "ConsumerGroups": lambda env: env.groups("x"),
    "EventProducer": lambda env: _replay(env, 0),
    "EventPoster": lambda env: _replay(env, 1),
    "Alertmanager": lambda env: env.alertmanager,
    "ZooKeeper": _zookeeper,
    "LoadBench": _load_bench,
}


def _adapters(env: Environment) -> dict[str, Any]:
    return {name: build(env) for name, build in BUILDERS.items()}


def _placeholders(method: Any) -> list[Any]:
    params = [p for p in inspect.signature(method).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return [None] * len(params)


def test_every_adapter_with_a_write_has_a_builder_here() -> None:
    found = adapter_classes()
    missing = sorted(set(found) - set(BUILDERS))
    assert not missing, f"adapters with @write methods that this test cannot build yet: {missing} (add a builder)"
    assert set(found) == set(EXPECTED_WRITES), f"adapters with @write methods: {sorted(found)}"


def test_every_write_of_every_adapter_raises_in_a_dry_run() -> None:
    classes = adapter_classes()
    adapters = _adapters(Environment(_cluster(), dry_run=True))
    assert set(adapters) == set(classes)
    for name, adapter in adapters.items():
        assert type(adapter) is classes[name]
        writes = write_methods(type(adapter))
        assert set(writes) == EXPECTED_WRITES[name], f"{name}: marked writes {writes}"
        for method_name in writes:
            method = getattr(adapter, method_name)
            with pytest.raises(DryRunViolation, match=f"{type(adapter).__name__}.{method_name} called in a dry-run"):
                method(*_placeholders(method))


def test_a_live_environment_builds_adapters_that_allow_writes() -> None:
    env = Environment(_cluster(), dry_run=True)
    live = env.live()
    assert all(getattr(a, "dry_run", None) is True for a in _adapters(env).values())
    assert all(getattr(a, "dry_run", None) is False for a in _adapters(live).values())


def test_a_dry_run_violation_is_a_bug_not_an_operator_error() -> None:
    assert DryRunViolation.exit_code == 1


def test_the_run_identity_names_what_changed_and_ignores_masked_values() -> None:
    from kafkaops.engine.audit import redact
    from kafkaops.run_identity import dependencies, environment_changes

    cluster = _cluster()
    recorded = redact(Environment(cluster, inventory="/x/inv.yaml").identity())  # as the journal keeps it
    assert environment_changes(recorded, dependencies(cluster)) == []
    moved = dataclasses.replace(cluster, bootstrap_servers="127.0.0.9:9092")
    assert environment_changes(recorded, dependencies(moved)) == [
        f"bootstrap_servers: '{NOWHERE}:{CLOSED_PORT}' -> '127.0.0.9:9092'"]
    host = dataclasses.replace(cluster.hosts[0], ssh=dataclasses.replace(cluster.hosts[0].ssh, key_file="/k2"))
    keyed = dataclasses.replace(cluster, hosts=(host,))
    assert environment_changes(recorded, dependencies(keyed)) != []


def test_a_run_journaled_before_a_model_field_existed_resumes_on_the_same_inventory() -> None:
    """An upgrade mid-roll: the run's identity was journaled by a kafkaops whose model had no ``migrating``;
    the same inventory, read by this one, is the same world. Set, the field is a change like any other."""
    from kafkaops.run_identity import dependencies, environment_changes

    cluster = _cluster()
    recorded = Environment(cluster, inventory="/x/inv.yaml").identity()
    older = {**recorded, "depends": {k: v for k, v in recorded["depends"].items() if k != "migrating"}}
    assert "migrating" not in recorded["depends"]
    assert environment_changes(older, dependencies(cluster)) == []
    assert environment_changes(older, dependencies(dataclasses.replace(cluster, migrating=True))) == [
        "migrating: '<absent>' -> True"]


def test_the_labs_own_writes_refuse_themselves_in_a_dry_run_too() -> None:
    """The lab's adapters (kafkaops_lab) add writes production never makes; a dry-run's copy refuses them."""
    from kafkaops_lab.kafka import LabKafka
    from kafkaops_lab.pools import LabConftool, LabDiscovery

    for adapter, name, args in ((LabConftool("/nonexistent/conftool.yaml", dry_run=True), "ensure",
                                 ("h", {}, )), (LabDiscovery("/nonexistent/conftool.yaml", dry_run=True), "seed",
                                                ("svc", "x")), (
                                    LabKafka(KafkaEndpoint(f"{NOWHERE}:{CLOSED_PORT}"), dry_run=True),
                                                                "create_topics", ([],))):
        kwargs: dict[str, Any] = {"pooled": "yes", "weight": 1} if name == "ensure" else \
            {"pooled": True} if name == "seed" else {}
        with pytest.raises(DryRunViolation, match=f"{type(adapter).__name__}.{name} called in a dry-run"):
            getattr(adapter, name)(*args, **kwargs)
