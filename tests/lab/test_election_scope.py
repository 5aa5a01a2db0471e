"""Leader spread and election scope on the lab (issue 13, points 4 and 5).

Leadership is skewed on purpose the way maintenance skews it in the field: a broker restarted without
an election (``restart --no-election``) comes back leading nothing (Strimzi #5564; the lab brokers run
with ``auto.leader.rebalance.enable=false``, so nothing repairs it behind the test's back). Then:

* a reboot of another host with ``--election-scope cluster`` is refused by the pre-flight, with the
  numbers (which broker, how many of its preferred partitions it leads, leaders now/preferred per
  broker), before anything changed;
* a restart of the broker that leads nothing, default scope (``broker``), is allowed (its own election
  restores it) and ends with every broker within the threshold;
* a cluster-scope election accepted past the gate (``--max-leader-imbalance 100``) repairs the skew of a
  broker that was not the target.

The real CLI in a subprocess; the spread is read independently with the AdminClient.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.errors import SafetyRefusal
from kafkaops.health.status import collect
from kafkaops.lab.host import LabHost
from kafkaops.model import Cluster, Host
from kafkaops.policy.leaders import LeaderSpread, leader_spread
from kafkaops.systems.kafka import KafkaAdmin

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAST = ["--syn-window", "1s", "--no-scan"]


def confirmations(runbook: str) -> list[str]:
    """``--confirmed NAME`` for every manual checkpoint the runbook has (``operator.confirm``): the test
    stands for the operator who confirmed them; ``--yes`` never does."""
    import kafkaops.steps  # noqa: F401  - registers the kinds
    from kafkaops.catalog import find_runbook

    return [arg for s in find_runbook(runbook).steps if s.kind == "operator.confirm"
            for arg in ("--confirmed", str(s.params["checkpoint"]))]


def run(home: Path, cluster: Cluster, runbook: str, target: str, *args: str) -> tuple[int, str]:
    result = kafkaops(home, cluster, runbook, target, "--yes", *confirmations(runbook), *FAST, *args)
    return result.returncode, result.stdout + result.stderr


def spread(cluster: Cluster, max_imbalance: int = 10) -> LeaderSpread:
    return leader_spread(KafkaAdmin(cluster.bootstrap_servers).snapshot(with_configs=False), max_imbalance)


def two_hosts(cluster: Cluster) -> tuple[Host, Host]:
    """Two hosts that are not the controller (neither run moves the controller: fewer moving parts)."""
    controller = KafkaAdmin(cluster.bootstrap_servers).controller()
    others = [h for h in cluster.hosts if h.broker_id != controller]
    return others[0], others[1]


def skew(home: Path, cluster: Cluster, host: Host) -> None:
    """Restart ``host`` without an election: it comes back leading nothing, and the plan says so."""
    code, out = run(home, cluster, "restart", host.name, "--no-election", "--reason", "skew on purpose")
    assert code == 0, out
    assert f"{host.name} is repooled while leading nothing" in out, out
    me = next(b for b in spread(cluster).brokers if b.broker_id == host.broker_id)
    assert me.preferred > 0 and me.leaders == 0 and me.imbalance == 1.0, me


def test_skewed_cluster_refused_then_repaired_with_the_default_scope(pooled_lab: Cluster, home: Path) -> None:
    cluster = pooled_lab
    target, skewed = two_hosts(cluster)
    assert spread(cluster, 0).within(), spread(cluster).line()
    skew(home, cluster, skewed)
    preferred = next(b for b in spread(cluster).brokers if b.broker_id == skewed.broker_id).preferred

    boot = LabHost.named(target.name).boot_id()
    code, out = run(home, cluster, "reboot", target.name, "--election-scope", "cluster", "--reason", "must refuse")
    assert code == SafetyRefusal.exit_code, out
    assert (f"leadership is skewed past 10% per broker: broker {skewed.broker_id} leads 0 of the {preferred} "
            "partitions it is preferred leader of (100% off)") in out, out
    assert f"{skewed.broker_id} 0/{preferred} (100% off)" in out and "leaders now/preferred" in out, out
    assert "--max-leader-imbalance" in out
    print("\n" + next(line for line in out.splitlines() if "leadership is skewed" in line))
    assert LabHost.named(target.name).boot_id() == boot
    data = collect(cluster)
    assert all(b["pooled"] == "yes" and b["registered"] for b in data["brokers"]), data["brokers"]

    # The broker that leads nothing is the target: its own election (default scope) restores it.
    code, out = run(home, cluster, "restart", skewed.name, "--reason", "repair the skew")
    assert code == 0, out
    assert "its election in this run restores it" in out, out
    after = spread(cluster)
    print(f"after the default-scope restart of {skewed.name}: {after.line()}")
    assert after.within(), after.line()
    assert next(b for b in after.brokers if b.broker_id == skewed.broker_id).not_led == 0


def test_cluster_scope_election_repairs_a_skew_it_was_told_to_accept(pooled_lab: Cluster, home: Path) -> None:
    cluster = pooled_lab
    target, skewed = two_hosts(cluster)
    skew(home, cluster, skewed)
    started = time.monotonic()
    code, out = run(home, cluster, "restart", target.name, "--election-scope", "cluster",
                    "--max-leader-imbalance", "100", "--reason", "cluster-wide election")
    assert code == 0, out
    elected = re.search(r"preferred-replica election for (\d+) partition\(s\) of the whole cluster "
                        r"\(--election-scope cluster\)", out)
    assert elected, out
    # more than the target's own partitions: the skewed broker's were elected too
    mine = next(b for b in spread(cluster).brokers if b.broker_id == target.broker_id).preferred
    assert int(elected.group(1)) > mine, (elected.group(0), mine)
    after = spread(cluster, 0)
    print(f"\nafter the cluster-scope restart of {target.name} ({time.monotonic() - started:.0f}s): {after.line()}")
    # the broker that was not the target leads its preferred partitions again: the seed's cluster-wide election
    assert after.within(), after.line()
    assert collect(cluster)["preferred_leader_ratio"] == 1.0
