"""Kill sweep: SIGKILL kafkaops at journal boundaries of a roll, resume, and check nothing happened twice.

A reference roll (``rolling-reboot``, not killed) gives the journal's shape. Kill points are chosen
from its records (:func:`choose_points`) spread evenly over every host of the roll and every kind of
point: a step's intent (``step_applying``, the reboot's ``reboot_intent``), after its effect
(``step_applied``, the reboot's ``reboot_sent``) and inside its wait (a second after the intent). For
each point: a healthy, pooled lab under load; the roll; SIGKILL of the whole process group once the
journal reaches the point; ``kafkaops resume``; then the invariants:

- resume exits 0, every host pooled, no URP, every partition led by its preferred replica;
- every acked message read back exactly once (the load generator's own read-back);
- no side effect happened twice, counted from the lab's own logs: per host exactly one broker stop,
  one reboot command and one boot (``hosts/<h>/events.jsonl``), at most one host depooled at a time.

Run by hand (the lab is started if it is down, and then stopped at the end):
    python bench/kill_sweep.py [--points 24] [--inventory bench/lab-bench.yaml] [--keep DIR]
``--inventory bench/lab-bench.yaml`` runs it on the bench lab (127.0.80.0/24, its own directory), beside
the default lab. The raw result goes to bench/results/kill-sweep-<date>.json (``--json`` elsewhere),
rewritten after every point. Each point takes a roll (one to two minutes here). The CI runs a short
version (tests/lab/test_kill_sweep.py).
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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package

REPO = Path(__file__).resolve().parents[1]
FAST = ["--syn-window", "2s", "--stable-for", "2s", "--no-scan"]


@dataclass
class Point:
    """Kill once the journal holds ``after`` records (+ ``delay`` seconds: inside a wait)."""

    after: int
    label: str
    delay: float = 0.0
    #: Which host of the roll (1: the first rolled): a position, not a name — the runbook picks the
    #: order per run (the reference roll and a killed roll may take the hosts in different orders).
    position: int = 0
    kind: str = ""  # one of POINT_KINDS
    step: str = ""  # the step kind (conftool.depool, host.reboot...)


@dataclass
class Outcome:
    point: Point
    #: The host the killed roll was on (its latest ``target_started``): the point's position in this
    #: roll's own order.
    host: str = ""
    killed_at: str = ""
    #: The journal's last record when the kill landed (``inside`` points land a second after the intent:
    #: the step may have gone on by then).
    killed_after: dict[str, Any] = field(default_factory=dict)
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


#: The kinds of kill point, each hit on every host: right after a step's intent was journaled (nothing
#: done yet, or the effect under way), right after its effect was journaled (done, not yet verified or
#: moved on), and a second into a step that waits (a gate, the stop, the reboot: killed mid-wait).
POINT_KINDS = ("intent", "effect", "inside-wait")


#: The steps whose side effect the sweep counts (a depool, a broker stop, a reboot, a repool): each is hit
#: at every kind of point it has before any other step is hit twice.
SIDE_EFFECTS = ("conftool.depool", "kafka.stop_broker", "host.reboot", "conftool.repool")


def _waits(step: str) -> bool:
    return "wait" in step or step in ("host.reboot", "kafka.stop_broker")


def candidates(records: list[dict[str, Any]]) -> list[Point]:
    """Every kill point a journal offers, in journal order. The reboot's own events count as its intent
    (``reboot_intent``: journaled before the command) or its effect (``reboot_sent``)."""
    out: list[Point] = []
    order = [r["target"] for r in records if r["type"] == "target_started"]
    n = len(order)
    for i, r in enumerate(records, start=1):
        step = r.get("kind", "")
        pos = order.index(r["target"]) + 1 if r.get("target") in order else 0
        at = f"(host {pos} of {n})"
        if r["type"] == "event":
            kind = "intent" if str(r.get("event", "")).endswith("_intent") else "effect"
            out.append(Point(i, f"after event {r.get('event')} {at}", 0.0, pos, kind, step))
        elif r["type"] == "step_applying":
            out.append(Point(i, f"after step_applying {step} {at}", 0.0, pos, "intent", step))
            if _waits(step):
                out.append(Point(i, f"inside {step} {at}", 1.0, pos, "inside-wait", step))
        elif r["type"] in ("step_applied", "step_verified"):
            out.append(Point(i, f"after {r['type']} {step} {at}", 0.0, pos, "effect", step))
    return out


def choose_points(records: list[dict[str, Any]], n: int) -> list[Point]:
    """``n`` kill points spread evenly over the roll's hosts and the kinds of point, deterministically.

    Hosts take turns (each gets its fair share, at most one more); each host cycles through the point
    kinds, starting one kind further than the host before it, so even three points hit every host and
    every kind. Within a (host, kind) the step kind least chosen so far wins (first for that kind of
    point, then at all), then the earliest: a sweep covers as many different steps as it has points,
    instead of the first host's first steps (the first 24-point sweep hit kafka1001 22 times and
    kafka1003 never). Returned in journal order.
    """
    every = candidates(records)
    if n >= len(every):
        return every
    # After the verification of a step that had nothing to do (it was skipped) is the least telling
    # effect: steps that changed something go first.
    changed = {(r.get("target"), r.get("step")) for r in records if r["type"] == "step_applying"}
    noop = {i for i, r in enumerate(records, start=1)
            if r["type"] == "step_verified" and (r.get("target"), r.get("step")) not in changed}
    events = {i for i, r in enumerate(records, start=1) if r["type"] == "event"}
    hosts = list(dict.fromkeys(p.position for p in every))
    left = {(h, k): [p for p in every if p.position == h and p.kind == k] for h in hosts for k in POINT_KINDS}
    by_kind: Counter[tuple[str, str]] = Counter()
    by_step: Counter[str] = Counter()
    turns: Counter[int] = Counter()
    chosen: list[Point] = []
    k = 0
    while len(chosen) < n:
        h, k = k % len(hosts), k + 1
        host = hosts[h]
        offset = turns[host] + h
        turns[host] += 1
        for m in range(len(POINT_KINDS)):
            kind = POINT_KINDS[(offset + m) % len(POINT_KINDS)]
            if left[(host, kind)]:
                pick = min(left[(host, kind)], key=lambda p: (
                    p.after in noop, p.step not in SIDE_EFFECTS or by_kind[(p.kind, p.step)] > 0, by_step[p.step],
                    by_kind[(p.kind, p.step)], p.after not in events, p.after))
                left[(host, kind)].remove(pick)
                by_kind[(pick.kind, pick.step)] += 1
                by_step[pick.step] += 1
                chosen.append(pick)
                break
    return sorted(chosen, key=lambda p: (p.after, p.delay))


def _counts(hosts: list[Any], event: str, since: dict[str, int]) -> dict[str, int]:
    return {h.name: len(h.events(event)) - since.get(f"{h.name}/{event}", 0) for h in hosts}


def run_point(cluster: Any, point: Point, workdir: Path) -> Outcome:
    from kafkaops.health.status import collect
    from kafkaops.systems.conftool import read_pools
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.load import run_load
    from kafkaops_lab.spec import LabSpec

    home = workdir / f"home-{point.after}-{int(point.delay * 10)}"
    spec = LabSpec.load(lab_dir(cluster.name))
    hosts = [LabHost.named(h.name, spec) for h in cluster.hosts]
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
    if out.killed_at:
        killed = _journal(home)
        last = killed[-1]
        out.host = next((r["target"] for r in reversed(killed) if r["type"] == "target_started"), "")
        out.killed_after = {k: last[k] for k in ("type", "kind", "target", "step", "event") if k in last}
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
    parser.add_argument("--points", type=int, default=24)
    parser.add_argument("--inventory", type=Path, default=REPO / "inventory" / "lab.yaml",
                        help="the lab to run on (default inventory/lab.yaml; bench/lab-bench.yaml: beside it)")
    parser.add_argument("--json", type=Path, default=None,
                        help="the raw result (default bench/results/kill-sweep-<date>.json)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the runs and logs here (a failed point's resume log: failed-*.log)")
    args = parser.parse_args()

    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir

    inventory = args.inventory.resolve()
    cluster = load_inventory(inventory)
    # Every kafkaops this bench starts (roll, resume, abort) finds the cluster in this inventory only.
    os.environ["KAFKAOPS_INVENTORY"] = str(inventory)
    base = lab_dir(cluster.name)
    out_path = args.json or raw_result.default_path("kill-sweep")
    result = raw_result.header("kill-sweep", vars(args), inventory)
    result.update(seed=None, selection="deterministic: choose_points(reference journal, --points)",
                  lab_dir=str(base))
    started_lab = not lab.is_up(base)
    if started_lab:
        lab.up(cluster)
    results: list[Outcome] = []
    try:
        with tempfile.TemporaryDirectory(prefix="kill-sweep-") as tmp:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            ref_home = work / "reference"
            started = time.monotonic()
            ref = _kafkaops(ref_home, "rolling-reboot", cluster.name, "--yes", "--reason", "kill sweep reference",
                            *FAST, log=work / "reference.log")
            if ref.wait(1200) != 0:
                sys.exit(f"the reference roll failed: {(work / 'reference.log').read_text()[-500:]}")
            records = _journal(ref_home)
            points = choose_points(records, args.points)
            result["reference"] = {"seconds": round(time.monotonic() - started, 1), "records": len(records),
                                   "hosts": list(dict.fromkeys(r["target"] for r in records
                                                               if r["type"] == "target_started")),
                                   "candidates": len(candidates(records))}
            for i, point in enumerate(points, start=1):
                outcome = run_point(cluster, point, work)
                results.append(outcome)
                print(f"{i:2}/{len(points)} {'ok ' if outcome.ok else 'BAD'} {point.label:60} "
                      f"{outcome.seconds:6.1f}s {'; '.join(outcome.problems)}", flush=True)
                result["points"] = [{**asdict(r), "ok": r.ok} for r in results]
                raw_result.write(out_path, result)
    finally:
        if started_lab:
            lab.down(base)
    print("\n| # | killed | host killed | kind | resume | s | lost/dup | stops, reboots, boots per host | whole |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results, start=1):
        print(f"| {i} | {r.point.label} | {r.host} | {r.point.kind} | {r.resume_rc} | {r.seconds} | "
              f"{r.lost}/{r.duplicated} | {sorted(set(r.stops.values()))}, {sorted(set(r.reboots.values()))}, "
              f"{sorted(set(r.boots.values()))} | {'yes' if r.healthy else 'NO'} |")
    ok = sum(r.ok for r in results)
    print(f"\n{ok}/{len(results)} points resumed to every invariant")
    result.update(complete=True, finished=raw_result.now(), summary={
        "points": len(results), "ok": ok,
        "per_host_killed": dict(Counter(r.host for r in results)),
        "per_position": dict(Counter(r.point.position for r in results)),
        "per_kind": dict(Counter(r.point.kind for r in results)),
        "steps": sorted({r.point.step for r in results}),
        "lost": sum(max(r.lost, 0) for r in results), "duplicated": sum(max(r.duplicated, 0) for r in results),
    })
    raw_result.write(out_path, result)
    print(f"raw result: {out_path}")
    sys.exit(0 if ok == len(results) else 1)


if __name__ == "__main__":
    main()
