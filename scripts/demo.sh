#!/usr/bin/env bash
# The main job on the embedded default (the local lab): install everything, bring the lab up, show
# its health, run a load check, and take the lab down again (also on failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
PYTHON=${PYTHON:-python3}
kafkaops() { $PYTHON -m kafkaops.cli.main "$@"; }
started=0
cleanup() { if [ "$started" = 1 ] && [ -z "${KAFKAOPS_KEEP_LAB:-}" ]; then kafkaops lab down; fi; }
trap cleanup EXIT
step() { printf '\n\033[1;34m== %s\033[0m\n' "$*"; }

step "kafkaops lab up"
if kafkaops lab status -o json >/dev/null 2>&1; then echo "(a lab is already up: using it)"; else kafkaops lab up; started=1; fi
step "kafkaops lab status"
kafkaops lab status
step "kafkaops lab load --seconds 5"
kafkaops lab load --seconds 5
