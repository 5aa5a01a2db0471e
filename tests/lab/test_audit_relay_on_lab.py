"""A real reboot relays every audit record to the network sinks the operator configured (issue 28, item 9),
its START and END as the lines Wikimedia's server admin log receives (``!log user@host START - ...``, issue 31).

Before, ``kafkaops`` never installed the sinks ``KAFKAOPS_AUDIT_TCP`` and ``KAFKAOPS_AUDIT_WEBHOOK``
name: every record said it was not relayed, and the channel operators watch stayed silent. Here a TCP
line listener (what tcpircbot is) and an HTTP receiver, both on 127.0.0.1 and started by the test, count
what one real ``kafkaops reboot`` sends them; the audit file (authoritative) says how many there were.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops

from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "kafka1002"


class LineListener:
    """Accepts TCP connections on 127.0.0.1 and keeps every line received, until :meth:`close`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._server.settimeout(0.5)
        self.port = int(self._server.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                if self._stop.is_set():  # nothing pending any more: every sender has been read
                    return
                continue
            with conn:
                conn.settimeout(10)
                data = b""
                while chunk := conn.recv(4096):
                    data += chunk
            self.lines += data.decode(errors="replace").splitlines()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._server.close()


@pytest.fixture
def receivers() -> Iterator[tuple[LineListener, list[dict[str, Any]], str]]:
    tcp = LineListener()
    posted: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield tcp, posted, f"http://127.0.0.1:{http.server_address[1]}/audit/hook"
    finally:
        http.shutdown()
        http.server_close()
        tcp.close()


def test_every_audit_record_of_a_reboot_reaches_both_sinks(
    pooled_lab: Cluster, home: Path, monkeypatch: pytest.MonkeyPatch,
    receivers: tuple[LineListener, list[dict[str, Any]], str],
) -> None:
    tcp, posted, url = receivers
    monkeypatch.setenv("KAFKAOPS_AUDIT_TCP", f"127.0.0.1:{tcp.port}")
    monkeypatch.setenv("KAFKAOPS_AUDIT_WEBHOOK", url)
    result = kafkaops(home, pooled_lab, "reboot", HOST, "--yes", "--reason", "audit relay", "--syn-window", "2s",
                      "--no-scan")
    tcp.close()
    shown = f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, shown
    assert "audit sink" not in result.stderr + result.stdout, shown  # no sink failed, none "not installed"

    records = [json.loads(line) for line in (home / "audit.log").read_text().splitlines()]
    assert len(records) >= 4, records  # START, END and the actions in between
    assert records[0]["message"].split(": ", 1)[1].startswith("START - reboot kafka1002")
    assert records[-1]["message"].split(": ", 1)[1].startswith("END (PASS) - reboot kafka1002")
    # The relay gets the run's START and END as the SAL receives them (issue 31), the actions as they are.
    assert tcp.lines == [r.get("sal") or r["message"] for r in records]
    operator = records[0]["operator"]
    assert tcp.lines[0].startswith(f"!log {operator} START - reboot kafka1002 (audit relay)"), tcp.lines[0]
    assert tcp.lines[-1].startswith(f"!log {operator} END (PASS) - reboot kafka1002 (audit relay)"), tcp.lines[-1]
    assert sum(line.startswith("!log ") for line in tcp.lines) == 2  # one host: no per-host lines
    assert posted == records
