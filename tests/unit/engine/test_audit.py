"""Audit log: JSON lines with who/what/why, SAL-style START/END, sinks, and no secrets anywhere."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from kafkaops.engine.audit import AuditLog, FileSink, MemorySink, TcpSink, redact


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


def test_tcp_sink_sends_one_line_per_message_and_best_effort_failures_are_swallowed() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]
    got: list[bytes] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                got.append(conn.recv(4096))

    t = threading.Thread(target=serve)
    t.start()
    errors: list[str] = []
    mem = MemorySink()
    log = AuditLog([mem], [TcpSink("127.0.0.1", port)], on_sink_error=errors.append)
    log.start(run="r", runbook="reboot", targets=["a", "b"], operator="o@h", reason="why", task=None)
    log.end(
        run="r", runbook="reboot", targets=["a", "b"], operator="o@h", reason="why", task=None, passed=False
    )
    t.join(5)
    server.close()
    assert got == [b"o@h: START - reboot a,b (why)\n", b"o@h: END (FAIL) - reboot a,b (why)\n"]
    # a dead chat bot must not stop the run
    dead = AuditLog([mem], [TcpSink("127.0.0.1", port, timeout=0.5)], on_sink_error=errors.append)
    dead.record(run="r", operator="o", reason="x", action="a", outcome="ok")
    assert errors and "TcpSink failed" in errors[0]
    assert len(mem.records) == 3
