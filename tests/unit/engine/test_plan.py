"""Plans: dry-run observes for real, renders, saves with a fingerprint, and stale plans are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.engine.binding import Target, bind_runbook
from kafkaops.engine.plan import Plan, load_plan, save_plan
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import ConfigError, StalePlanError


def _bound() -> object:
    rb = parse_runbook(
        {
            "name": "r",
            "summary": "Depool and mark",
            "targets": {"order": "controller_last"},
            "steps": [{"test.depool": {}}, {"test.set": {"key": "{target.name}", "value": "done"}}],
        }
    )
    return bind_runbook(rb, cluster="main", targets=[Target("h2"), Target("h1")])


def test_dry_run_changes_nothing_and_shows_actions_and_noops(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data["pool"] = {"h2": "no"}
    plan = make_runner().dry_run(_bound(), env=world, operator="alice@a", reason="kernel", task="T1",  # type: ignore[arg-type]
                                 notes=("controller h1 goes last",))
    assert world.applies == {} and world.data == {"pool": {"h2": "no"}}
    assert not (home / "runs").exists()
    assert plan.targets == ["h2", "h1"]
    by = {(s.target, s.index): s for s in plan.steps}
    assert by[("h2", 1)].action is None and by[("h2", 1)].noop_reason == "already pooled=no"
    assert by[("h1", 1)].action is not None and by[("h1", 1)].action["commands"] == ["confctl pooled=no"]
    assert by[("h1", 1)].rollback == "test.repool: repool what was depooled"
    assert len(plan.changes) == 3

    md = plan.to_markdown()
    assert "# Plan: `r` on `main`" in md
    assert "- **Targets** (in order): `h2`, `h1`" in md
    assert "- **Reason**: kernel (task T1)" in md
    assert "| h1 | 1 | `test.depool` | h1 pooled=yes |" in md
    assert "```\nconfctl pooled=no\n```" in md
    assert "**No-op**: already pooled=no" in md
    assert "**Rollback**: test.repool: repool what was depooled" in md
    assert "controller h1 goes last" in md
    data = json.loads(plan.to_json())
    assert data["fingerprint"] == plan.fingerprint and len(data["steps"]) == 4

    from rich.console import Console

    from kafkaops.cli.plan_render import render_plan

    console = Console(record=True, width=160)
    console.print(render_plan(plan))
    assert "confctl pooled=no" in console.export_text()


def test_saved_plan_applies_when_fresh(
    make_runner: Callable[..., Runner], world: World, tmp_path: Path
) -> None:
    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="kernel")  # type: ignore[arg-type]
    path = save_plan(plan, tmp_path / "plan.json")
    loaded = load_plan(path)
    assert loaded.fingerprint == plan.fingerprint and loaded.steps == plan.steps
    res = make_runner().apply_plan(loaded, env=world, operator="b@b")
    assert res.status == "finished"
    assert world.data == {"pool": {"h1": "no", "h2": "no"}, "h1": "done", "h2": "done"}


def test_stale_plan_is_refused_naming_what_changed(
    make_runner: Callable[..., Runner], world: World, tmp_path: Path, home: Path
) -> None:
    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="kernel")  # type: ignore[arg-type]
    save_plan(plan, tmp_path / "plan.json")
    world.data["pool"] = {"h1": "no"}  # someone depooled h1 meanwhile
    with pytest.raises(StalePlanError) as info:
        make_runner().apply_plan(load_plan(tmp_path / "plan.json"), env=world, operator="b@b")
    msg = str(info.value)
    assert "1 observation(s) changed" in msg
    assert 'h1 step 1 (test.depool): pooled was "yes", now "no"' in msg
    assert "--dry-run --save-plan" in msg
    assert info.value.exit_code == 8
    assert world.applies == {}
    assert not (home / "locks" / "main.lock").exists()  # lock given back after refusing


EDITS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("an observation", lambda d: d["steps"][0]["fingerprint_data"].update(pooled="inactive"),
     "what the steps observed"),
    ("a step parameter", lambda d: d["bound"]["targets"][0]["steps"][0]["params"].update(window=999),
     "the procedure"),
    ("a step added", lambda d: d["bound"]["targets"][0]["steps"].append(dict(d["bound"]["targets"][0]["steps"][0])),
     "the procedure"),
    ("the runbook file hash", lambda d: d["bound"].update(sha256="0" * 64), "the procedure"),
    ("the reason", lambda d: d.update(reason="something else"), "the request"),
    ("the task", lambda d: d.update(task="T999"), "the request"),
    ("the cluster", lambda d: d.update(cluster="other"), "the request"),
    ("the inventory", lambda d: d["environment"].update(inventory="/tmp/other.yaml"), "the environment"),
    ("a shown command", lambda d: d["steps"][1]["action"]["commands"].append("rm -rf /"), "the plan as shown"),
    ("a rollback note", lambda d: d["steps"][0].update(rollback="none"), "the plan as shown"),
]


@pytest.mark.parametrize(("what", "edit", "named"), EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_plan_is_refused_naming_what_was_edited(
        make_runner: Callable[..., Runner], world: World, tmp_path: Path, what: str,
        edit: Callable[[dict[str, Any]], None], named: str) -> None:
    world.data["pool"] = {"h2": "no"}
    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="kernel")  # type: ignore[arg-type]
    plan.environment = {"inventory": "/inv/lab.yaml", "sha256": "abc", "depends": {"x": 1}}
    plan.fingerprint = ""
    plan.__post_init__()
    path = save_plan(plan, tmp_path / "plan.json")
    assert load_plan(path).fingerprint == plan.fingerprint
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"edited after it was saved: {named}"):
        load_plan(path)


def test_recomputed_section_hashes_do_not_pass_the_fingerprint_and_keys_sign(
        make_runner: Callable[..., Runner], world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkaops.engine.plan import section_hashes

    plan = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="kernel")  # type: ignore[arg-type]
    path = save_plan(plan, tmp_path / "plan.json")
    data = json.loads(path.read_text())
    data["reason"] = "edited"
    edited = Plan.from_dict(data)
    data["sections"] = section_hashes(edited)  # an editor who recomputes the sections...
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="fingerprint does not match"):  # ...still fails the fingerprint
        load_plan(path)

    monkeypatch.setenv("KAFKAOPS_PLAN_KEY", "k1")
    signed = make_runner().dry_run(_bound(), env=world, operator="a@a", reason="kernel")  # type: ignore[arg-type]
    assert signed.signature
    save_plan(signed, tmp_path / "signed.json")
    assert load_plan(tmp_path / "signed.json").signature == signed.signature
    with pytest.raises(ConfigError, match="not signed"):
        load_plan(save_plan(plan, tmp_path / "unsigned.json"))
    monkeypatch.setenv("KAFKAOPS_PLAN_KEY", "k2")
    with pytest.raises(ConfigError, match="signed with another key"):
        load_plan(tmp_path / "signed.json")


def test_a_plan_that_is_not_a_plan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not a plan file"):
        load_plan(path)
    path.write_text(json.dumps({"version": 1, "runbook": "r", "bound": {}, "steps": [], "created_at": "soon"}))
    with pytest.raises(ConfigError, match="malformed plan"):
        load_plan(path)


def test_the_terminal_table_prints_observations_as_text_never_markup() -> None:
    """What a plan shows came from inventories, runbooks and live systems: a topic or a command output
    containing console markup must appear as typed."""
    from rich.console import Console

    from kafkaops.cli.plan_render import render_plan
    from kafkaops.engine.plan import Plan, PlannedStep

    hostile = "[red]pooled=no[/red] [link=http://x]y[/link]"
    plan = Plan(runbook="r", summary="s", cluster="main", operator="o@h", reason="[bold]why[/bold]", task=None,
                created_at=0.0, bound={"targets": [{"name": "h[1]"}]},
                steps=[PlannedStep(target="h[1]", index=1, kind="test.depool", params={}, observed=hostile,
                                   fingerprint_data={}, action={"description": "[blink]depool[/blink]",
                                                                "commands": ["confctl [x]"]})],
                notes=["[i]note[/i]"])
    console = Console(record=True, width=200)
    console.print(render_plan(plan))
    text = console.export_text()
    for literal in (hostile, "[bold]why[/bold]", "h[1]", "[blink]depool[/blink]", "confctl [x]", "[i]note[/i]"):
        assert literal in text
