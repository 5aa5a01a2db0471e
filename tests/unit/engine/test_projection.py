"""A dry-run plans every step against the state the steps before it will leave (their effects)."""

from __future__ import annotations

from collections.abc import Callable

from engine_fakes import World

from kafkaops.engine.binding import Target, bind_runbook
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner


def _bound() -> object:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {},
                        "steps": [{"test.depool": {}}, {"test.repool": {}}]})
    return bind_runbook(rb, cluster="main", targets=[Target("h1"), Target("h2")])


def test_later_steps_observe_what_earlier_steps_will_leave(make_runner: Callable[..., Runner], world: World) -> None:
    world.data["pool"] = {"h1": "yes", "h2": "yes"}
    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="r")  # type: ignore[arg-type]
    by = {(s.target, s.index): s for s in plan.steps}
    # Live, h1 is pooled: without the projection the repool would be planned as a no-op.
    assert by[("h1", 2)].action is not None, by[("h1", 2)].noop_reason
    assert by[("h1", 2)].observed == "h1 pooled=no (projected: after h1 step 1 (test.depool))"
    # The second target sees the state the first target's repool leaves, and says so.
    assert by[("h2", 1)].observed == "h2 pooled=yes"
    assert by[("h2", 2)].observed == "h2 pooled=no (projected: after h2 step 1 (test.depool))"
    assert world.applies == {} and world.data["pool"] == {"h1": "yes", "h2": "yes"}


def test_a_noop_projects_nothing(make_runner: Callable[..., Runner], world: World) -> None:
    world.data["pool"] = {"h1": "no", "h2": "yes"}
    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="r")  # type: ignore[arg-type]
    by = {(s.target, s.index): s for s in plan.steps}
    assert by[("h1", 1)].noop_reason == "already pooled=no"
    assert by[("h1", 2)].observed == "h1 pooled=no"  # live, not projected: the depool did nothing
    assert by[("h1", 2)].action is not None


def test_a_real_run_sees_no_projection(make_runner: Callable[..., Runner], world: World) -> None:
    world.data["pool"] = {"h1": "yes", "h2": "yes"}
    make_runner().start(_bound(), env=world, operator="a@a", reason="r")  # type: ignore[arg-type]
    assert world.applies == {"depool:h1": 1, "repool:h1": 1, "depool:h2": 1, "repool:h2": 1}
