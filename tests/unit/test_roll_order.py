"""A roll's order and batches (:mod:`kafkaops.policy.roll_order`, :func:`kafkaops.policy.batches.roll_batches`):
the controller last on ZooKeeper; on KRaft the controller nodes first, the quorum's leader last among
them (from a recorded ``--replication``; no cluster), then the brokers; controllers always one at a time,
whatever ``--batch`` says. And the environment asks the cluster only what the decision needs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkaops.environment import Environment
from kafkaops.facts.quorum import parse_replication
from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster, ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.batches import needs_snapshot, parse_batch, roll_batches
from kafkaops.policy.quorum import judge
from kafkaops.policy.roll_order import controller_last, kraft_order
from kafkaops.procedure import roll_order

from test_quorum_facts import ALL_CAUGHT_UP  # isort: skip

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kraft() -> Cluster:
    return load_inventory(REPO / "inventory" / "lab-kraft.yaml")


@pytest.fixture
def zk() -> Cluster:
    return load_inventory(REPO / "inventory" / "lab.yaml")


def names(hosts: list) -> list[str]:
    return [h.name for h in hosts]


def test_the_controller_goes_last_and_nothing_else_moves(zk: Cluster) -> None:
    hosts = list(zk.hosts)
    first, *rest = hosts
    ordered, notes = controller_last(hosts, first.broker_id)
    assert names(ordered) == names([*rest, first])
    assert notes == [f"controller {first.name} goes last (one controller election for the whole roll)"]
    assert controller_last(hosts, hosts[-1].broker_id)[0] == hosts  # already last
    assert controller_last(hosts, None) == (hosts, [])  # unknown: inventory order, nothing said
    assert controller_last(hosts, 999_999) == (hosts, [])  # not among the roll's hosts


def test_controllers_first_the_leader_last_then_the_brokers(kraft: Cluster) -> None:
    leader = judge(parse_replication(ALL_CAUGHT_UP)).leader_id  # 3001 in the recorded answer
    ordered, notes = kraft_order([*kraft.controllers, *kraft.hosts], leader)
    assert names(ordered) == ["kafka-ctrl3002", "kafka-ctrl3003", "kafka-ctrl3001",
                              "kafka-kraft1001", "kafka-kraft1002", "kafka-kraft1003"]
    assert "the active controller kafka-ctrl3001 last" in notes[0]
    assert notes[1].startswith("then the brokers")


def test_a_quorum_without_leader_keeps_the_controllers_order_and_says_the_gate_will_refuse(kraft: Cluster) -> None:
    ordered, notes = kraft_order(list(kraft.controllers), None)
    assert ordered == list(kraft.controllers)
    assert notes == ["the quorum has no leader now: the quorum gate will refuse"]


def test_the_procedure_asks_the_quorum_only_for_a_roll_of_controller_nodes(
        kraft: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Environment(kraft, dry_run=True)
    monkeypatch.setattr(env, "quorum", lambda: pytest.fail("a broker-only roll needs no quorum"))
    assert roll_order(env, list(kraft.hosts), "controller_last") == (list(kraft.hosts), [])
    monkeypatch.setattr(env, "quorum",
                        lambda: SimpleNamespace(replication=lambda: parse_replication(ALL_CAUGHT_UP)))
    ordered, _ = roll_order(env, [*kraft.controllers, *kraft.hosts], "controller_last")
    assert names(ordered)[:3] == ["kafka-ctrl3002", "kafka-ctrl3003", "kafka-ctrl3001"]
    assert roll_order(env, list(kraft.controllers), "inventory") == (list(kraft.controllers), [])


def _snapshot(brokers: list[int], controller: int | None) -> ClusterSnapshot:
    """Every partition on every broker, RF 3, min ISR 1: any two of three may stop together."""
    parts = tuple(PartitionState("t", p, brokers[0], tuple(brokers), tuple(brokers)) for p in range(3))
    return ClusterSnapshot("c", 0.0, tuple(brokers), controller, parts, {"t": TopicConfig("t", 1, 3)})


def test_controllers_go_one_at_a_time_whatever_batch_says(kraft: Cluster) -> None:
    brokers = [dataclasses.replace(h, services=(), conftool_tags={}) for h in kraft.hosts]  # no pooled service
    batches, notes = roll_batches([*kraft.controllers, *brokers], "auto",
                                  _snapshot([h.broker_id for h in brokers], None))
    assert [names(b) for b in batches] == [["kafka-ctrl3001"], ["kafka-ctrl3002"], ["kafka-ctrl3003"],
                                           ["kafka-kraft1001", "kafka-kraft1002"], ["kafka-kraft1003"]]
    assert notes[0] == "controller nodes one at a time (a quorum may lose only one voter)"
    assert notes[1].startswith("--batch auto: 2 batch(es)")


def test_one_at_a_time_needs_no_snapshot_and_a_batched_roll_of_brokers_does(kraft: Cluster, zk: Cluster) -> None:
    assert not needs_snapshot(list(zk.hosts), "1")
    assert not needs_snapshot([*kraft.controllers, kraft.hosts[0]], "auto")  # one broker: nothing to group
    assert needs_snapshot([*kraft.controllers, *kraft.hosts], "2")
    assert roll_batches(list(zk.hosts), "1", None) == ([[h] for h in zk.hosts], [])
    with pytest.raises(TypeError, match="needs the cluster's snapshot"):
        roll_batches(list(zk.hosts), "auto", None)


def test_batch_spec_is_auto_or_a_positive_number() -> None:
    assert parse_batch(" Auto ") is None and parse_batch("3") == 3
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(ValueError, match="is not auto or a number"):
            parse_batch(bad)
