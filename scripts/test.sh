#!/usr/bin/env bash
# The whole test suite, as CI runs it: install (idempotent), lint, type-check, then pytest.
# Lab tests start the real lab themselves (one per session) and stop it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
PYTHON=${PYTHON:-python3}
$PYTHON -m ruff check kafkaops tests bench
$PYTHON -m mypy
exec $PYTHON -m pytest "$@"
