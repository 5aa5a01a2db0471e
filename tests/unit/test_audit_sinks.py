"""Network audit sinks (systems/audit_sinks.py): TCP line sink, webhook, configuration from the environment.

Real sockets on 127.0.0.1 (a TCP listener, an HTTP server), no mocks: what reaches the wire is what is
asserted. Best-effort sinks never stop a run: their failures are reported in one line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from kafkaops.engine import audit
from kafkaops.engine.audit import AuditLog, MemorySink
from kafkaops.errors import ConfigError
from kafkaops.systems.audit_sinks import TcpSink, WebhookSink, install, remote_sinks_from_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    assert got == [b"!log o@h START - reboot a,b (why)\n", b"!log o@h END (FAIL) - reboot a,b (why)\n"]
    # a dead chat bot must not stop the run
    dead = AuditLog([mem], [TcpSink("127.0.0.1", port, timeout=0.5)], on_sink_error=errors.append)
    dead.record(run="r", operator="o", reason="x", action="a", outcome="ok")
    assert errors and "TcpSink failed" in errors[0]
    assert len(mem.records) == 3


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[Any]]]:
    """A local HTTP server that records every JSON body POSTed to it; ``/fail...`` answers 500."""
    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(json.loads(body))
            self.send_response(500 if self.path.startswith("/fail") else 204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_posts_each_record_as_json_without_secrets(webhook: tuple[str, list[Any]]) -> None:
    url, received = webhook
    errors: list[str] = []
    log = AuditLog([MemorySink()], [WebhookSink(url + "/hook")], on_sink_error=errors.append)
    log.record(run="r1", operator="o@h", reason="kernel", action="depool kafka1001", outcome="applied",
               target="kafka1001", params={"api_token": "s3cret"})
    assert errors == []
    assert len(received) == 1 and received[0]["action"] == "depool kafka1001"
    assert received[0]["params"] == {"api_token": "***"}


def test_webhook_failures_are_one_line_naming_the_url(webhook: tuple[str, list[Any]]) -> None:
    url, _ = webhook
    dead = f"http://127.0.0.1:{_free_port()}/hook"
    errors: list[str] = []
    log = AuditLog([MemorySink()], [WebhookSink(url + "/fail"), WebhookSink(dead, timeout=2)],
                   on_sink_error=errors.append)
    log.record(run="r", operator="o", reason="x", action="a", outcome="ok")
    assert errors == [f"warning: audit sink WebhookSink failed: POST {url}/fail: HTTP 500",
                      f"warning: audit sink WebhookSink failed: POST {dead}: ConnectionError"]


def test_remote_sinks_from_env() -> None:
    assert remote_sinks_from_env({}) == []
    sinks = remote_sinks_from_env({"KAFKAOPS_AUDIT_TCP": "ircbot.example.org:9200",
                                   "KAFKAOPS_AUDIT_WEBHOOK": "https://hooks.example.org/x"})
    tcp, hook = sinks
    assert isinstance(tcp, TcpSink) and (tcp.host, tcp.port) == ("ircbot.example.org", 9200)
    assert isinstance(hook, WebhookSink) and hook.url == "https://hooks.example.org/x"
    v6 = remote_sinks_from_env({"KAFKAOPS_AUDIT_TCP": "[::1]:9200"})[0]
    assert isinstance(v6, TcpSink) and v6.host == "::1"
    for bad in ("ircbot", "ircbot:", ":9200", "ircbot:port"):
        with pytest.raises(ConfigError, match="KAFKAOPS_AUDIT_TCP"):
            remote_sinks_from_env({"KAFKAOPS_AUDIT_TCP": bad})


def test_install_makes_the_default_audit_relay_to_the_configured_sinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhook: tuple[str, list[Any]]
) -> None:
    url, received = webhook
    monkeypatch.setattr(audit, "_remote_sinks", None)
    monkeypatch.setenv("KAFKAOPS_AUDIT_WEBHOOK", url + "/hook")
    monkeypatch.delenv("KAFKAOPS_AUDIT_TCP", raising=False)
    install()
    log = audit.default_audit(tmp_path)
    log.start(run="r", runbook="reboot", targets=["kafka1001"], operator="o@h", reason="kernel", task="T1")
    assert [r["message"] for r in received] == ["o@h: START - reboot kafka1001 (kernel - T1)"]
    assert "START - reboot kafka1001" in (tmp_path / "audit.log").read_text()


# --- secrets in a sink's URL (issue 28, item 9) -----------------------------------------------------------


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/abcdefghijklmnopqrstuvwx",
     "https://hooks.slack.com/services/***/***/***"),
    ("https://bot:hunter2@chat.example.org:8443/hooks/kafka?token=s3cret&channel=ops#frag",
     "https://***@chat.example.org:8443/hooks/kafka?token=***&channel=***#***"),
    ("https://tok3n@chat.example.org/", "https://***@chat.example.org/"),
    ("https://mattermost.example.org/hooks/xq9bq3fq7fgu8mjwz3ekgo5smw", "https://mattermost.example.org/hooks/***"),
    ("https://discord.example/api/webhooks/123456789012345678/Zx-9_abcdefghijklmnopqrstuvwxyz0123456789",
     "https://discord.example/api/webhooks/***/***"),
    ("http://[::1]:9200/relay?s3cretkey", "http://[::1]:9200/relay?***"),
    ("http://127.0.0.1:8080/v1/hook", "http://127.0.0.1:8080/v1/hook"),
    ("http://h:notaport/x", "***"),
])
def test_urls_are_shown_without_their_secrets(url: str, shown: str) -> None:
    assert audit.redact_url(url) == shown


def test_a_failing_webhook_names_its_url_without_the_secret(webhook: tuple[str, list[Any]]) -> None:
    url, _ = webhook
    secret_path = "T0A1B2C3D/B0A1B2C3D/abcdefghijklmnopqrstuvwx"
    errors: list[str] = []
    log = AuditLog([MemorySink()], [WebhookSink(f"{url}/fail/{secret_path}?token=s3cret")],
                   on_sink_error=errors.append)
    log.record(run="r", operator="o", reason="x", action="a", outcome="ok")
    assert errors == [f"warning: audit sink WebhookSink failed: POST {url}/fail/***/***/***?token=***: HTTP 500"]
    dead = f"http://user:hunter2@127.0.0.1:{_free_port()}/hook?token=s3cret"
    log = AuditLog([MemorySink()], [WebhookSink(dead, timeout=2)], on_sink_error=errors.append)
    log.record(run="r", operator="o", reason="x", action="a", outcome="ok")
    assert "hunter2" not in errors[-1] and "s3cret" not in errors[-1]
    assert errors[-1].endswith("/hook?token=***: ConnectionError")


def test_the_cli_installs_the_network_sinks_at_start(tmp_path: Path) -> None:
    """Before: nothing installed them, and every record of every run said it was not relayed."""
    code = ("import sys\nfrom kafkaops.cli import main\nfrom kafkaops.engine import audit\n"
            "sys.argv = ['kafkaops', '--version']\ntry:\n    main.main()\nexcept SystemExit:\n    pass\n"
            "log = audit.default_audit(__import__('pathlib').Path(sys.argv[-1]))\n"
            "print([type(s).__name__ for s in log.best_effort])\n")
    env = {**os.environ, "KAFKAOPS_AUDIT_TCP": "127.0.0.1:9", "KAFKAOPS_AUDIT_WEBHOOK": "http://127.0.0.1:9/hook"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                         env=env, check=True).stdout
    assert out.strip().splitlines()[-1] == "['TcpSink', 'WebhookSink']"
