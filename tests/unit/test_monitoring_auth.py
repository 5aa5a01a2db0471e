"""Prometheus and Alertmanager behind authentication (issue 43): ``monitoring.auth`` is validated at load,
every request carries it, and a refusal is exit 14 naming who kafkaops was — against Debian's real
Alertmanager started here behind its own ``--web.config.file`` basic auth."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
import requests

from kafkaops.errors import AuthError, ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.model import HttpAuth, Secret
from kafkaops.systems.alertmanager import Alertmanager
from kafkaops.systems.prometheus import Prometheus

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-of-the-test"


def _inventory(tmp_path: Path, auth: str) -> Path:
    text = (REPO / "inventory" / "lab.yaml").read_text()
    start = text.index("  auth:")
    end = text.index("  roll_alerts:")
    path = tmp_path / "lab.yaml"
    path.write_text(text[:start] + auth + text[end:])
    return path


@pytest.mark.parametrize(("auth", "expected"), [
    ("  auth: {username: k, password: hunter2}\n", r"monitoring\.auth\.password: a password is never written"),
    ("  auth: {username: k}\n", r"basic auth needs both username and password_file"),
    ("  auth: {bearer_token: abc}\n", r"bearer token is never written in an inventory"),
    ("  auth: {password_env: PW}\n", r"monitoring\.auth\.username: basic auth needs both"),
    ("  auth: {username: k, password_env: PW, bearer_token_env: T}\n", r"basic auth .* or a bearer token, not both"),
    ("  auth: {username: k, password_env: 'a b'}\n", r"'a b' is not an environment variable name"),
    ("  auth: {ca_file: rel.pem}\n", r"monitoring\.auth\.ca_file: expected an absolute path"),
    ("  auth: {mode: open}\n", r"monitoring\.auth\.mode: unknown key"),
])
def test_malformed_monitoring_auth_is_refused_at_load(tmp_path: Path, auth: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as refused:
        load_inventory(_inventory(tmp_path, auth))
    assert "hunter2" not in str(refused.value) and "abc" not in str(refused.value)


def test_the_lab_names_its_alertmanager_password_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", "/srv/labdir")
    monitoring = load_inventory(REPO / "inventory" / "lab.yaml").monitoring
    assert monitoring is not None and monitoring.auth == HttpAuth(
        username="kafkaops", password=Secret(file="/srv/labdir/secrets/alertmanager.password"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def secured_alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's Alertmanager behind basic auth (user kafkaops, :data:`PASSWORD`, bcrypt), as the lab runs it."""
    binary = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
    if not os.path.exists(binary):
        pytest.fail("prometheus-alertmanager not found: run scripts/install.sh", pytrace=False)
    d = tmp_path_factory.mktemp("alertmanager")
    (d / "alertmanager.yml").write_text('route: {receiver: "null"}\nreceivers: [{name: "null"}]\n')
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (d / "web.yml").write_text(json.dumps({"basic_auth_users": {"kafkaops": hashed}}))
    port = _free_port()
    log = (d / "alertmanager.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={d / 'alertmanager.yml'}", f"--storage.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             f"--web.config.file={d / 'web.yml'}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{url}/-/ready", timeout=1, auth=("kafkaops", PASSWORD)).status_code == 200:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"alertmanager did not start: {(d / 'alertmanager.log').read_text()[-2000:]}", pytrace=False)
        time.sleep(0.1)
    try:
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()


def _auth(tmp_path: Path, password: str) -> HttpAuth:
    f = tmp_path / "am.password"
    f.write_text(password + "\n")
    f.chmod(0o600)
    return HttpAuth(username="kafkaops", password=Secret(file=str(f)))


def test_the_right_password_reads_and_silences(secured_alertmanager: str, tmp_path: Path) -> None:
    am = Alertmanager(secured_alertmanager, timeout=5, auth=_auth(tmp_path, PASSWORD))
    assert am.alerts() == []
    assert isinstance(am.silences(), list)
    assert requests.get(f"{secured_alertmanager}/api/v2/alerts", timeout=5).status_code == 401  # it is closed


def test_a_wrong_password_is_exit_14_at_once_naming_the_user_never_the_password(secured_alertmanager: str,
                                                                                 tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(AuthError, match=r"Alertmanager http://127\.0\.0\.1:\d+ did not accept GET /api/v2/alerts "
                                        r"\(HTTP 401, with basic auth as kafkaops\)") as refused:
        Alertmanager(secured_alertmanager, timeout=5, auth=_auth(tmp_path, "wrong-one")).alerts()
    assert refused.value.exit_code == 14 and time.monotonic() - started < 5
    assert "wrong-one" not in str(refused.value) and PASSWORD not in str(refused.value)
    with pytest.raises(AuthError, match=r"with no credentials"):
        Alertmanager(secured_alertmanager, timeout=5).alerts()


def test_prometheus_gets_the_same_credentials(tmp_path: Path) -> None:
    """A bearer token from the environment reaches Prometheus' request; a 403 is a refusal (exit 14)."""
    import http.server
    import threading

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(403)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["KAFKAOPS_TEST_TOKEN"] = "tok-123"
    try:
        prom = Prometheus(f"http://127.0.0.1:{server.server_address[1]}", timeout=5,
                          auth=HttpAuth(token=Secret(env="KAFKAOPS_TEST_TOKEN")))
        with pytest.raises(AuthError, match=r"Prometheus .* forbids gate x \(HTTP 403, with a bearer token\)"):
            prom.query("up", what="gate x")
    finally:
        del os.environ["KAFKAOPS_TEST_TOKEN"]
        server.shutdown()
    assert seen == ["Bearer tok-123"]
