"""A run's report folded from its journal: step times, outcomes, wait restarts, and the sessions — a
process that died says nothing, so a session followed by a resume without a pause was killed."""

from __future__ import annotations

from typing import Any

from kafkaops.engine.timeline import category, run_report


def _journal() -> list[dict[str, Any]]:
    steps = [{"index": 1, "kind": "conftool.depool"}, {"index": 2, "kind": "traffic.wait_zero_syns"},
             {"index": 3, "kind": "kafka.stop_broker"}, {"index": 4, "kind": "kafka.wait_healthy", "gate": True}]
    recs: list[dict[str, Any]] = [
        {"type": "run_started", "ts": 100.0, "run_id": "r1", "cluster": "lab", "operator": "alice", "reason": "kernel",
         "task": "T1", "pid": 11, "hostname": "adm", "runbook": {"name": "rolling-restart", "targets": [
             {"name": "kafka1001", "steps": steps}, {"name": "kafka1002", "steps": steps[:3]}]}},
        {"type": "target_started", "ts": 100.1, "target": "kafka1001"},
        {"type": "step_observed", "ts": 100.5, "target": "kafka1001", "step": 1},
        {"type": "step_applying", "ts": 100.6, "target": "kafka1001", "step": 1, "action": {"description": "depool"}},
        {"type": "step_verified", "ts": 101.0, "target": "kafka1001", "step": 1},
        {"type": "step_observed", "ts": 101.2, "target": "kafka1001", "step": 2},
        {"type": "step_applying", "ts": 101.3, "target": "kafka1001", "step": 2, "action": {"description": "wait"}},
        {"type": "event", "ts": 104.0, "target": "kafka1001", "step": 2, "event": "wait_restarted",
         "reason": "new SYN from 127.0.0.1", "syns": 1},
        {"type": "event", "ts": 105.0, "target": "kafka1001", "step": 2, "event": "wait_restarted",
         "reason": "new SYN from 127.0.0.1", "syns": 2},
        {"type": "step_verified", "ts": 116.0, "target": "kafka1001", "step": 2},
        {"type": "step_observed", "ts": 116.5, "target": "kafka1001", "step": 3},
        {"type": "step_applying", "ts": 116.6, "target": "kafka1001", "step": 3, "action": {"description": "stop"}},
        # the process dies here: no record says so
        {"type": "resumed", "ts": 200.0, "pid": 12, "hostname": "adm"},
        {"type": "step_observed", "ts": 200.4, "target": "kafka1001", "step": 3},
        {"type": "step_applying", "ts": 200.5, "target": "kafka1001", "step": 3, "action": {"description": "stop"}},
        {"type": "step_retry", "ts": 201.0, "target": "kafka1001", "step": 3, "error": "timeout"},
        {"type": "step_verified", "ts": 205.0, "target": "kafka1001", "step": 3},
        {"type": "step_observed", "ts": 205.5, "target": "kafka1001", "step": 4},
        {"type": "step_skipped", "ts": 205.6, "target": "kafka1001", "step": 4, "reason": "healthy"},
        {"type": "step_verified", "ts": 205.7, "target": "kafka1001", "step": 4},
        {"type": "event", "ts": 206.0, "target": "kafka1002", "step": 3, "event": "reboot_intent", "boot_id": "b"},
        {"type": "paused", "ts": 210.0},
    ]
    return recs


def test_steps_have_their_times_outcomes_tries_and_restart_reasons() -> None:
    report = run_report(_journal())
    by = {(s.target, s.step): s for s in report.steps}
    depool, syn, stop, gate = (by[("kafka1001", i)] for i in (1, 2, 3, 4))
    assert (depool.start, depool.end, depool.duration, depool.outcome) == (100.1, 101.0, 0.9, "changed")
    assert syn.duration == 15.0 and [r["reason"] for r in syn.restarts] == ["new SYN from 127.0.0.1"] * 2
    assert (stop.attempts, stop.errors, stop.outcome) == (2, ["timeout"], "changed")  # applied again after the kill
    assert stop.interrupted and not syn.interrupted and not gate.interrupted
    assert gate.gate and gate.outcome == "no-op" and gate.description == "healthy"
    assert by[("kafka1002", 1)].outcome == "pending" and by[("kafka1002", 1)].start is None
    assert [e["event"] for e in report.events] == ["reboot_intent"]  # restarts are the step's, not events
    assert (report.operator, report.reason, report.task, report.runbook) == ("alice", "kernel", "T1", "rolling-restart")


def test_a_session_that_a_resume_follows_without_a_pause_was_killed_at_its_last_record() -> None:
    report = run_report(_journal())
    assert [(s.how, s.start, s.end, s.ended_by, s.pid) for s in report.sessions] == [
        ("started", 100.0, 116.6, "killed", 11), ("resumed", 200.0, 210.0, "paused", 12)]
    assert report.status == "paused" and report.duration == 110.0


def test_a_last_session_without_an_end_is_killed_unless_its_process_lives() -> None:
    recs = [r for r in _journal() if r["type"] != "paused"]
    assert run_report(recs).sessions[-1].ended_by == "killed"
    assert run_report(recs, alive=True).sessions[-1].ended_by == "running"


def test_a_compensated_step_is_rolled_back_and_a_failure_is_failed() -> None:
    recs = [
        *_journal()[:12],
        {"type": "step_failed", "ts": 117.0, "target": "kafka1001", "step": 3, "error": "boom"},
        {"type": "failed", "ts": 117.1},
        {"type": "compensate_verified", "ts": 130.0, "target": "kafka1001", "step": 1},
        {"type": "aborted", "ts": 131.0},
    ]
    report = run_report(recs)
    by = {(s.target, s.step): s for s in report.steps}
    assert by[("kafka1001", 3)].outcome == "failed" and by[("kafka1001", 3)].errors == ["boom"]
    assert by[("kafka1001", 1)].outcome == "rolled back"
    assert report.sessions[-1].ended_by == "aborted"


def test_categories_colour_the_chart_by_what_a_step_acts_on() -> None:
    assert [category(k) for k in ("conftool.depool", "traffic.wait_zero_syns", "kraft.stop_controller",
                                  "host.reboot", "service.verify_health", "logs.scan_kafka", "x.y")] == [
        "traffic", "traffic", "kafka", "host", "service", "check", "check"]
