"""A hung test fails instead of hanging CI (issue 28, item 10): pytest-timeout, as pyproject.toml sets it.

The proof runs pytest in a subprocess, on a tiny test file beside a copy of this project's pytest
settings: a sleeping test fails with pytest-timeout's message, its fixture still tears down (the signal
method: a lab test's lab is stopped), and the session goes on to the next test. A second check collects
real lab and unit tests and reads the timeout each gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SLEEPER = '''
import time
from pathlib import Path

import pytest


@pytest.fixture
def cleaned(tmp_path_factory):
    yield
    Path(__file__).with_name("teardown.txt").write_text("torn down")


@pytest.mark.timeout(2)
def test_hangs(cleaned):
    time.sleep(600)


def test_after():
    assert True
'''


def _settings() -> dict[str, object]:
    return dict(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"])


def test_a_sleeping_test_fails_on_its_timeout_and_still_tears_down(tmp_path: Path) -> None:
    settings = _settings()
    assert settings["timeout"] == 60 and settings["timeout_method"] == "signal"
    lines = ["[tool.pytest.ini_options]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items()
                                            if k != "testpaths")]
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n")
    marker = tmp_path / "teardown.txt"
    (tmp_path / "test_sleeper.py").write_text(SLEEPER)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sleeper.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "Failed: Timeout" in out and ">2.0s" in out, out
    assert "1 failed, 1 passed" in out, out
    assert marker.read_text() == "torn down", out


RECORDER = '''
import json, sys
import pytest


class Recorder:
    def pytest_collection_finish(self, session):
        print("TIMEOUTS=" + json.dumps({item.nodeid: (item.get_closest_marker("timeout").args[0]
                                        if item.get_closest_marker("timeout") else None)
                                        for item in session.items}))


sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[Recorder()]))
'''


def test_lab_tests_get_900_seconds_slow_ones_300_and_unit_tests_the_default() -> None:
    slow = "tests/unit/test_spark_prestart.py::test_a_real_background_start_leaves_the_runs_output_alone"
    result = subprocess.run([sys.executable, "-c", RECORDER, "tests/lab/test_audit_relay_on_lab.py", slow,
                             "tests/unit/test_templates.py::test_revisions"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    line = next((x for x in result.stdout.splitlines() if x.startswith("TIMEOUTS=")), None)
    assert line is not None, result.stdout + result.stderr
    timeouts = json.loads(line.removeprefix("TIMEOUTS="))
    lab = [t for node, t in timeouts.items() if node.startswith("tests/lab/")]
    unit = [t for node, t in timeouts.items() if node.startswith("tests/unit/test_templates.py")]
    assert lab and set(lab) == {900}, timeouts
    assert timeouts[slow] == 300, timeouts
    assert unit and set(unit) == {None}, timeouts  # the ini's 60 s applies
