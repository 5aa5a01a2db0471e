"""The standard-library JSON transport (kafkaops.systems.http_json): what it sends, how it verifies TLS, and
what each failure says. A local http.server stands on the other side; Alertmanager itself is spoken to for
real in test_monitoring_auth.py and the lab tests."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kafkaops.systems.http_json import HttpFailure, send, url_with

SEEN: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        SEEN.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                     "type": self.headers.get("Content-Type"), "body": self.rfile.read(length)})
        if self.path.startswith("/slow"):
            time.sleep(2)
        code = 404 if self.path.startswith("/missing") else 200
        body = json.dumps({"path": self.path}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(server: ThreadingHTTPServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def plain() -> Iterator[str]:
    yield from _serve(ThreadingHTTPServer(("127.0.0.1", 0), _Handler))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out",
                    str(d / "cert.pem")], check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "cert.pem", d / "key.pem")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    for address in _serve(server):
        yield address, d / "cert.pem"


def test_a_json_body_and_the_headers_reach_the_server_and_any_status_comes_back(plain: str) -> None:
    SEEN.clear()
    answer = send("POST", url_with(f"http://{plain}", "/api/v2/silences", [("filter", 'a="b c"')]),
                  headers={"Authorization": "Basic eDp5"}, body={"k": [1]}, timeout=5)
    assert answer.status == 200 and answer.json() == {"path": "/api/v2/silences?filter=a%3D%22b+c%22"}
    assert SEEN[-1] == {"method": "POST", "path": "/api/v2/silences?filter=a%3D%22b+c%22", "auth": "Basic eDp5",
                        "type": "application/json", "body": b'{"k": [1]}'}
    missing = send("GET", f"http://{plain}/missing", timeout=5)
    assert missing.status == 404 and missing.json() == {"path": "/missing"}


def test_https_is_verified_against_the_given_ca_only(tls: tuple[str, Path]) -> None:
    address, ca = tls
    assert send("GET", f"https://{address}/x", timeout=5, ca_file=str(ca)).status == 200
    with pytest.raises(HttpFailure) as untrusted:
        send("GET", f"https://{address}/x", timeout=5)  # the system's store does not know this CA
    assert untrusted.value.tls and untrusted.value.reason.startswith("TLS handshake failed")


def test_each_failure_says_what_happened_in_a_few_words(plain: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(HttpFailure, match=r"^connection refused$"):
        send("GET", f"http://127.0.0.1:{closed}/", timeout=5)
    with pytest.raises(HttpFailure) as slow:
        send("GET", f"http://{plain}/slow", timeout=0.3)
    assert slow.value.timed_out and slow.value.reason == "no answer within 0.3s"
    with pytest.raises(HttpFailure, match="not an http"):
        send("GET", "file:///etc/passwd", timeout=5)
