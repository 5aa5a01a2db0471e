"""Runner: the observe/plan/apply/verify loop, no-ops, retries, failures, pause, resume, rollback."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import FIXTURES, World

from kafkaops.engine.audit import MemorySink
from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.engine.runbook import load_runbook, parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import ConfigError, Interrupted, RunFailed

OP = "alice@admin1"


def simple() -> BoundRunbook:
    return bind_runbook(load_runbook(FIXTURES / "good" / "simple.yaml"), cluster="c1")


def rolling(steps: list[Any], hosts: tuple[str, ...] = ("h1", "h2", "h3")) -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": steps})
    return bind_runbook(rb, cluster="c1", targets=[Target(h) for h in hosts])


def types(run_id: str, home: Path) -> list[str]:
    return [r["type"] for r in Journal.open(run_id, home).records()]


def test_run_applies_only_what_is_needed(
    make_runner: Callable[..., Runner], world: World, home: Path, audit_sink: MemorySink
) -> None:
    world.data["a"] = 1  # already holds: step 1 is a no-op
    res = make_runner().start(simple(), env=world, operator=OP, reason="test", task="T1")
    assert res.status == "finished" and res.applied == 2 and res.skipped == 1
    assert world.data == {"a": 1, "n": 3, "b": "two"}
    assert world.applies == {"inc:n": 1, "set:b": 1}
    t = types(res.run_id, home)
    assert t[0] == "run_started" and t[-1] == "finished"
    # intent record strictly before the applied record, for each applied step
    assert t.count("step_applying") == 2 == t.count("step_applied")
    assert t.index("step_applying") < t.index("step_applied")
    assert "step_skipped" in t
    msgs = [r["message"] for r in audit_sink.records]
    assert msgs[0] == f"{OP}: START - simple c1 (test - T1)"
    assert msgs[-1] == f"{OP}: END (PASS) - simple c1 (test - T1)"
    assert any(r["outcome"] == "applied" and r["action"] == "set b to 'two'" for r in audit_sink.records)
    # lock released when the run finishes
    assert not (home / "locks" / "c1.lock").exists()


def test_reason_is_required(make_runner: Callable[..., Runner], world: World) -> None:
    with pytest.raises(ConfigError, match="reason is required"):
        make_runner().start(simple(), env=world, operator=OP, reason="  ")


def test_verify_is_retried_with_backoff(make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    world.verify_failures["a"] = 2
    runner = make_runner()
    res = runner.start(simple(), env=world, operator=OP, reason="r")
    assert res.status == "finished"
    assert runner.clock.sleeps == [1.0, 2.0]  # type: ignore[attr-defined]
    assert types(res.run_id, home).count("step_retry") == 2
    assert world.applies["set:a"] == 1  # verify retries never re-apply


def test_failed_step_raises_runfailed_with_resume_and_rollback_commands(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.verify_failures["b"] = 99
    with pytest.raises(RunFailed) as info:
        make_runner().start(simple(), env=world, operator=OP, reason="r")
    msg = str(info.value)
    run_id = Journal.open(os.listdir(home / "runs")[0], home).run_id
    assert f"run {run_id} stopped at c1 step 3 (test.set) of 3" in msg
    assert "2 step(s) verified" in msg and "may be partly applied" in msg
    assert f"`kafkaops resume {run_id}`" in msg
    assert f"`kafkaops runs abort {run_id} --rollback --reason ...`" in msg
    assert info.value.exit_code == 11
    assert Journal.open(run_id, home).replay().status == "failed"
    assert (home / "locks" / "c1.lock").exists()  # the run keeps its lock

    # fix the cause, resume: only the failed step runs again (re-observed: it already holds -> no-op)
    world.verify_failures.clear()
    res = make_runner().resume(run_id, env=world)
    assert res.status == "finished" and res.applied == 0 and res.skipped == 1
    assert world.applies == {"set:a": 1, "inc:n": 1, "set:b": 1}
    assert not (home / "locks" / "c1.lock").exists()
    with pytest.raises(ConfigError, match="is already finished; nothing to resume"):
        make_runner().resume(run_id, env=world)


def test_non_retryable_check_fails_at_once(make_runner: Callable[..., Runner], world: World) -> None:
    world.data["broken"] = True
    runner = make_runner()
    with pytest.raises(RunFailed, match="the thing is broken"):
        runner.start(rolling([{"test.fail": {}}], ("h1",)), env=world, operator=OP, reason="r")
    assert runner.clock.sleeps == []  # type: ignore[attr-defined]


def test_ctrl_c_pauses_at_next_safe_point_then_resume(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    # The operator hits Ctrl-C (a real SIGINT) while h1's first step is applying.
    world.on_apply = lambda key: os.kill(os.getpid(), signal.SIGINT) if key == "h1" else None
    bound = rolling(
        [{"test.set": {"key": "{target.name}", "value": 1}}, {"test.set": {"key": "x", "value": 2}}]
    )
    runner = make_runner(handle_sigint=True)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted) as info:
        runner.start(bound, env=world, operator=OP, reason="r")
    assert signal.getsignal(signal.SIGINT) is before  # handler restored
    run_id = os.listdir(home / "runs")[0]
    assert "paused before h1 step 2 (test.set)" in str(info.value)
    assert "State: h1 so far: set h1 to 1;" in str(info.value)  # what the operator leaves behind
    assert f"kafkaops resume {run_id}" in str(info.value)
    assert info.value.exit_code == 130
    # the in-flight step completed (apply is never torn by Ctrl-C); nothing after it ran
    assert world.data == {"h1": 1}
    assert Journal.open(run_id, home).replay().status == "paused"

    world.on_apply = None
    res = make_runner().resume(run_id, env=world)
    assert res.status == "finished"
    assert world.data == {"h1": 1, "x": 2, "h2": 1, "h3": 1}
    assert world.applies["set:h1"] == 1 and world.applies["set:x"] == 1
    assert "resumed" in types(run_id, home)


def test_ctrl_c_during_a_wait_pauses_the_run(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    runner = make_runner()
    world.clock.sleep = lambda s: runner.request_pause()  # type: ignore[method-assign]
    with pytest.raises(Interrupted, match="wait for healthy interrupted"):
        runner.start(
            rolling([{"test.wait_for": {"key": "healthy"}}], ("h1",)), env=world, operator=OP, reason="r"
        )
    run_id = os.listdir(home / "runs")[0]
    world.data["healthy"] = True
    assert make_runner().resume(run_id, env=world).status == "finished"


def test_abort_rollback_only_compensates_what_the_run_changed(
    make_runner: Callable[..., Runner], world: World, home: Path, audit_sink: MemorySink
) -> None:
    # h2 was depooled by someone else before the run: the run must not repool it.
    world.data["pool"] = {"h1": "yes", "h2": "no", "h3": "yes"}
    world.data["broken"] = True
    bound = rolling([{"test.depool": {}}, {"test.fail": {}}])
    with pytest.raises(RunFailed):
        make_runner().start(bound, env=world, operator=OP, reason="r")
    run_id = os.listdir(home / "runs")[0]
    assert world.data["pool"] == {"h1": "no", "h2": "no", "h3": "yes"}
    res = make_runner().abort(run_id, reason="give up", operator="bob@admin2", rollback=True, env=world)
    assert res.compensated == 1
    assert world.data["pool"] == {"h1": "yes", "h2": "no", "h3": "yes"}
    assert world.applies["repool:h1"] == 1 and "repool:h2" not in world.applies
    st = Journal.open(run_id, home).replay()
    assert st.status == "aborted"
    assert not (home / "locks" / "c1.lock").exists()
    assert audit_sink.records[-1]["message"].startswith("bob@admin2: END (FAIL) - r h1,h2,h3 (give up)")
    with pytest.raises(ConfigError, match="already aborted"):
        make_runner().abort(run_id, reason="again", operator=OP)


def test_abort_rollback_after_crash_mid_apply_and_twice_is_safe(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    class Crash(BaseException):
        pass

    def hook(point: str, target: str, step: Any) -> None:
        if point == "after_apply" and target == "h2":
            raise Crash

    with pytest.raises(Crash):
        make_runner(hook=hook).start(rolling([{"test.depool": {}}]), env=world, operator=OP, reason="r")
    run_id = os.listdir(home / "runs")[0]
    assert world.data["pool"] == {"h1": "no", "h2": "no"}
    make_runner().abort(run_id, reason="undo", operator=OP, rollback=True, env=world)
    assert world.data["pool"] == {"h1": "yes", "h2": "yes"}  # h2's intent was journaled: undone too


def test_abort_without_rollback_releases_lock_and_changes_nothing(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data["broken"] = True
    with pytest.raises(RunFailed):
        make_runner().start(
            rolling([{"test.depool": {}}, {"test.fail": {}}]), env=world, operator=OP, reason="r"
        )
    run_id = os.listdir(home / "runs")[0]
    make_runner().abort(run_id, reason="leave it", operator=OP)
    assert world.data["pool"] == {"h1": "no"}
    assert not (home / "locks" / "c1.lock").exists()


def test_gate_runs_between_targets_only(make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    rb = load_runbook(FIXTURES / "good" / "roll.yaml")

    class H:
        def __init__(self, n: str) -> None:
            self.name, self.fqdn, self.services = n, f"{n}.x", ()

    bound = bind_runbook(rb, cluster="c1", targets=[Target(n, host=H(n)) for n in ("h1", "h2")])
    world.data["healthy"] = True
    res = make_runner().start(bound, env=world, operator=OP, reason="r")
    recs = Journal.open(res.run_id, home).records()
    gates = [r for r in recs if r["type"] == "step_verified" and r["kind"] == "test.wait_for"]
    assert [g["target"] for g in gates] == ["h1"]
    assert world.data["pool"] == {"h1": "yes", "h2": "yes"}
    assert world.data["h2.state"] == "rolled"


def test_a_held_lock_is_said_before_any_gate_and_planning_changes_nothing(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    from kafkaops.engine.lock import FileLockBackend, lock_info
    from kafkaops.errors import LockHeldError

    lock = FileLockBackend(home / "locks")
    lock.acquire(lock_info("c1", "20990101-000000-other-0000", "alice@bastion", "her roll", "T9"))
    world.data["broken"] = True  # a gate that would refuse: the lock must be what the operator hears about
    bound = rolling([{"test.depool": {}}, {"test.fail": {}}])
    with pytest.raises(LockHeldError, match=r"alice@bastion.*her roll, task T9"):
        make_runner(lock=lock).dry_run(bound, env=world, operator=OP, reason="r")
    with pytest.raises(LockHeldError):
        make_runner(lock=lock).start(bound, env=world, operator=OP, reason="r")
    assert world.applies == {}
