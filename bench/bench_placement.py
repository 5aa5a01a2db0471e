"""Benchmark: `placement plan` on a stretch cluster of 1,000 brokers, 500,000 partitions, 2 DCs.

What it times is the plan's own work once the cluster is read: check the current layout, compute the
target with the fewest moves, check the target, estimate the bytes to move (target: < 5 s and < 2 GiB,
issue 15). The synthetic cluster is what Kafka's rack-aware assignment gives on two racks: RF 3 with DCs
alternating (so every partition has one DC with a single replica, and needs one move to reach RF 4).

Run: ``python bench/bench_placement.py [--brokers 1000] [--partitions 500000]``. Peak RSS is the whole
process's (the synthetic cluster included); tracemalloc measures in a second pass.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
import tracemalloc

from kafkaops.placement.estimate import estimate_moves
from kafkaops.placement.layout import check_layout
from kafkaops.placement.planner import plan_layout


def synthetic(brokers: int, partitions: int, per_topic: int = 100) -> tuple[dict, dict, dict]:
    half = brokers // 2
    eqiad = list(range(1001, 1001 + half))
    codfw = list(range(2001, 2001 + brokers - half))
    dc_of = {b: "eqiad" for b in eqiad} | {b: "codfw" for b in codfw}
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    for i in range(partitions):
        t, p = divmod(i, per_topic)
        a, b = eqiad[i % len(eqiad)], codfw[(i * 7) % len(codfw)]
        c = eqiad[(i + 1) % len(eqiad)]
        assignment[(f"topic_{t:05d}", p)] = (a, b, c) if i % 2 else (b, a, codfw[(i * 7 + 1) % len(codfw)])
    sizes = {tp: 1_000_000 + (hash(tp) % 1000) for tp in assignment}
    return assignment, dc_of, sizes


def work(assignment: dict, dc_of: dict, sizes: dict) -> tuple[int, int, int]:
    min_isr = dict.fromkeys({t for t, _ in assignment}, 2)
    before = check_layout(assignment, dc_of, min_isr)
    plan = plan_layout(assignment, dc_of, rf=4)
    after = check_layout(plan.target, dc_of, min_isr)
    est = estimate_moves(assignment, plan.target, sizes, dc_of)
    return sum(before.counts().values()), plan.moves, sum(after.counts().values()) + est.replicas * 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=500_000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    assignment, dc_of, sizes = synthetic(args.brokers, args.partitions)
    print(f"synthetic cluster: {args.brokers} brokers, {len(assignment)} partitions "
          f"({time.perf_counter() - t0:.1f} s to build)")
    gc.collect()
    t0 = time.perf_counter()
    violations, moves, left = work(assignment, dc_of, sizes)
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"check + plan + check + estimate: {elapsed:.2f} s (target < 5 s); peak RSS {rss:.0f} MiB "
          f"(target < 2048 MiB)")
    print(f"  rules broken before (partitions x rules) {violations}, replica moves {moves} "
          "(the least possible: one per partition), "
          f"violations after {left}")
    tracemalloc.start()
    work(assignment, dc_of, sizes)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  the plan's own allocations at peak: {peak / 2**20:.0f} MiB (tracemalloc)")


if __name__ == "__main__":
    main()
