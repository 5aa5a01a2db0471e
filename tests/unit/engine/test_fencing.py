"""Fencing: right before each destructive step the runner re-reads the cluster lock from its store, and
does not act on a lock it cannot see as its own (issue 32).

The lock is persistent by design, so a run learns that a human removed it (``runs unlock --force``), or
that its store is out of reach (an admin host partitioned from ZooKeeper), only by asking. The stories
here: the lock is force-removed between two destructive steps; another run takes it; the store does
not answer. Each time the next stop is not applied, the run is paused (resumable) with the lock's exit
code, and ``resume`` goes on once the lock can be taken back as the run's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.engine.lock import FileLockBackend, LockInfo
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.engine.step import Action, Noop, Observation, StepBase, register_step
from kafkaops.errors import LockHeldError, UnreachableError

OP = "alice@admin1"


class Stop(StepBase):
    """Stop one node of the world (destructive); ``on_apply`` lets a test act between two stops."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({"running": ctx.env.data.get(f"running:{ctx.target}", True)})

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("stop the node") if obs.data["running"] else Noop("already stopped")

    def precondition(self, ctx: Any, action: Action) -> str:
        return "safe"

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"stop:{ctx.target}"] += 1
        world.data[f"running:{ctx.target}"] = False
        if world.on_apply is not None:
            world.on_apply(ctx.target)


class Unreachable(FileLockBackend):
    """A lock store that stops answering on demand (an admin host cut off from ZooKeeper)."""

    down = False

    def holder(self, cluster: str) -> LockInfo | None:
        if self.down:
            raise UnreachableError("ZooKeeper at 127.0.10.10:2181 went away during a read of /kafkaops/locks/c1")
        return super().holder(cluster)

    def acquire(self, info: LockInfo) -> LockInfo:
        if self.down:
            raise UnreachableError("ZooKeeper at 127.0.10.10:2181 did not answer")
        return super().acquire(info)


@pytest.fixture(autouse=True)
def _kinds() -> None:
    register_step("test.stop_node", Stop, effect="disruptive")


def _bound() -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"},
                        "steps": [{"test.stop_node": {}}]})
    return bind_runbook(rb, cluster="c1", targets=[Target("n1"), Target("n2"), Target("n3")])


def _records(home: Path) -> list[dict[str, Any]]:
    return list(Journal.open(os.listdir(home / "runs")[0], home).records())


def test_a_lock_force_removed_mid_run_stops_the_next_destructive_step(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    lock = FileLockBackend(home / "locks")
    world.on_apply = lambda target: lock.force_unlock("c1") if target == "n1" else None  # runs unlock --force
    with pytest.raises(LockHeldError, match=r"cluster lock .* is no longer this run's .*gone") as paused:
        make_runner(lock=lock).start(_bound(), env=world, operator=OP, reason="r")
    assert "paused before n2" in str(paused.value) and "resume" in str(paused.value)
    assert world.applies == {"stop:n1": 1}  # n2 not stopped
    records = _records(home)
    assert records[-1]["type"] == "paused" and records[-1]["target"] == "n2"
    assert any(r.get("event") == "lock_unconfirmed" for r in records)
    assert not any(r["type"] == "step_applying" and r["target"] == "n2" for r in records)

    world.on_apply = None
    result = make_runner(lock=lock).resume(records[0]["run_id"], env=world)  # takes its lock back
    assert result.status == "finished"
    assert world.applies == {"stop:n1": 1, "stop:n2": 1, "stop:n3": 1}


def test_a_lock_taken_by_another_run_stops_the_run_and_resume_is_refused(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    lock = FileLockBackend(home / "locks")

    def steal(target: str) -> None:
        if target == "n1":
            lock.force_unlock("c1")
            lock.acquire(LockInfo("c1", "other-run", "bob@admin2", "another roll", 0.0))

    world.on_apply = steal
    with pytest.raises(LockHeldError, match="held by run other-run by bob@admin2"):
        make_runner(lock=lock).start(_bound(), env=world, operator=OP, reason="r")
    assert world.applies == {"stop:n1": 1}
    with pytest.raises(LockHeldError, match="other-run"):
        make_runner(lock=lock).resume(_records(home)[0]["run_id"], env=world)
    assert world.applies == {"stop:n1": 1}


def test_an_unreachable_lock_store_pauses_the_run_before_the_next_stop(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    lock = Unreachable(home / "locks")

    def cut(target: str) -> None:
        lock.down = target == "n1"

    world.on_apply = cut
    with pytest.raises(UnreachableError, match=r"paused before n2 .*cannot confirm the cluster lock") as paused:
        make_runner(lock=lock).start(_bound(), env=world, operator=OP, reason="r")
    assert paused.value.exit_code == 4
    assert world.applies == {"stop:n1": 1}
    run_id = _records(home)[0]["run_id"]
    with pytest.raises(UnreachableError):  # still cut off: resume cannot take the lock either
        make_runner(lock=lock).resume(run_id, env=world)
    assert world.applies == {"stop:n1": 1}

    lock.down = False
    world.on_apply = None
    assert make_runner(lock=lock).resume(run_id, env=world).status == "finished"
    assert world.applies == {"stop:n1": 1, "stop:n2": 1, "stop:n3": 1}
    assert sum(r.get("event") == "lock_confirmed" for r in _records(home)) == 3  # once before each stop
