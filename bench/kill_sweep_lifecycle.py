"""SIGKILL ``broker add`` and ``broker decommission`` at every step boundary and inside a reassignment batch,
resume, and check every invariant (issue 46): the lifecycle procedures' kill sweep.

``bench/kill_sweep.py`` kills rolling reboots; this is its sibling for the procedures that move data. The
short CI version (``tests/lab/test_broker_lifecycle_on_lab.py``) kills one decommission mid-batch; this
one kills each procedure at each of its step boundaries, so a resume is shown to hold wherever the kill
lands — not only where a test author thought of.

On the bench lab (``bench/lab-bench.yaml``, 127.0.80.0/24; nothing else on those addresses), one *cycle*
per point, under acks=all load and HTTP through the VIP the whole cycle:

1. ``lab host add``: kafka1004 racked, registered, holding nothing;
2. ``broker add kafka1004``, SIGKILLed (its whole process group) at the cycle's add point, then
   ``kafkaops resume RUN``; checked;
3. ``broker decommission kafka1004``, SIGKILLed at the cycle's decommission point, resumed; checked;
4. ``lab host remove kafka1004``.

The points come from the runbooks (:func:`points_of`): after each step's end (its ``step_verified``: the
next step not begun; the last one too: the run not yet finished) and one second after the first
``batch_submitted`` of every ``placement.reassign`` (Kafka copying under the throttle). A cycle with no
point left for one procedure runs it unkilled.

Invariants checked after each resume (each failure is named in the point's ``problems``):

* the resume exits 0;
* replicas at the run's target (its ``assignment`` parameter) for every partition it names; after a
  decommission the broker holds no replica, leads nothing, is no longer registered, and every partition is
  led by its preferred replica (the one final election happened);
* no replication throttle left on any broker or bench topic;
* the cluster lock released;
* each change done once per the journal: no ``step_applied`` twice for one step, no ``batch_submitted``
  twice for one batch of one step; the broker stopped exactly once (the lab host's own event log);
* at the end of the cycle, nothing lost and nothing duplicated by the load (acks=all, idempotent).

Raw result: ``bench/results/kill-sweep-lifecycle-<date>.json`` (:mod:`raw_result`), rewritten after each
cycle::

    python bench/kill_sweep_lifecycle.py [--throttle 200KB/s] [--batch-size 200] [--max-cycles N]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result
from bench_lifecycle import NEW, Load, drop_topics, journal, kafkaops, run_params, seed

REPO = Path(__file__).resolve().parents[1]
BENCH_LAB = REPO / "bench" / "lab-bench.yaml"


@dataclass(frozen=True)
class KillPoint:
    """Kill once the journal holds a record like ``match`` (the ``nth`` such), ``delay`` s later."""

    label: str
    match: tuple[tuple[str, Any], ...]
    delay: float = 0.0

    def hit(self, record: dict[str, Any]) -> bool:
        return all(record.get(k) == v for k, v in self.match)


@dataclass
class Procedure:
    """One procedure's kill and resume in a cycle, and what was found after."""

    name: str
    point: str = ""
    killed_after: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    run_rc: int | None = None
    resume_rc: int | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def points_of(runbook: str) -> list[KillPoint]:
    """The kill points of a runbook: the end of every step (its ``step_verified``, journaled whether it
    applied or was skipped: the next step not begun), one second into each reassignment's first batch.
    The kills inside a batch come first: a sweep cut short (a shared machine, a deadline) has hit them."""
    import yaml

    steps = yaml.safe_load((REPO / "runbooks" / f"{runbook}.yaml").read_text())["steps"]
    inside, ends = [], []
    for n, step in enumerate(steps, start=1):  # the journal counts steps from 1
        kind = next(iter(step))
        ends.append(KillPoint(f"after step {n} {kind}", (("type", "step_verified"), ("step", n))))
        if kind == "placement.reassign":
            inside.append(KillPoint(f"inside step {n} placement.reassign, batch 1 (1 s after submitted)",
                                    (("type", "event"), ("event", "batch_submitted"), ("step", n), ("batch", 1)),
                                    delay=1.0))
    return [*inside, *ends]


def chosen(points: list[KillPoint], wanted: str) -> list[KillPoint]:
    """``points`` narrowed and ordered by ``wanted`` (``"9,14,inside"``: step 9's end, step 14's end, every
    kill inside a batch); empty: all of them. A second sweep covers what a first one cut short did not."""
    if not wanted.strip():
        return points
    out: list[KillPoint] = []
    for item in (w.strip() for w in wanted.split(",") if w.strip()):
        if item == "inside":
            out.extend(p for p in points if p.label.startswith("inside") and p not in out)
        else:
            out.extend(p for p in points if p.label.startswith(f"after step {int(item)} ") and p not in out)
    return out


def spawn(home: Path, *args: str, log: Path) -> subprocess.Popen[str]:
    out = open(log, "w")  # noqa: SIM115 - a file, never an unread pipe
    return subprocess.Popen([sys.executable, "-m", "kafkaops.cli.main", *args], stdout=out,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "KAFKAOPS_HOME": str(home)},
                            start_new_session=True)


def run_killed(home: Path, args: list[str], point: KillPoint | None, work: Path, name: str) -> Procedure:
    """Run ``kafkaops ARGS``; SIGKILL it at ``point`` (None: let it finish), then resume it to its end."""
    out = Procedure(name, point.label if point else "")
    started = time.monotonic()
    proc = spawn(home, *args, log=work / f"{name}.log")
    deadline = time.monotonic() + 1800
    while point is not None and proc.poll() is None and time.monotonic() < deadline:
        records = journal(home)
        if any(point.hit(r) for r in records):
            time.sleep(point.delay)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                last = journal(home)[-1]
                out.killed_after = {k: last[k] for k in ("type", "kind", "step", "event", "batch") if k in last}
            if not out.killed_after or out.killed_after.get("type") == "finished":
                # the last step's end: the run finished (journaled ``finished``, or exited) before the kill
                # landed — nothing to resume (`resume` says so with exit 3), not a failed point
                out.note = "the point was reached but the run had finished before the kill landed"
                out.killed_after = {}
            break
        time.sleep(0.05)
    out.run_rc = proc.wait(1800)
    if point is not None and not out.killed_after and not out.note:
        out.problems.append("the run ended before the kill point")
    records = journal(home)
    if point is not None and out.killed_after and records:
        run_id = str(records[0]["run_id"])
        _, out.resume_rc, said = kafkaops("resume", run_id, home=home, log=work / f"{name}-resume.log", timeout=1800)
        if out.resume_rc != 0:
            error = next((line for line in said.splitlines() if line.startswith("error:")), said[-400:])
            out.problems.append(f"resume exited {out.resume_rc}: {error[:500]}")
    elif out.run_rc != 0:
        out.problems.append(f"run exited {out.run_rc}: {(work / f'{name}.log').read_text()[-400:]}")
    out.seconds = round(time.monotonic() - started, 1)
    return out


def once_per_journal(records: list[dict[str, Any]]) -> list[str]:
    """Changes the journal shows done twice: a step applied twice, a partition submitted to Kafka twice by
    one reassignment step (a resumed step numbers its batches from 1 again: the partitions are compared,
    each ``batch_submitted`` standing for the ``batch_submitting`` before it)."""
    applied = Counter(int(r["step"]) for r in records if r["type"] == "step_applied")
    submitted: Counter[tuple[Any, str]] = Counter()
    pending: dict[Any, list[str]] = {}
    for r in records:
        if r["type"] != "event":
            continue
        if r.get("event") == "batch_submitting":
            pending[r.get("step")] = list(r.get("partitions") or [])
        elif r.get("event") == "batch_submitted":
            submitted.update((r.get("step"), tp) for tp in pending.pop(r.get("step"), []))
    twice = sorted((s, tp) for (s, tp), n in submitted.items() if n > 1)
    return ([f"step {s} applied {n} times" for s, n in sorted(applied.items()) if n > 1]
            + [f"step {s}: {tp} submitted more than once" for s, tp in twice[:5]])


def check(cluster: Any, home: Path, proc: Procedure, *, decommissioned: bool, stops_before: int) -> None:
    """Every invariant after a resumed (or unkilled) run; problems appended to ``proc``."""
    from kafkaops.environment import Environment
    from kafkaops.steps.placement import RATE_CONFIGS, REPLICA_CONFIGS
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.spec import LabSpec

    records = journal(home)
    proc.problems.extend(once_per_journal(records))
    target = {(str(t), int(p)): tuple(r) for t, p, r in run_params(records).get("assignment", [])}
    new_id = next(h.broker_id for h in cluster.hosts if h.name == NEW)
    env = Environment.of(cluster, dry_run=True)
    try:
        snap = env.kafka.snapshot(with_configs=False)
        now = {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}
        off = [f"{t}-{p}" for (t, p), r in target.items() if now.get((t, p)) != r]
        if off:
            proc.problems.append(f"{len(off)} partition(s) not at the target: {off[:5]}")
        topics = sorted({p.topic for p in snap.partitions})
        brokers = [h.broker_id for h in cluster.hosts if h.broker_id in snap.brokers]
        left = {k: v for k, v in env.kafka.dynamic_configs(brokers=brokers, topics=topics,
                                                            names=(*RATE_CONFIGS, *REPLICA_CONFIGS)).items() if v}
        if left:
            proc.problems.append(f"throttle(s) left: {sorted(left)[:5]}")
        holder = env.lock.holder(cluster.name)
        if holder is not None:
            proc.problems.append(f"lock still held by {holder.run_id}")
        if decommissioned:
            held = sum(new_id in p.replicas for p in snap.partitions)
            leads = sum(p.leader == new_id for p in snap.partitions)
            if held or leads or new_id in snap.brokers:
                proc.problems.append(f"broker {new_id}: {held} replica(s), leads {leads}, "
                                     f"registered {new_id in snap.brokers}")
            astray = [f"{p.topic}-{p.partition}" for p in snap.partitions if p.replicas and p.leader != p.replicas[0]]
            if astray:
                proc.problems.append(f"{len(astray)} partition(s) off their preferred leader: {astray[:5]}")
    finally:
        env.close()
    if decommissioned:
        spec = LabSpec.load(lab_dir(cluster.name))
        stops = len(LabHost.named(NEW, spec).events("kafka-stop")) - stops_before
        if stops != 1:
            proc.problems.append(f"{NEW} stopped {stops} times")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throttle", default="200KB/s", help="low: a batch still moves a second after it is submitted")
    parser.add_argument("--batch-size", type=int, default=200, help="one batch: the fewest JVM starts of the tool")
    parser.add_argument("--max-cycles", type=int, default=0, help="stop after this many killed cycles (0: all)")
    parser.add_argument("--add-points", default="", metavar="LIST",
                        help="sweep only these add points, in this order: step numbers (a step's end) and "
                             "'inside' (the batch), e.g. 5,7,inside (default: every one, batches first)")
    parser.add_argument("--decommission-points", default="", metavar="LIST", help="the same for decommission")
    parser.add_argument("--topics", type=int, default=0,
                        help="bench topics (RF 3 and 2 alternately) to add to the lab's own (0: the lab's only)")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--mb-per-topic", type=float, default=2.0)
    parser.add_argument("--inventory", type=Path, default=BENCH_LAB)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.spec import LabSpec

    inventory = args.inventory.resolve()
    cluster = load_inventory(inventory)
    base = lab_dir(cluster.name)
    grown_path = base / f"{inventory.stem}-next-host.yaml"
    out_path = args.json or raw_result.default_path("kill-sweep-lifecycle")
    result = raw_result.header("kill-sweep-lifecycle", vars(args), inventory)
    result["lab_dir"] = str(base)
    started_lab = not lab.is_up(base)
    if started_lab:
        lab.up(cluster)
    work = Path(tempfile.mkdtemp(prefix="kill-sweep-lifecycle-"))
    common = ["--yes", "--reason", "kill sweep", "--no-scan", "--throttle", args.throttle,
              "--batch-size", str(args.batch_size)]
    cycles: list[dict[str, Any]] = []

    def cycle(n: int, add_point: KillPoint | None, retire_point: KillPoint | None) -> dict[str, Any]:
        cwork = work / f"cycle-{n}"
        cwork.mkdir()
        _, rc, said = kafkaops("-i", str(inventory), "lab", "host", "add", log=cwork / "host-add.log")
        if rc != 0:
            raise SystemExit(f"lab host add failed: {said[-600:]}")
        grown = load_inventory(grown_path)
        stops_before = len(LabHost.named(NEW, LabSpec.load(base)).events("kafka-stop"))
        with Load(grown) as load:
            added = run_killed(cwork / "add", ["-i", str(grown_path), "broker", "add", NEW, *common], add_point,
                               cwork, "add")
            check(grown, cwork / "add", added, decommissioned=False, stops_before=stops_before)
            retired = run_killed(cwork / "decommission", ["-i", str(grown_path), "broker", "decommission", NEW,
                                                          *common, "--syn-window", "2s"], retire_point, cwork,
                                 "decommission")
            check(grown, cwork / "decommission", retired, decommissioned=True, stops_before=stops_before)
        report = load.summary()
        if report.get("lost") or report.get("duplicated") or not report:
            retired.problems.append(f"load: {report}")
        _, rc, said = kafkaops("lab", "--lab", cluster.name, "host", "remove", NEW, log=cwork / "host-remove.log")
        if rc != 0:  # a failed point left it holding data: retire it unkilled, so the next cycle starts clean
            retired.problems.append(f"lab host remove exited {rc}: {said[-300:]}")
            kafkaops("-i", str(grown_path), "broker", "decommission", NEW, *common, "--syn-window", "2s",
                     home=cwork / "cleanup", log=cwork / "cleanup.log")
            _, rc, said = kafkaops("lab", "--lab", cluster.name, "host", "remove", NEW, log=cwork / "host-remove.log")
            if rc != 0:
                raise SystemExit(f"{NEW} cannot be taken out after cycle {n}: {said[-400:]}")
        procs = [asdict(added), asdict(retired)]
        return {"cycle": n, "load": report, "procedures": procs,
                "ok": not added.problems and not retired.problems}

    try:
        if args.topics:
            seed(cluster, args.topics, args.partitions, args.mb_per_topic, sorted(h.broker_id for h in cluster.hosts))
        add_points = chosen(points_of("broker-add"), args.add_points)
        retire_points = chosen(points_of("broker-decommission"), args.decommission_points)
        result["points"] = {"add": [p.label for p in add_points], "decommission": [p.label for p in retire_points]}
        print(f"{len(add_points)} add point(s), {len(retire_points)} decommission point(s)", flush=True)
        total = max(len(add_points), len(retire_points))
        if args.max_cycles:
            total = min(total, args.max_cycles)
        for i in range(total):
            a = add_points[i] if i < len(add_points) else None
            d = retire_points[i] if i < len(retire_points) else None
            done = cycle(i + 1, a, d)
            cycles.append(done)
            result["cycles"] = cycles
            raw_result.write(out_path, result)
            print(f"{i + 1:2}/{total} {'ok ' if done['ok'] else 'BAD'} add: {a.label if a else '-'} | "
                  f"decommission: {d.label if d else '-'} | "
                  + "; ".join(p for proc in done["procedures"] for p in proc["problems"]), flush=True)
    finally:
        drop_topics(cluster)
        if started_lab:
            lab.down(base)
    kills = [p for c in cycles for p in c["procedures"] if p["point"]]
    result.update(complete=True, finished=raw_result.now(), work=str(work), summary={
        "cycles": len(cycles), "kills": len(kills), "kills_ok": sum(1 for p in kills if not p["problems"]),
        "cycles_ok": sum(1 for c in cycles if c["ok"]),
        "lost": sum(int(c["load"].get("lost") or 0) for c in cycles),
        "duplicated": sum(int(c["load"].get("duplicated") or 0) for c in cycles)})
    raw_result.write(out_path, result)
    print(f"{result['summary']}\nraw result: {out_path}")
    sys.exit(0 if result["summary"]["cycles_ok"] == len(cycles) else 1)


if __name__ == "__main__":
    main()
