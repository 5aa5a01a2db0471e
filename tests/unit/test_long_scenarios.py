"""bench/long_scenarios.py (issue 31): the long lab scenarios are the tests marked ``long``, out of the suite
CI runs, each outcome read back from pytest's own summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from long_scenarios import outcomes, printed  # noqa: E402 - bench/ is not a package


def test_each_scenarios_outcome_is_read_from_pytests_summary() -> None:
    log = ("=========================== short test summary info ============================\n"
           "PASSED tests/lab/test_kraft_on_lab.py::test_role_all_rolls\n"
           "FAILED tests/lab/test_network_faults_on_lab.py::test_cut[peers] - AssertionError: held\n"
           "ERROR tests/lab/test_placement_on_lab.py::test_apply - TimeoutError\n"
           "tests/lab/test_other.py::test_not_a_summary_line PASSED\n")
    assert outcomes(log) == {"tests/lab/test_kraft_on_lab.py::test_role_all_rolls": "passed",
                             "tests/lab/test_network_faults_on_lab.py::test_cut[peers]": "failed",
                             "tests/lab/test_placement_on_lab.py::test_apply": "error"}


def test_the_figures_a_scenario_printed_are_kept_per_test() -> None:
    log = ("==================================== PASSES ====================================\n"
           "_________________ test_kafkas_documented_migration_walks_through_under_load _________________\n"
           "----------------------------- Captured stdout call -----------------------------\n"
           "phases: provision controllers 15s, brokers into KRaft mode 30s\n"
           "------------------------------ Captured log call -------------------------------\n"
           "INFO     kazoo.client:client.py:565 Zookeeper connection established\n"
           "=========================== short test summary info ============================\n"
           "PASSED tests/lab/test_migration_lab.py::test_kafkas_documented_migration_walks_through_under_load\n")
    assert printed(log) == {"test_kafkas_documented_migration_walks_through_under_load": [
        "phases: provision controllers 15s, brokers into KRaft mode 30s"]}
    assert printed("no passes section\n") == {}


def test_a_test_name_as_wide_as_the_terminal_is_still_a_section() -> None:
    # pytest leaves one underscore each side of a long name (seen in long-scenarios-2026-11-27-2.json's run)
    log = ("==================================== PASSES ====================================\n"
           "_ test_abort_rollback_of_a_migration_returns_the_cluster_to_zookeeper_mode_under_load _\n"
           "----------------------------- Captured stdout call -----------------------------\n"
           "abort --rollback (Kafka's revert, 3 stages): 191s\n"
           "=========================== short test summary info ============================\n")
    assert printed(log) == {"test_abort_rollback_of_a_migration_returns_the_cluster_to_zookeeper_mode_under_load": [
        "abort --rollback (Kafka's revert, 3 stages): 191s"]}


def _collected(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=120).stdout
    return {line.strip() for line in out.splitlines() if line.startswith("tests/")}


def test_the_suite_leaves_the_long_scenarios_out_and_each_has_a_short_version_beside_it() -> None:
    long = _collected("tests/lab", "-m", "long")
    suite = _collected("tests/lab")
    assert long, "no test is marked long"
    assert not long & suite, long & suite
    # A short version in the suite: each long scenario's module keeps tests the suite runs.
    assert {t.split("::")[0] for t in long} <= {t.split("::")[0] for t in suite}
