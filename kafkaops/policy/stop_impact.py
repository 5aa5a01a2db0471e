"""What stopping one broker does to the partitions it hosts: leaders that move, ISR that shrinks, writes lost.

**Gate on this broker's partitions** (Strimzi's ``canRoll``): a cluster can be slightly degraded and a
given broker still safe to stop, or fully in sync and the broker unsafe because some topic has RF ==
``min.insync.replicas``. :func:`stop_impact` simulates the stop partition by partition: who becomes
leader (the controller picks the first live ISR member in replica order), which partitions lose an ISR
member, which would fall below ``min.insync.replicas`` (plus an optional headroom) and which would go
offline. On a cluster stretched over DCs, :func:`cross_dc_impact` says which leaders cross the DC link
and which partitions then keep min ISR only through one DC. After the restart,
:func:`partitions_not_in_isr` says when the broker is back in every ISR, so the roll may continue.

**Topics with RF <= min.insync.replicas can never pass a min-ISR gate**: stopping any of their replicas
always leaves fewer than ``min.insync.replicas`` in sync. Waiting for them to "recover" stalled Strimzi
rolls forever (#2964), so :class:`StopImpact` names them apart (``rf_not_above_min_isr``) and the
pre-flight reports them as a *permanent* violation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.policy.snapshot_scan import (
    DEFAULT_MIN_ISR,
    partition_name,
    partition_names,
    snapshot_scan,
    summarize_names,
)


@dataclass(frozen=True)
class StopImpact:
    """What stopping one broker does to the partitions it hosts (a controlled shutdown, no unclean election).

    Attributes:
        broker_id: The broker that would stop.
        isr_headroom: Extra in-sync replicas required above ``min.insync.replicas``.
        hosted: Partitions the broker is a replica of.
        leadership_moves: ``(partition, new_leader)`` for partitions the broker leads; ``new_leader``
            is the first live ISR member in replica order (what the controller picks), ``None`` when
            there is none (the partition goes offline).
        loses_isr_replica: Partitions whose ISR shrinks (the broker is in their ISR).
        below_min_isr: Partitions that would be left with fewer than ``min.insync.replicas +
            isr_headroom`` live in-sync replicas (includes those in ``goes_offline``).
        goes_offline: Partitions the broker leads with no other live ISR member.
        rf_not_above_min_isr: Topics hosted by the broker whose replication factor is <=
            ``min.insync.replicas + isr_headroom``: stopping *any* replica of them always breaks the
            gate, so waiting cannot help (Strimzi #2964). Reported, never silently waited on.
        is_controller: The broker is the active controller (stopping it triggers an election).
    """

    broker_id: int
    isr_headroom: int
    hosted: int
    leadership_moves: tuple[tuple[PartitionState, int | None], ...]
    loses_isr_replica: tuple[PartitionState, ...]
    below_min_isr: tuple[PartitionState, ...]
    goes_offline: tuple[PartitionState, ...]
    rf_not_above_min_isr: tuple[str, ...]
    is_controller: bool
    _min_isr: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def below_min_isr_recoverable(self) -> tuple[PartitionState, ...]:
        """``below_min_isr`` minus topics with RF <= min ISR: these clear once lagging replicas catch up."""
        permanent = set(self.rf_not_above_min_isr)
        return tuple(p for p in self.below_min_isr if p.topic not in permanent)

    @property
    def below_min_isr_permanent(self) -> tuple[PartitionState, ...]:
        """``below_min_isr`` restricted to topics with RF <= min ISR (waiting never helps)."""
        permanent = set(self.rf_not_above_min_isr)
        return tuple(p for p in self.below_min_isr if p.topic in permanent)

    @property
    def new_leader_counts(self) -> dict[int, int]:
        """How many leaderships each broker would gain."""
        counts: defaultdict[int, int] = defaultdict(int)
        for _, new in self.leadership_moves:
            if new is not None:
                counts[new] += 1
        return dict(sorted(counts.items()))

    @property
    def safe(self) -> bool:
        """Stopping keeps every hosted partition online and at or above min ISR (+ headroom)."""
        return not self.below_min_isr and not self.goes_offline

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "broker_id": self.broker_id,
            "isr_headroom": self.isr_headroom,
            "is_controller": self.is_controller,
            "hosted": self.hosted,
            "leaders_moving": len(self.leadership_moves),
            "leadership_moves": [
                {"partition": partition_name(p), "from": self.broker_id, "to": new}
                for p, new in self.leadership_moves
            ],
            "new_leader_counts": {str(b): n for b, n in self.new_leader_counts.items()},
            "loses_isr_replica": partition_names(self.loses_isr_replica),
            "below_min_isr": [
                {
                    "partition": partition_name(p),
                    "isr_after": max(len(p.isr) - 1, 0),
                    "min_insync_replicas": self._min_isr.get(p.topic, DEFAULT_MIN_ISR),
                }
                for p in self.below_min_isr
            ],
            "goes_offline": partition_names(self.goes_offline),
            "rf_not_above_min_isr": list(self.rf_not_above_min_isr),
            "safe": self.safe,
        }


def stop_impact(snapshot: ClusterSnapshot, broker_id: int, isr_headroom: int = 0) -> StopImpact:
    """Simulate stopping ``broker_id``: leadership moves, ISR shrinks, min-ISR breaches, offline.

    Only ISR members that are registered count as live (a stale ISR entry of a dead broker does not
    keep a partition writable), which makes the answer conservative.

    Args:
        snapshot: The cluster as observed.
        broker_id: The broker to stop.
        isr_headroom: Require ``min.insync.replicas + isr_headroom`` live ISR members after the stop
            (``--isr-headroom``; 0 = exactly min ISR is acceptable).

    Returns:
        A :class:`StopImpact`.
    """
    s = snapshot_scan(snapshot)
    alive = set(snapshot.brokers)
    alive.discard(broker_id)
    # Common case: every broker named in a replica list is registered, so ISR size - 1 is the answer.
    all_alive = s.replica_brokers <= (alive | {broker_id})
    get_min = s.min_isr.get
    default = DEFAULT_MIN_ISR
    moves: list[tuple[PartitionState, int | None]] = []
    loses: list[PartitionState] = []
    below: list[PartitionState] = []
    offline: list[PartitionState] = []
    rf_topics: set[str] = set()
    hosted = s.by_broker.get(broker_id, [])

    for p in hosted:
        m = get_min(p.topic, default) + isr_headroom
        if len(p.replicas) <= m:
            rf_topics.add(p.topic)
        if p.leader is None or p.leader < 0:
            continue  # already offline: reported by the cluster-wide gate, not caused by this stop
        isr = p.isr
        if broker_id not in isr:
            continue  # out of sync already: stopping it changes neither ISR nor leadership
        loses.append(p)
        live_after = len(isr) - 1 if all_alive else sum(1 for r in isr if r in alive)
        if live_after < m:
            below.append(p)
        if p.leader == broker_id:
            new_leader = next((r for r in p.replicas if r in alive and r in isr), None)
            moves.append((p, new_leader))
            if new_leader is None:
                offline.append(p)

    return StopImpact(
        broker_id=broker_id,
        isr_headroom=isr_headroom,
        hosted=len(hosted),
        leadership_moves=tuple(moves),
        loses_isr_replica=tuple(loses),
        below_min_isr=tuple(below),
        goes_offline=tuple(offline),
        rf_not_above_min_isr=tuple(sorted(rf_topics)),
        is_controller=snapshot.controller == broker_id,
        _min_isr=s.min_isr,
    )


@dataclass(frozen=True)
class CrossDcImpact:
    """What stopping one broker of a cluster stretched over DCs does across DCs.

    Attributes:
        leaders_to: How many leaderships move to each *other* DC: producers there are then written to
            across the DC link (and the election moves them back).
        min_isr_depends_on: Per DC, the partitions that, while the broker is down, keep
            ``min.insync.replicas`` only thanks to that DC: losing it too (a DC outage, a link cut) would
            stop their writes. On a 2+2 layout with min ISR 2 that is every partition the broker hosts —
            the plan says so rather than let it pass unnoticed.
    """

    leaders_to: Mapping[str, int]
    min_isr_depends_on: Mapping[str, tuple[PartitionState, ...]]

    def describe(self) -> str:
        """One clause for a plan's impact line ("" when nothing crosses a DC)."""
        parts = []
        if self.leaders_to:
            parts.append(", ".join(f"{n} leader(s) move to {dc}" for dc, n in sorted(self.leaders_to.items())))
        for dc, parts_ in sorted(self.min_isr_depends_on.items()):
            if parts_:
                parts.append(f"{len(parts_)} partition(s) keep min ISR only through {dc} "
                             f"({summarize_names(partition_names(parts_))})")
        return "; ".join(parts)


def cross_dc_impact(snapshot: ClusterSnapshot, broker_id: int, broker_dc: Mapping[int, str]) -> CrossDcImpact | None:
    """The cross-DC part of :func:`stop_impact`; ``None`` when the cluster's brokers are in one DC."""
    if len(set(broker_dc.values())) < 2:
        return None
    impact = stop_impact(snapshot, broker_id)
    home = broker_dc.get(broker_id)
    leaders_to: dict[str, int] = {}
    for _p, new in impact.leadership_moves:
        if new is not None and broker_dc.get(new) not in (None, home):
            dc = broker_dc[new]
            leaders_to[dc] = leaders_to.get(dc, 0) + 1
    alive = set(snapshot.brokers) - {broker_id}
    depends: dict[str, list[PartitionState]] = {}
    for p in impact.loses_isr_replica:
        live = [r for r in p.isr if r in alive]
        need = snapshot.min_isr(p.topic, DEFAULT_MIN_ISR)
        for dc in sorted(set(broker_dc.values())):
            if len(live) >= need and sum(1 for r in live if broker_dc.get(r) != dc) < need:
                depends.setdefault(dc, []).append(p)
    return CrossDcImpact(leaders_to, {dc: tuple(ps) for dc, ps in depends.items()})


def partitions_not_in_isr(snapshot: ClusterSnapshot, broker_id: int) -> list[PartitionState]:
    """Partitions ``broker_id`` is a replica of but not in the ISR of (``kafka.wait_in_sync``).

    Empty means the broker is back in every ISR it belongs to and the roll may continue.

    Args:
        snapshot: The cluster as observed.
        broker_id: The broker that was restarted.

    Returns:
        The partitions still missing this broker from their ISR, in snapshot order.
    """
    return [p for p in snapshot_scan(snapshot).by_broker.get(broker_id, []) if broker_id not in p.isr]
