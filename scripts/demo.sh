#!/usr/bin/env bash
# The main job on the embedded default, the local lab: install everything, bring the lab up, show the
# cluster, show the reviewable plan for rebooting kafka1001, reboot it for real under load, and end with
# the Spark post-check's report against the baseline the run took before it changed anything. The lab is taken down at the end (also on failure or Ctrl-C) unless KAFKAOPS_KEEP_LAB=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
PYTHON=${PYTHON:-python3}
kafkaops() { $PYTHON -m kafkaops.cli.main "$@"; }
export KAFKAOPS_HOME=${KAFKAOPS_HOME:-$HOME/.local/state/kafkaops}
# The demo acts on the lab: it names the lab's inventory (kafkaops itself never falls back to it).
export KAFKAOPS_INVENTORY=${KAFKAOPS_INVENTORY:-$PWD/inventory/lab.yaml}
mkdir -p "$KAFKAOPS_HOME"
started=0 load_pid=""
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  if [ "$started" = 1 ] && [ -z "${KAFKAOPS_KEEP_LAB:-}" ]; then kafkaops lab --lab lab down; fi
}
trap cleanup EXIT
step() { printf '\n\033[1;34m== %s\033[0m\n' "$*"; }

step "kafkaops lab up"
if kafkaops lab --lab lab status -o json >/dev/null 2>&1; then echo "(a healthy lab is already up: using it)"; else kafkaops lab up; started=1; fi
step "kafkaops status lab"
kafkaops status lab
step "kafkaops reboot kafka1001 --dry-run -o markdown   (the plan a change review gets)"
kafkaops reboot kafka1001 --dry-run -o markdown
step "kafkaops reboot kafka1001 --yes   (for real, while the load generator produces and reads back)"
kafkaops lab load --seconds 75 --rate 100 -o json > "$KAFKAOPS_HOME/demo-load.json" &
load_pid=$!
sleep 3
kafkaops reboot kafka1001 --yes --reason "kafkaops demo: rehearse a broker reboot on the lab" --syn-window 5s
run=$(ls -t "$KAFKAOPS_HOME/runs" | head -1)
step "load generator report (every acknowledged message must be read back exactly once)"
wait "$load_pid"; load_pid=""
cat "$KAFKAOPS_HOME/demo-load.json"
step "kafkaops status lab"
kafkaops status lab
step "post-check report: kafkaops check lab --baseline <run>/baseline.json   (Spark scan of the data)"
kafkaops check lab --baseline "$KAFKAOPS_HOME/runs/$run/baseline.json" --chart "$KAFKAOPS_HOME/demo-post-check.png"
step "kafkaops runs show $run --chart ...   (the run as a report, and its timeline)"
kafkaops runs show "$run" --chart "$KAFKAOPS_HOME/demo-timeline.png"
echo "charts: $KAFKAOPS_HOME/demo-post-check.png $KAFKAOPS_HOME/demo-timeline.png   journal: $KAFKAOPS_HOME/runs/$run/journal.jsonl"
