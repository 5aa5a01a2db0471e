"""Coordination checkpoints (``operator.confirm``, issue 13 point 8) over the engine's fake world.

The EventBus runbook: "Before starting please sync with the Services team ... they might need to
temporarily stop services like ChangeProp". What must hold: the plan shows the question; without a
confirmation nothing changes (the CLI refuses before the run; a run reaching it pauses, exit 13);
``--yes`` is not a confirmation; a roll asks once per run, a resume never asks again; the journal says
who confirmed it and when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.engine import step as step_mod
from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import NotConfirmed, RunFailed
from kafkaops.queries.checkpoints import pending_checkpoints
from kafkaops.steps import operator

OP = "alice@admin1"
TEXT = "The Services team knows about this maintenance and has paused ChangeProp"


@dataclass
class Cluster:
    checkpoints: dict[str, str] = field(default_factory=lambda: {"changeprop": TEXT})


@dataclass
class CheckpointWorld(World):
    """The fake world plus what ``operator.confirm`` reads: the inventory's checkpoints (the run's facts
    are the runner's, ``ctx.facts``)."""

    cluster: Any = field(default_factory=Cluster)


@pytest.fixture(autouse=True)
def confirm_kind() -> Iterator[None]:
    step_mod.register_step(operator.KIND, operator.ConfirmCheckpoint,
                           [step_mod.Param("checkpoint", "str", required=True)], replace=True)
    yield


@pytest.fixture
def cw() -> CheckpointWorld:
    return CheckpointWorld()


def roll(hosts: tuple[str, ...] = ("h1", "h2", "h3"), checkpoint: str = "changeprop") -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": [
        {"operator.confirm": {"checkpoint": checkpoint}},
        {"test.set": {"key": "{target.name}", "value": "rebooted"}},
    ]})
    return bind_runbook(rb, cluster="c1", targets=[Target(h) for h in hosts])


def events(run_id: str, home: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in Journal.open(run_id, home).records() if r["type"] == "event" and r.get("event") == name]


def test_the_plan_shows_the_checkpoint_once_for_the_whole_roll(make_runner: Callable[..., Runner],
                                                               cw: CheckpointWorld) -> None:
    plan = make_runner().dry_run(roll(), env=cw, operator=OP)
    asks = [s for s in plan.steps if s.kind == operator.KIND]
    assert [s.action is not None for s in asks] == [True, False, False]
    assert asks[0].action and asks[0].action["description"] == f"operator confirms: {TEXT}"
    assert "--confirmed changeprop" in asks[0].action["commands"][0]
    assert asks[1].noop_reason and "once for the run, at h1 step 1" in asks[1].noop_reason
    assert pending_checkpoints(plan.steps) == [("changeprop", TEXT)]
    assert "operator confirms: " + TEXT in plan.to_markdown()


def test_unconfirmed_the_run_pauses_before_any_change_and_resume_with_confirmed_goes_on(
    make_runner: Callable[..., Runner], cw: CheckpointWorld, home: Path
) -> None:
    with pytest.raises(NotConfirmed) as exc:
        make_runner().start(roll(), env=cw, operator=OP, reason="test")
    assert exc.value.exit_code == 13
    assert "checkpoint 'changeprop' is not confirmed" in str(exc.value)
    assert "--confirmed changeprop" in str(exc.value) and "\n" not in str(exc.value)
    assert not cw.applies and not cw.data  # nothing changed
    run_id = str(exc.value).split()[1]
    state = Journal.open(run_id, home).replay()
    assert state.status == "paused"
    res = make_runner(confirmed=("changeprop",)).resume(run_id, env=cw, operator="bob@admin2")
    assert res.status == "finished"
    assert cw.data == {"h1": "rebooted", "h2": "rebooted", "h3": "rebooted"}
    [ev] = events(run_id, home, "checkpoint_confirmed")  # once for three hosts
    assert ev["checkpoint"] == "changeprop" and ev["operator"] == "bob@admin2" and ev["via"] == "--confirmed"
    assert ev["at"].endswith("Z") and ev["text"] == TEXT


def test_a_prompt_asks_once_per_run_and_a_no_refuses(make_runner: Callable[..., Runner],
                                                     cw: CheckpointWorld, home: Path) -> None:
    asked: list[str] = []

    def yes(question: str) -> bool:
        asked.append(question)
        return True

    res = make_runner(ask=yes).start(roll(), env=cw, operator=OP, reason="test")
    assert res.status == "finished" and asked == [f"Checkpoint changeprop: {TEXT}. Confirmed?"]
    assert events(res.run_id, home, "checkpoint_confirmed")[0]["via"] == "prompt"
    with pytest.raises(NotConfirmed, match="not confirmed at the prompt"):
        make_runner(ask=lambda _q: False).start(roll(("h4",)), env=cw, operator=OP, reason="test")
    assert "h4" not in cw.data


def test_a_resumed_run_never_asks_again(make_runner: Callable[..., Runner], cw: CheckpointWorld,
                                        home: Path) -> None:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": [
        {"operator.confirm": {"checkpoint": "changeprop"}},
        {"test.wait_for": {"key": "ready", "timeout": "1s"}},
        {"test.set": {"key": "{target.name}", "value": "rebooted"}},
    ]})
    bound = bind_runbook(rb, cluster="c1", targets=[Target("h1"), Target("h2")])
    with pytest.raises(RunFailed) as exc:  # confirmed, then a wait times out
        make_runner(confirmed=("changeprop",)).start(bound, env=cw, operator=OP, reason="test")
    run_id = str(exc.value).split()[1]
    cw.data["ready"] = True

    def never(question: str) -> bool:
        raise AssertionError(f"asked again: {question}")

    res = make_runner(ask=never).resume(run_id, env=cw, operator=OP)  # no --confirmed, no prompt
    assert res.status == "finished" and cw.data["h2"] == "rebooted"
    assert len(events(run_id, home, "checkpoint_confirmed")) == 1


def test_a_checkpoint_the_inventory_does_not_define_is_a_noop_saying_so(
    make_runner: Callable[..., Runner], cw: CheckpointWorld
) -> None:
    cw.cluster = Cluster(checkpoints={})
    res = make_runner().start(roll(("h1",)), env=cw, operator=OP, reason="test")
    assert res.status == "finished" and res.skipped == 1
    plan = make_runner().dry_run(roll(("h1",)), env=cw, operator=OP)
    assert plan.steps[0].noop_reason == "the inventory defines no checkpoint 'changeprop': nothing to confirm"
    assert pending_checkpoints(plan.steps) == []


def test_the_cli_check_refuses_without_confirmed_and_yes_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``confirm_checkpoints`` is what every CLI entry (procedure commands, run, apply) calls after the
    plan and before the run: without a terminal only --confirmed NAME passes; --yes is not among its
    inputs at all."""
    import io

    from kafkaops.cli.common import confirm_checkpoints

    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal
    needed = [("changeprop", TEXT)]
    with pytest.raises(NotConfirmed) as exc:
        confirm_checkpoints(needed, ())
    assert str(exc.value) == (f"checkpoint 'changeprop' is not confirmed: {TEXT} (once it holds, pass "
                              "--confirmed changeprop (--yes does not confirm a checkpoint))")
    with pytest.raises(NotConfirmed):
        confirm_checkpoints(needed, ("chngeprop",))
    assert confirm_checkpoints(needed, ("changeprop",)) == {"changeprop": "--confirmed"}
    assert confirm_checkpoints([], ()) == {}
