"""Benchmark: the safe batches of a roll over 1,000 brokers and 500,000 partitions (issue 19: < 2 s, < 1 GiB).

Two synthetic clusters: bench_safety's (RF 3, min ISR 2, replicas on neighbouring brokers: no two
replicas of a partition may stop together, so batches are a colouring of the brokers) and a stretched one
(RF 4, two replicas per DC, min ISR 2: a whole DC may stop at once, minus what the placement forbids).

Run: ``python bench/bench_batches.py [--brokers 1000] [--partitions 500000]``.
"""

from __future__ import annotations

import argparse
import resource
import time

from bench_safety import synthetic_snapshot

from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.batches import plan_batches


def stretched(brokers: int, partitions: int) -> tuple[ClusterSnapshot, dict[int, str]]:
    half = brokers // 2
    eqiad, codfw = list(range(1001, 1001 + half)), list(range(5001, 5001 + brokers - half))
    parts, topics = [], {}
    for i in range(partitions):
        t, p = divmod(i, 100)
        a, b = eqiad[i % half], eqiad[(i + 1) % half]
        c, d = codfw[(i * 7) % len(codfw)], codfw[(i * 7 + 1) % len(codfw)]
        replicas = (a, b, c, d) if i % 2 else (c, d, a, b)
        parts.append(PartitionState(f"topic_{t:05d}", p, replicas[0], replicas, replicas))
        topics[f"topic_{t:05d}"] = TopicConfig(f"topic_{t:05d}", 2, 4)
    dc = {b: "eqiad" for b in eqiad} | {b: "codfw" for b in codfw}
    return ClusterSnapshot("s", 0.0, tuple(sorted(dc)), codfw[-1], tuple(parts), topics), dc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=500_000)
    args = ap.parse_args()
    for name, (snap, group_of) in (("RF 3, neighbours", (synthetic_snapshot(args.brokers, args.partitions), None)),
                                   ("RF 4 stretched over 2 DCs", stretched(args.brokers, args.partitions))):
        last = [snap.controller] if snap.controller is not None else []
        order = [b for b in snap.brokers if b not in last] + last
        t0 = time.perf_counter()
        plan = plan_batches(snap, order, group_of=group_of)
        elapsed = time.perf_counter() - t0
        sizes = sorted({len(b) for b in plan.batches})
        print(f"{name}: {len(plan.batches)} batches (sizes {sizes[0]}..{sizes[-1]}, {plan.strategy}) in "
              f"{elapsed:.2f} s (target < 2 s)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB, the synthetic snapshots included (target < 1024 MiB)")


if __name__ == "__main__":
    main()
