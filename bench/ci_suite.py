"""The test suite's time, from the log of one run of the README's test command (``.ci/run``).

CI has 90 minutes and the project keeps the suite under 45 (issue 31): this turns a run's log into the
raw result a doc may quote — the wall time (the ``CI_RC=… WALL=…`` line the caller appends), pytest's own
time (summed over scripts/test.sh's two pytest runs, each run's too), the counts, and every test's time
pytest printed (``--durations``), grouped per module so the places worth trimming show.

    ip netns exec kci env HOME=/tmp/ci-home CI=true bash -c \\
        'start=$(date +%s); bash .ci/run; echo "CI_RC=$? WALL=$(( $(date +%s) - start ))"' > ci.log 2>&1
    python3 bench/ci_suite.py ci.log --commit "$(git -C /tmp/ci-clone rev-parse --short HEAD)"
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from raw_result import default_path

_DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)")
_SUMMARY = re.compile(r"=+ (.*?) in (\d+\.\d+)s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed|skipped|deselected)")
_WALL = re.compile(r"CI_RC=(\d+) WALL=(\d+)")


def parse(log: str) -> dict[str, Any]:
    """What one run's log says: counts, pytest's total, wall time, per-test and per-module seconds."""
    tests: dict[str, float] = defaultdict(float)
    phases: list[dict[str, Any]] = []
    for line in log.splitlines():
        if m := _DURATION.match(line):
            seconds, phase, test = float(m[1]), m[2], m[3]
            tests[test] += seconds
            phases.append({"seconds": seconds, "phase": phase, "test": test})
    # scripts/test.sh runs pytest twice (the tests without a lab on two cores, then the lab's): one summary
    # line each, summed. What one run deselects the other runs, so "deselected" is left out.
    summaries = list(_SUMMARY.finditer(log))
    counts: dict[str, int] = defaultdict(int)
    for summary in summaries:
        for n, k in _COUNT.findall(summary[1]):
            if k != "deselected":
                counts[k.rstrip("s") if k.startswith("error") else k] += int(n)
    wall = _WALL.search(log)
    modules: dict[str, float] = defaultdict(float)
    for test, seconds in tests.items():
        modules[test.split("::")[0]] += seconds
    return {
        "pytest_seconds": round(sum(float(m[2]) for m in summaries), 2) if summaries else None,
        "pytest_runs": [float(m[2]) for m in summaries],
        "wall_seconds": int(wall[2]) if wall else None,
        "exit_code": int(wall[1]) if wall else None,
        "counts": dict(counts),
        "modules": {m: round(s, 1) for m, s in sorted(modules.items(), key=lambda kv: -kv[1])},
        "slowest": sorted(phases, key=lambda p: -p["seconds"])[:60],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the run's output (stdout and stderr)")
    parser.add_argument("--commit", required=True, help="the commit the run tested")
    parser.add_argument("--machine", default="2 cores, nothing else running")
    parser.add_argument("--json", type=Path, default=None, help="default bench/results/ci-suite-<date>.json")
    args = parser.parse_args()
    result = {"what": "the README's test command (.ci/run, CI=true) on a clean clone, in its own network "
                      "namespace and HOME", "commit": args.commit, "machine": args.machine,
              **parse(args.log.read_text(errors="replace"))}
    path = args.json or default_path("ci-suite")
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{path}: {result['wall_seconds']} s wall, pytest {result['pytest_seconds']} s, {result['counts']}")


if __name__ == "__main__":
    main()
