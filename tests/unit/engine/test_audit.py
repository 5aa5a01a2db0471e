"""Audit log: JSON lines with who/what/why, SAL-style START/END, sinks, and no secrets anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkaops.engine import audit
from kafkaops.engine.audit import AuditLog, FileSink, MemorySink, redact


def test_redact_masks_secret_keys_at_any_depth_and_inline() -> None:
    data = {
        "password": "hunter2",
        "nested": {"api_token": "abc", "ssh": {"key_file": "/root/.ssh/id", "user": "root"}},
        "list": [{"client_secret": "s3"}],
        "cmd": "curl -u x --password hunter2 && export TOKEN=abc",
        "empty_password": "",
        "port": 9092,
    }
    out = redact(data)
    text = json.dumps(out)
    for secret in ("hunter2", "abc", "/root/.ssh/id", "s3"):
        assert secret not in text
    assert out["nested"]["ssh"]["user"] == "root" and out["port"] == 9092
    assert out["empty_password"] == ""
    assert data["password"] == "hunter2"  # input not mutated


def test_file_sink_writes_json_lines_with_all_fields(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog([FileSink(path)])
    log.start(
        run="r1", runbook="reboot", targets=["kafka1001"], operator="alice@a", reason="kernel", task="T1"
    )
    log.record(
        run="r1",
        operator="alice@a",
        reason="kernel",
        task="T1",
        target="kafka1001",
        step="step 1 (conftool.depool)",
        action="depool kafka1001",
        outcome="applied",
        params={"password": "x"},
    )
    log.end(
        run="r1",
        runbook="reboot",
        targets=["kafka1001"],
        operator="alice@a",
        reason="kernel",
        task="T1",
        passed=True,
    )
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["start", "action", "end"]
    assert lines[0]["message"] == "alice@a: START - reboot kafka1001 (kernel - T1)"
    assert lines[2]["message"] == "alice@a: END (PASS) - reboot kafka1001 (kernel - T1)"
    act = lines[1]
    for key in ("time", "run", "step", "operator", "reason", "task", "target", "action", "outcome"):
        assert key in act
    assert act["params"] == {"password": "***"}


def test_default_audit_writes_the_file_and_the_installed_network_sinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = MemorySink()
    monkeypatch.setattr(audit, "_remote_sinks", None)
    audit.set_remote_sinks(lambda: [remote])
    log = audit.default_audit(tmp_path)
    log.record(run="r", operator="o@h", reason="why", action="depool a", outcome="applied")
    assert [r["action"] for r in remote.records] == ["depool a"]
    assert json.loads((tmp_path / "audit.log").read_text())["outcome"] == "applied"
    audit.set_remote_sinks(None)
    assert audit.default_audit(tmp_path).best_effort == []


def test_network_sinks_configured_but_not_installed_are_reported_never_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "_remote_sinks", None)
    monkeypatch.setenv("KAFKAOPS_AUDIT_WEBHOOK", "http://127.0.0.1:9/hook")
    monkeypatch.delenv("KAFKAOPS_AUDIT_TCP", raising=False)
    errors: list[str] = []
    log = audit.default_audit(tmp_path)
    log.on_sink_error = errors.append
    log.record(run="r", operator="o@h", reason="why", action="depool a", outcome="applied")
    assert (tmp_path / "audit.log").read_text().count("\n") == 1  # the authoritative record is written
    assert len(errors) == 1 and "KAFKAOPS_AUDIT_WEBHOOK set" in errors[0]
    assert "only in the audit file" in errors[0]


def test_the_audit_file_is_on_disk_before_every_action_and_an_outcome_waits_for_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    path = tmp_path / "audit.log"
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(audit.os, "fsync", lambda fd: (synced.append(
        json.loads(path.read_text().splitlines()[-1])["outcome"]), real(fd)))
    log = AuditLog([FileSink(path)])
    log.start(run="r", runbook="reboot", targets=["kafka1001"], operator="o", reason="why", task=None)
    for outcome in ("applying", "applied", "rollback-applying", "rolled-back", "failed", "paused"):
        log.record(run="r", operator="o", reason="why", action="a", outcome=outcome, step="s", target="kafka1001")
    log.end(run="r", runbook="reboot", targets=["kafka1001"], operator="o", reason="why", task=None, passed=True)
    assert synced == ["started", "applying", "rollback-applying", "failed", "paused", "pass"]
    assert len(path.read_text().splitlines()) == 8
