"""Roll overhead: wall time of `kafkaops rolling-restart lab` / sum of per-broker floors.

A broker's floor is the time the cluster itself sees it degraded — from the moment it leaves (it is
unregistered or missing from an ISR it belongs to) until it is registered and back in every ISR —
measured by polling ZooKeeper's registrations and the metadata every 0.1 s, independently of kafkaops' run
(:class:`FloorWatch`). Everything else in the roll
(pre-flight, depool, SYN window, elections, health gates) costs time on top of it.

Issue 14's measure, printed last: overhead = wall - (sum of floors + the configured safety windows on the
roll's critical path), the windows being one zero-SYN window per host and, between hosts, what of the
stability window the SYN window does not cover (``--syn-window``, ``--stable-for``; defaults 10 s and 5 s:
the stability window runs under the next host's SYN window). Target: <= 2 s per broker.

Issue 47's measure beside it: kafkaops' own cost = wall - floors - windows - the post-check, per broker
(target <= 1 s), and the post-check itself (target <= 5 s: its reader warmed while the roll runs). Three
floors outside kafkaops that this cost still holds are measured and reported beside it: the hosts' own
commands (the lab's ``hostctl``, from the run's debug log); Kafka's reaction to each stop signal (from the
SIGTERM the lab host logs to the first change the cluster shows); and the interpreter's teardown of the
libraries the post-check loads into the roll's process (Spark's driver, pandas, pyarrow, matplotlib), timed
on a process that only imports them. ``own_cost_beyond_measured_floors`` subtracts all three.

Run by hand with the lab up:
    python bench/bench_roll.py [--under-load] [--inventory bench/lab-bench.yaml] [extra kafkaops args...]

``--under-load`` runs the lab's load generator (200 msg/s, acks=all) through the roll, as production
traffic would: only then has the post-check's Spark scan data to read (on a quiet lab it has none and
stops after the metadata checks). The figures and the journal's time per step go to
``bench/results/roll-DATE.json`` (:mod:`raw_result`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.zookeeper import ZooKeeper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package


class SourceWatch(threading.Thread):
    """One source's view of which brokers are degraded, polled every 0.1 s on its own thread; each degraded
    interval kept in wall-clock seconds. A poll that does not answer changes nothing."""

    def __init__(self, brokers: list[int], degraded: Callable[[], set[int] | None]) -> None:
        super().__init__(daemon=True)
        self.brokers, self.degraded = brokers, degraded
        self.since: dict[int, float | None] = dict.fromkeys(brokers)
        self.intervals: dict[int, list[tuple[float, float]]] = {b: [] for b in brokers}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            asked = time.time()
            seen = self.degraded()
            if seen is not None:
                for b in self.brokers:
                    since = self.since[b]
                    if b in seen and since is None:
                        self.since[b] = asked  # the state when the question was asked
                    elif b not in seen and since is not None:
                        self.intervals[b].append((since, time.time()))
                        self.since[b] = None
            self.stop.wait(0.1)


class FloorWatch:
    """Each broker's time out of service, seen from outside kafkaops: unregistered in ZooKeeper, missing from
    the metadata, or out of an ISR it belongs to — the union of what each source saw.

    Two sources, each on its own thread, because one alone missed floors: the metadata request went to the
    broker that was stopping and hung past its restart (bench/results/roll-2026-12-07-2.json: broker 1001,
    0.0 s); asked in turn with ZooKeeper, the hang also delayed ZooKeeper's answer (roll-2026-12-07-17.json:
    broker 1001, 0.98 s). ZooKeeper's registrations answer through a restart; the metadata adds the ISR."""

    def __init__(self, cluster: Cluster) -> None:
        self.admin = KafkaAdmin(cluster.kafka, timeout=2)
        self.zk = ZooKeeper.for_cluster(cluster, timeout=2) if cluster.zookeeper else None
        self.brokers = [h.broker_id for h in cluster.hosts]
        self.sources = [SourceWatch(self.brokers, self._out_of_isr)]
        if self.zk is not None:
            self.sources.append(SourceWatch(self.brokers, self._unregistered))

    def _unregistered(self) -> set[int] | None:
        assert self.zk is not None
        try:
            return set(self.brokers) - set(self.zk.open().registered_brokers())
        except Exception:
            return None

    def _out_of_isr(self) -> set[int] | None:
        try:
            snap = self.admin.snapshot(with_configs=False, attempts=1)
        except Exception:
            return None
        return {b for b in self.brokers if b not in snap.brokers
                or any(b in p.replicas and b not in p.isr for p in snap.partitions)}

    def start(self) -> None:
        for w in self.sources:
            w.start()

    def finish(self) -> None:
        for w in self.sources:
            w.stop.set()
        for w in self.sources:
            w.join()
        if self.zk is not None:
            self.zk.close()

    @property
    def intervals(self) -> dict[int, list[tuple[float, float]]]:
        """Each broker's degraded intervals, the sources' merged."""
        merged: dict[int, list[tuple[float, float]]] = {}
        for b in self.brokers:
            out: list[tuple[float, float]] = []
            for lo, hi in sorted(iv for w in self.sources for iv in w.intervals[b]):
                if out and lo <= out[-1][1]:
                    out[-1] = (out[-1][0], max(out[-1][1], hi))
                else:
                    out.append((lo, hi))
            merged[b] = [(round(lo, 3), round(hi, 3)) for lo, hi in out]
        return merged

    @property
    def floor(self) -> dict[int, float]:
        return {b: sum(hi - lo for lo, hi in ivs) for b, ivs in self.intervals.items()}


def stop_reactions(cluster: Cluster, intervals: dict[int, list[tuple[float, float]]],
                   since: float) -> dict[str, float]:
    """Per broker, the seconds from the stop signal its host sent (the lab host's own event log, written
    right before the SIGTERM) to the first moment the cluster saw it degraded: Kafka's own reaction —
    the JVM's shutdown hook, the controlled-shutdown request, the controller's ISR change — which no
    tool that stops a broker can shorten, and which the floor (measured from the cluster's side) leaves
    out. Empty for a cluster that is not a lab."""
    base = Path(os.environ.get("KAFKAOPS_LAB_DIR_" + cluster.name.upper().replace("-", "_"))
                or Path.home() / ".local" / "state" / "kafkaops" / cluster.name)
    out: dict[str, float] = {}
    for h in cluster.hosts:
        try:
            lines = (base / "hosts" / h.name / "events.jsonl").read_text().splitlines()
        except OSError:
            continue
        stops = [float(e["t"]) for e in map(json.loads, lines) if e.get("event") == "kafka-stop" and e["t"] >= since]
        floor_starts = [lo for lo, _ in intervals.get(h.broker_id, [])]
        if stops and floor_starts:
            first = min((lo for lo in floor_starts if lo >= stops[0] - 1), default=None)
            if first is not None:
                out[str(h.broker_id)] = round(max(0.0, first - stops[0]), 3)
    return out


#: What the post-check loads into the roll's own process: the Spark driver (which imports pandas and pyarrow
#: for its Arrow transfers) and matplotlib for its charts.
POST_CHECK_LIBRARIES = ("pyspark.sql", "pandas", "pyarrow", "matplotlib.pyplot")


def libraries_exit(runs: int = 5) -> float:
    """Median seconds a Python process that has only imported :data:`POST_CHECK_LIBRARIES` takes to exit:
    the interpreter's teardown of those modules, which every roll's process pays after its last record (a
    floor of the post-check's libraries, not of kafkaops; a bare interpreter exits in milliseconds)."""
    code = "import sys, time\nfor m in sys.argv[1:]:\n    __import__(m)\nprint(time.time(), flush=True)\n"
    seen = []
    for _ in range(runs):
        proc = subprocess.Popen([sys.executable, "-c", code, *POST_CHECK_LIBRARIES], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None
        imported = float(proc.stdout.readline())
        proc.wait()
        seen.append(time.time() - imported)
    return sorted(seen)[len(seen) // 2]


def configured_windows(extra: list[str], hosts: int) -> float:
    """The safety windows the roll is configured to wait, as far as they lie on its critical path (issue 14
    does not count them as overhead): one SYN window per host, and between hosts the part of the stability
    window the SYN window does not cover. The stability window is counted from the gate after the previous
    host and the next host's pre-flight, depool and SYN window run inside it (``kafka.wait_stable``), so
    with the defaults (10 s SYN, 5 s stable) it costs nothing; counting it whole made kafkaops' own cost
    come out negative."""
    from kafkaops.engine.step import parse_duration

    def option(name: str, default: str) -> float:
        for i, arg in enumerate(extra):
            if arg == name and i + 1 < len(extra):
                return parse_duration(extra[i + 1])
            if arg.startswith(name + "="):
                return parse_duration(arg.split("=", 1)[1])
        return parse_duration(default)

    syn, stable = option("--syn-window", "10s"), option("--stable-for", "5s")
    return hosts * syn + (hosts - 1) * max(0.0, stable - syn)


def commands_outside_floors(debug_log: str, cluster: Cluster) -> dict[str, float]:
    """Seconds the run's commands on the hosts took, by command (its first two words), from the run's debug
    log (``kafkaops.ssh`` lines) — the time the hosts' own tools (the lab's ``hostctl``: a Python process per
    command) take, which kafkaops waits for but does not spend. The broker's stop and start are left out:
    they are the floors' (and the SYN capture is streamed, not logged)."""
    from kafkaops.environment import Environment

    env = Environment(cluster)
    floors = {env.command(h, name) for h in cluster.hosts for name in ("kafka_stop", "kafka_start")}
    line = re.compile(r" kafkaops\.ssh DEBUG \S+: exit -?\d+ in (?P<secs>[\d.]+)s: (?P<command>.*)$")
    spent: dict[str, float] = {}
    with open(debug_log) as f:
        for text in f:
            m = line.search(text.rstrip("\n"))
            if m is None or m["command"] in floors:
                continue
            kind = " ".join(m["command"].split()[:2])
            spent[kind] = spent.get(kind, 0.0) + float(m["secs"])
    return spent


def _option(argv: list[str], name: str) -> tuple[str | None, list[str]]:
    """``name VALUE`` taken out of ``argv``: (VALUE or None, the rest)."""
    if name in argv:
        i = argv.index(name)
        return argv[i + 1], argv[:i] + argv[i + 2:]
    return None, argv


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    inventory_arg, extra = _option([a for a in sys.argv[1:] if a != "--under-load"], "--inventory")
    inventory = Path(inventory_arg) if inventory_arg else repo / "inventory" / "lab.yaml"
    cluster = load_inventory(inventory)
    load = None
    if "--under-load" in sys.argv[1:]:
        load = subprocess.Popen([sys.executable, "-m", "kafkaops.cli.main", "lab", "load", "-s", "600", "-i",
                                 str(inventory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(5)  # producer connected and writing before the roll starts
    watch = FloorWatch(cluster)
    watch.start()
    time.sleep(1)
    home = tempfile.mkdtemp(prefix="kafkaops-bench-")
    path = raw_result.default_path("roll")
    result: dict[str, Any] = raw_result.header("roll", {"extra": extra, "under_load": load is not None}, inventory)
    started, started_at = time.monotonic(), time.time()
    done = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "rolling-restart", cluster.name, "--yes",
                           "--reason", "bench_roll", *extra], capture_output=True, text=True,
                          env={**os.environ, "KAFKAOPS_HOME": home, "KAFKAOPS_INVENTORY": cluster.source})
    wall = time.monotonic() - started
    if load is not None:
        load.terminate()
        load.wait(timeout=30)
    time.sleep(1)
    watch.finish()
    if done.returncode != 0:
        sys.exit(f"rolling-restart failed ({done.returncode}): {done.stderr[-2000:]}")
    floors = watch.floor
    result["floor_intervals"] = {str(b): v for b, v in watch.intervals.items()}
    reactions = stop_reactions(cluster, watch.intervals, started_at)
    teardown = libraries_exit()
    total = sum(floors.values())
    run = os.listdir(os.path.join(home, "runs"))[0]
    with open(os.path.join(home, "runs", run, "journal.jsonl")) as f:
        records = [json.loads(line) for line in f]
    by_kind: dict[str, float] = {}
    open_at: dict[tuple[str, int], tuple[float, str]] = {}
    for r in records:
        key = (r.get("target", ""), r.get("step", 0))
        if r["type"] == "step_observed" and key not in open_at:
            open_at[key] = (r["ts"], r["kind"])
        elif r["type"] in ("step_verified",) and key in open_at:
            t0, kind = open_at.pop(key)
            by_kind[kind] = by_kind.get(kind, 0.0) + r["ts"] - t0
    # Outside the journal: the process start, the plan (every step of every host observed once) and the lock,
    # before the run's first record; the exit after its last.
    before_run = records[0]["ts"] - started_at
    after_run = started_at + wall - records[-1]["ts"]
    host_commands = commands_outside_floors(os.path.join(home, "runs", run, "debug.log"), cluster)
    brokers = len(floors)
    windows = configured_windows(extra, brokers)
    post_check = by_kind.get("health.post_check", 0.0)
    overhead = wall - total - windows
    own = overhead - post_check
    result.update({"cluster": cluster.name, "wall_s": round(wall, 2), "floors_s": {str(b): round(v, 2)
                                                                                   for b, v in floors.items()},
                   "windows_s": windows, "post_check_s": round(post_check, 2),
                   "overhead_per_broker_s": round(overhead / brokers, 2),
                   "own_cost_per_broker_s": round(own / brokers, 2),
                   "before_first_record_s": round(before_run, 2), "after_last_record_s": round(after_run, 2),
                   "host_commands_s": {k: round(v, 2) for k, v in host_commands.items()},
                   "stop_reaction_s": reactions,
                   "post_check_libraries_exit_s": round(teardown, 3),
                   "own_cost_beyond_measured_floors_per_broker_s": round(
                       (own - sum(reactions.values()) - sum(host_commands.values()) - teardown) / brokers, 2),
                   "by_kind_s": {k: round(v, 2) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
                   "complete": True, "finished": raw_result.now()})
    raw_result.write(path, result)
    print(f"args: {' '.join(extra) or '(defaults)'}{' under load' if load is not None else ''}")
    print(f"wall time of rolling-restart (plan included): {wall:6.1f} s")
    for b, secs_down in floors.items():
        print(f"  floor of broker {b}: {secs_down:5.1f} s")
    print(f"sum of floors: {total:6.1f} s   overhead ratio: {wall / total:4.2f}  (target <= 1.10)")
    print(f"configured safety windows: {windows:6.1f} s   overhead = wall - floors - windows: {overhead:5.1f} s, "
          f"{overhead / brokers:4.1f} s per broker (target <= 2 s); {wall / brokers:4.1f} s wall per broker")
    print(f"post-check {post_check:4.1f} s (target <= 5 s); kafkaops' own cost = overhead - post-check: "
          f"{own / brokers:4.1f} s per broker (target <= 1 s)")
    print(f"before the run's first record (start, plan, lock): {before_run:4.1f} s; after its last (exit): "
          f"{after_run:4.1f} s")
    print(f"commands on the hosts outside the floors (status, log scans; not stop, start or the SYN capture): "
          f"{sum(host_commands.values()):4.1f} s in {len(host_commands)} kinds of command")
    beyond = (own - sum(reactions.values()) - sum(host_commands.values()) - teardown) / brokers
    print(f"Kafka's reaction to each stop signal, before the floor: {reactions}; the exit of a process holding only "
          f"the post-check's libraries: {teardown:4.2f} s; own cost beyond these and the hosts' commands: "
          f"{beyond:4.2f} s per broker")
    print("time per step kind (observe -> verified, summed over hosts):")
    for kind, secs in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:<28} {secs:6.1f} s")
    print(f"-> {path.relative_to(repo) if path.is_relative_to(repo) else path}")


if __name__ == "__main__":
    main()
