"""Fail safe (issue 12) on the lab: a rollback leaves the cluster whole; every system the run needs is
checked before the first change; a wait cannot outlive its timeout; a second operator hears who holds
the cluster.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops, output, spawn
from invariants import journal, live_journal, only_run

from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture
def lab(pooled_lab: Cluster) -> Cluster:
    """The lab, pooled and healthy, restored after the test (see conftest.py)."""
    return pooled_lab

FAST = ["--syn-window", "2s", "--no-scan"]


def _wait_healthy(cluster: Cluster, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    data = collect(cluster)
    while time.monotonic() < deadline and not data["healthy"]:
        time.sleep(1)
        data = collect(cluster)
    return data


def _world(cluster: Cluster) -> dict[str, Any]:
    """What must not change when kafkaops refuses: pools, registrations, boot ids."""
    data = collect(cluster)
    return {"brokers": [(b["host"], b["registered"], b["pooled"]) for b in data["brokers"]],
            "boots": {h.name: LabHost.named(h.name).boot_id() for h in cluster.hosts}}


def _kill_after(home: Path, cluster: Cluster, kind: str, *args: str) -> str:
    proc = spawn(home, cluster, *args)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any(r["type"] == "step_verified" and r["kind"] == kind for r in live_journal(home)):
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, output(proc)
    return only_run(home)


def _assert_whole(cluster: Cluster) -> None:
    data = _wait_healthy(cluster, 30)
    assert data["healthy"], data
    assert all(b["registered"] and b["pooled"] == "yes" for b in data["brokers"]), data["brokers"]
    assert data["preferred_leader_ratio"] == 1.0, data


@pytest.mark.parametrize(("runbook", "killed_after"), [("restart", "kafka.stop_broker"),
                                                        ("reboot", "host.reboot")])
def test_abort_with_rollback_leaves_the_cluster_whole(lab: Cluster, home: Path, runbook: str,
                                                      killed_after: str) -> None:
    run_id = _kill_after(home, lab, killed_after, runbook, "kafka1003", "--yes", "--reason", "rollback test", *FAST)
    aborted = kafkaops(home, lab, "runs", "abort", run_id, "--rollback", "--reason", "give up")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    _assert_whole(lab)
    kinds = [r.get("compensation") for r in journal(home, run_id) if r["type"] == "compensate_verified"]
    assert "kafka.restore_broker" in kinds and "conftool.repool" in kinds and "kafka.cluster_whole" in kinds, kinds


def test_an_over_long_window_is_refused_before_the_depool(lab: Cluster, home: Path) -> None:
    before = _world(lab)
    for argv, code in (([ "--syn-window", "1000d"], 2),  # a usage error, before any system is asked
                       (["--param", "syn_window=1000d"], 2),
                       (["--syn-window", "10m"], 3)):  # fits the flag's bounds, not the step's 5 min timeout
        cmd = ["run", "reboot", "kafka1001"] if argv[0] == "--param" else ["reboot", "kafka1001"]
        result = kafkaops(home, lab, *cmd, *argv, "--yes", "--reason", "too long")
        assert result.returncode == code, (argv, result.stdout + result.stderr)
        assert "maximum" in result.stderr or "shorter than" in result.stderr, result.stderr
    assert _world(lab) == before
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def _broken_inventory(cluster: Cluster, tmp_path: Path, old: str, new: str) -> Path:
    text = Path(cluster.source).read_text()
    assert old in text, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(("what", "old", "new", "code", "said"), [
    ("ZooKeeper address", "zookeeper: 127.0.10.10:2182", "zookeeper: 127.0.10.10:2999", 4, "ZooKeeper"),
    ("ZooKeeper chroot", "zookeeper: 127.0.10.10:2182", "zookeeper: 127.0.10.10:2182/nochroot", 3,
     "/brokers/ids"),
    ("SSH to the target", "    broker_id: 1001\n", "    broker_id: 1001\n    ssh: {port: 2999}\n", 4, "ssh kafka1001"),
])
def test_a_system_that_does_not_answer_refuses_before_any_change(
        lab: Cluster, home: Path, tmp_path: Path, what: str, old: str, new: str, code: int, said: str) -> None:
    inventory = _broken_inventory(lab, tmp_path, old, new)
    before = _world(lab)
    result = kafkaops(home, lab, "reboot", "kafka1001", "-i", str(inventory), "--yes", "--reason", what, *FAST)
    assert result.returncode == code, result.stdout + result.stderr
    assert said in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2, result.stderr
    assert _world(lab) == before


def test_a_dead_etcd_refuses_before_any_change(lab: Cluster, home: Path, tmp_path: Path) -> None:
    """conftool's config (and its etcdrc, which python-etcd reads first) pointed at a closed port."""
    assert lab.conftool_config
    config = Path(lab.conftool_config)
    etcdrc = config.parent / "etcdrc"
    dead_rc = tmp_path / "etcdrc"
    dead_rc.write_text(etcdrc.read_text().replace("2379", "2999"))
    dead = tmp_path / "conftool.yaml"
    dead.write_text(config.read_text().replace("2379", "2999").replace(str(etcdrc), str(dead_rc)))
    assert "2999" in dead.read_text() and str(dead_rc) in dead.read_text()
    line = next(x for x in Path(lab.source).read_text().splitlines() if x.strip().startswith("config:"))
    inventory = _broken_inventory(lab, tmp_path, line, f"  config: {dead}")
    before = _world(lab)
    result = kafkaops(home, lab, "reboot", "kafka1001", "-i", str(inventory), "--yes", "--reason", "dead etcd",
                      *FAST)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "conftool" in result.stderr or "etcd" in result.stderr
    assert _world(lab) == before


def test_a_second_operator_during_a_roll_hears_who_holds_the_cluster(lab: Cluster, home: Path,
                                                                    tmp_path: Path) -> None:
    proc = spawn(home, lab, "rolling-restart", "lab", "--yes", "--reason", "the first roll", "--task", "T1", *FAST)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any(
                r["type"] == "step_verified" and r["kind"] == "kafka.stop_broker" for r in live_journal(home)):
            time.sleep(0.1)
        run_id = only_run(home)
        other = kafkaops(tmp_path / "other-home", lab, "restart", "kafka1002", "--yes", "--reason", "second")
        assert other.returncode == 7, other.stdout + other.stderr
        assert run_id in other.stderr and "the first roll" in other.stderr and "T1" in other.stderr
        assert re.search(r"since \d{4}-\d\d-\d\dT", other.stderr)
        assert "start broker" not in other.stderr and "--force" not in other.stderr
    finally:
        assert proc.wait(600) == 0, output(proc)
