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

from collections import Counter
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

    def to_dict(self) -> dict[str, object]:
        return {"rf": self.rf, "moves": self.moves, "changed": len(self.changed)}


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


def plan_layout(current: Assignment, dc_of: Mapping[int, str], *, rf: int | None = None,
                per_dc: int = PER_DC, load: Assignment | None = None) -> PlacementPlan:
    """The target assignment for the partitions of ``current``.

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
    members: dict[str, list[int]] = {dc: sorted(b for b, d in dc_of.items() if d == dc) for dc in dcs}
    for dc, n in share.items():
        if len(members[dc]) < n:
            raise ConfigError(f"DC {dc} has {len(members[dc])} broker(s), the layout needs {n} replicas there",
                              hint="lower --rf, or add brokers to that DC")
    replicas_on: Counter[int] = Counter(dict.fromkeys(dc_of, 0))
    for replicas in (load if load is not None else current).values():
        replicas_on.update(b for b in replicas if b in dc_of)

    chosen: dict[TopicPartition, dict[str, list[int]]] = {}
    for tp in sorted(current):
        now = list(current[tp])
        per: dict[str, list[int]] = {}
        for dc in dcs:
            keep = [b for b in now if dc_of.get(b) == dc]
            if len(keep) > share[dc]:  # drop the busiest, never the current preferred leader
                ranked = sorted(keep, key=lambda b: (b == now[0], -replicas_on[b], keep.index(b)))
                for b in ranked[: len(keep) - share[dc]]:
                    keep.remove(b)
                    replicas_on[b] -= 1
            while len(keep) < share[dc]:
                b = min((x for x in members[dc] if x not in keep), key=lambda x: (replicas_on[x], x))
                keep.append(b)
                replicas_on[b] += 1
            per[dc] = keep
        chosen[tp] = per  # a replica on a broker outside dc_of (decommissioned) is in no DC: dropped

    target: dict[TopicPartition, tuple[int, ...]] = {}
    led_topic: Counter[tuple[str, int | str]] = Counter()
    led_all: Counter[int] = Counter()
    first_topic: Counter[tuple[str, int]] = Counter()
    for tp in sorted(chosen):
        topic = tp[0]
        per = chosen[tp]
        now = list(current[tp])
        now_leader_dc = dc_of.get(now[0]) if now else None
        lead_dc = min(dcs, key=lambda dc: (led_topic[(topic, dc)], dc != now_leader_dc, dcs.index(dc)))
        in_dc = per[lead_dc]
        leader = min(in_dc, key=lambda b: (led_topic[(topic, b)], led_all[b], b != (now[0] if now else None),
                                           b))
        order = [leader, *sorted((b for b in in_dc if b != leader), key=lambda b: (_pos(now, b), b))]
        for dc in dcs:
            if dc == lead_dc:
                continue
            others = per[dc]
            head = min(others, key=lambda b: (first_topic[(topic, b)], _pos(now, b), b))
            order += [head, *sorted((b for b in others if b != head), key=lambda b: (_pos(now, b), b))]
            first_topic[(topic, head)] += 1
        led_topic[(topic, lead_dc)] += 1
        led_topic[(topic, leader)] += 1
        led_all[leader] += 1
        target[tp] = tuple(order)

    moved = sum(len(set(r) - set(current[tp])) for tp, r in target.items())
    changed = tuple(tp for tp in sorted(target) if tuple(current[tp]) != target[tp])
    return PlacementPlan(target, moved, changed, want_rf)


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
