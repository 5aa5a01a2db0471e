"""Every write of every adapter refuses itself in a dry-run: the second line of defence behind the planner.

The adapters are built in a dry-run as the environment builds them, then every method marked
``@write`` is called (with placeholder arguments: the guard must refuse before looking at them, let
alone before connecting anywhere). The expected writes are listed per adapter, so removing a mark —
or adding a write without one that this list names — fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from kafkaops.environment import Environment
from kafkaops.model import Cluster, Host, SshEndpoint
from kafkaops.systems.guard import DryRunViolation, write_methods

# TEST-NET-1 (RFC 5737): never routed. A guard that let a call through would fail to connect (slowly),
# not reach a real system; the test fails either way because DryRunViolation was not raised.
NOWHERE = "192.0.2.1"

EXPECTED_WRITES = {
    "KafkaAdmin": {"alter_configs", "create_topics", "delete_records", "elect_preferred_leaders", "produce"},
    "Conftool": {"ensure", "set_pooled"},
    "SshClient": {"change"},
}


def _cluster() -> Cluster:
    host = Host(name="kafka9001", fqdn="kafka9001.example", address=NOWHERE, broker_id=9001, dc="x", rack="a",
                ssh=SshEndpoint(address=NOWHERE, port=22), conftool_tags={"dc": "x", "cluster": "c", "service": "s"},
                commands={"kafka_stop": "true"})
    return Cluster(name="nowhere", bootstrap_servers=f"{NOWHERE}:9092", hosts=(host,), zookeeper=f"{NOWHERE}:2181",
                   conftool_config="/nonexistent/conftool.yaml")


def _adapters(env: Environment) -> dict[str, Any]:
    host = env.cluster.hosts[0]
    return {"KafkaAdmin": env.kafka, "Conftool": env.conftool, "SshClient": env.ssh(host)}


def _placeholders(method: Any) -> list[Any]:
    params = [p for p in inspect.signature(method).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return [None] * len(params)


def test_every_write_of_every_adapter_raises_in_a_dry_run() -> None:
    adapters = _adapters(Environment(_cluster(), dry_run=True))
    assert set(adapters) == set(EXPECTED_WRITES)
    for name, adapter in adapters.items():
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
    from kafkaops.environment import dependencies, environment_changes

    cluster = _cluster()
    recorded = redact(Environment(cluster, inventory="/x/inv.yaml").identity())  # as the journal keeps it
    assert environment_changes(recorded, dependencies(cluster)) == []
    moved = dataclasses.replace(cluster, bootstrap_servers="127.0.0.9:9092")
    assert environment_changes(recorded, dependencies(moved)) == [
        f"bootstrap_servers: '{NOWHERE}:9092' -> '127.0.0.9:9092'"]
    host = dataclasses.replace(cluster.hosts[0], ssh=dataclasses.replace(cluster.hosts[0].ssh, key_file="/k2"))
    keyed = dataclasses.replace(cluster, hosts=(host,))
    assert environment_changes(recorded, dependencies(keyed)) != []
