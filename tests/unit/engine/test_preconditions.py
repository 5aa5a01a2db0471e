"""A destructive step's safety precondition: the runner re-reads it right before every apply (issue 28.4).

The KRaft story in miniature: a gate step verifies "a majority stays caught up", the run stops after it,
a voter falls behind, and the run is resumed. The resume never re-runs the verified gate, so only the
stop step's own precondition, called by the runner right before ``apply``, can refuse the stop.
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
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.engine.step import Action, Noop, Observation, StepBase, register_step
from kafkaops.errors import RunFailed, SafetyRefusal

OP = "alice@admin1"


class Crash(BaseException):
    """The run's process dying (SIGKILL) at a hook point."""


class Gate(StepBase):
    """The quorum gate: refuses unless the world is safe; changes nothing."""

    def observe(self, ctx: Any) -> Observation:
        world: World = ctx.env
        world.data.setdefault("calls", []).append("gate.observe")
        return Observation({"safe": world.data["safe"]})

    def plan(self, obs: Observation) -> Action | Noop:
        if not obs.data["safe"]:
            raise SafetyRefusal("gate: a voter lags")
        return Noop("gate passes")


class Stop(StepBase):
    """Stop the node: destructive, its precondition is the gate's check asked again."""

    def _log(self, ctx: Any, what: str) -> None:
        ctx.env.data.setdefault("calls", []).append(f"stop.{what}")

    def observe(self, ctx: Any) -> Observation:
        self._log(ctx, "observe")
        return Observation({"running": ctx.env.data["running"]})

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("stop the node") if obs.data["running"] else Noop("already stopped")

    def precondition(self, ctx: Any, action: Action) -> str:
        self._log(ctx, "precondition")
        if not ctx.env.data["safe"]:
            raise SafetyRefusal("stopping it now could cost the quorum its majority: a voter lags")
        return "every voter caught up"

    def apply(self, ctx: Any, action: Action) -> None:
        self._log(ctx, "apply")
        ctx.env.applies["stop"] += 1
        ctx.env.data["running"] = False


@pytest.fixture(autouse=True)
def _kinds() -> None:  # the engine conftest isolates the registry around every test
    register_step("test.gate", Gate)
    register_step("test.stop", Stop, effect="disruptive")


def _bound() -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"},
                        "steps": [{"test.gate": {}}, {"test.stop": {}}]})
    return bind_runbook(rb, cluster="c1", targets=[Target("c1")])


def _events(run_id: str, home: Path) -> list[str]:
    return [r["event"] for r in Journal.open(run_id, home).records() if r["type"] == "event"]


def test_the_precondition_is_called_right_before_apply(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data.update(safe=True, running=True)
    res = make_runner().start(_bound(), env=world, operator=OP, reason="r")
    assert res.status == "finished" and world.applies["stop"] == 1
    calls = world.data["calls"]
    assert calls[calls.index("stop.apply") - 1] == "stop.precondition", calls
    assert calls.count("stop.precondition") == 1
    assert "precondition_held" in _events(res.run_id, home)


def test_a_resume_after_the_gate_re_checks_and_refuses_the_stop(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data.update(safe=True, running=True)

    def crash_after_gate(point: str, target: str, step: Any) -> None:
        if point == "after_verified" and step.kind == "test.gate":
            raise Crash

    with pytest.raises(Crash):
        make_runner(hook=crash_after_gate).start(_bound(), env=world, operator=OP, reason="r")
    run_id = os.listdir(home / "runs")[0]
    world.data.update(safe=False, calls=[])  # a voter falls behind while the run is stopped

    with pytest.raises(RunFailed, match="could cost the quorum its majority") as refused:
        make_runner().resume(run_id, env=world)
    assert isinstance(refused.value.__cause__, SafetyRefusal)
    assert "this step was not applied" in str(refused.value)
    assert world.data["running"] and world.applies["stop"] == 0
    assert "gate.observe" not in world.data["calls"]  # the verified gate is not re-run: the stop checks itself
    assert world.data["calls"][-1] == "stop.precondition"
    records = Journal.open(run_id, home).records()
    assert not any(r["type"] == "step_applying" and r["kind"] == "test.stop" for r in records)

    world.data["safe"] = True  # the voter caught up again
    assert make_runner().resume(run_id, env=world).status == "finished"
    assert world.applies["stop"] == 1 and not world.data["running"]


def test_a_dry_run_shows_the_refusal(make_runner: Callable[..., Runner], world: World) -> None:
    world.data.update(safe=True, running=True)
    make_runner().dry_run(_bound(), env=world, operator=OP)
    world.data["safe"] = False
    world.data["calls"] = []
    with pytest.raises(SafetyRefusal, match="gate: a voter lags"):  # the gate, first in the runbook
        make_runner().dry_run(_bound(), env=world, operator=OP)
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": [{"test.stop": {}}]})
    with pytest.raises(SafetyRefusal, match="a voter lags"):
        make_runner().dry_run(bind_runbook(rb, cluster="c1", targets=[Target("c1")]), env=world, operator=OP)
    assert world.applies["stop"] == 0


def test_a_destructive_kind_must_declare_its_precondition() -> None:
    class Bare(StepBase):
        pass

    with pytest.raises(ValueError, match="disruptive: it must define precondition"):
        register_step("test.bare_stop", Bare, effect="disruptive")
