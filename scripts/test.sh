#!/usr/bin/env bash
# The whole test suite, as CI runs it: install (idempotent), lint, type-check, then pytest.
# Lab tests start the real lab themselves (one per session) and stop it at the end.
#
# Without arguments, pytest runs twice: the tests without a lab on both cores (pytest-xdist, -n 2: they
# are CPU-bound and independent), then the lab tests one at a time (they share one lab, and a 2-core lab
# under a second test's load is a different lab). Both always run; the exit code is the first failure's.
# With arguments, one pytest gets them as they are (`scripts/test.sh tests/unit -k plan`).
# Tests marked `long` are not in the suite: bench/long_scenarios.py runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
PYTHON=${PYTHON:-python3}
$PYTHON -m ruff check kafkaops lab tests bench
$PYTHON -m mypy
if [ $# -gt 0 ]; then
  exec $PYTHON -m pytest "$@"
fi
rc=0
$PYTHON -m pytest -m "not lab and not long" -n 2 || rc=$?
$PYTHON -m pytest -m "lab and not long" || { r=$?; [ "$rc" -ne 0 ] || rc=$r; }
exit "$rc"
