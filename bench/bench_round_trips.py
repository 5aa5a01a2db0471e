"""What one step of a roll asks, question by question: the round trips behind kafkaops' own cost (issue 47).

A roll's ~80 steps each observe and verify on fresh answers (a snapshot where a step decides, the lock's
holder before each change, each silence's lease). This bench times each of those questions on a lab, and each
next to the form it had before the work of 2026-12-07, so that docs/performance.md can say what a step costs
and why, from a committed file:

- a ZooKeeper session opened per read vs the environment's kept one;
- the serving probe and the controller's view on new connections (TLS, and SCRAM for the view) vs kept,
  logged-in ones (:class:`kafkaops.systems.broker_probe.KeptConnections`);
- the parts of a snapshot: Metadata, the topics' DescribeConfigs (through confluent-kafka), the same
  DescribeConfigs sent raw on a kept connection asking all keys and asking only the two a gate reads (what
  part of it is the broker's own time), and the whole :meth:`Environment.snapshot`;
- an SSH command on a kept connection (``true``), and the lab's ``hostctl status`` and log scan.

Run by hand with a lab up:
    python bench/bench_round_trips.py [--inventory bench/lab-bench.yaml] [--runs 30]
Medians and maxima in milliseconds go to ``bench/results/round-trips-DATE.json`` (:mod:`raw_result`).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkaops.environment import Environment
from kafkaops.inventory import load_inventory
from kafkaops.systems.broker_probe import KeptConnections, serves, view_of
from kafkaops.systems.kafka_wire import CORRELATION, open_connection, read_frame
from kafkaops.systems.zookeeper import ZooKeeper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package

REPO = Path(__file__).resolve().parents[1]
_DESCRIBE_CONFIGS = 32


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def describe_configs_request(topics: list[str], keys: list[str] | None) -> Callable[[int], bytes]:
    """A size-prefixed DescribeConfigs v1 for ``topics`` (``keys``: only those; None: every key)."""
    body = struct.pack(">i", len(topics))
    for topic in topics:
        body += struct.pack(">b", 2) + _string(topic)
        body += struct.pack(">i", -1) if keys is None else struct.pack(">i", len(keys)) + b"".join(map(_string, keys))
    body += struct.pack(">b", 0)  # no synonyms

    def request(correlation_id: int) -> bytes:
        head = struct.pack(">hhih", _DESCRIBE_CONFIGS, 1, correlation_id, 8) + b"kafkaops"
        return struct.pack(">i", len(head) + len(body)) + head + body
    return request


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    fn()  # the first call of a kind pays for imports and lazy clients: not what a step pays
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "max_ms": round(max(times), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", type=Path, default=REPO / "bench" / "lab-bench.yaml")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    cluster = load_inventory(args.inventory)
    env = Environment(cluster, dry_run=True)
    host = cluster.hosts[0]
    snap = env.kafka.snapshot(with_configs=False)
    broker = sorted(snap.endpoints)[0]
    address, port = snap.endpoints[broker]
    topics = sorted({p.topic for p in snap.partitions})
    kept = KeptConnections()
    raw = open_connection(cluster.kafka, address, port, time.monotonic() + 10)

    def raw_describe(keys: list[str] | None) -> None:
        raw.settimeout(10)
        raw.sendall(describe_configs_request(topics, keys)(next(CORRELATION) & 0x7FFFFFFF))
        read_frame(raw, time.monotonic() + 10, 64 << 20)

    def zk_session_per_read() -> None:
        with ZooKeeper.for_cluster(cluster, dry_run=True) as zk:
            zk.registered_brokers()

    def kept_session_read() -> None:
        with env.zookeeper() as zk:
            assert zk is not None
            zk.registered_brokers()

    questions: dict[str, Callable[[], Any]] = {
        "zookeeper: a new session per read": zk_session_per_read,
        "zookeeper: a read on the kept session": kept_session_read,
        "probe: serving, new TLS connection": lambda: serves(cluster.kafka, address, port),
        "probe: serving, kept logged-in connection": lambda: serves(cluster.kafka, address, port, kept=kept),
        "probe: controller's view, new TLS + SCRAM connection": lambda: view_of(cluster.kafka, broker, address,
                                                                               port),
        "probe: controller's view, kept connection": lambda: view_of(cluster.kafka, broker, address, port,
                                                                    kept=kept),
        "snapshot part: Metadata (confluent-kafka)": lambda: env.kafka.metadata(attempts=1),
        "snapshot part: DescribeConfigs of every topic (confluent-kafka)":
            lambda: env.kafka.topic_configs(topics, {t: 3 for t in topics}),
        "snapshot part: DescribeConfigs raw, every key": lambda: raw_describe(None),
        "snapshot part: DescribeConfigs raw, min.insync.replicas and cleanup.policy only":
            lambda: raw_describe(["min.insync.replicas", "cleanup.policy"]),
        "snapshot: Environment.snapshot, with configs": lambda: env.snapshot(with_configs=True),
        "snapshot: Environment.snapshot, without configs": lambda: env.snapshot(with_configs=False),
        "ssh: `true` on the kept connection": lambda: env.run(host, "true"),
        "ssh: the host's kafka_status": lambda: env.run(host, env.command(host, "kafka_status"), check=False),
        "ssh: the host's kafka_log since a minute ago": lambda: env.run(
            host, env.command(host, "kafka_log", since=int(time.time()) - 60), check=False),
    }
    path = raw_result.default_path("round-trips")
    result: dict[str, Any] = raw_result.header("round-trips", {"runs": args.runs}, args.inventory)
    result.update({"cluster": cluster.name, "partitions": len(snap.partitions), "topics": len(topics),
                   "questions": {}})
    try:
        for name, fn in questions.items():
            result["questions"][name] = timed(fn, args.runs)
            got = result["questions"][name]
            print(f"{got['median_ms']:8.2f} ms (max {got['max_ms']:7.2f})  {name}")
    finally:
        raw.close()
        kept.close()
        env.close()
    result.update({"complete": True, "finished": raw_result.now()})
    raw_result.write(path, result)
    print(f"-> {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
