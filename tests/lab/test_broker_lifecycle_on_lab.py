"""A broker's whole life on the lab, under acks=all load and HTTP through the VIP (issue 46).

A new machine is racked (``kafkaops lab host add``: kafka1004, its broker joined, holding nothing); ``broker
add`` gives it replicas and leaders and pools it; ``broker demote`` takes its leadership off while it stays
in sync, ``broker promote`` gives it back the order recorded; ``broker decommission`` — SIGKILLed while a
throttled batch is moving replicas off it, then resumed — leaves it with no replica and no leadership,
stopped and gone from ZooKeeper, with no throttle left. Before that, a decommission SIGKILLed inside a
throttled batch and rolled back (``runs abort --rollback``) leaves the cluster whole: nothing moving, no
throttle, every partition with its replication factor, all in sync. Nothing is lost or duplicated throughout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import live_journal

from kafkaops.environment import Environment
from kafkaops.model import Cluster
from kafkaops.steps.placement import RATE_CONFIGS, REPLICA_CONFIGS

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NEW = "kafka1004"


def _lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "lab", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def racked(pooled_lab: Cluster) -> Iterator[Cluster]:
    """The lab with kafka1004 added (its inventory naming it); afterwards taken out again, decommissioned
    first if a failure left it holding replicas, so the next test finds the three-broker lab."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.dirs import lab_dir

    added = _lab("host", "add")
    assert added.returncode == 0, added.stderr + added.stdout
    cluster = load_inventory(lab_dir() / "lab-next-host.yaml")
    try:
        yield cluster
    finally:
        if _held(cluster)[0]:
            kafkaops(Path(lab_dir()) / "cleanup-home", cluster, "broker", "decommission", NEW, "--yes", "--reason",
                     "test cleanup", "--no-scan", "--syn-window", "1s")
        removed = _lab("host", "remove", NEW)
        assert removed.returncode == 0, removed.stderr


def _held(cluster: Cluster, broker: int = 1004) -> tuple[int, int, bool]:
    """(replicas it holds, partitions it leads, registered)."""
    env = Environment.of(cluster, dry_run=True)
    try:
        snap = env.kafka.snapshot(with_configs=False)
    finally:
        env.close()
    return (sum(broker in p.replicas for p in snap.partitions), sum(p.leader == broker for p in snap.partitions),
            broker in snap.brokers)


def _throttles(cluster: Cluster) -> dict[str, dict[str, str]]:
    env = Environment.of(cluster, dry_run=True)
    try:
        topics = sorted({p.topic for p in env.kafka.snapshot(with_configs=False).partitions})
        found = env.kafka.dynamic_configs(brokers=[h.broker_id for h in cluster.hosts if h.name != NEW], topics=topics,
                                          names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
    finally:
        env.close()
    return {k: v for k, v in found.items() if v}


def _killed_in_a_batch(home: Path, cluster: Cluster) -> str:
    """Start ``broker decommission kafka1004`` throttled to 100 KB/s, SIGKILL it once its first move batch is
    submitted (Kafka moving under the throttle), and return its run id."""
    proc = spawn(home, cluster, "broker", "decommission", NEW, "--yes", "--reason", "hardware refresh",
                 "--no-scan", "--syn-window", "2s", "--throttle", "100KB/s", "--batch-size", "2")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not any(
            r.get("event") == "batch_submitted" and r.get("step") == 8 for r in live_journal(home)):
        time.sleep(0.1)
    assert proc.poll() is None, "the decommission ended before a move batch could be interrupted:\n" + output(proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    return str(live_journal(home)[0]["run_id"])


def _assert_whole(cluster: Cluster) -> None:
    """Nothing moving, no throttle on any broker or topic, every partition with its replication factor and all
    of its replicas in sync (waited for: a cancelled move's replicas rejoin in seconds)."""
    env = Environment.of(cluster, dry_run=True)
    try:
        assert env.reassigner().list() == {}
        topics = sorted({p.topic for p in env.kafka.snapshot(with_configs=False).partitions})
        left = env.kafka.dynamic_configs(brokers=[h.broker_id for h in cluster.hosts], topics=topics,
                                         names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
        assert {k: v for k, v in left.items() if v} == {}
        deadline = time.monotonic() + 60
        while True:
            snap = env.kafka.snapshot(with_configs=True)
            short = [f"{p.topic}-{p.partition}" for p in snap.partitions
                     if len(p.replicas) != snap.topics[p.topic].replication_factor or set(p.isr) != set(p.replicas)]
            if not short or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert short == [], short
    finally:
        env.close()


def test_add_demote_promote_and_decommission_a_broker(racked: Cluster, home: Path) -> None:
    cluster = racked
    assert _held(cluster) == (0, 0, True)  # racked: registered, holding nothing
    with Load(cluster) as load:
        added = kafkaops(home / "add", cluster, "broker", "add", NEW, "--yes", "--reason", "new machine", "--no-scan")
        assert added.returncode == 0, added.stdout[-3000:] + added.stderr[-3000:]
        replicas, leads, _ = _held(cluster)
        assert replicas > 0 and leads > 0, (replicas, leads)

        demoted = kafkaops(home / "demote", cluster, "broker", "demote", NEW, "--yes", "--reason", "disk check")
        assert demoted.returncode == 0, demoted.stdout[-3000:] + demoted.stderr[-3000:]
        assert _held(cluster)[:2] == (replicas, 0)  # leads nothing, holds the same
        promoted = kafkaops(home / "demote", cluster, "broker", "promote", NEW, "--yes", "--reason", "disk ok")
        assert promoted.returncode == 0, promoted.stdout[-3000:] + promoted.stderr[-3000:]
        assert _held(cluster)[:2] == (replicas, leads)  # the recorded order back: the same leaders

        # A decommission changed half-way: SIGKILLed inside a throttled batch, then rolled back. The batch in
        # flight goes back to its replicas, the throttles go; the cluster is whole (the broker keeps its
        # replicas, leading nothing: the demote half is not undone). Then retired for good, from there.
        rolled = home / "rolled-back"
        run_id = _killed_in_a_batch(rolled, cluster)
        aborted = kafkaops(rolled, cluster, "runs", "abort", run_id, "--rollback", "--reason", "changed our mind")
        assert aborted.returncode == 0, aborted.stdout[-3000:] + aborted.stderr[-3000:]
        _assert_whole(cluster)
        assert _held(cluster)[0] > 0

        retire = home / "decommission"
        run_id = _killed_in_a_batch(retire, cluster)  # Kafka goes on moving under the throttle
        resumed = kafkaops(retire, cluster, "resume", run_id)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert _held(cluster) == (0, 0, False)  # empty, stopped, gone from ZooKeeper's registrations
    assert _throttles(cluster) == {}
    assert load.report is not None and load.report.lost == 0 and load.report.duplicated == 0, load.report
