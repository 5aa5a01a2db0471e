"""The target assignment that meets the stretch layout with the fewest replica moves.

A replica *move* copies a whole partition to a broker that does not hold it: that is the cost of a
reassignment (hours and cross-DC bandwidth on a real cluster). Reordering a replica list, or dropping a
replica, moves no data — only leadership, at the next preferred election. So the planner works in two
passes per partition:

1. **Which brokers.** Every DC gets its share of the replication factor (``rf`` split evenly; at least
   :data:`~kafkaops.placement.layout.PER_DC` each). Within a DC the current replicas are kept first — no
   partition is copied that does not have to be, which makes the number of moves the least possible
   (each DC short of its share needs exactly that many additions, and nothing else is added). A DC that
   needs a new replica gets the broker of that DC holding the fewest replicas so far (the whole plan's
   count, so the load spreads); a DC with too many drops the replicas on its busiest brokers, never the
   current preferred leader.
2. **Which order.** The preferred leader's DC is the one leading the fewest of the topic's partitions so
   far, then the broker of that DC leading the fewest; its DC's other replicas follow (a single failure
   keeps the leader in the DC: producers do not switch DC), then each other DC's replicas, that DC's
   first being its broker that has stood first the fewest times (the leader after a whole-DC loss, so
   that too is spread). Ties keep what is there now, so a partition already laid out is left alone.

Linear in the partitions (a few dictionary operations per replica): 500,000 partitions on 1,000 brokers
plan in seconds (``bench/bench_placement.py``).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkaops.errors import ConfigError
from kafkaops.placement.layout import PER_DC, Assignment, TopicPartition, dcs_of


@dataclass(frozen=True)
class PlacementPlan:
    """The target of a placement change."""

    target: dict[TopicPartition, tuple[int, ...]]
    moves: int  # replicas copied to a broker that does not hold them
    changed: tuple[TopicPartition, ...]  # partitions whose replica list or order changes
    rf: int



def shares(rf: int, dcs: Sequence[str], *, per_dc: int = PER_DC) -> dict[str, int]:
    """Replicas per DC for replication factor ``rf``: even, the first DCs taking the remainder.

    Raises:
        ConfigError: ``rf`` cannot give every DC ``per_dc`` replicas, or exceeds what the DCs hold.
    """
    if rf < per_dc * len(dcs):
        raise ConfigError(f"replication factor {rf} cannot give each of {len(dcs)} DCs {per_dc} replicas",
                          hint=f"use --rf {per_dc * len(dcs)} or more")
    base, extra = divmod(rf, len(dcs))
    return {dc: base + (1 if i < extra else 0) for i, dc in enumerate(dcs)}


class _LeastLoaded:
    """Per DC, the broker holding the fewest replicas so far: a heap per DC whose stale entries (a count
    that changed since) are dropped when they surface; every change pushes the new count. O(log n) a pick
    where a scan of a 500-broker DC would cost 500 steps for each of 500,000 partitions."""

    def __init__(self, members: Sequence[Sequence[int]], load: dict[int, int]) -> None:
        self.load = load
        self.heaps = [[(load[b], b) for b in dc] for dc in members]
        for h in self.heaps:
            heapq.heapify(h)

    def take(self, dc: int, exclude: Sequence[int]) -> int:
        heap, aside = self.heaps[dc], []
        while True:
            count, b = heapq.heappop(heap)
            if count != self.load[b]:
                continue  # stale: the current count has its own entry
            if b in exclude:
                aside.append((count, b))
                continue
            break
        for entry in aside:
            heapq.heappush(heap, entry)
        self.load[b] = count + 1
        heapq.heappush(heap, (count + 1, b))
        return b

    def drop(self, dc: int, b: int) -> None:
        self.load[b] -= 1
        heapq.heappush(self.heaps[dc], (self.load[b], b))


def plan_layout(current: Assignment, dc_of: Mapping[int, str], *, rf: int | None = None,
                per_dc: int = PER_DC, load: Assignment | None = None) -> PlacementPlan:
    """The target assignment for the partitions of ``current`` (visited in its order, which the snapshot
    gives sorted by topic and partition; the same input gives the same plan).

    Args:
        current: ``{(topic, partition): replicas}`` of the partitions to lay out.
        dc_of: Every broker that may hold a replica, and its DC.
        rf: Replication factor of the target (default: ``per_dc`` times the number of DCs).
        per_dc: The least number of replicas per DC.
        load: The whole cluster's assignment, to count replicas per broker (default: ``current``).

    Raises:
        ConfigError: The DCs cannot hold the layout (too few brokers in a DC for its share).
    """
    dcs = dcs_of(dc_of)
    want_rf = rf if rf is not None else per_dc * len(dcs)
    share = shares(want_rf, dcs, per_dc=per_dc)
    members = [sorted(b for b, d in dc_of.items() if d == dc) for dc in dcs]
    for i, dc in enumerate(dcs):
        if len(members[i]) < share[dc]:
            raise ConfigError(f"DC {dc} has {len(members[i])} broker(s), the layout needs {share[dc]} replicas there",
                              hint="lower --rf, or add brokers to that DC")
    want = [share[dc] for dc in dcs]
    index = {b: dcs.index(d) for b, d in dc_of.items()}
    counts: dict[int, int] = dict.fromkeys(dc_of, 0)
    for replicas in (load if load is not None else current).values():
        for b in replicas:
            if b in counts:
                counts[b] += 1
    least = _LeastLoaded(members, counts)
    nd = len(dcs)
    target: dict[TopicPartition, tuple[int, ...]] = {}
    topic_state: dict[str, tuple[list[int], dict[int, int], dict[int, int]]] = {}
    led_all: dict[int, int] = dict.fromkeys(dc_of, 0)
    moved = 0
    changed: list[TopicPartition] = []
    for tp, now_seq in current.items():
        now = tuple(now_seq)
        # 1. which brokers: keep what each DC has up to its share, add the least-loaded for the rest
        per: list[list[int]] = [[] for _ in range(nd)]
        for b in now:
            d = index.get(b)
            if d is not None:  # a broker in no DC of the inventory (decommissioned) is dropped
                per[d].append(b)
        for d in range(nd):
            keep = per[d]
            if len(keep) > want[d]:  # drop the busiest, never the current preferred leader
                for b in sorted(keep, key=lambda x: (x == now[0], -counts[x]))[: len(keep) - want[d]]:
                    keep.remove(b)
                    least.drop(d, b)
            while len(keep) < want[d]:
                keep.append(least.take(d, keep))
                moved += 1
        # 2. which order: the DC, then the broker, leading the fewest of the topic's partitions so far
        state = topic_state.get(tp[0])
        if state is None:
            state = topic_state[tp[0]] = ([0] * nd, {}, {})
        led_dc, led_b, first_b = state
        now_leader = now[0] if now else None
        now_dc = index.get(now_leader, -1) if now_leader is not None else -1
        lead_dc, best = 0, None
        for d in range(nd):
            rank = (led_dc[d], d != now_dc, d)
            if best is None or rank < best:
                lead_dc, best = d, rank
        leader, rest = _pick_leader(per[lead_dc], led_b, led_all, now_leader)
        order = [leader, *_in_order(now, rest)]
        for d in range(nd):
            if d != lead_dc:
                head, rest = _pick_head(per[d], first_b, now)
                order += [head, *_in_order(now, rest)]
                first_b[head] = first_b.get(head, 0) + 1
        led_dc[lead_dc] += 1
        led_b[leader] = led_b.get(leader, 0) + 1
        led_all[leader] += 1
        result = tuple(order)
        target[tp] = result
        if result != now:
            changed.append(tp)
    return PlacementPlan(target, moved, tuple(changed), want_rf)


def _pick_leader(brokers: list[int], led: dict[int, int], led_all: dict[int, int],
                 now_leader: int | None) -> tuple[int, list[int]]:
    """The DC's broker leading the fewest of the topic's partitions, then of all, then today's leader; and
    the others. Two brokers (the usual share) are compared directly: this runs once per partition."""
    if len(brokers) == 2:
        x, y = brokers
        if (led.get(x, 0), led_all[x], x != now_leader, x) <= (led.get(y, 0), led_all[y], y != now_leader, y):
            return x, [y]
        return y, [x]
    best = min(brokers, key=lambda b: (led.get(b, 0), led_all[b], b != now_leader, b))
    return best, [b for b in brokers if b != best]


def _pick_head(brokers: list[int], first: dict[int, int], now: Sequence[int]) -> tuple[int, list[int]]:
    """Another DC's first replica (its leader after a loss of the leader's DC): the broker that stood first
    the fewest times for the topic, then today's order; and the others."""
    if len(brokers) == 2:
        x, y = brokers
        if (first.get(x, 0), _pos(now, x), x) <= (first.get(y, 0), _pos(now, y), y):
            return x, [y]
        return y, [x]
    best = min(brokers, key=lambda b: (first.get(b, 0), _pos(now, b), b))
    return best, [b for b in brokers if b != best]


def _in_order(now: Sequence[int], brokers: list[int]) -> list[int]:
    """``brokers`` in today's order, new ones last (ties keep today's order); one needs no sorting."""
    if len(brokers) > 1:
        brokers.sort(key=lambda b: (_pos(now, b), b))
    return brokers


def _pos(replicas: Sequence[int], broker: int) -> int:
    """Where ``broker`` stands in the current list (new replicas last): ties keep today's order."""
    return replicas.index(broker) if broker in replicas else len(replicas)


def batches(partitions: Sequence[TopicPartition], size: int) -> list[list[TopicPartition]]:
    """Reassignment batches in a stable order: ``size`` partitions each, so that a batch's data moves
    under one throttle and a resumed run knows which were submitted."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    ordered = sorted(partitions)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]
