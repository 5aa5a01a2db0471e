"""Benchmark: safety analysis of a synthetic 1,000-broker / 500,000-partition snapshot.

Measures what a plan for ``kafkaops reboot`` costs on a very large cluster: ``cluster_health`` +
``stop_impact`` + ``preflight`` for one broker (target: < 2 s and < 1 GiB, issue 4), then a preflight
for every broker as a rolling plan does (the per-snapshot scan is shared).

Run: ``python bench/bench_safety.py [--brokers 1000] [--partitions 500000]``.
Timing runs without tracemalloc; a second, separate run measures the analysis' own allocations.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
import tracemalloc

from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.availability import cluster_health
from kafkaops.policy.preflight import PreflightResult, preflight
from kafkaops.policy.stop_impact import stop_impact


def synthetic_snapshot(brokers: int, partitions: int, partitions_per_topic: int = 100) -> ClusterSnapshot:
    """RF 3 / min.isr 2; ~1 % of partitions lag one replica, ~2 % are led by a non-preferred one."""
    broker_ids = tuple(range(1001, 1001 + brokers))
    topics: dict[str, TopicConfig] = {}
    parts: list[PartitionState] = []
    n_topics = partitions // partitions_per_topic
    i = 0
    for t in range(n_topics):
        name = f"eqiad.topic_{t:05d}"
        topics[name] = TopicConfig(name=name, min_insync_replicas=2, replication_factor=3)
        for p in range(partitions_per_topic):
            a = i % brokers
            replicas = (broker_ids[a], broker_ids[(a + 1) % brokers], broker_ids[(a + 7) % brokers])
            isr = replicas[:2] if i % 100 == 37 else replicas
            leader = replicas[1] if i % 50 == 3 else replicas[0]
            parts.append(PartitionState(topic=name, partition=p, leader=leader, replicas=replicas, isr=isr))
            i += 1
    return ClusterSnapshot(
        cluster="synthetic",
        taken_at=0.0,
        brokers=broker_ids,
        controller=broker_ids[0],
        partitions=tuple(parts),
        topics=topics,
    )


def rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def analyse(snap: ClusterSnapshot, broker: int, dc: dict[int, str]) -> PreflightResult:
    cluster_health(snap, dc)
    stop_impact(snap, broker)
    return preflight(snap, broker, allow_urp=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=500_000)
    args = ap.parse_args()

    t0 = time.perf_counter()
    snap = synthetic_snapshot(args.brokers, args.partitions)
    build_s = time.perf_counter() - t0
    rss_snapshot = rss_mib()
    dc = {b: ("eqiad" if b % 2 else "codfw") for b in snap.brokers}
    broker = snap.brokers[len(snap.brokers) // 2]
    print(
        f"snapshot: {args.brokers} brokers, {len(snap.partitions)} partitions "
        f"(built in {build_s:.2f} s, peak RSS {rss_snapshot:.0f} MiB)"
    )

    gc.collect()
    t0 = time.perf_counter()
    result = analyse(snap, broker, dc)
    analysis_s = time.perf_counter() - t0
    rss_after = rss_mib()
    print(
        f"cluster_health + stop_impact + preflight(broker {broker}): {analysis_s:.3f} s; "
        f"peak RSS {rss_after:.0f} MiB (+{rss_after - rss_snapshot:.0f} MiB over the snapshot)"
    )
    print(
        f"  preflight ok={result.ok} codes={result.codes} "
        f"leaders moving={len(result.impact.leadership_moves)} hosted={result.impact.hosted}"
    )

    t0 = time.perf_counter()
    for b in snap.brokers:
        preflight(snap, b, allow_urp=True)
    roll_s = time.perf_counter() - t0
    print(f"rolling plan: preflight for all {len(snap.brokers)} brokers (scan cached): {roll_s:.3f} s")

    # Allocations of the analysis alone, on a fresh snapshot object so nothing is cached.
    snap2 = ClusterSnapshot(
        cluster=snap.cluster,
        taken_at=0.0,
        brokers=snap.brokers,
        controller=snap.controller,
        partitions=snap.partitions,
        topics=snap.topics,
    )
    tracemalloc.start()
    analyse(snap2, broker, dc)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"analysis allocations (tracemalloc peak): {peak / 2**20:.1f} MiB")
    ok = analysis_s < 2.0 and rss_after < 1024
    print("PASS" if ok else "FAIL", "(target: < 2 s and < 1 GiB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
