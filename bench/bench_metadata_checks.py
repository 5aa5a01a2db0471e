"""Benchmark: driver-side metadata checks on a synthetic 100,000-partition baseline vs now.

Target (issue 6): ``metadata_findings(before, now)`` on 100,000 partitions in < 3 s. Also times the
snapshot file round trip (``to_json`` / ``from_json``), which every maintenance run pays once.

"Now" is the baseline after a plausible run: every partition grew, retention trimmed some starts,
one broker is out of the ISR of its partitions (URP), 100 partitions were truncated and 10 had their
records deleted, so every kind of finding is produced and the comparison does real work.

Run: ``python bench/bench_metadata_checks.py [--partitions 100000] [--brokers 60]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from collections import Counter

from kafkaops.health.metadata import OffsetsSnapshot, PartitionOffsets, metadata_findings
from kafkaops.model import TopicConfig


def build(partitions: int, brokers: int) -> tuple[OffsetsSnapshot, OffsetsSnapshot]:
    ids = tuple(range(1001, 1001 + brokers))
    dc = {b: ("eqiad" if i % 2 == 0 else "codfw") for i, b in enumerate(ids)}
    per_topic = 50
    topics = {}
    base: list[PartitionOffsets] = []
    after: list[PartitionOffsets] = []
    down = ids[3]
    for i in range(partitions):
        t, p = divmod(i, per_topic)
        name = f"eqiad.topic_{t:05d}"
        if p == 0:
            topics[name] = TopicConfig(name, 2, 3)
        a = i % brokers
        replicas = (ids[a], ids[(a + 1) % brokers], ids[(a + 5) % brokers])
        start, end = i * 10, i * 10 + 10_000
        base.append(PartitionOffsets(name, p, replicas[0], replicas, replicas, start, end))
        isr = tuple(r for r in replicas if r != down)
        leader = isr[0]
        n_start, n_end = start + (500 if i % 7 == 0 else 0), end + 2_000
        if i % 1000 == 1:
            n_end = end - 50  # truncation
        if i % 10_000 == 2:
            n_start = n_end  # delete_records
        after.append(PartitionOffsets(name, p, leader, replicas, isr, n_start, n_end))
    before = OffsetsSnapshot("synthetic", 0.0, ids, ids[0], tuple(base), topics, dc)
    now = OffsetsSnapshot("synthetic", 3600.0, ids, ids[0], tuple(after), topics, dc)
    return before, now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--brokers", type=int, default=60)
    args = ap.parse_args()

    before, now = build(args.partitions, args.brokers)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.partitions} partitions, {args.brokers} brokers (peak RSS after building: {rss0:.0f} MiB)")

    t0 = time.perf_counter()
    findings = metadata_findings(before, now)
    checks_s = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"metadata_findings(before, now): {checks_s:.3f} s, {len(findings)} findings, peak RSS {rss1:.0f} MiB"
    )
    for (severity, check), n in sorted(Counter((f.severity, f.check) for f in findings).items()):
        print(f"  {severity:8} {check:30} {n}")

    t0 = time.perf_counter()
    text = before.to_json()
    dump_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = OffsetsSnapshot.from_json(text)
    load_s = time.perf_counter() - t0
    assert back == before
    print(f"snapshot file: {len(text) / 2**20:.1f} MiB, to_json {dump_s:.3f} s, from_json {load_s:.3f} s")

    fresh = OffsetsSnapshot.from_json(now.to_json())  # no cached ClusterSnapshot
    tracemalloc.start()
    metadata_findings(before, fresh)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"metadata_findings allocations (tracemalloc peak): {peak / 2**20:.1f} MiB")
    ok = checks_s < 3.0
    print("PASS" if ok else "FAIL", "(target: < 3 s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
