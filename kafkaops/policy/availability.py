"""Cluster-wide availability figures from a snapshot: what ``kafkaops status`` shows and checks report.

URP, offline and min-ISR counts are judged from metadata over every partition
(:mod:`kafkaops.policy.snapshot_scan`), never from the brokers being rolled: Kafka's own URP metric is
counted on the leader, so asking a subset misses partitions led elsewhere. The leaders per broker and the
preferred-leader ratio come from the same figures the pre-flight's spread gate judges
(:func:`kafkaops.policy.leaders.leader_spread`), so ``kafkaops status`` and a refusal never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kafkaops.model import Cluster, ClusterSnapshot, PartitionState
from kafkaops.policy.leaders import leader_spread
from kafkaops.policy.snapshot_scan import partition_names, snapshot_scan

#: DC label for brokers missing from the broker -> DC mapping.
UNKNOWN_DC = "unknown"


def broker_dc_map(cluster: Cluster) -> dict[int, str]:
    """The broker id -> DC mapping of an inventory cluster, for the per-DC figures."""
    return {h.broker_id: h.dc for h in cluster.hosts}


def as_alive(snapshot: ClusterSnapshot, alive: Collection[int]) -> ClusterSnapshot:
    """The snapshot as the brokers really are: brokers not ``alive`` — no longer registered in ZooKeeper,
    or not answering when asked directly — taken out of the broker list and of every ISR.

    Why: a broker's metadata can be stale in two ways. A broker cut off from ZooKeeper still answers
    clients with the metadata it had when it was cut (every broker alive, every ISR full) while the
    controller has already declared it dead and shrunk the ISRs; an AdminClient that happens to ask it
    would see a healthy cluster. And a broker whose host has just crashed stays registered and in every
    ISR for seconds (:mod:`kafkaops.systems.broker_probe`). Either way the partitions show
    under-replicated here, as they are. Leaders are left as reported (a stale leader cannot be corrected
    from here; the ISR is what the gates judge)."""
    keep = set(alive)
    gone = set(snapshot.brokers) - keep
    if not gone:
        return snapshot
    partitions = tuple(replace(p, isr=tuple(b for b in p.isr if b in keep)) if set(p.isr) & gone else p
                       for p in snapshot.partitions)
    return replace(snapshot, brokers=tuple(b for b in snapshot.brokers if b in keep), partitions=partitions)


def as_both_see(snapshot: ClusterSnapshot, isr: Mapping[tuple[str, int], tuple[int, ...]]) -> ClusterSnapshot:
    """The snapshot with each partition's ISR narrowed to the replicas another view (the controller's own,
    :mod:`kafkaops.systems.broker_probe`) also has in sync: a replica is in sync only where both agree.

    Why: the metadata a client gets comes from whichever broker it asked, and a broker the controller
    cannot reach keeps stale ISRs (every replica in sync) while the controller has shrunk them. A
    partition the other view does not know is left as it is (created a moment ago; the next read has it)."""
    changed = False
    partitions = []
    for p in snapshot.partitions:
        seen = isr.get((p.topic, p.partition))
        if seen is not None and not set(p.isr) <= set(seen):
            p = replace(p, isr=tuple(b for b in p.isr if b in seen))
            changed = True
        partitions.append(p)
    return replace(snapshot, partitions=tuple(partitions)) if changed else snapshot


@dataclass(frozen=True)
class HealthSummary:
    """Cluster-wide availability figures, as ``kafkaops status`` shows them.

    Partition lists hold the snapshot's own :class:`PartitionState` objects; :meth:`to_dict` renders
    them as ``topic-N`` names.

    Attributes:
        cluster: Cluster name.
        taken_at: When the snapshot was taken (unix seconds).
        controller: Active controller broker id, ``None`` when unknown or no controller.
        brokers: Registered (alive) broker ids, sorted.
        partition_count: Number of partitions in the snapshot.
        offline: Partitions with no leader.
        under_replicated: Online partitions whose ISR is smaller than their replica set (URP).
        under_min_isr: Online partitions whose ISR is below ``min.insync.replicas``: ``acks=all``
            producers get ``NotEnoughReplicas`` right now.
        at_min_isr: Online partitions whose ISR equals ``min.insync.replicas``: one more replica lost
            and ``acks=all`` producers fail.
        preferred_leader_ratio: Fraction of partitions led by their preferred leader (``replicas[0]``).
        preferred_ratio_by_broker: For each broker that is some partition's preferred leader, the
            fraction of those partitions it actually leads (1.0 = balanced as designed).
        preferred_ratio_by_dc: The same aggregated per DC (empty without a broker -> DC mapping).
        leaders_by_broker: Partitions led, per broker; every registered broker appears (0 included:
            "the last broker rolled leads nothing", Strimzi #5564).
        leaders_by_dc: Partitions led, per DC (empty without a broker -> DC mapping).
        unregistered_replica_brokers: Broker ids named in replica lists but not registered (down).
    """

    cluster: str
    taken_at: float
    controller: int | None
    brokers: tuple[int, ...]
    partition_count: int
    offline: tuple[PartitionState, ...]
    under_replicated: tuple[PartitionState, ...]
    under_min_isr: tuple[PartitionState, ...]
    at_min_isr: tuple[PartitionState, ...]
    preferred_leader_ratio: float
    preferred_ratio_by_broker: Mapping[int, float]
    preferred_ratio_by_dc: Mapping[str, float]
    leaders_by_broker: Mapping[int, int]
    leaders_by_dc: Mapping[str, int]
    unregistered_replica_brokers: tuple[int, ...]

    @property
    def healthy(self) -> bool:
        """No offline, under-replicated or under-min-ISR partition and every replica broker registered."""
        return not (
            self.offline or self.under_replicated or self.under_min_isr or self.unregistered_replica_brokers
        )

    @property
    def leader_skew(self) -> float:
        """Max / mean leaders per registered broker (1.0 = perfectly even; 0.0 with no leaders)."""
        counts = [self.leaders_by_broker.get(b, 0) for b in self.brokers] or list(
            self.leaders_by_broker.values()
        )
        total = sum(counts)
        if not counts or total == 0:
            return 0.0
        return max(counts) / (total / len(counts))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (partition lists as ``topic-N`` names)."""
        return {
            "cluster": self.cluster,
            "taken_at": self.taken_at,
            "healthy": self.healthy,
            "controller": self.controller,
            "brokers": list(self.brokers),
            "unregistered_replica_brokers": list(self.unregistered_replica_brokers),
            "partition_count": self.partition_count,
            "offline": partition_names(self.offline),
            "under_replicated": partition_names(self.under_replicated),
            "under_min_isr": partition_names(self.under_min_isr),
            "at_min_isr": partition_names(self.at_min_isr),
            "preferred_leader_ratio": self.preferred_leader_ratio,
            "preferred_ratio_by_broker": {str(b): r for b, r in self.preferred_ratio_by_broker.items()},
            "preferred_ratio_by_dc": dict(self.preferred_ratio_by_dc),
            "leaders_by_broker": {str(b): n for b, n in self.leaders_by_broker.items()},
            "leaders_by_dc": dict(self.leaders_by_dc),
            "leader_skew": self.leader_skew,
        }


def cluster_health(snapshot: ClusterSnapshot, broker_dc: Mapping[int, str] | None = None) -> HealthSummary:
    """Summarise a snapshot's availability: offline, URP, min-ISR, leader balance, controller.

    Args:
        snapshot: The cluster as observed.
        broker_dc: Optional broker id -> DC mapping (see :func:`broker_dc_map`) for the per-DC figures;
            brokers missing from it are grouped under ``"unknown"``.

    Returns:
        A :class:`HealthSummary`.
    """
    s = snapshot_scan(snapshot)
    registered = tuple(sorted(set(snapshot.brokers)))
    # Leaders per broker and the preferred ratio come from the same figures the pre-flight's spread gate
    # judges (leader_spread), so `kafkaops status` and a refusal never disagree.
    spread = leader_spread(snapshot)
    leaders_by_broker = {b.broker_id: b.leaders for b in spread.brokers if b.live or b.leaders}
    ratio_by_broker = {b.broker_id: b.preferred_led / b.preferred for b in spread.brokers if b.preferred}

    ratio_by_dc: dict[str, float] = {}
    leaders_by_dc: dict[str, int] = {}
    if broker_dc is not None:
        dc_total: defaultdict[str, int] = defaultdict(int)
        dc_led: defaultdict[str, int] = defaultdict(int)
        for b, total in s.preferred_total.items():
            dc = broker_dc.get(b, UNKNOWN_DC)
            dc_total[dc] += total
            dc_led[dc] += s.preferred_led.get(b, 0)
        ratio_by_dc = {dc: dc_led[dc] / total for dc, total in sorted(dc_total.items())}
        dcs: defaultdict[str, int] = defaultdict(int)
        for dc in broker_dc.values():
            dcs[dc] += 0  # every known DC appears, even one that leads nothing
        for b, n in leaders_by_broker.items():
            dcs[broker_dc.get(b, UNKNOWN_DC)] += n
        leaders_by_dc = dict(sorted(dcs.items()))

    return HealthSummary(
        cluster=snapshot.cluster,
        taken_at=snapshot.taken_at,
        controller=snapshot.controller,
        brokers=registered,
        partition_count=len(snapshot.partitions),
        offline=tuple(s.offline),
        under_replicated=tuple(s.under_replicated),
        under_min_isr=tuple(s.under_min_isr),
        at_min_isr=tuple(s.at_min_isr),
        preferred_leader_ratio=(s.preferred_ok / s.with_replicas) if s.with_replicas else 1.0,
        preferred_ratio_by_broker=dict(sorted(ratio_by_broker.items())),
        preferred_ratio_by_dc=ratio_by_dc,
        leaders_by_broker=dict(sorted(leaders_by_broker.items())),
        leaders_by_dc=leaders_by_dc,
        unregistered_replica_brokers=tuple(sorted(s.replica_brokers - set(registered))),
    )

