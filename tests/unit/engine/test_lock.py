"""Cluster lock: contention, run-scoped re-entry across crashes, force unlock; ZooKeeper backend (lab)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.engine.audit import AuditLog, MemorySink
from kafkaops.engine.lock import FileLockBackend, LockInfo, force_unlock, lock_info
from kafkaops.engine.runbook import Target, bind_runbook, parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import LockHeldError, RunFailed


def _bound() -> Any:
    rb = parse_runbook(
        {"name": "r", "summary": "s", "steps": [{"test.set": {"key": "a", "value": 1}}, {"test.fail": {}}]}
    )
    return bind_runbook(rb, cluster="main", targets=[Target("h1")])


def test_file_lock_contention_reports_holder(tmp_path: Path) -> None:
    be = FileLockBackend(tmp_path)
    first = LockInfo("main", "run-A", "alice@admin1", "reboot for kernel", 1_700_000_000.0, task="T42")
    be.acquire(first)
    with pytest.raises(LockHeldError) as info:
        be.acquire(LockInfo("main", "run-B", "bob@admin2", "other", 1_700_000_100.0))
    msg = str(info.value)
    assert "run run-A by alice@admin1 since 2023-11-14T22:13:20Z" in msg
    assert "reason: reboot for kernel, task T42" in msg
    assert "kafkaops runs unlock main --force" in msg
    assert info.value.exit_code == 7
    # same run takes its own lock back; other clusters are independent
    assert be.acquire(LockInfo("main", "run-A", "alice@admin1", "x", 0.0)).reason == "reboot for kernel"
    be.acquire(LockInfo("other", "run-B", "bob@admin2", "other", 0.0))
    # only the holder releases
    assert not be.release("main", "run-B")
    assert be.release("main", "run-A")
    assert be.holder("main") is None


def test_second_run_refused_while_first_is_failed_then_resume_retakes_its_lock(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data["broken"] = True
    with pytest.raises(RunFailed):
        make_runner().start(_bound(), services=world, operator="alice@a", reason="first")
    run_a = os.listdir(home / "runs")[0]
    with pytest.raises(LockHeldError, match=f"locked by run {run_a} by alice@a"):
        make_runner().start(_bound(), services=world, operator="bob@b", reason="second")
    assert len(os.listdir(home / "runs")) == 1  # the refused run left no journal
    world.data["broken"] = False
    assert make_runner().resume(run_a, services=world).status == "finished"
    # now free
    assert (
        make_runner().start(_bound(), services=world, operator="bob@b", reason="second").status == "finished"
    )


def test_force_unlock_is_audited_and_lets_the_next_run_in(home: Path) -> None:
    be = FileLockBackend(home / "locks")
    be.acquire(lock_info("main", "ghost-run", "carol@c", "crashed host", None))
    sink = MemorySink()
    prev = force_unlock(
        "main", "admin host died, run is gone", operator="dave@d", backend=be, audit=AuditLog([sink])
    )
    assert prev is not None and prev.run_id == "ghost-run"
    assert be.holder("main") is None
    rec = sink.records[-1]
    assert rec["action"] == "force-unlock main" and rec["operator"] == "dave@d"
    assert rec["reason"] == "admin host died, run is gone" and rec["run"] == "ghost-run"
    assert force_unlock("main", "again", operator="dave@d", backend=be, audit=AuditLog([sink])) is None


def test_force_unlock_needs_reason(tmp_path: Path) -> None:
    from kafkaops.errors import ConfigError

    with pytest.raises(ConfigError, match="--reason"):
        force_unlock("main", " ", operator="x", backend=FileLockBackend(tmp_path), audit=AuditLog())


@pytest.fixture
def zk_hosts() -> str:
    hosts = os.environ.get("KAFKAOPS_TEST_ZK")
    if not hosts:
        pytest.skip("KAFKAOPS_TEST_ZK is not set (needs the lab's ZooKeeper)")
    return hosts


@pytest.mark.lab
def test_zookeeper_lock_is_persistent_and_run_scoped(zk_hosts: str) -> None:
    from kafkaops.engine.lock import ZooKeeperLockBackend

    root = f"/kafkaops-test-{os.getpid()}/locks"
    be = ZooKeeperLockBackend(zk_hosts, root=root)
    try:
        be.acquire(LockInfo("main", "run-A", "alice@a", "roll", 1.0))
        be.close()  # the session ends (a crashed process): the lock must survive
        be2 = ZooKeeperLockBackend(zk_hosts, root=root)
        holder = be2.holder("main")
        assert holder is not None and holder.run_id == "run-A"
        with pytest.raises(LockHeldError, match="run-A"):
            be2.acquire(LockInfo("main", "run-B", "bob@b", "other", 2.0))
        assert be2.acquire(LockInfo("main", "run-A", "alice@a", "roll", 1.0)).run_id == "run-A"
        assert not be2.release("main", "run-B")
        assert be2.release("main", "run-A")
        be2.acquire(LockInfo("main", "run-C", "c@c", "x", 3.0))
        assert be2.force_unlock("main") is not None and be2.holder("main") is None
    finally:
        with contextlib.suppress(Exception):
            ZooKeeperLockBackend(zk_hosts)._zk().delete(root.rsplit("/", 1)[0], recursive=True)
