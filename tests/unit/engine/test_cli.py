"""The runbooks/runs/resume/apply commands, in-process with Typer's CliRunner."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_fakes import FIXTURES, World
from typer.testing import CliRunner

from kafkaops.cli.main import register
from kafkaops.engine.binding import Target, bind_runbook
from kafkaops.engine.lock import FileLockBackend, lock_info
from kafkaops.engine.plan import save_plan
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import RetryPolicy, Runner
from kafkaops.errors import ConfigError, RunFailed

app = register()
cli = CliRunner()
GOOD = str(FIXTURES / "good")
BAD = str(FIXTURES / "bad")


@pytest.fixture
def factory(world: World, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The CLI's environment, rebuilt from a journal or looked up for a plan, is the fake world."""
    import kafkaops.environment
    import kafkaops.lookup

    world.lock = FileLockBackend(home / "locks")
    monkeypatch.setattr(kafkaops.environment.Environment, "from_identity",
                        classmethod(lambda cls, recorded, accept_changes=False, **kw: (world, [])))
    monkeypatch.setattr(kafkaops.lookup, "find_cluster", lambda name, inventory=None: name)
    monkeypatch.setattr(kafkaops.environment.Environment, "of", classmethod(lambda cls, cluster, **kw: world))
    yield world


def test_runbooks_list_show_docs(tmp_path: Path) -> None:
    res = cli.invoke(app, ["runbooks", "list", "--dir", GOOD, "--output", "json"])
    assert res.exit_code == 0, res.output
    assert [r["name"] for r in json.loads(res.stdout)] == ["roll", "simple"]

    res = cli.invoke(app, ["runbooks", "list", "--dir", BAD, "--check"])
    assert res.exit_code == 3
    assert "invalid" in res.stdout

    res = cli.invoke(app, ["runbooks", "show", "roll", "--dir", GOOD, "--output", "markdown"])
    assert res.exit_code == 0 and "# Runbook `roll`" in res.stdout

    out = tmp_path / "docs"
    res = cli.invoke(app, ["runbooks", "docs", "--dir", GOOD, "--out", str(out)])
    assert res.exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["roll.md", "simple.md"]
    assert cli.invoke(app, ["runbooks", "docs", "--dir", GOOD, "--out", str(out), "--check"]).exit_code == 0
    (out / "simple.md").write_text("hand edited\n")
    res = cli.invoke(app, ["runbooks", "docs", "--dir", GOOD, "--out", str(out), "--check"])
    assert res.exit_code == 3
    assert (out / "simple.md").read_text() == "hand edited\n"  # --check writes nothing


def _failed_run(home: Path, world: World) -> str:
    rb = parse_runbook(
        {"name": "r", "summary": "s", "targets": {}, "steps": [{"test.depool": {}}, {"test.fail": {}}]}
    )
    bound = bind_runbook(rb, cluster="main", targets=[Target("h1"), Target("h2")])
    world.data.update({"broken": True, "pool": {"h2": "no"}})
    with pytest.raises(RunFailed):
        Runner(home=home, retry=RetryPolicy(attempts=1), handle_sigint=False).start(
            bound, env=world, operator="alice@a", reason="kernel"
        )
    return os.listdir(home / "runs")[0]


def test_runs_list_show_abort_rollback(home: Path, factory: World) -> None:
    run_id = _failed_run(home, factory)
    res = cli.invoke(app, ["runs", "list", "--output", "json"])
    assert res.exit_code == 0
    (row,) = json.loads(res.stdout)
    assert row["run_id"] == run_id and row["status"] == "failed" and row["cursor"] == ["h1", 2]

    res = cli.invoke(app, ["runs", "show", run_id, "--output", "json"])
    steps = json.loads(res.stdout)["steps"]
    assert [(s["target"], s["step"], s["status"]) for s in steps] == [
        ("h1", 1, "verified"),
        ("h1", 2, "failed"),
        ("h2", 1, "pending"),
        ("h2", 2, "pending"),
    ]
    assert cli.invoke(app, ["runs", "show", run_id]).exit_code == 0

    res = cli.invoke(app, ["runs", "abort", run_id, "--rollback", "--reason", "give up"])
    assert res.exit_code == 0, res.output
    assert factory.data["pool"] == {"h1": "yes", "h2": "no"}
    assert json.loads(cli.invoke(app, ["runs", "list", "-o", "json"]).stdout)[0]["status"] == "aborted"
    audit = (home / "audit.log").read_text()
    assert "END (FAIL) - r h1,h2 (give up): aborted, rolled back 1 change(s)" in audit


def test_resume_via_cli_uses_the_recorded_environment(home: Path, factory: World) -> None:
    run_id = _failed_run(home, factory)
    factory.data["broken"] = False
    res = cli.invoke(app, ["resume", run_id])
    assert res.exit_code == 0, res.output
    assert factory.data["pool"] == {"h1": "no", "h2": "no"}


def test_resume_unknown_run_and_missing_plan_refuse(home: Path, tmp_path: Path, world: World) -> None:
    res = cli.invoke(app, ["resume", "whatever"])
    assert isinstance(res.exception, ConfigError) and "whatever" in str(res.exception)
    res = cli.invoke(app, ["apply", str(tmp_path / "p.json")])
    assert isinstance(res.exception, ConfigError)


def test_apply_plan_via_cli(home: Path, factory: World, tmp_path: Path) -> None:
    rb = parse_runbook({"name": "r", "summary": "s", "steps": [{"test.set": {"key": "a", "value": 1}}]})
    bound = bind_runbook(rb, cluster="main")
    plan = Runner(home=home, handle_sigint=False).dry_run(
        bound, env=factory, operator="a@a", reason="why"
    )
    save_plan(plan, tmp_path / "plan.json")
    res = cli.invoke(app, ["apply", str(tmp_path / "plan.json")])
    assert res.exit_code == 0, res.output
    assert factory.data == {"a": 1}


def test_unlock_diagnoses_the_lock_and_needs_force(home: Path, factory: World) -> None:
    run_id = _failed_run(home, factory)  # a failed run keeps its lock: it is the run's, not orphaned
    factory.lock.force_unlock("main")
    factory.lock.acquire(lock_info("main", run_id, "alice@a", "kernel", None))
    res = cli.invoke(app, ["runs", "unlock", "main", "--reason", "gone"])
    assert isinstance(res.exception, ConfigError)
    assert f"run {run_id} is failed: resume it" in str(res.exception), str(res.exception)
    assert "only if that run is gone for good" in str(res.exception)
    factory.lock.force_unlock("main")

    be = FileLockBackend(home / "locks")
    be.acquire(lock_info("main", "ghost", "c@c", "crashed", None))  # took the lock, crashed before starting
    res = cli.invoke(app, ["runs", "unlock", "main", "--reason", "gone"])
    assert isinstance(res.exception, ConfigError)
    assert "has no journal on this host" in str(res.exception) and "(safe: orphaned)" in str(res.exception)
    assert be.holder("main") is not None
    res = cli.invoke(app, ["runs", "unlock", "main", "--force", "--reason", "host died"])
    assert res.exit_code == 0, res.output
    assert be.holder("main") is None
    assert "force-unlock main" in (home / "audit.log").read_text()
