"""An operator's first connect (issue 45): a spinner while the command waits (on a terminal, after a second),
connection failures said plainly — the name that does not resolve, the port that refuses — never a raw
``KafkaError{...}``, and ``-v`` showing what kafkaops and its client libraries log, redacted."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from kafkaops.cli import common
from kafkaops.errors import UnreachableError
from kafkaops.model import KafkaEndpoint
from kafkaops.systems.kafka import KafkaAdmin


def _terminal(monkeypatch: pytest.MonkeyPatch, *, is_terminal: bool) -> io.StringIO:
    out = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=out, force_terminal=is_terminal, width=100))
    monkeypatch.setattr(common, "SPINNER_AFTER", 0.1)
    return out


def test_a_wait_longer_than_the_threshold_shows_what_it_waits_for(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _terminal(monkeypatch, is_terminal=True)
    with common.waiting("asking Kafka at k1:9092"):
        time.sleep(0.8)
    assert "asking Kafka at k1:9092" in out.getvalue()


def test_a_quick_answer_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _terminal(monkeypatch, is_terminal=True)
    with common.waiting("asking Kafka at k1:9092"):
        pass
    time.sleep(0.3)  # past the threshold: a cancelled spinner never appears late
    assert out.getvalue() == ""


def test_no_spinner_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _terminal(monkeypatch, is_terminal=False)
    with common.waiting("asking Kafka at k1:9092"):
        time.sleep(0.5)
    assert out.getvalue() == ""


def _admin(bootstrap: str) -> KafkaAdmin:
    return KafkaAdmin(KafkaEndpoint(bootstrap_servers=bootstrap, cluster="c1"), timeout=1.0, attempts=2)


def test_a_name_that_does_not_resolve_is_said_at_once() -> None:
    with pytest.raises(UnreachableError) as caught:
        _admin("nosuchhost.invalid:9092").metadata()
    message = str(caught.value)
    assert "cannot resolve nosuchhost.invalid" in message and "KafkaError" not in message, message
    assert caught.value.final


def test_a_refused_port_is_said_plainly_per_bootstrap_address() -> None:
    with pytest.raises(UnreachableError) as caught:
        _admin("127.0.0.1:1").metadata(attempts=1)
    message = str(caught.value)
    assert "127.0.0.1:1: Connection refused" in message, message
    assert "KafkaError" not in message and "_TRANSPORT" not in message
    assert not caught.value.final  # a refused port may be a broker restarting: a run retries it


def _kafkaops(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=Path(__file__).parent, stdin=subprocess.DEVNULL)


def test_the_cli_says_a_dns_failure_in_one_line() -> None:
    result = _kafkaops("inventory", "init", "c1", "--bootstrap", "nosuchhost.invalid:9092")
    assert result.returncode == UnreachableError.exit_code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot resolve nosuchhost.invalid" in lines[0], result.stderr
    assert "KafkaError" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("verbose", [True, False])
def test_verbose_shows_the_libraries_log_redacted(verbose: bool) -> None:
    """A record a client library logs while the command runs (here at exit, once the command is done) is on
    stderr under ``-v``, with its secret hidden; without ``-v`` it is nowhere."""
    code = ("import atexit, logging, sys\nfrom kafkaops.cli import main as m\n"
            "atexit.register(lambda: logging.getLogger('paramiko.transport').debug('auth password=hunter2 ok'))\n"
            f"sys.argv = ['kafkaops', *{['-v'] if verbose else []!r}, 'docs']\nm.main()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stderr
    assert ("paramiko.transport DEBUG auth password=*** ok" in result.stderr) is verbose, result.stderr
