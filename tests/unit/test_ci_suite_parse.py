"""The suite's time as bench/ci_suite.py reads it from a run's log (issue 31): per test, per module, totals."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from ci_suite import parse  # noqa: E402 - bench/ is not a package

LOG = """\
tests/lab/test_a.py ..F                                                  [ 50%]
============================= slowest durations ==============================
303.77s call     tests/lab/test_kraft_on_lab.py::test_roll[all]
41.20s setup    tests/lab/test_kraft_on_lab.py::test_roll[all]
20.00s call     tests/lab/test_kraft_on_lab.py::test_status
12.50s teardown tests/lab/test_alerts_on_lab.py::test_silence

(1200 durations < 2s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
FAILED tests/lab/test_a.py::test_x - AssertionError
====== 1 failed, 1499 passed, 1 xfailed, 2 errors in 3292.20s (0:54:52) ======
CI_RC=1 WALL=3336
"""


def test_a_runs_log_gives_its_totals_and_its_time_per_module() -> None:
    got = parse(LOG)
    assert got["pytest_seconds"] == 3292.20 and got["wall_seconds"] == 3336 and got["exit_code"] == 1
    assert got["counts"] == {"failed": 1, "passed": 1499, "xfailed": 1, "error": 2}
    assert got["modules"] == {"tests/lab/test_kraft_on_lab.py": 365.0, "tests/lab/test_alerts_on_lab.py": 12.5}
    assert [p["seconds"] for p in got["slowest"]] == [303.77, 41.2, 20.0, 12.5]
    assert got["slowest"][1] == {"seconds": 41.2, "phase": "setup",
                                 "test": "tests/lab/test_kraft_on_lab.py::test_roll[all]"}


def test_the_two_runs_of_the_test_script_are_summed_without_what_each_deselects() -> None:
    log = ("====== 1416 passed, 121 deselected in 100.15s (0:01:40) ======\n"
           "0.50s call     tests/unit/test_x.py::test_y\n"
           "====== 1 failed, 113 passed, 1421 deselected in 2400.00s (0:40:00) ======\nCI_RC=1 WALL=2600\n")
    got = parse(log)
    assert got["pytest_seconds"] == 2500.15 and got["pytest_runs"] == [100.15, 2400.0]
    assert got["counts"] == {"passed": 1529, "failed": 1}


def test_a_log_without_a_summary_says_so() -> None:
    got = parse("collected 3 items\n")
    assert got["pytest_seconds"] is None and got["wall_seconds"] is None and got["counts"] == {}
