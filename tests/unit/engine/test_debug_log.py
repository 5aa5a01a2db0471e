"""Every run keeps a debug log beside its journal: what kafkaops and its client libraries said, redacted."""

from __future__ import annotations

import logging
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine_fakes import FIXTURES, World

from kafkaops.engine import debug_log
from kafkaops.engine.binding import bind_runbook
from kafkaops.engine.runbook import load_runbook
from kafkaops.engine.runner import Runner


class _TalkativeCounter(Counter[str]):
    """The fake world's apply counter, logging as client libraries do while a step changes something."""

    def __setitem__(self, key: str, value: int) -> None:
        logging.getLogger("kazoo.client").info("session established for %s, digest password=hunter2", key)
        logging.getLogger("paramiko.transport").debug("kex done for %s", key)
        logging.getLogger("urllib3.connectionpool").debug("GET https://am:s3cret@alertmanager/-/ready 200")
        super().__setitem__(key, value)


def test_a_run_keeps_its_client_libraries_log_beside_its_journal(make_runner: Callable[..., Runner], world: World,
                                                                 home: Path) -> None:
    world.applies = _TalkativeCounter()
    rb = bind_runbook(load_runbook(FIXTURES / "good" / "simple.yaml"), cluster="c1")
    res = make_runner().start(rb, env=world, operator="alice@admin1", reason="test")
    assert res.status == "finished"
    log = res.journal.parent / debug_log.FILENAME
    text = log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "kazoo.client INFO session established for set:b, digest password=***" in text, text
    assert "paramiko.transport DEBUG kex done for inc:n" in text
    assert "https://am:***@alertmanager/-/ready" in text
    assert "hunter2" not in text and "s3cret" not in text
    logging.getLogger("paramiko.transport").debug("after the run")  # the run no longer drives: not its log
    assert "after the run" not in log.read_text()


def test_redact_hides_every_secret_shape() -> None:
    cases: dict[str, str] = {
        "sasl.password=abc123 next": "sasl.password=*** next",
        "password: 'x y' next": "password: '***' next",
        '{"password": "pw1", "user": "u"}': '{"password": "***", "user": "u"}',
        "Authorization: Basic dXNlcjpwYXNz": "Authorization: Basic ***",
        "authorization=Bearer abc.def": "authorization=Bearer ***",
        "http://user:pass@host:2379/v3": "http://user:***@host:2379/v3",
        "token=t0k&x=1": "token=***&x=1",
        "nothing secret here: 127.0.0.1:9092": "nothing secret here: 127.0.0.1:9092",
    }
    for raw, want in cases.items():
        assert debug_log.redact(raw) == want, raw


def _lines(path: Path) -> list[Any]:
    return path.read_text().splitlines()


def test_each_process_appends(tmp_path: Path) -> None:
    for n in range(2):
        with debug_log.recorded(tmp_path):
            logging.getLogger("kafkaops.test").info("process %d", n)
    assert [line.split(" ", 1)[1] for line in _lines(tmp_path / debug_log.FILENAME)] == [
        "kafkaops.test INFO process 0", "kafkaops.test INFO process 1"]
