"""Leader spread and election scope on the lab (issue 13, points 4 and 5).

Leadership is skewed on purpose the way maintenance skews it in the field: a broker restarted without
an election (``restart --no-election``) comes back leading nothing (Strimzi #5564; the lab brokers run
with ``auto.leader.rebalance.enable=false``, so nothing repairs it behind the test's back). Then:

* a restart of another host: its pre-flight, finding the cluster whole, elects the skewed broker's
  partitions back (in the plan and the journal) before it judges, and the restart goes on (issue 41.6;
  the refusal when the cluster is not whole is tests/unit/test_leadership_restore.py's);
* a cluster-scope election accepted past the gate (``--max-leader-imbalance 100``) repairs the skew of a
  broker that was not the target.

The real CLI in a subprocess; the spread is read independently with the AdminClient.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.health.status import collect
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
    return leader_spread(KafkaAdmin(cluster.kafka).snapshot(with_configs=False), max_imbalance)


def two_hosts(cluster: Cluster) -> tuple[Host, Host]:
    """Two hosts that are not the controller (neither run moves the controller: fewer moving parts)."""
    controller = KafkaAdmin(cluster.kafka).controller()
    others = [h for h in cluster.hosts if h.broker_id != controller]
    return others[0], others[1]


def skew(home: Path, cluster: Cluster, host: Host) -> None:
    """Restart ``host`` without an election: it comes back leading nothing, and the plan says so."""
    code, out = run(home, cluster, "restart", host.name, "--no-election", "--reason", "skew on purpose")
    assert code == 0, out
    assert f"{host.name} is repooled while leading nothing" in out, out
    me = next(b for b in spread(cluster).brokers if b.broker_id == host.broker_id)
    assert me.preferred > 0 and me.leaders == 0 and me.imbalance == 1.0, me


def test_a_skew_another_broker_was_left_with_is_restored_by_the_next_preflight(pooled_lab: Cluster,
                                                                                home: Path) -> None:
    """Issue 41.6: a broker that was not the target lost its leaderships (here: restarted without an
    election; in the field, cut from ZooKeeper between hosts). The next pre-flight used to refuse on that
    skew, and every resume with it, until a human elected the leaders back. Now, the cluster being whole,
    it elects them itself (shown in the plan, journaled) and then judges."""
    cluster = pooled_lab
    target, skewed = two_hosts(cluster)
    assert spread(cluster, 0).within(), spread(cluster).line()
    skew(home, cluster, skewed)

    code, out = run(home, cluster, "restart", target.name, "--dry-run", "--reason", "plan")
    assert code == 0, out
    flat = re.sub(r"\s+", " ", out)
    assert f"whose preferred leader (broker(s) {skewed.broker_id}) is registered and in sync" in flat, out

    code, out = run(home, cluster, "restart", target.name, "--reason", "roll past another broker's skew")
    assert code == 0, out
    after = spread(cluster)
    print(f"\nafter the restart of {target.name}: {after.line()}")
    assert after.within(), after.line()
    assert next(b for b in after.brokers if b.broker_id == skewed.broker_id).not_led == 0
    records = [json.loads(line) for run_dir in (home / "runs").iterdir()
               for line in (run_dir / "journal.jsonl").read_text().splitlines() if line.strip()]
    restored = [r for r in records if r.get("event") == "leadership_restored" and r.get("kind") == "kafka.preflight"]
    assert restored, [r for r in records if r.get("kind") == "kafka.preflight"]
    data = collect(cluster)
    assert all(b["pooled"] == "yes" and b["registered"] for b in data["brokers"]), data["brokers"]


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
