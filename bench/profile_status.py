"""Where `kafkaops status CLUSTER -o json` spends its time: a timing trace of each phase and each question.

Run by hand with a lab up:  python bench/profile_status.py [--runs N] [--inventory bench/lab-bench.yaml]

Each run is a fresh process (the command as an operator runs it: imports included) that runs the CLI's
``main()`` with every phase and question wrapped in a recorder — start and end on one clock, and the
thread that asked — so the result says what each costs *and whether it overlapped the others* (a
question asked on the main thread after another one finished is serial). ``cProfile`` alone cannot say
that: it sees the main thread only, and the questions are asked on worker threads. The interpreter's own
start-up is the gap between the spawn and the child's first line.

Phases: ``interpreter`` (python and its site hooks), ``import cli`` (typer, rich, the root command),
``import status`` (the command's module and what it imports at its top), ``inventory`` (finding and
loading the cluster), each question of :func:`kafkaops.health.status.collect` (``kafka client``,
``kafka metadata``, ``kafka configs``, ``pools``, ``alerts``, ``quorum``, ``migration``) and ``render``
(the JSON written). The raw trace of every run goes to ``bench/results/status-profile-DATE.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package

REPO = Path(__file__).resolve().parents[1]

#: The child: the CLI in-process, each phase and question recorded (wrapped by name where it exists:
#: the same script profiles the code before and after a change).
_CHILD = r"""
import json, sys, threading, time
T0_WALL, T0 = time.time(), time.perf_counter()
events = []

def record(name, start, end):
    events.append({"name": name, "start": start - T0, "end": end - T0, "thread": threading.current_thread().name})

def wrap(owner, attr, name):
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    is_class = isinstance(owner, type)
    raw = owner.__dict__.get(attr) if is_class else fn
    if isinstance(raw, classmethod):
        inner = raw.__func__
        def wrapped_cm(cls, *a, **k):
            s = time.perf_counter()
            try:
                return inner(cls, *a, **k)
            finally:
                record(name, s, time.perf_counter())
        setattr(owner, attr, classmethod(wrapped_cm))
        return
    def wrapped(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            record(name, s, time.perf_counter())
    setattr(owner, attr, wrapped)

s = time.perf_counter()
import kafkaops.cli.main as cli_main
record("import cli", s, time.perf_counter())
s = time.perf_counter()
import kafkaops.health.status as status_mod
import kafkaops.cli.status as cli_status
record("import status", s, time.perf_counter())
import kafkaops.lookup as lookup
import kafkaops.cli.common as common
from kafkaops.systems.kafka import KafkaAdmin

wrap(lookup, "find_cluster", "inventory")
wrap(KafkaAdmin, "look", "kafka client")
wrap(KafkaAdmin, "metadata", "kafka metadata")
wrap(KafkaAdmin, "topic_configs", "kafka configs")
for attr, name in (("_pool_states", "pools"), ("alerts_state", "alerts"), ("quorum_state", "quorum"),
                   ("migration_state", "migration"), ("collect", "collect")):
    wrap(status_mod, attr, name)
wrap(common, "print_json", "render")
wrap(cli_status, "print_json", "render")
sys.argv = ["kafkaops", *sys.argv[1:]]
code = 0
try:
    cli_main.main()
except SystemExit as exc:
    code = exc.code or 0
end = time.perf_counter() - T0
json.dump({"t0_wall": T0_WALL, "events": events, "end": end, "exit": code}, sys.stderr)
"""


def _one(argv: list[str]) -> dict[str, Any]:
    spawned = time.time()
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    trace = json.loads(proc.stderr.strip().splitlines()[-1])
    return {"wall": wall, "interpreter": trace["t0_wall"] - spawned, "exit": trace["exit"],
            "events": trace["events"], "child_end": trace["end"], "stdout_bytes": len(proc.stdout)}


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["start"] < b["end"] and b["start"] < a["end"])


#: The independent questions of one status: whether each overlapped another says whether they are serial.
QUESTIONS = ("kafka metadata", "kafka configs", "pools", "alerts", "quorum", "migration")


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median duration of each phase/question over the runs, its median start, its thread, and which other
    questions it overlapped in every run (empty: it was asked alone, one after another)."""
    names: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for e in run["events"]:
            names.setdefault(e["name"], []).append(e)
    out: dict[str, Any] = {
        "interpreter": {"median_s": round(statistics.median(r["interpreter"] for r in runs), 4)},
        "wall": {"median_s": round(statistics.median(r["wall"] for r in runs), 4)},
    }
    for name, evs in names.items():
        overlapped = set()
        for other in QUESTIONS:
            if other == name or name not in QUESTIONS:
                continue
            if all(any(_overlaps(e, o) for o in r["events"] if o["name"] == other)
                   for r in runs for e in r["events"] if e["name"] == name):
                overlapped.add(other)
        out[name] = {"median_s": round(statistics.median(e["end"] - e["start"] for e in evs), 4),
                     "median_start_s": round(statistics.median(e["start"] for e in evs), 4),
                     "threads": sorted({"main" if e["thread"] == "MainThread" else "worker" for e in evs}),
                     **({"overlaps_in_every_run": sorted(overlapped)} if name in QUESTIONS else {})}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--inventory", type=Path, default=REPO / "bench" / "lab-bench.yaml")
    parser.add_argument("--cluster", default=None, help="the inventory's cluster (default: its only one)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from kafkaops.inventory import load_inventory

    cluster = args.cluster or load_inventory(args.inventory).name
    path = args.out or raw_result.default_path("status-profile")
    result = raw_result.header("status-profile", vars(args), args.inventory)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "kafkaops")], check=True,
                   stdout=subprocess.DEVNULL)
    argv = ["-i", str(args.inventory), "status", cluster, "-o", "json"]
    runs = [_one(argv) for _ in range(args.runs)]
    result.update({"cluster": cluster, "argv": argv, "runs": runs, "summary": summarize(runs),
                   "complete": True, "finished": raw_result.now(), "pythonpath": os.environ.get("PYTHONPATH", "")})
    raw_result.write(path, result)
    for name, row in result["summary"].items():
        extra = f"  start {row['median_start_s']:.3f}  {','.join(row['threads'])}" if "threads" in row else ""
        if "overlaps_in_every_run" in row:
            extra += f"  overlaps: {', '.join(row['overlaps_in_every_run']) or 'none (serial)'}"
        print(f"{name:<16} {row['median_s']:7.3f}{extra}")
    print(f"(runs={args.runs}, exits={sorted({r['exit'] for r in runs})}) -> {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
