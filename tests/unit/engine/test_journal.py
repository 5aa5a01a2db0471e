"""Journal: append-only, fsynced, replayable, tolerant of a torn last line, secret-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkaops.engine.journal import Journal, list_runs, new_run_id, replay
from kafkaops.errors import ConfigError


def _bound() -> dict[str, object]:
    return {
        "name": "rb",
        "targets": [
            {"name": "a", "steps": [{"index": 1, "kind": "k"}, {"index": 2, "kind": "k"}]},
            {"name": "b", "steps": [{"index": 1, "kind": "k"}]},
        ],
    }


def test_append_and_replay_cursor(home: Path) -> None:
    j = Journal.create("run-1", home)
    j.append("run_started", run_id="run-1", runbook=_bound(), cluster="c", operator="op", reason="r")
    j.append("step_observed", target="a", step=1, kind="k", sync=False)
    j.append("step_applying", target="a", step=1, kind="k")
    j.append("step_applied", target="a", step=1, kind="k")
    j.append("step_verified", target="a", step=1, kind="k")
    j.append("step_observed", target="a", step=2, kind="k")
    j.append("step_skipped", target="a", step=2, kind="k", reason="holds")
    state = Journal.open("run-1", home).replay()
    assert state.status == "running"
    assert state.is_done("a", 1) and not state.is_done("a", 2)
    assert state.step("a", 2).status == "skipped"
    assert state.cursor() == ("a", 2)
    assert [s.index for s in state.changed_steps()] == [1]
    assert state.targets == ["a", "b"]
    seqs = [r["seq"] for r in j.records()]
    assert seqs == list(range(1, 8))


def test_failed_paused_resumed_finished_status(home: Path) -> None:
    j = Journal.create("run-2", home)
    j.append("run_started", run_id="run-2", runbook=_bound())
    j.append("step_failed", target="a", step=1, kind="k", error="boom")
    assert j.replay().status == "failed"
    assert j.replay().last_error == "boom"
    j.append("resumed")
    assert j.replay().status == "running"
    j.append("paused", target="a", step=1)
    assert j.replay().status == "paused"
    j.append("resumed")
    for t, i in (("a", 1), ("a", 2), ("b", 1)):
        j.append("step_verified", target=t, step=i, kind="k")
    assert j.replay().cursor() is None
    j.append("finished")
    assert j.replay().status == "finished" and j.replay().terminal


def test_torn_last_line_is_skipped_and_next_record_starts_a_new_line(home: Path) -> None:
    j = Journal.create("run-3", home)
    j.append("run_started", run_id="run-3", runbook=_bound())
    with j.path.open("a") as fh:
        fh.write('{"seq": 2, "type": "step_appl')  # crash mid-write
    fresh = Journal.open("run-3", home)
    assert [r["type"] for r in fresh.records()] == ["run_started"]
    fresh.append("step_applying", target="a", step=1, kind="k")
    types = [r["type"] for r in Journal.open("run-3", home).records()]
    assert types == ["run_started", "step_applying"]
    assert fresh.replay().step("a", 1).changed


def test_secrets_never_reach_the_journal(home: Path) -> None:
    j = Journal.create("run-4", home)
    j.append(
        "run_started",
        run_id="run-4",
        runbook={"params": {"password": "hunter2", "api_token": "t0k"}},
        note="mysql --password=hunter2 -h db",
    )
    text = j.path.read_text()
    assert "hunter2" not in text and "t0k" not in text
    rec = json.loads(text.splitlines()[0])
    assert rec["runbook"]["params"] == {"password": "***", "api_token": "***"}


def test_open_unknown_run_and_duplicate_create(home: Path) -> None:
    with pytest.raises(ConfigError, match="no run 'nope'"):
        Journal.open("nope", home)
    Journal.create("dup", home)
    with pytest.raises(FileExistsError):
        Journal.create("dup", home)


def test_list_runs_newest_first_and_run_ids_sort(home: Path) -> None:
    a = new_run_id("reboot", now=1_700_000_000)
    b = new_run_id("reboot", now=1_700_000_100)
    assert a < b and "-reboot-" in a
    for rid in (a, b):
        Journal.create(rid, home).append("run_started", run_id=rid, runbook=_bound())
    assert [s.run_id for s in list_runs(home)] == [b, a]


def test_replay_is_pure_function_of_records() -> None:
    recs = [
        {"seq": 1, "type": "run_started", "run_id": "x", "runbook": _bound()},
        {"seq": 2, "type": "step_applying", "target": "b", "step": 1, "kind": "k"},
        {"seq": 3, "type": "step_applying", "target": "a", "step": 1, "kind": "k"},
        {"seq": 4, "type": "compensate_verified", "target": "b", "step": 1, "kind": "k"},
    ]
    st = replay(recs)
    assert [(s.target, s.index) for s in st.changed_steps()] == [("b", 1), ("a", 1)]
    assert st.step("b", 1).compensated and not st.step("a", 1).compensated


@pytest.mark.parametrize("run_id", ["../../x", "/var/x", "..", ".", "a/b", "x\n", "", "-rf", "a" * 200])
def test_a_run_id_is_a_name_never_a_path(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ConfigError, match="is not a run id"):
        Journal.open(run_id, tmp_path)
    with pytest.raises(ConfigError, match="is not a run id"):
        Journal.create(run_id, tmp_path)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_free_text_is_journaled_verbatim_and_secret_shapes_are_masked(tmp_path: Path) -> None:
    j = Journal.create("r1", tmp_path)
    j.append("run_started", reason="fix token refresh", runbook={"params": {"message": "rotate token: soon"}},
             command="curl --password hunter2 -H 'Authorization: Bearer abc.def'", note="token=xyz; the token works")
    (rec,) = j.records()
    assert rec["reason"] == "fix token refresh"
    assert rec["runbook"]["params"]["message"] == "rotate token: soon"  # what a resume sends is unaltered
    assert "hunter2" not in rec["command"] and "abc.def" not in rec["command"]
    assert rec["note"] == "token=*** the token works"


def test_every_intent_is_on_disk_before_its_side_effect_and_facts_after_it_wait_for_the_next(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An intent (``*_applying``) and a run's lifecycle records are fsynced before append returns; a record
    written after the fact is not, and is made durable by the next fsync, which every side effect follows."""
    import os

    import kafkaops.engine.journal as journal

    synced: list[str] = []
    real = os.fsync
    j = Journal.create("run-1", home)
    monkeypatch.setattr(journal.os, "fsync", lambda fd: (synced.append(_last_type(j.path)), real(fd)))
    for type_ in ("run_started", "target_started", "step_observed", "step_applying", "step_applied", "step_verified",
                  "lease_renewed", "event", "step_skipped", "compensate_applying", "compensate_applied",
                  "paused", "finished"):
        j.append(type_, target="a", step=1, kind="k")
    assert synced == ["run_started", "step_applying", "event", "compensate_applying", "paused", "finished"]
    assert not any(t.endswith("_applying") for t in journal.AFTER_THE_FACT)


def _last_type(path: Path) -> str:
    return str(json.loads(path.read_text().splitlines()[-1])["type"])
