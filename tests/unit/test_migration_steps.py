"""The migration's stages and the decisions of its steps, from observations (issue 33).

What the lab proves end to end (tests/lab/test_migrate_to_kraft_on_lab.py) rests on these: which stage a
phase is ready for, what the gate refuses and why, and that no step formats a node of another cluster.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.policy.migration import NO_RETURN, PHASES, STAGES, MigrationView, next_stage, stage
from kafkaops.queries.migration import judge_phase
from kafkaops.steps.migration import phases_line


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params if p.default is not None}, **params})


def test_each_phase_is_ready_for_the_stage_that_leaves_it_and_a_half_done_stage_runs_again() -> None:
    assert [next_stage(p).name if next_stage(p) else None for p in PHASES] == [  # type: ignore[union-attr]
        "controllers", "brokers-migration", "brokers-kraft", "finalize", "finalize", None]
    for s in STAGES:  # every stage resumes in the phase it ends in, so a resumed run's gate lets it finish
        assert s.end in s.start
    assert [s.name for s in STAGES if s.no_return] == ["finalize"]
    assert PHASES.index(NO_RETURN) > PHASES.index(stage("brokers-kraft").end)


def test_an_unknown_stage_names_the_stages() -> None:
    with pytest.raises(ValueError, match="stages: controllers, brokers-migration, brokers-kraft, finalize"):
        stage("brokers")


def test_a_runbook_naming_an_unknown_stage_or_node_phase_is_refused_when_bound() -> None:
    gate = get_step_kind("migration.phase_gate")
    configure = get_step_kind("migration.configure")
    assert gate is not None and configure is not None and gate.check is not None and configure.check is not None
    assert gate.check({"stage": "finalize"}) is None
    assert "unknown migration stage 'last'" in (gate.check({"stage": "last"}) or "")
    assert configure.check({"phase": "kraft"}) is None
    assert "not a node configuration phase" in (configure.check({"phase": "KRaft"}) or "")


def _gate(phase: str, stage_name: str, problems: tuple[str, ...] = ()) -> Action | Noop:
    this = stage(stage_name)
    return _step("migration.phase_gate", stage=stage_name).plan(Observation({
        "stage": this.name, "phase": phase, "start": list(this.start), "end": this.end, "no_return": this.no_return,
        "line": phases_line(phase, this), "problems": list(problems)}))


def test_the_gate_passes_from_a_phase_its_stage_starts_from_and_says_where_the_way_back_ends() -> None:
    first = _gate("zookeeper", "controllers")
    assert isinstance(first, Noop) and "abort RUN --rollback" in first.reason
    assert "[zookeeper: now] -> controllers (this run)" in first.reason
    last = _gate("kraft-brokers", "finalize")
    assert isinstance(last, Noop) and "NO way back" in last.reason
    assert "| no way back from here | finalizing" in last.reason


def test_the_gate_refuses_a_stage_the_cluster_is_not_ready_for_or_is_past() -> None:
    with pytest.raises(SafetyRefusal, match="an earlier stage is not finished"):
        _gate("controllers", "brokers-kraft")
    with pytest.raises(SafetyRefusal, match="runs from kraft-brokers or finalizing or finalized, but the cluster is "
                                            "in phase dual-write"):
        _gate("dual-write", "finalize")
    with pytest.raises(SafetyRefusal) as past:
        _gate("kraft-brokers", "brokers-migration")
    assert "not finished" not in (past.value.hint or "")


def test_the_first_stage_refuses_brokers_not_on_the_bridge_release() -> None:
    with pytest.raises(SafetyRefusal, match=re.escape("kafka1001 runs Kafka 3.8.1, not 3.9")) as refused:
        _gate("zookeeper", "controllers", ("kafka1001 runs Kafka 3.8.1, not 3.9",))
    assert "inter.broker.protocol.version=3.9" in (refused.value.hint or "")


def test_a_view_no_migration_can_produce_stops_the_run() -> None:
    with pytest.raises(CheckFailed, match="in no phase of a migration"):
        judge_phase(MigrationView({1001: "kraft"}, {3001: "migration"}, quorum_leader=None))


def test_configure_writes_only_a_changed_phase_and_says_how_to_undo_it() -> None:
    step = _step("migration.configure", phase="kraft")
    same = step.plan(Observation({"host": "h", "now": "kraft", "want": "kraft", "command": "c kraft"}))
    assert isinstance(same, Noop)
    change = step.plan(Observation({"host": "h", "now": "migration", "want": "kraft", "command": "c kraft"}))
    assert isinstance(change, Action) and change.commands == ("on h: c kraft",)
    assert "configure it for migration again" in change.rollback


def test_format_never_touches_a_node_formatted_for_another_cluster() -> None:
    step = _step("migration.format")
    ours = "OY1P1D2cTLyvXpcrpaR9Dw"
    assert isinstance(step.plan(Observation({"host": "c", "has": ours, "want": ours, "command": "f"})), Noop)
    assert isinstance(step.plan(Observation({"host": "c", "has": None, "want": ours, "command": "f"})), Action)
    with pytest.raises(SafetyRefusal, match="formatted for cluster AAAAAAAAAAAAAAAAAAAAAA, not this cluster's"):
        step.plan(Observation({"host": "c", "has": "A" * 22, "want": ours, "command": "f"}))
