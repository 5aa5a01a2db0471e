"""kafkaops at production scale: the lab grown to 3,000 and 10,000 partitions, and what each level costs.

Issue 47: Wikimedia's clusters hold thousands of partitions, and every gate polls the metadata of every
partition, the post-check reads every partition's offsets, the stop-impact analysis walks every partition.
The lab holds ~30. This bench creates topics (RF 3, min ISR 2) until the cluster holds each level's
partition count, waits until every one has a leader and its full ISR, and measures at each level:

* **in-process** (what a run does at every poll; ``--runs`` times, the median kept):
  ``metadata+configs`` (the snapshot a gate takes: one Metadata request and the topics' configs),
  ``gate: cluster health`` (the pure evaluation of it: offline, under-replicated, under min ISR),
  ``gate poll`` (the two together: what pre-flight, wait-in-sync and stability each do per poll), and
  ``stop impact`` (the analysis of stopping a broker: every partition it holds, with the ISR left);
* **whole processes**, as an operator runs them, each with its peak memory (max RSS):
  ``kafkaops status -o json``; ``kafkaops rolling-restart --dry-run -o json`` (the plan of a roll: every
  gate observed once); ``kafkaops check --no-scan -o json`` (the post-check's metadata part: every
  partition's offsets) — and side by side Kafka's own ``kafka-topics --describe
  --under-replicated-partitions`` (a JVM, the same question status answers).

Targets: a gate poll at 10,000 partitions within 2x its time at the lab's ~30; the CLI's memory at most
200 MiB. The raw times go to ``bench/results/scale-DATE.json`` (:mod:`raw_result`); docs/performance.md
states only what those files show.

Run by hand with a lab up (the bench lab beside the default one), its brokers given a production-like heap
(at 10,000 partitions the lab's default 320m ran out: OutOfMemoryError in every broker):
    kafkaops -i bench/lab-bench.yaml lab up --broker-heap 1g
    python bench/bench_scale.py --inventory bench/lab-bench.yaml [--levels 0,3000,10000] [--runs 5] [--keep]
Level 0 is the lab as it is. The topics it creates (``bench-scale-N``) are deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster
from kafkaops.policy.availability import cluster_health
from kafkaops.policy.stop_impact import stop_impact
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.kafka_auth import java_properties, properties_text
from kafkaops_lab.dirs import kafka_jars

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package

REPO = Path(__file__).resolve().parents[1]
PREFIX = "bench-scale-"
TIME = "/usr/bin/time"


def _admin_client(cluster: Cluster) -> Any:
    """The lab's super user: kafkaops' own user may not create or delete topics (the lab's ACLs give it only
    what a maintenance needs), and the bench's topics are the lab's set-up, not kafkaops' work."""
    from confluent_kafka.admin import AdminClient

    from kafkaops.systems.kafka_auth import librdkafka_config
    from kafkaops_lab.security import admin_endpoint

    return AdminClient({**librdkafka_config(admin_endpoint(cluster)), "log_level": 2})


def grow(cluster: Cluster, total: int, per_topic: int, progress: Callable[[str], None]) -> int:
    """Create ``bench-scale-N`` topics until the cluster holds at least ``total`` partitions; wait until every
    partition has a leader and its whole replica set in sync. Returns the partitions it holds."""
    from confluent_kafka.admin import NewTopic

    client = _admin_client(cluster)
    md = client.list_topics(timeout=30)
    have = sum(len(t.partitions) for t in md.topics.values())
    existing = {t for t in md.topics if t.startswith(PREFIX)}
    n = len(existing)
    new: list[Any] = []
    while have < total:
        count = min(per_topic, total - have)
        new.append(NewTopic(f"{PREFIX}{n:04d}", num_partitions=count, replication_factor=3,
                            config={"min.insync.replicas": "2", "segment.bytes": str(16 * 1024 * 1024)}))
        have += count
        n += 1
    for i in range(0, len(new), 10):  # a few topics a request: a controller under 10,000 new replicas is slow
        futures = client.create_topics(new[i:i + 10], request_timeout=120)
        for name, f in futures.items():
            f.result(timeout=180)
            progress(f"created {name}")
    deadline = time.monotonic() + 900
    while True:
        md = client.list_topics(timeout=60)
        parts = [p for t in md.topics.values() for p in t.partitions.values()]
        pending = [p for p in parts if p.leader < 0 or len(p.isrs) < len(p.replicas)]
        if not pending:
            return len(parts)
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} of {len(parts)} partition(s) still without a leader or full ISR")
        progress(f"{len(pending)} of {len(parts)} partition(s) not yet led and in sync")
        time.sleep(5)


def shrink(cluster: Cluster) -> None:
    """Delete every ``bench-scale-`` topic."""
    client = _admin_client(cluster)
    names = [t for t in client.list_topics(timeout=30).topics if t.startswith(PREFIX)]
    if names:
        for f in client.delete_topics(names, request_timeout=120).values():
            f.result(timeout=180)


def in_process(cluster: Cluster, runs: int) -> dict[str, Any]:
    """The gate's poll and the stop-impact analysis, timed in this process (a run's own cost per poll)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from kafkaops.systems.kafka_auth import librdkafka_config

    admin = KafkaAdmin.for_cluster(cluster)
    # The floor of a poll: the same two requests through a bare confluent-kafka client, nothing of kafkaops
    # (librdkafka parses the metadata in C; confluent-kafka builds a Python object per partition and replica).
    bare = AdminClient({**librdkafka_config(cluster.kafka), "log_level": 2})
    broker = cluster.hosts[0].broker_id
    times: dict[str, list[float]] = {"floor: list_topics": [], "floor: list_topics + describe_configs": [],
                                     "metadata+configs": [], "gate: cluster health": [], "gate poll": [],
                                     "stop impact": []}
    partitions = 0
    for _ in range(runs):
        f0 = time.perf_counter()
        md = bare.list_topics(timeout=30)
        f1 = time.perf_counter()
        configs = bare.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in md.topics],
                                        request_timeout=30)
        for future in configs.values():
            future.result(30)
        f2 = time.perf_counter()
        times["floor: list_topics"].append(round(f1 - f0, 4))
        times["floor: list_topics + describe_configs"].append(round(f2 - f0, 4))
        t0 = time.perf_counter()
        snap = admin.snapshot(with_configs=True)
        t1 = time.perf_counter()
        cluster_health(snap)
        t2 = time.perf_counter()
        stop_impact(snap, broker)
        t3 = time.perf_counter()
        partitions = len(snap.partitions)
        times["metadata+configs"].append(round(t1 - t0, 4))
        times["gate: cluster health"].append(round(t2 - t1, 4))
        times["gate poll"].append(round(t2 - t0, 4))
        times["stop impact"].append(round(t3 - t2, 4))
    return {"partitions": partitions, "times": times,
            "median_s": {k: round(statistics.median(v), 4) for k, v in times.items()}}


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Wall seconds, exit code and peak RSS (KiB) of one whole process (GNU time's %M)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        t = time.perf_counter()
        proc = subprocess.run([TIME, "-o", out.name, "-f", "%M", *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env, check=False)
        took = time.perf_counter() - t
        lines = [ln for ln in Path(out.name).read_text().splitlines() if ln.strip().isdigit()]
    return took, proc.returncode, int(lines[-1]) if lines else -1


def processes(cluster: Cluster, inventory: Path, runs: int, java: bool, props: Path) -> dict[str, Any]:
    entry = Path(sys.executable).parent / "kafkaops"
    kafkaops = [str(entry), "-i", str(inventory)]
    cases = {
        "kafkaops status -o json": [*kafkaops, "status", cluster.name, "-o", "json"],
        "kafkaops rolling-restart --dry-run -o json": [*kafkaops, "rolling-restart", cluster.name, "--dry-run",
                                                       "-o", "json"],
        "kafkaops check --no-scan -o json": [*kafkaops, "check", cluster.name, "--no-scan", "-o", "json"],
    }
    if java:
        cases["kafka-topics --describe --under-replicated-partitions"] = [
            "java", "-Dlog4j.configuration=file:/dev/null", "-cp", f"{kafka_jars()}/*",
            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap_servers.split(",")[0],
            "--command-config", str(props), "--describe", "--under-replicated-partitions"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "lab")]),
           "KAFKAOPS_HOME": tempfile.mkdtemp(prefix="bench-scale-home-")}
    times: dict[str, list[float]] = {k: [] for k in cases}
    rss: dict[str, list[int]] = {k: [] for k in cases}
    exits: dict[str, list[int]] = {k: [] for k in cases}
    for _ in range(runs):  # in rounds: a noisy moment hits every command
        for name, argv in cases.items():
            took, code, kib = _timed(argv, env)
            times[name].append(round(took, 4))
            rss[name].append(kib)
            exits[name].append(code)
    return {"times": times, "max_rss_kib": rss, "exits": {k: sorted(set(v)) for k, v in exits.items()},
            "median_s": {k: round(statistics.median(v), 4) for k, v in times.items()},
            "peak_rss_mib": {k: round(max(v) / 1024, 1) for k, v in rss.items()}}


def _say(level: int, message: str) -> None:
    print(f"  [{level}] {message}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", type=Path, default=REPO / "bench" / "lab-bench.yaml")
    parser.add_argument("--levels", default="0,3000,10000", help="total partitions per level (0: as it is)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--per-topic", type=int, default=250, help="partitions per created topic")
    parser.add_argument("--no-java", action="store_true", help="leave out kafka-topics (a JVM a run)")
    parser.add_argument("--keep", action="store_true", help="leave the created topics")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cluster = load_inventory(args.inventory)
    levels = [int(x) for x in args.levels.split(",")]
    path = args.out or raw_result.default_path("scale")
    result: dict[str, Any] = raw_result.header("scale", vars(args), args.inventory)
    result.update({"cluster": cluster.name, "levels": []})
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "kafkaops")], check=True,
                   stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "client.properties"
        props.write_text(properties_text(java_properties(cluster.kafka)))
        props.chmod(0o600)
        try:
            for level in levels:
                started = time.monotonic()
                held = grow(cluster, level, args.per_topic, functools.partial(_say, level))
                print(f"level {level}: {held} partitions, ready in {time.monotonic() - started:.0f} s", flush=True)
                row: dict[str, Any] = {"level": level, "partitions": held, "in_process": in_process(cluster, args.runs),
                       "processes": processes(cluster, args.inventory, args.runs, not args.no_java, props)}
                result["levels"].append(row)
                raw_result.write(path, result)
                for name, value in {**row["in_process"]["median_s"], **row["processes"]["median_s"]}.items():
                    mem = row["processes"]["peak_rss_mib"].get(name)
                    print(f"  {name:<56} {value:8.3f} s" + (f"  {mem:7.1f} MiB" if mem is not None else ""))
        finally:
            if not args.keep:
                shrink(cluster)
    first = result["levels"][0]["in_process"]["median_s"]["gate poll"] if result["levels"] else None
    if first:
        for row in result["levels"]:
            row["gate_poll_vs_first"] = round(row["in_process"]["median_s"]["gate poll"] / first, 2)
    result.update({"complete": True, "finished": raw_result.now()})
    raw_result.write(path, result)
    print(f"-> {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
