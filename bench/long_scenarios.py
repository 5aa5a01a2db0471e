"""The long lab scenarios: the tests marked ``long``, which the suite (``.ci/run``) leaves out.

CI must stay under 45 minutes (issue 31) on 2 cores, and a whole roll killed and resumed costs two to
four of them. Each long scenario keeps a short version in the suite (its plan, or the same gates on a
shorter path — the module says which); this runs the scenarios themselves, by hand, before a release or
after a change to what they cover, and keeps the raw result a doc may quote:

    python3 bench/long_scenarios.py                 # every long scenario, serially, on the real labs
    python3 bench/long_scenarios.py -k kraft        # some of them (pytest's -k)

It runs pytest on ``tests/lab`` with ``-m long`` (the labs start and stop as in the suite) and writes
``bench/results/long-scenarios-<date>.json``: per test its outcome and seconds, the counts, the wall time.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ci_suite import parse
from raw_result import REPO, default_path, header, now, write

#: pytest -rA's short summary: ``PASSED tests/lab/x.py::test_y`` (also FAILED, ERROR, SKIPPED).
_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (tests/\S+)")


def outcomes(log: str) -> dict[str, str]:
    """Each test's outcome, from pytest's ``-rA`` summary."""
    return {m[2]: m[1].lower() for line in log.splitlines() if (m := _OUTCOME.match(line))}


_SECTION = re.compile(r"^_+ (\S+) _+$")  # a long test name leaves one underscore each side


def printed(log: str) -> dict[str, list[str]]:
    """What each passed scenario printed (its figures: phase times, load reports), from the ``PASSES``
    section ``-rA`` adds: test name -> its captured stdout lines."""
    out: dict[str, list[str]] = {}
    if "= PASSES =" not in log:
        return out
    test, capturing = "", False
    for line in log.split("= PASSES =", 1)[1].splitlines():
        if line.startswith("=") and "short test summary" in line:
            break
        if m := _SECTION.match(line):
            test, capturing = m[1], False
        elif line.startswith("-") and "Captured stdout" in line:
            capturing = True
        elif line.startswith("-") and "Captured" in line:
            capturing = False
        elif capturing and test and line.strip():
            out.setdefault(test, []).append(line)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default=None, help="only the scenarios pytest's -k expression selects")
    parser.add_argument("--json", type=Path, default=None, help="default bench/results/long-scenarios-<date>.json")
    parser.add_argument("--log", type=Path, default=None, help="also keep pytest's whole output here")
    args = parser.parse_args()
    path = args.json or default_path("long-scenarios")
    result: dict[str, Any] = header("long-scenarios", vars(args), REPO / "inventory")
    argv = [sys.executable, "-m", "pytest", "tests/lab", "-m", "long", "-rA", "-p", "no:cacheprovider"]
    if args.k:
        argv += ["-k", args.k]
    result["pytest"] = argv[1:]
    write(path, result)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = proc.stdout
    sys.stdout.write(log)
    if args.log:
        args.log.write_text(log)
    result.update(finished=now(), complete=True, exit_code=proc.returncode,
                  wall_seconds=round(time.monotonic() - start), **summary(log))
    write(path, result)
    print(f"{path}: {result['counts']} in {result['wall_seconds']} s (exit {proc.returncode})")
    return proc.returncode


def summary(log: str) -> dict[str, Any]:
    """What a run's output says: counts, pytest's time, each scenario's outcome and printed figures, the
    time per module and the slowest phases."""
    parsed = parse(log)
    return {"pytest_seconds": parsed["pytest_seconds"], "counts": parsed["counts"], "outcomes": outcomes(log),
            "printed": printed(log), "modules": parsed["modules"], "slowest": parsed["slowest"]}


if __name__ == "__main__":
    sys.exit(main())
