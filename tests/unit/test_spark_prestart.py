"""The post-check's Spark session starts in the background when a maintenance begins (issue 14, point 1):
the scan at the end only scans, a start that fails is said at once, and the run's own output is never
swallowed while the JVM starts."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from kafkaops.health import spark_job

WARMED: list[object] = []


@pytest.fixture(autouse=True)
def _no_leftovers(monkeypatch: pytest.MonkeyPatch) -> Any:
    spark_job._WARMING.clear()
    WARMED.clear()
    monkeypatch.setattr(spark_job, "_warm_up", WARMED.append)  # the fake sessions here run no jobs
    yield
    spark_job._WARMING.clear()


def test_the_prestarted_session_is_the_one_the_scan_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    release = threading.Event()

    def fake(master: str, *, conf: Any, app_name: str) -> object:
        started.append(master)
        release.wait(5)
        return ("session", master)

    monkeypatch.setattr(spark_job, "_new_session", fake)
    assert spark_job.prestart("local[2]") is True
    assert spark_job.prestart("local[2]") is False  # one start per master, however many hosts ask
    release.set()
    assert spark_job.spark_session("local[2]") == ("session", "local[2]")
    assert started == ["local[2]"]
    assert WARMED == [("session", "local[2]")]  # its first job already ran, in the background
    # consumed: the next scan (another run in the same process) starts its own
    assert spark_job.spark_session("local[2]") == ("session", "local[2]") and started == ["local[2]"] * 2


def test_other_settings_get_their_own_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_job, "_new_session", lambda master, *, conf, app_name: (master, dict(conf or {})))
    spark_job.prestart("local[2]")
    assert spark_job.spark_session("local[2]", conf={"spark.executor.instances": "4"}) == \
        ("local[2]", {"spark.executor.instances": "4"})
    assert spark_job.spark_session("local[2]") == ("local[2]", {})


def test_a_start_that_fails_is_said_at_once_and_raised_by_the_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(master: str, *, conf: Any, app_name: str) -> object:
        raise RuntimeError("Java gateway process exited before sending its port number\nmore")

    said: list[str] = []
    heard = threading.Event()
    monkeypatch.setattr(spark_job, "_new_session", broken)
    spark_job.prestart("local[2]", on_error=lambda line: (said.append(line), heard.set()))
    assert heard.wait(5)
    assert said == ["Spark did not start on local[2]: Java gateway process exited before sending its port number"]
    with pytest.raises(RuntimeError, match="Java gateway"):
        spark_job.spark_session("local[2]")


def test_a_warm_up_that_fails_is_said_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_workers(session: object) -> None:
        raise RuntimeError("Python worker failed to connect back")

    said: list[str] = []
    heard = threading.Event()
    monkeypatch.setattr(spark_job, "_new_session", lambda master, *, conf, app_name: "session")
    monkeypatch.setattr(spark_job, "_warm_up", no_workers)
    spark_job.prestart("local[2]", on_error=lambda line: (said.append(line), heard.set()))
    assert heard.wait(5)
    assert said == ["Spark did not start on local[2]: Python worker failed to connect back"]


@pytest.mark.slow
def test_a_real_background_start_leaves_the_runs_output_alone() -> None:
    """Before, the JVM's stderr was silenced by pointing *our* fd 2 at a log file while it started: done on
    a background thread that would swallow the run's progress lines for those seconds."""
    script = """
import sys, time
from kafkaops.health import spark_job
spark_job.prestart("local[1]", on_error=lambda m: print(m, file=sys.stderr))
for i in range(6):
    time.sleep(0.5)
    print(f"progress {i}", file=sys.stderr, flush=True)
spark = spark_job.spark_session("local[1]")
print("count", spark.range(7).count(), flush=True)
spark.stop()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line for line in done.stderr.splitlines() if line.startswith("progress")] == \
        [f"progress {i}" for i in range(6)], done.stderr[-2000:]
    assert "count 7" in done.stdout
    assert "WARN" not in done.stderr and "INFO" not in done.stderr, done.stderr[-2000:]  # JVM chatter in its log
