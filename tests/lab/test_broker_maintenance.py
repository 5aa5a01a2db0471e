"""Broker maintenance end to end on the lab (issue: restart/reboot and rolling procedures).

Runs the real CLI in a subprocess, under load, with independent witnesses (its own tcpdump, its own
pool poller, the load generator's read-back) for the invariants an SRE cares about.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import PoolWatch, SynWatch, journal, only_run, quiet_windows_hold

from kafkaops.errors import LockHeldError, SafetyRefusal
from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAST = ["--syn-window", "3s", "--stable-for", "3s"]
VIP = "127.0.10.100"  # inventory/lab.yaml: the balancer connects to hosts from it


def assert_clean_end(cluster: Cluster) -> None:
    data = collect(cluster)
    assert data["healthy"], data
    assert all(b["pooled"] == "yes" for b in data["brokers"]), data["brokers"]
    assert data["preferred_leader_ratio"] == 1.0, data


@pytest.fixture
def healthy_lab(pooled_lab: Cluster) -> Cluster:
    """Every test starts and ends with a healthy, fully pooled lab (see conftest.py): a failed run keeps
    its lock and may leave its host depooled (by design: it is resumable), so clean-up aborts it with
    rollback, as an operator would."""
    return pooled_lab


def test_rolling_reboot_under_load_keeps_every_invariant(healthy_lab: Cluster, home: Path) -> None:
    cluster = healthy_lab
    boot_ids = {h.name: LabHost.named(h.name).boot_id() for h in cluster.hosts}
    controller = cluster.by_broker_id(KafkaAdmin(cluster.kafka).controller() or -1)
    assert controller is not None
    with Load(cluster) as load, PoolWatch(cluster) as pools, SynWatch(8085, clients=VIP) as syns:
        result = kafkaops(home, cluster, "rolling-reboot", "lab", "--yes", "--reason", "test roll", *FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert load.report is not None
    assert load.report.produced_acked > 1000 and load.report.produce_errors == 0, load.report
    assert load.report.lost == 0 and load.report.duplicated == 0, load.report
    assert load.report.http_failed == 0, load.report.http_errors
    assert pools.samples > 50 and pools.max_depooled == 1
    run_id = only_run(home)
    assert quiet_windows_hold(cluster, syns, home, run_id) == {h.name: 0 for h in cluster.hosts}
    assert any(src == VIP for _, src, _ in syns.syns), "the capture saw no client SYN at all: it is not watching"
    assert all(LabHost.named(h.name).boot_id() != boot_ids[h.name] for h in cluster.hosts)
    records = journal(home, run_id)
    order = [r["target"] for r in records if r["type"] == "target_started"]
    assert sorted(order) == sorted(h.name for h in cluster.hosts)
    assert order[-1] == controller.name, f"the controller at the start ({controller.name}) went {order}"
    assert_clean_end(cluster)


# A long scenario (bench/long_scenarios.py): the suite's chaos roll kills and resumes a roll under load too.
@pytest.mark.long
def test_sigkill_mid_roll_then_resume(healthy_lab: Cluster, home: Path) -> None:
    cluster = healthy_lab
    seed = random.randrange(1_000_000)
    kill_after = random.Random(seed).randrange(8, 70)  # journal records written before the kill
    with Load(cluster) as load, PoolWatch(cluster) as pools:
        proc = spawn(home, cluster, "rolling-restart", "lab", "--yes", "--reason", "kill test", *FAST)
        deadline = time.monotonic() + 600
        run_id = ""
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list((home / "runs").glob("*/journal.jsonl")) if (home / "runs").exists() else []
            if runs and len(runs[0].read_text().splitlines()) >= kill_after:
                run_id = runs[0].parent.name
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        proc.wait(30)
        assert run_id, f"run finished before the kill point (seed {seed}): {output(proc)}"
        killed_at = journal(home, run_id)[-1]
        resumed = kafkaops(home, cluster, "resume", run_id)
        assert resumed.returncode == 0, f"seed {seed}, killed after {killed_at}: {resumed.stdout}{resumed.stderr}"
    assert load.report is not None and load.report.lost == 0 and load.report.duplicated == 0, load.report
    assert load.report.produce_errors == 0, load.report
    assert load.report.http_failed == 0, load.report.http_errors
    assert pools.max_depooled <= 1
    stops: dict[str, int] = {}
    for r in journal(home, run_id):
        if r["type"] == "step_applying" and r["kind"] == "kafka.stop_broker":
            stops[r["target"]] = stops.get(r["target"], 0) + 1
    assert stops == {h.name: 1 for h in cluster.hosts}, f"seed {seed}: {stops}"
    assert_clean_end(cluster)


def test_reboot_refuses_when_a_topic_cannot_lose_a_replica(healthy_lab: Cluster, home: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkaops_lab.security import admin_endpoint

    cluster = healthy_lab
    admin = AdminClient({**librdkafka_config(admin_endpoint(cluster))})  # kafkaops may not create topics
    name = f"lab.strict-{random.randrange(10**6)}"
    fut = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=2,
                                        config={"min.insync.replicas": "2"})])[name]
    fut.result(30)
    try:
        time.sleep(2)
        replicas = admin.list_topics(name, timeout=10).topics[name].partitions[0].replicas
        victim = cluster.by_broker_id(replicas[1])
        assert victim is not None
        boot = LabHost.named(victim.name).boot_id()
        result = kafkaops(home, cluster, "reboot", victim.name, "--yes", "--reason", "must refuse")
        assert result.returncode == SafetyRefusal.exit_code, result.stdout + result.stderr
        assert name in result.stderr and "replication factor" in result.stderr
        data = collect(cluster)
        assert all(b["pooled"] == "yes" and b["registered"] for b in data["brokers"])
        assert LabHost.named(victim.name).boot_id() == boot
        assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    finally:
        admin.delete_topics([name])[name].result(30)


def test_rolling_restart_refuses_with_a_broker_down(healthy_lab: Cluster, home: Path) -> None:
    cluster = healthy_lab
    down = LabHost.named("kafka1003")
    down.stop("kafka")
    try:
        time.sleep(1)
        result = kafkaops(home, cluster, "rolling-restart", "lab", "--yes", "--reason", "must refuse")
        assert result.returncode == SafetyRefusal.exit_code, result.stdout + result.stderr
        assert "refusing" in result.stderr
        data = collect(cluster)
        assert all(b["pooled"] == "yes" for b in data["brokers"])
        assert [b["registered"] for b in data["brokers"]] == [True, True, False]
    finally:
        down.start("kafka")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not collect(cluster)["healthy"]:
            time.sleep(1)


def test_held_lock_refuses(healthy_lab: Cluster, home: Path) -> None:
    from kafkaops.engine.lock import lock_info
    from kafkaops.environment import Environment

    cluster = healthy_lab
    env = Environment(cluster)
    backend = env.lock
    backend.acquire(lock_info("lab", "20990101-000000-other-0000", "alice@bastion", "someone else's roll", "T1"))
    try:
        result = kafkaops(home, cluster, "restart", "kafka1002", "--yes", "--reason", "must refuse")
        assert result.returncode == LockHeldError.exit_code, result.stdout + result.stderr
        assert "alice@bastion" in result.stderr and "someone else's roll" in result.stderr
        assert all(b["pooled"] == "yes" for b in collect(cluster)["brokers"])
    finally:
        backend.release("lab", "20990101-000000-other-0000")
        env.close()  # its ZooKeeper session: left open, kazoo retries it for the rest of the session


def test_dry_run_markdown_shows_live_impact_and_changes_nothing(healthy_lab: Cluster, home: Path) -> None:
    from kafkaops.systems.zookeeper import ZooKeeper

    cluster = healthy_lab
    boot = LabHost.named("kafka1002").boot_id()
    before = collect(cluster)
    leaders = {(p.topic, p.partition): p.leader for p in KafkaAdmin(cluster.kafka).snapshot().partitions}
    result = kafkaops(home, cluster, "reboot", "kafka1002", "--dry-run", "-o", "markdown")
    assert result.returncode == 0, result.stderr
    md = result.stdout
    assert md.startswith("# Plan: `reboot` on `lab`")
    assert "leader(s) move" in md and "lose a replica" in md
    assert "hostctl stop kafka" in md and "hostctl reboot" in md
    assert "confctl depool --hostname kafka1002.lab.local" in md
    assert "tcpdump" in md
    assert LabHost.named("kafka1002").boot_id() == boot
    after = collect(cluster)
    assert [(b["host"], b["registered"], b["pooled"]) for b in after["brokers"]] == \
        [(b["host"], b["registered"], b["pooled"]) for b in before["brokers"]]
    assert {(p.topic, p.partition): p.leader
            for p in KafkaAdmin(cluster.kafka).snapshot().partitions} == leaders
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    assert not (home / "audit.log").exists() or not (home / "audit.log").read_text().strip()
    assert cluster.zookeeper
    with ZooKeeper.for_cluster(cluster, timeout=15) as zk:  # the inventory's TLS and identity
        assert zk.client.exists("/kafkaops/locks/lab") is None


def test_saved_plan_applies_when_unchanged_and_is_refused_when_stale(healthy_lab: Cluster, home: Path,
                                                                     tmp_path: Path) -> None:
    from kafkaops.errors import StalePlanError

    cluster = healthy_lab
    stale, fresh = tmp_path / "stale.json", tmp_path / "fresh.json"
    # --max-leader-imbalance 100: the bounce below leaves kafka1002 leading nothing, which the spread gate
    # would refuse (exit 6) before the plan's staleness is even compared; staleness is what is tested here.
    saved = kafkaops(home, cluster, "restart", "kafka1001", "--dry-run", "--reason", "plan test",
                     "--save-plan", str(stale), *FAST[:2], "--max-leader-imbalance", "100")
    assert saved.returncode == 0 and stale.exists(), saved.stderr
    bounce = LabHost.named("kafka1002")  # its leaders move to kafka1001 and back only by election
    bounce.stop("kafka")
    bounce.start("kafka")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not collect(cluster)["healthy"]:
        time.sleep(1)
    refused = kafkaops(home, cluster, "apply", str(stale))
    assert refused.returncode == StalePlanError.exit_code, refused.stdout + refused.stderr
    assert "the plan is stale" in refused.stderr and "state.leads" in refused.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    KafkaAdmin(cluster.kafka).elect_preferred_leaders()
    time.sleep(2)
    saved = kafkaops(home, cluster, "restart", "kafka1001", "--dry-run", "--reason", "plan test",
                     "--save-plan", str(fresh), *FAST[:2])
    applied = kafkaops(home, cluster, "apply", str(fresh))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert len(list((home / "runs").iterdir())) == 1
