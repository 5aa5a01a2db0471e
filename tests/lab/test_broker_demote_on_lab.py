"""``kafkaops broker demote|promote`` on the lab, under acks=all load and HTTP through the VIP (issue 46).

Demote: the plan reorders (no replica changes broker set, nothing is copied); after the run the broker
leads nothing, is still in every ISR it was in, and no record was lost or duplicated. Promote: the order
recorded by the demote is back and the broker leads its preferred partitions again. A partition whose only
in-sync replica is the broker would refuse the demote up front (unit-tested in the planner: the lab cannot
make one without stopping brokers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Load, kafkaops

from kafkaops.environment import Environment
from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "kafka1002"


def _partitions(cluster: Cluster) -> dict[tuple[str, int], dict[str, object]]:
    env = Environment.of(cluster, dry_run=True)
    try:
        snap = env.kafka.snapshot(with_configs=False)
    finally:
        env.close()
    return {(p.topic, p.partition): {"replicas": tuple(p.replicas), "leader": p.leader, "isr": set(p.isr)}
            for p in snap.partitions}


def test_demote_moves_every_leader_off_and_promote_brings_them_back(pooled_lab: Cluster, home: Path) -> None:
    cluster = pooled_lab
    broker = next(h.broker_id for h in cluster.hosts if h.name == HOST)
    before = _partitions(cluster)
    preferred = {tp for tp, p in before.items() if p["replicas"][0] == broker}  # type: ignore[index]
    assert preferred, "the lab's broker is preferred leader of some partitions"

    plan = kafkaops(home, cluster, "broker", "demote", HOST, "--dry-run", "-o", "json")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert [s["kind"] for s in planned["steps"]].count("placement.reassign") == 1
    params = planned["bound"]["params"]
    for t, p, replicas in params["assignment"]:  # a reorder: the same brokers, the demoted one last
        assert set(replicas) == set(before[(t, p)]["replicas"]) and replicas[-1] == broker  # type: ignore[arg-type]
    assert {(t, p) for t, p, _ in params["original"]} == {(t, p) for t, p, _ in params["assignment"]}

    with Load(cluster) as load:
        demoted = kafkaops(home, cluster, "broker", "demote", HOST, "--yes", "--reason", "disk check")
        assert demoted.returncode == 0, demoted.stdout[-3000:] + demoted.stderr[-3000:]
        after = _partitions(cluster)
        assert not [tp for tp, p in after.items() if p["leader"] == broker], "the demoted broker still leads"
        still_in_sync = [tp for tp, p in before.items() if broker in p["isr"] and broker not in after[tp]["isr"]]  # type: ignore[operator]
        assert not still_in_sync, f"demote took the broker out of ISRs: {still_in_sync}"

        promoted = kafkaops(home, cluster, "broker", "promote", HOST, "--yes", "--reason", "disk checked")
        assert promoted.returncode == 0, promoted.stdout[-3000:] + promoted.stderr[-3000:]
    back = _partitions(cluster)
    assert {tp: p["replicas"] for tp, p in back.items()} == {tp: p["replicas"] for tp, p in before.items()}
    assert {tp for tp in preferred if back[tp]["leader"] == broker} == preferred
    assert load.report is not None and load.report.lost == 0 and load.report.duplicated == 0, load.report
