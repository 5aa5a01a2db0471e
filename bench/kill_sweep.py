"""Kill sweep: SIGKILL kafkaops at journal boundaries of a roll, resume, and check nothing happened twice.

A reference roll (`rolling-reboot lab`, not killed) gives the journal's shape. Kill points are chosen
from its records so that every step kind is hit at its intent (``step_applying``), after its effect
(``step_applied``/``step_verified``) and inside its waits (a second after the intent), plus the
reboot's own events. For each point: a healthy, pooled lab under load; the roll; SIGKILL of the whole
process group once the journal reaches the point; ``kafkaops resume``; then the invariants:

- resume exits 0, every host pooled, no URP, every partition led by its preferred replica;
- every acked message read back exactly once (the load generator's own read-back);
- no side effect happened twice, counted from the lab's own logs: per host exactly one broker stop,
  one reboot command and one boot (``hosts/<h>/events.jsonl``), at most one host depooled at a time.

Run by hand (the lab is started if it is down):  python bench/kill_sweep.py [--points 20] [--json out.json].
Each point takes a roll (one to two minutes here). The CI runs a short version
(tests/lab/test_kill_sweep.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FAST = ["--syn-window", "2s", "--stable-for", "2s", "--no-scan"]


@dataclass
class Point:
    """Kill once the journal holds ``after`` records (+ ``delay`` seconds: inside a wait)."""

    after: int
    label: str
    delay: float = 0.0


@dataclass
class Outcome:
    point: Point
    killed_at: str = ""
    resume_rc: int | None = None
    seconds: float = 0.0
    lost: int = -1
    duplicated: int = -1
    produce_errors: int = -1
    max_depooled: int = 0
    stops: dict[str, int] = field(default_factory=dict)
    reboots: dict[str, int] = field(default_factory=dict)
    boots: dict[str, int] = field(default_factory=dict)
    healthy: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _journal(home: Path) -> list[dict[str, Any]]:
    runs = sorted((home / "runs").glob("*/journal.jsonl")) if (home / "runs").exists() else []
    out = []
    for line in runs[0].read_text().splitlines() if runs else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def _kafkaops(home: Path, *args: str, log: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "KAFKAOPS_HOME": str(home)}
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - a file, never an unread pipe
    return subprocess.Popen([sys.executable, "-m", "kafkaops.cli.main", *args], stdout=out,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def choose_points(records: list[dict[str, Any]], n: int) -> list[Point]:
    """Up to ``n`` kill points covering every step kind: its intent, its effect, inside its waits."""
    candidates: list[Point] = []
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(records, start=1):
        kind = r.get("kind", "")
        if r["type"] == "event":
            candidates.append(Point(i, f"after event {r['event']} ({r['target']})"))
        elif r["type"] in ("step_applying", "step_applied", "step_verified") and (r["type"], kind) not in seen:
            seen.add((r["type"], kind))
            candidates.append(Point(i, f"after {r['type']} {kind} ({r['target']})"))
            if r["type"] == "step_applying" and ("wait" in kind or kind in ("host.reboot", "kafka.stop_broker")):
                candidates.append(Point(i, f"inside {kind} ({r['target']})", delay=1.0))
    if len(candidates) <= n:
        return candidates
    step = len(candidates) / n
    return [candidates[int(k * step)] for k in range(n)]


def _counts(hosts: list[Any], event: str, since: dict[str, int]) -> dict[str, int]:
    return {h.name: len(h.events(event)) - since.get(f"{h.name}/{event}", 0) for h in hosts}


def run_point(cluster: Any, point: Point, workdir: Path) -> Outcome:
    from kafkaops.cli.status import collect
    from kafkaops.lab.host import LabHost
    from kafkaops.lab.load import run_load
    from kafkaops.systems.conftool import read_pools

    home = workdir / f"home-{point.after}-{int(point.delay * 10)}"
    hosts = [LabHost.named(h.name) for h in cluster.hosts]
    before = {f"{h.host.name}/{e}": len(h.events(e)) for h in hosts for e in ("kafka-stop", "reboot-command", "boot")}
    out = Outcome(point)
    stop = threading.Event()
    report: dict[str, Any] = {}
    load = threading.Thread(target=lambda: report.update(r=run_load(cluster, 3600, rate=100, http_rate=8,
                                                                    stop=stop)), daemon=True)
    depooled = [0]

    def watch_pools() -> None:
        tags = cluster.hosts[0].conftool_tags
        while not stop.is_set():
            states = read_pools(cluster.conftool_config, tags)
            depooled[0] = max(depooled[0], sum(1 for s in states if not s.is_pooled))
            time.sleep(0.2)

    pools = threading.Thread(target=watch_pools, daemon=True)
    load.start()
    pools.start()
    time.sleep(2)
    started = time.monotonic()
    proc = _kafkaops(home, "rolling-reboot", cluster.name, "--yes", "--reason", f"kill sweep {point.label}",
                     *FAST, log=workdir / "roll.log")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        records = _journal(home)
        if len(records) >= point.after:
            time.sleep(point.delay)
            os.killpg(proc.pid, signal.SIGKILL)
            out.killed_at = f"{records[point.after - 1]['type']} {records[point.after - 1].get('kind', '')}"
            break
        time.sleep(0.02)
    proc.wait(60)
    runs = sorted((home / "runs").iterdir()) if (home / "runs").exists() else []
    if not out.killed_at or not runs:
        out.problems.append("the roll ended before the kill point")
    else:
        resume = _kafkaops(home, "resume", runs[0].name, log=workdir / "resume.log")
        out.resume_rc = resume.wait(1200)
        if out.resume_rc != 0:
            said = (workdir / "resume.log").read_text()
            error = next((line for line in said.splitlines() if line.startswith("error:")), said[-300:])
            out.problems.append(f"resume exited {out.resume_rc}: {error[:600]}")
            # Leave the lab whole for the next point (as an operator would): a failed point must not
            # fail every later one on its lock.
            _kafkaops(home, "runs", "abort", runs[0].name, "--rollback", "--reason", "kill sweep clean-up",
                      log=workdir / "abort.log").wait(900)
            (workdir / f"failed-{point.after}-{int(point.delay * 10)}.log").write_text(said)
    out.seconds = round(time.monotonic() - started, 1)
    stop.set()
    load.join(600)
    pools.join(10)
    r = report.get("r")
    if r is not None:
        out.lost, out.duplicated, out.produce_errors = r.lost, r.duplicated, r.produce_errors
        if r.lost or r.duplicated:
            out.problems.append(f"{r.lost} lost, {r.duplicated} duplicated")
    out.max_depooled = depooled[0]
    if out.max_depooled > 1:
        out.problems.append(f"{out.max_depooled} hosts depooled at once")
    labhosts = hosts
    out.stops = {h.host.name: len(h.events("kafka-stop")) - before[f"{h.host.name}/kafka-stop"] for h in labhosts}
    out.reboots = {h.host.name: len(h.events("reboot-command")) - before[f"{h.host.name}/reboot-command"]
                   for h in labhosts}
    out.boots = {h.host.name: len(h.events("boot")) - before[f"{h.host.name}/boot"] for h in labhosts}
    for what, counts in (("broker stops", out.stops), ("reboot commands", out.reboots), ("boots", out.boots)):
        if any(v != 1 for v in counts.values()):
            out.problems.append(f"{what}: {counts}")
    data = collect(cluster)
    out.healthy = bool(data["healthy"]) and all(b["pooled"] == "yes" for b in data["brokers"]) \
        and data["preferred_leader_ratio"] == 1.0
    if not out.healthy:
        out.problems.append("cluster not whole after resume")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the runs and logs here (a failed point's resume log: failed-*.log)")
    args = parser.parse_args()

    from kafkaops.inventory import load_inventory
    from kafkaops.lab import lab

    cluster = load_inventory(Path(__file__).resolve().parents[1] / "inventory" / "lab.yaml")
    started_lab = not lab.is_up()
    if started_lab:
        lab.up(cluster)
    try:
        with tempfile.TemporaryDirectory(prefix="kill-sweep-") as tmp:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            ref_home = work / "reference"
            ref = _kafkaops(ref_home, "rolling-reboot", cluster.name, "--yes", "--reason", "kill sweep reference",
                            *FAST, log=work / "reference.log")
            if ref.wait(1200) != 0:
                sys.exit(f"the reference roll failed: {(work / 'reference.log').read_text()[-500:]}")
            points = choose_points(_journal(ref_home), args.points)
            results = []
            for i, point in enumerate(points, start=1):
                result = run_point(cluster, point, work)
                results.append(result)
                print(f"{i:2}/{len(points)} {'ok ' if result.ok else 'BAD'} {point.label:60} "
                      f"{result.seconds:6.1f}s {'; '.join(result.problems)}", flush=True)
    finally:
        if started_lab:
            lab.down()
    print("\n| # | killed | resume | s | lost/dup | stops, reboots, boots per host | whole |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(results, start=1):
        print(f"| {i} | {r.point.label} | {r.resume_rc} | {r.seconds} | {r.lost}/{r.duplicated} | "
              f"{sorted(set(r.stops.values()))}, {sorted(set(r.reboots.values()))}, {sorted(set(r.boots.values()))} "
              f"| {'yes' if r.healthy else 'NO'} |")
    print(f"\n{sum(r.ok for r in results)}/{len(results)} points resumed to every invariant")
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "ok": r.ok} for r in results], indent=1))
    sys.exit(0 if all(r.ok for r in results) else 1)


if __name__ == "__main__":
    main()
