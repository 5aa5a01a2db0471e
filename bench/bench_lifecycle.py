"""A broker's whole life, measured (issue 46): kafkaops' add and decommission plans against Kafka's own
``kafka-reassign-partitions --generate`` for the same broker list, and each plan run for real once.

Why against ``--generate``: it is what an operator without kafkaops runs to add or retire a broker. It
computes a rack-aware assignment *from scratch* over the brokers given, so it moves replicas that did not
need to move; kafkaops moves one replica per partition the retired broker held (decommission) or only what
brings the new broker to its DC's mean (add). This bench says how much that is worth on real data, in the
units an operator pays in: replicas and bytes copied, bytes across racks and DCs, preferred leaders
changed (each a round of NOT_LEADER errors for clients), whether every partition keeps its replicas in
distinct racks, and the time the copies take at the replication throttle (:meth:`MoveEstimate.seconds_at`:
the busiest broker's bytes in or out over the throttle — the same formula for both plans).

On the bench lab (``bench/lab-bench.yaml``, 127.0.80.0/24, its own directory), with no other lab on those
addresses:

1. ``lab up`` unless it is up; bench topics created on the three brokers (``--topics`` of ``--partitions``,
   RF 3 and RF 2 alternately, so a plan has choices to make) and filled with ``--mb-per-topic`` of
   incompressible records (acks=all);
2. ``kafkaops -i bench/lab-bench.yaml lab host add``: kafka1004, registered, holding nothing;
3. **add**: kafkaops' plan (:func:`add_plan`, what ``broker add`` runs) and ``--generate`` over the four
   brokers, compared; then ``kafkaops broker add kafka1004`` for real under acks=all load, timed, the bytes
   the new replicas hold on disk afterwards measured (``du`` of their log directories);
4. **decommission**: the same for kafka1004 over the three brokers left (and, plan only, for kafka1001),
   then ``kafkaops broker decommission kafka1004`` for real, timed, the bytes of the new replicas measured;
5. ``lab host remove kafka1004``; ``lab down`` if this bench started the lab.

The raw result goes to ``bench/results/lifecycle-<date>.json`` (:mod:`raw_result`)::

    python bench/bench_lifecycle.py [--topics 4] [--partitions 24] [--mb-per-topic 8] [--throttle 4MB/s]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result

REPO = Path(__file__).resolve().parents[1]
BENCH_LAB = REPO / "bench" / "lab-bench.yaml"
NEW = "kafka1004"
TOPIC_PREFIX = "bench-lifecycle-"

TP = tuple[str, int]
Assignment = Mapping[TP, Sequence[int]]


# --- the comparison: pure, over plain mappings -------------------------------------------------------------


def rack_rule_broken(assignment: Assignment, rack_of: Mapping[int, str]) -> list[str]:
    """Partitions with two replicas in one rack (a rack failure then costs two replicas of them)."""
    out = []
    for (t, p), replicas in sorted(assignment.items()):
        racks = [rack_of[b] for b in replicas if b in rack_of]
        if len(racks) != len(set(racks)):
            out.append(f"{t}-{p}")
    return out


def compare(current: Assignment, target: Assignment, *, sizes: Mapping[TP, int], dc_of: Mapping[int, str],
            rack_of: Mapping[int, str], leaders: Mapping[TP, int | None], throttle: float,
            brokers: Sequence[int]) -> dict[str, Any]:
    """What ``target`` costs and leaves, in an operator's units (the same for kafkaops' plan and Kafka's)."""
    from kafkaops.placement.estimate import estimate_moves
    from kafkaops.placement.layout import moves
    from kafkaops.placement.lifecycle import bytes_per_broker, leaders_per_broker

    changed = {tp: tuple(r) for tp, r in target.items() if tuple(current.get(tp, ())) != tuple(r)}
    est = estimate_moves(current, changed, sizes, dc_of, leaders=leaders)
    cross_rack = sum(n for (src, dst), n in est.by_pair.items() if rack_of.get(src) != rack_of.get(dst))
    after = {**current, **changed}
    led = leaders_per_broker(after, brokers)
    held = bytes_per_broker(after, sizes, brokers)
    return {
        "partitions_changed": len(changed),
        "replicas_moved": moves(current, changed),
        "bytes_moved": est.bytes_total,
        "bytes_cross_rack": cross_rack,
        "bytes_cross_dc": est.bytes_cross_dc,
        "preferred_leaders_changed": sum(1 for tp, r in changed.items() if r[:1] != tuple(current[tp])[:1]),
        "rack_rule_broken": rack_rule_broken(after, rack_of),
        "seconds_at_throttle": round(est.seconds_at(throttle), 1),
        "bytes_in_per_broker": {str(b): n for b, n in sorted(est.into.items())},
        "bytes_out_per_broker": {str(b): n for b, n in sorted(est.out_of.items())},
        "preferred_leaders_after": {str(b): led[b] for b in brokers},
        "bytes_after": {str(b): held[b] for b in brokers},
        "unknown_size": est.unknown_size,
    }


# --- the lab ---------------------------------------------------------------------------------------------


def kafkaops(*args: str, home: Path | None = None, log: Path | None = None,
             timeout: float = 1800) -> tuple[float, int, str]:
    """Run ``kafkaops ARGS`` to its end (its own home): (seconds, exit code, output)."""
    env = {**os.environ, **({"KAFKAOPS_HOME": str(home)} if home else {})}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    text = done.stdout + done.stderr
    if log is not None:
        log.write_text(text)
    return round(time.monotonic() - started, 2), done.returncode, text


def seed(cluster: Any, topics: int, partitions: int, mb_per_topic: float, brokers: Sequence[int]) -> list[str]:
    """The bench topics on ``brokers`` only (explicit replica lists, racks distinct, leaders round robin),
    each filled with ``mb_per_topic`` MB of random 10 KB records (acks=all). Existing ones are kept."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkaops.systems.kafka_auth import librdkafka_config
    from kafkaops_lab.security import admin_endpoint

    endpoint = admin_endpoint(cluster)
    conf = librdkafka_config(endpoint)
    admin = AdminClient(conf)
    have = set(admin.list_topics(timeout=30).topics)
    names = [f"{TOPIC_PREFIX}{i}" for i in range(topics)]
    new = []
    for i, name in enumerate(names):
        if name in have:
            continue
        rf = 3 if i % 2 == 0 else 2
        lists = [[brokers[(p + k) % len(brokers)] for k in range(rf)] for p in range(partitions)]
        # confluent-kafka 2.16 wants the count beside the lists (without it: "mutually exclusive")
        new.append(NewTopic(name, num_partitions=partitions, replica_assignment=lists,
                            config={"min.insync.replicas": "1"}))
    if not new:
        return names
    for f in admin.create_topics(new).values():
        f.result(60)
    time.sleep(2)
    producer = Producer({**conf, "acks": "all", "linger.ms": 20, "compression.type": "none",
                         "message.max.bytes": 2_000_000})
    record = 10_000
    for t in new:
        count = int(mb_per_topic * 1_000_000 / record)
        for n in range(count):
            producer.produce(t.topic, os.urandom(record), partition=n % partitions)
            if n % 200 == 0:
                producer.poll(0)
        left = producer.flush(300)
        if left:
            raise SystemExit(f"{left} record(s) of {t.topic} not acknowledged")
    return names


def drop_topics(cluster: Any) -> list[str]:
    """Delete the bench topics (the lab as found: the next bench seeds its own sizes)."""
    from confluent_kafka.admin import AdminClient

    from kafkaops.systems.kafka_auth import librdkafka_config
    from kafkaops_lab.security import admin_endpoint

    admin = AdminClient(librdkafka_config(admin_endpoint(cluster)))
    names = sorted(t for t in admin.list_topics(timeout=30).topics if t.startswith(TOPIC_PREFIX))
    if names:
        for f in admin.delete_topics(names).values():
            f.result(60)
    return names


def live(env: Any) -> dict[str, Any]:
    """Every partition's replicas, leader and size now."""
    snap = env.kafka.snapshot(with_configs=False)
    current = {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}
    return {"current": current, "leaders": {(p.topic, p.partition): p.leader for p in snap.partitions},
            "sizes": env.kafka.partition_sizes(sorted(current)), "brokers": sorted(snap.brokers)}


def on_disk(lab_dir: Path, hosts: Mapping[int, str], replicas: Mapping[TP, Sequence[int]]) -> int:
    """Bytes the given new replicas hold on their brokers' disks (the lab's log directories)."""
    total = 0
    for (t, p), brokers in replicas.items():
        for b in brokers:
            d = lab_dir / "hosts" / hosts[b] / "kafka-data" / f"{t}-{p}"
            if d.is_dir():
                total += sum(f.stat().st_size for f in d.iterdir() if f.is_file() and f.suffix == ".log")
    return total


def journal(home: Path) -> list[dict[str, Any]]:
    runs = sorted((home / "runs").glob("*/journal.jsonl")) if (home / "runs").exists() else []
    out = []
    for line in runs[0].read_text().splitlines() if runs else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def run_params(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's parameters (the target assignment among them), as its ``run_started`` record bound them."""
    first = records[0] if records else {}
    return dict(first.get("params") or (first.get("runbook") or {}).get("params") or {})


def step_seconds(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step of a journal: its kind and the seconds from its start to its verification."""
    def at(r: dict[str, Any]) -> float:
        return float(r["ts"])  # the journal's epoch seconds

    start: dict[int, float] = {}
    out = []
    for r in records:
        if r["type"] == "step_observed":
            start.setdefault(int(r["step"]), at(r))
        elif r["type"] in ("step_verified", "step_skipped") and int(r.get("step", -1)) in start:
            began = start[int(r["step"])]
            out.append({"step": r["step"], "kind": r.get("kind", ""), "seconds": round(at(r) - began, 2)})
    return out


def new_replicas(before: Assignment, target: Assignment) -> dict[TP, list[int]]:
    return {tp: [b for b in r if b not in before.get(tp, ())] for tp, r in target.items()
            if set(r) - set(before.get(tp, ()))}


class Load:
    """acks=all load and HTTP through the VIP in the background; the lab's report at the end."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.stop = threading.Event()
        self.report: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kafkaops_lab.load import run_load

        self.report = run_load(self.cluster, 7200, rate=100, http_rate=8, stop=self.stop)

    def __enter__(self) -> Load:
        self.thread.start()
        time.sleep(2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(600)

    def summary(self) -> dict[str, Any]:
        r = self.report
        return {} if r is None else {"acked": r.produced_acked, "lost": r.lost, "duplicated": r.duplicated,
                                     "produce_errors": r.produce_errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--mb-per-topic", type=float, default=8.0)
    parser.add_argument("--throttle", default="4MB/s", help="replication throttle of the real runs and the estimates")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--inventory", type=Path, default=BENCH_LAB)
    parser.add_argument("--json", type=Path, default=None, help="default bench/results/lifecycle-<date>.json")
    parser.add_argument("--keep-lab", action="store_true", help="leave the lab up (and kafka1004 out) at the end")
    parser.add_argument("--keep-topics", action="store_true", help="leave the bench topics on the lab")
    args = parser.parse_args()

    from kafkaops.environment import Environment
    from kafkaops.inventory import load_inventory
    from kafkaops.placement.estimate import parse_rate
    from kafkaops.placement.lifecycle import add_plan, decommission_plan
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir

    inventory = args.inventory.resolve()
    cluster = load_inventory(inventory)
    base = lab_dir(cluster.name)
    rate = parse_rate(args.throttle)
    out_path = args.json or raw_result.default_path("lifecycle")
    result = raw_result.header("lifecycle", vars(args), inventory)
    result.update(lab_dir=str(base), throttle_bytes_per_s=rate)
    started_lab = not lab.is_up(base)
    if started_lab:
        result["lab_up_s"] = round(lab.up(cluster), 1)
    work = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    try:
        original = sorted(h.broker_id for h in cluster.hosts)
        t0 = time.monotonic()
        seed(cluster, args.topics, args.partitions, args.mb_per_topic, original)
        result["seed_s"] = round(time.monotonic() - t0, 1)
        seconds, rc, said = kafkaops("-i", str(inventory), "lab", "host", "add", log=work / "host-add.log")
        if rc != 0:
            raise SystemExit(f"lab host add failed: {said[-800:]}")
        result["host_add_s"] = seconds
        grown = load_inventory(base / f"{inventory.stem}-next-host.yaml")
        dc_of = {h.broker_id: h.dc for h in grown.hosts}
        rack_of = {h.broker_id: h.rack for h in grown.hosts if h.rack}
        names = {h.broker_id: h.name for h in grown.hosts}
        new_id = next(h.broker_id for h in grown.hosts if h.name == NEW)
        env = Environment.of(grown, dry_run=True)
        try:
            now = live(env)
            cur = now["current"]
            result["cluster_before"] = {
                "partitions": len(cur), "bench_partitions": sum(1 for t, _ in cur if t.startswith(TOPIC_PREFIX)),
                "bytes": sum(now["sizes"].values()),
                "replica_bytes": sum(now["sizes"].get(tp, 0) * len(r) for tp, r in cur.items()),
                "rf": dict(Counter(len(r) for r in cur.values())),
                "brokers": now["brokers"], "racks": {str(b): r for b, r in sorted(rack_of.items())}}
            every = sorted(dc_of)
            ours = add_plan(cur, new_id, dc_of=dc_of, rack_of=rack_of, sizes=now["sizes"])
            _, generated = env.reassigner().generate(sorted({t for t, _ in cur}), every)
            common = {"sizes": now["sizes"], "dc_of": dc_of, "rack_of": rack_of, "leaders": now["leaders"],
                      "throttle": rate, "brokers": every}
            result["add"] = {"broker": new_id, "kafkaops": compare(cur, ours.target, **common),
                             "kafka_generate": compare(cur, generated, **common),
                             "kafkaops_plan": {k: v for k, v in ours.to_dict().items() if k != "assignment"},
                             "rack_rule_broken_before": rack_rule_broken(cur, rack_of)}
        finally:
            env.close()
        raw_result.write(out_path, result)
        print(json.dumps({k: {kk: vv for kk, vv in v.items() if not isinstance(vv, (dict, list))}
                          for k, v in result["add"].items() if k in ("kafkaops", "kafka_generate")}), flush=True)

        # the add, for real, under load
        home = work / "add"
        with Load(grown) as load:
            seconds, rc, said = kafkaops("-i", str(base / f"{inventory.stem}-next-host.yaml"), "broker", "add", NEW,
                                         "--yes", "--reason", "bench lifecycle", "--no-scan", "--throttle",
                                         args.throttle, "--batch-size", str(args.batch_size), home=home,
                                         log=work / "add.log")
        records = journal(home)
        params = run_params(records)
        target = {(str(t), int(p)): tuple(r) for t, p, r in params.get("assignment", [])}
        planned = sum(now["sizes"].get(tp, 0) * len(n) for tp, n in new_replicas(cur, target).items())
        result["add"]["real"] = {"rc": rc, "wall_s": seconds, "loadavg_after": list(os.getloadavg()),
                                 "load": load.summary(), "planned_bytes": planned,
                                 "bytes_on_disk_of_new_replicas": on_disk(base, names, new_replicas(cur, target)),
                                 "partitions": len(target), "steps": step_seconds(records),
                                 "batches": sum(1 for r in records if r.get("event") == "batch_submitted")}
        if rc != 0:
            result["add"]["real"]["error"] = said[-1500:]
        raw_result.write(out_path, result)
        print(f"add: rc {rc}, {seconds} s", flush=True)
        if rc != 0:
            raise SystemExit(said[-1500:])

        env = Environment.of(grown, dry_run=True)
        try:
            now = live(env)
            cur = now["current"]
            result["decommission"] = {}
            for broker in (new_id, min(original)):
                left = [b for b in sorted(dc_of) if b != broker]
                common = {"sizes": now["sizes"], "dc_of": dc_of, "rack_of": rack_of, "leaders": now["leaders"],
                          "throttle": rate, "brokers": left}
                plan = decommission_plan(cur, broker, dc_of=dc_of, rack_of=rack_of, sizes=now["sizes"], min_isr={})
                _, generated = env.reassigner().generate(sorted({t for t, _ in cur}), left)
                result["decommission"][str(broker)] = {
                    "kafkaops": compare(cur, plan.target, **common),
                    "kafka_generate": compare(cur, generated, **common),
                    "kafkaops_plan": {k: v for k, v in plan.to_dict().items() if k != "assignment"},
                    "demote_leaders_after": _demote_leaders(cur, plan.target, broker, left)}
        finally:
            env.close()
        raw_result.write(out_path, result)

        home = work / "decommission"
        with Load(grown) as load:
            seconds, rc, said = kafkaops("-i", str(base / f"{inventory.stem}-next-host.yaml"), "broker",
                                         "decommission", NEW, "--yes", "--reason", "bench lifecycle", "--no-scan",
                                         "--syn-window", "2s", "--throttle", args.throttle, "--batch-size",
                                         str(args.batch_size), home=home, log=work / "decommission.log")
        records = journal(home)
        params = run_params(records)
        target = {(str(t), int(p)): tuple(r) for t, p, r in params.get("assignment", [])}
        env = Environment.of(grown, dry_run=True)
        try:
            after = live(env)
        finally:
            env.close()
        real = {"rc": rc, "wall_s": seconds, "loadavg_after": list(os.getloadavg()), "load": load.summary(),
                "planned_bytes": sum(now["sizes"].get(tp, 0) * len(n) for tp, n in new_replicas(cur, target).items()),
                "bytes_on_disk_of_new_replicas": on_disk(base, names, new_replicas(cur, target)),
                "partitions": len(target), "steps": step_seconds(records),
                "batches": sum(1 for r in records if r.get("event") == "batch_submitted"),
                "preferred_leaders_after": dict(Counter(str(r[0]) for r in after["current"].values())),
                "leaders_after": dict(Counter(str(v) for v in after["leaders"].values()))}
        if rc != 0:
            real["error"] = said[-1500:]
        result["decommission"][str(new_id)]["real"] = real
        raw_result.write(out_path, result)
        print(f"decommission: rc {rc}, {seconds} s", flush=True)
        seconds, rc, said = kafkaops("lab", "--lab", cluster.name, "host", "remove", NEW, log=work / "host-remove.log")
        result["host_remove"] = {"rc": rc, "s": seconds}
        if not args.keep_topics:
            drop_topics(cluster)
    finally:
        if started_lab and not args.keep_lab:
            lab.down(base)
    result.update(complete=True, finished=raw_result.now())
    raw_result.write(out_path, result)
    print(f"raw result: {out_path}  (logs in {work})")


def _demote_leaders(current: Assignment, target: Assignment, broker: int, left: Sequence[int]) -> dict[str, int]:
    """Preferred leaders per broker had the target kept the demote's leaders (before this change): the skew
    the final election's balanced order avoids."""
    from kafkaops.placement.lifecycle import demote_order, leaders_per_broker, replace_in_place

    demoted = {**current, **demote_order(current, broker)}
    plain = {tp: replace_in_place(current[tp], broker, next(b for b in r if b not in current[tp]))
             for tp, r in target.items() if set(r) - set(current[tp])}
    merged = {**demoted, **plain}
    led = leaders_per_broker({tp: r for tp, r in merged.items() if broker not in r}, left)
    return {str(b): n for b, n in sorted(led.items())}


if __name__ == "__main__":
    main()
