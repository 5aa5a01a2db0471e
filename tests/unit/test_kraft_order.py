"""A KRaft roll's order and batches, from the quorum's answer (a recorded ``--replication``; no cluster):
controller nodes first, the quorum's leader last among them, then the brokers; controllers always one at
a time, whatever ``--batch`` says."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkaops.environment import Environment
from kafkaops.facts.quorum import parse_replication
from kafkaops.inventory import load_inventory

from test_quorum_facts import ALL_CAUGHT_UP  # isort: skip

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Environment:
    cluster = load_inventory(REPO / "inventory" / "lab-kraft.yaml")
    e = Environment(cluster, dry_run=True)
    # The recorded answer has 3001 as the leader.
    monkeypatch.setattr(e, "quorum", lambda: SimpleNamespace(replication=lambda: parse_replication(ALL_CAUGHT_UP)))
    return e


def test_controllers_first_the_leader_last_then_the_brokers(env: Environment) -> None:
    c = env.cluster
    ordered, notes = env.order_hosts([*c.controllers, *c.hosts], "controller_last")
    assert [h.name for h in ordered] == ["kafka-ctrl3002", "kafka-ctrl3003", "kafka-ctrl3001",
                                         "kafka-kraft1001", "kafka-kraft1002", "kafka-kraft1003"]
    assert "the active controller kafka-ctrl3001 last" in notes[0]


def test_a_broker_roll_on_kraft_asks_no_quorum_and_keeps_inventory_order(env: Environment,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env, "quorum", lambda: pytest.fail("a broker-only roll needs no quorum"))
    ordered, notes = env.order_hosts(list(env.cluster.hosts), "controller_last")
    assert ordered == list(env.cluster.hosts) and notes == []


def test_controllers_go_one_at_a_time_whatever_batch_says(env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    c = env.cluster
    seen: list[list[str]] = []
    real = Environment.batch_hosts

    def brokers_only(self: Environment, hosts: list, spec: str, *, headroom: int = 0) -> tuple[list, list]:
        """The brokers' own batching stubbed (it asks the cluster): one batch of all of them."""
        if any(h.role == "controller" for h in hosts):
            return real(self, hosts, spec, headroom=headroom)
        seen.append([h.name for h in hosts])
        return [hosts], ["brokers together"]

    monkeypatch.setattr(Environment, "batch_hosts", brokers_only)
    batches, notes = env.batch_hosts([*c.controllers, *c.hosts], "auto")
    assert [[h.name for h in b] for b in batches] == [["kafka-ctrl3001"], ["kafka-ctrl3002"], ["kafka-ctrl3003"],
                                                      ["kafka-kraft1001", "kafka-kraft1002", "kafka-kraft1003"]]
    assert seen == [["kafka-kraft1001", "kafka-kraft1002", "kafka-kraft1003"]]
    assert notes[0].startswith("controller nodes one at a time")
