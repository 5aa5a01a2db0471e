"""The decisions the CLI used to hold, now in the product's policy layer (issue 30): the stretch
readiness of ``placement check`` and the production gate of ``service bench``, judged without a system."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import SafetyRefusal, UnreachableError
from kafkaops.inventory import load_inventory
from kafkaops.model import Host
from kafkaops.policy.bench import BenchTarget, refuse_production_bench
from kafkaops.policy.stretch import RACK_AWARE_SELECTOR, stretch_readiness

REPO = Path(__file__).resolve().parents[2]


def test_a_stretch_cluster_set_up_as_the_seed_says_is_ready_but_for_its_quorum() -> None:
    cluster = load_inventory(REPO / "inventory" / "lab-stretch.yaml")
    good = {h.broker_id: {"broker.rack": h.dc, "replica.selector.class": RACK_AWARE_SELECTOR} for h in cluster.hosts}
    facts = {f["fact"]: f for f in stretch_readiness(cluster, good)}
    assert [f["ok"] for f in facts.values()] == [False, True, True, None]  # one ZooKeeper server: not 3 DCs
    assert "ZooKeeper ensemble of 1 server(s)" in facts["quorum over 3 DCs"]["detail"]
    first = cluster.hosts[0]
    bad = {**good, first.broker_id: {"broker.rack": "elsewhere"}}
    facts = {f["fact"]: f for f in stretch_readiness(cluster, bad)}
    assert not facts["follower fetching"]["ok"] and str(first.broker_id) in facts["follower fetching"]["detail"]
    assert facts["broker.rack = DC"]["detail"] == (f"broker.rack differs from the inventory's dc: {first.broker_id} "
                                                   f"(elsewhere != {first.dc})")


def test_the_bench_gate_asks_the_pool_state_only_where_it_matters() -> None:
    prod = load_inventory(REPO / "inventory" / "eqiad-main.example.yaml")
    lab = load_inventory(REPO / "inventory" / "lab.yaml")
    asked: list[str] = []

    def depooled(host: Host) -> str:
        asked.append(host.name)
        return "no"

    hosts = [BenchTarget(h.name, f"http://{h.address}:8085/v1/events", "host", h) for h in prod.hosts]
    refuse_production_bench(prod, hosts, 10, depooled)
    assert asked == [h.name for h in prod.hosts]
    refuse_production_bench(lab, [BenchTarget("VIP", "http://x", "vip")], 10, depooled)  # the lab: never asked
    assert asked == [h.name for h in prod.hosts]

    def unreadable(host: Host) -> str:
        raise UnreachableError("etcd at 127.0.0.1:2379 did not answer")

    with pytest.raises(SafetyRefusal, match=r"kafka1001 of production cluster main-eqiad: its pool state cannot "
                                            r"be read \(etcd at 127.0.0.1:2379 did not answer\)") as exc:
        refuse_production_bench(prod, hosts, 10, unreadable)
    assert exc.value.exit_code == 6
