"""Who leads what: leader spread per broker against the assignment, and what an election can restore.

**Leader spread is judged per broker against its own preferred partitions** (:func:`leader_spread`),
Kafka's ``leader.imbalance.per.broker.percentage``: of the partitions a broker is preferred leader of
(``replicas[0]``), the share it does not lead. Not max - min leaders per broker: with an uneven replica
assignment (a broker preferred for 40 partitions, another for 10) the counts differ by design, and a
max - min rule either refuses a cluster that is exactly as designed or needs a slack so wide it misses a
broker leading nothing. The per-broker share is 0 % on a cluster led as assigned, whatever the
assignment, and 100 % for the broker a maintenance left leading nothing (Strimzi #5564).

After a broker's restart the run elects its preferred leaders back explicitly and verifies it
(:func:`leaders_not_preferred`, :func:`election_candidates`): Kafka's auto leader rebalance only fires
above a 10 % imbalance, so the last broker rolled would otherwise lead nothing.

**Another broker's leadership, lost through nothing the run did** (a broker cut off from ZooKeeper for
25 s between two hosts of a roll, issues 28 and 41), is given back by the gate that finds it, before it
judges, under one rule (:func:`leadership_to_restore`): only when every broker is registered and every
partition fully in sync, and never for the brokers the run itself is about to restore. Every gate that
judges leadership (``kafka.preflight``, ``kafka.verify_leaders``) asks this one function.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.policy.snapshot_scan import snapshot_scan, summarize_partitions

#: Kafka's broker default for ``leader.imbalance.per.broker.percentage``: the share of its preferred
#: partitions a broker may not lead before Kafka's own auto-rebalance (when enabled) steps in.
DEFAULT_MAX_LEADER_IMBALANCE = 10


def _pct(part: int, whole: int) -> str:
    """``8.3%``, ``100%``: a share for a message, one decimal only when it is not whole."""
    value = 100.0 * part / whole if whole else 0.0
    return f"{value:.1f}".rstrip("0").rstrip(".") + "%"


@dataclass(frozen=True)
class BrokerLeadership:
    """One broker's leadership, now and as assigned.

    Attributes:
        broker_id: The broker.
        live: Registered right now. A broker that is down leads nothing by necessity; the URP and
            registration gates speak for it, the spread gate does not.
        leaders: Partitions it leads now (any, preferred or not).
        preferred: Partitions it is preferred leader of (first in their replica list).
        preferred_led: Of those, how many it leads now.
    """

    broker_id: int
    live: bool
    leaders: int
    preferred: int
    preferred_led: int

    @property
    def not_led(self) -> int:
        """Partitions it is preferred leader of but does not lead (another replica does, or none)."""
        return self.preferred - self.preferred_led

    @property
    def imbalance(self) -> float:
        """``not_led / preferred`` (0.0 for a broker preferred for nothing): Kafka's per-broker ratio."""
        return self.not_led / self.preferred if self.preferred else 0.0

    def exceeds(self, max_imbalance: int) -> bool:
        """More than ``max_imbalance`` percent of its preferred partitions led elsewhere (as Kafka's
        controller compares: strictly above; integer arithmetic, so 10 % of 10 partitions is 1, not 1.0000001)."""
        return self.not_led * 100 > max_imbalance * self.preferred

    def describe(self) -> str:
        """``1002 leads 0 of the 12 partitions it is preferred leader of (100% off)``."""
        return (f"broker {self.broker_id} leads {self.preferred_led} of the {self.preferred} partitions it is "
                f"preferred leader of ({_pct(self.not_led, self.preferred)} off)")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"broker_id": self.broker_id, "live": self.live, "leaders": self.leaders,
                "preferred": self.preferred, "preferred_led": self.preferred_led,
                "imbalance_pct": round(100.0 * self.imbalance, 1)}


@dataclass(frozen=True)
class LeaderSpread:
    """Leaders per broker against the assignment, and which brokers are past the allowed imbalance.

    Attributes:
        brokers: Every registered broker, and every broker some partition prefers or is led by, by id.
        max_imbalance: The allowed share (percent) of a broker's preferred partitions led elsewhere
            (``max_leader_imbalance``; Kafka's ``leader.imbalance.per.broker.percentage``, default 10).
    """

    brokers: tuple[BrokerLeadership, ...]
    max_imbalance: int = DEFAULT_MAX_LEADER_IMBALANCE

    def over(self, exempt: Iterable[int] = ()) -> tuple[BrokerLeadership, ...]:
        """Live brokers past the allowed imbalance, except ``exempt`` ones (those the run itself is
        about to restore: the target of a reboot, brokers rolled earlier whose election is deferred)."""
        skip = set(exempt)
        return tuple(b for b in self.brokers
                     if b.live and b.broker_id not in skip and b.exceeds(self.max_imbalance))

    def within(self, exempt: Iterable[int] = ()) -> bool:
        """No live (non-exempt) broker past the allowed imbalance."""
        return not self.over(exempt)

    def line(self) -> str:
        """Leaders now vs preferred, per live broker: ``1001 16/12, 1002 0/12 (100% off), 1003 8/12``.

        ``16/12`` reads "leads 16 partitions, is preferred leader of 12"; the share off is shown only for a
        broker not leading all of its preferred partitions.
        """
        parts = []
        for b in self.brokers:
            if not b.live and not b.leaders:
                continue
            off = f" ({_pct(b.not_led, b.preferred)} off)" if b.not_led else ""
            parts.append(f"{b.broker_id} {b.leaders}/{b.preferred}{off}" + ("" if b.live else " (down)"))
        return ", ".join(parts) or "no brokers"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"max_imbalance_pct": self.max_imbalance, "brokers": [b.to_dict() for b in self.brokers],
                "over": [b.broker_id for b in self.over()]}


def leader_spread(snapshot: ClusterSnapshot, max_imbalance: int = DEFAULT_MAX_LEADER_IMBALANCE) -> LeaderSpread:
    """Leaders per broker now vs as assigned (the seed runbook's "brokers distributed uniformly among
    the partition Leaders" before a stop, and "the host is again among the partition leaders" after the
    election), from the same one-pass scan as :func:`cluster_health`.

    Why Kafka's per-broker measure and not max - min leaders: the assignment decides what "uniform"
    means. A topic created with 5 partitions on 3 brokers, or a broker added later with fewer
    partitions, gives brokers different preferred counts by design; a max - min (or max / mean) rule
    refuses such a cluster when it is led exactly as assigned, and the slack needed to accept it would
    also accept a small broker leading nothing. Per broker, "of the partitions you should lead, how many
    do you not" is 0 % for every broker of a cluster led as assigned, whatever the layout, and 100 % for
    a broker a maintenance left leading nothing (Strimzi #5564). It is also what Kafka's controller
    itself compares against ``leader.imbalance.per.broker.percentage`` when auto-rebalance is on, so
    operators already know the number.

    Args:
        snapshot: The cluster as observed (or projected).
        max_imbalance: Allowed share, in percent, of a broker's preferred partitions led elsewhere.

    Returns:
        A :class:`LeaderSpread`.
    """
    s = snapshot_scan(snapshot)
    live = set(snapshot.brokers)
    ids = sorted(live | set(s.preferred_total) | set(s.leaders))
    return LeaderSpread(
        brokers=tuple(BrokerLeadership(broker_id=b, live=b in live, leaders=s.leaders.get(b, 0),
                                       preferred=s.preferred_total.get(b, 0),
                                       preferred_led=s.preferred_led.get(b, 0)) for b in ids),
        max_imbalance=max_imbalance,
    )


def election_candidates(snapshot: ClusterSnapshot, broker_id: int | None = None
                        ) -> tuple[list[PartitionState], list[PartitionState]]:
    """Split :func:`leaders_not_preferred` into what a preferred-replica election can move now and what it
    cannot.

    A partition can go back to its preferred leader only when that replica is registered and in the
    ISR; Kafka answers ``PREFERRED_LEADER_NOT_AVAILABLE`` for the others. A cluster-wide election
    (``--election-scope cluster``) therefore asks only for the first list and reports the second,
    instead of failing on a partition whose preferred replica is lagging or down.

    Args:
        snapshot: The cluster as observed (or projected).
        broker_id: Only partitions whose preferred leader is this broker; ``None`` for all.

    Returns:
        ``(electable, blocked)``, each in snapshot order.
    """
    live = set(snapshot.brokers)
    electable: list[PartitionState] = []
    blocked: list[PartitionState] = []
    for p in leaders_not_preferred(snapshot, broker_id):
        (electable if p.replicas[0] in live and p.replicas[0] in p.isr else blocked).append(p)
    return electable, blocked


def leaders_not_preferred(snapshot: ClusterSnapshot, broker_id: int | None = None) -> list[PartitionState]:
    """Partitions not led by their preferred leader (``replicas[0]``), offline ones included.

    Used after a preferred-replica election to verify that the broker leads its preferred partitions
    again (``kafka.verify_leaders``); auto leader rebalance only fires above a 10 % imbalance, so the
    election is run and checked explicitly.

    Args:
        snapshot: The cluster as observed.
        broker_id: Only partitions whose preferred leader is this broker; ``None`` for all.

    Returns:
        The offending partitions, in snapshot order (empty = verified).
    """
    if broker_id is None:
        return [p for p in snapshot.partitions if p.replicas and p.leader != p.replicas[0]]
    hosted = snapshot_scan(snapshot).by_broker.get(broker_id, [])
    return [p for p in hosted if p.replicas[0] == broker_id and p.leader != broker_id]


@dataclass(frozen=True)
class LeadershipRestore:
    """What a gate may do, before it judges leadership, for brokers off their preferred leadership through
    nothing the run did (the verdict of :func:`leadership_to_restore`).

    Attributes:
        off: Live brokers, not exempt, past the allowed imbalance (the ones the gate would refuse or wait on).
        partitions: What to elect: the partitions ``off`` brokers are preferred leader of and do not lead.
            Empty unless the cluster is whole: an election is never the gate's answer to a cluster that is
            still recovering.
        missing: Brokers that should be registered (the inventory's, and every broker some partition has as
            a replica) and are not.
        not_in_sync: Partitions whose ISR is not their whole replica set (offline ones included).
        spread: The leader spread the verdict was drawn from.
    """

    off: tuple[BrokerLeadership, ...]
    partitions: tuple[PartitionState, ...]
    missing: tuple[int, ...]
    not_in_sync: tuple[PartitionState, ...]
    spread: LeaderSpread

    @property
    def needed(self) -> bool:
        """Some broker the gate judges is past the threshold."""
        return bool(self.off)

    @property
    def whole(self) -> bool:
        """Every broker registered and every partition fully in sync: an election can land everywhere."""
        return not self.missing and not self.not_in_sync

    @property
    def elect(self) -> bool:
        """The gate runs the election now (:attr:`partitions` is not empty)."""
        return bool(self.partitions)

    def brokers(self) -> list[int]:
        """The ids of :attr:`off`."""
        return [b.broker_id for b in self.off]

    def describe(self) -> str:
        """``broker 1002 leads 0 of the 11 partitions it is preferred leader of (100% off)``, per broker."""
        return "; ".join(b.describe() for b in self.off)

    def blocked(self) -> str:
        """Why the gate does not elect although a broker is off (``""`` when it can): the brokers that are
        not registered and the partitions not fully in sync, named."""
        why = []
        if self.missing:
            why.append(f"broker(s) {', '.join(map(str, self.missing))} not registered")
        if self.not_in_sync:
            why.append(f"{len(self.not_in_sync)} partition(s) not fully in sync "
                       f"({summarize_partitions(self.not_in_sync)})")
        return "; ".join(why)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (partitions as ``[topic, partition]``, what the adapter's election takes)."""
        return {"brokers": self.brokers(), "off": [b.describe() for b in self.off],
                "partitions": [[p.topic, p.partition] for p in self.partitions],
                "missing": list(self.missing), "blocked": self.blocked()}


def leadership_to_restore(snapshot: ClusterSnapshot, *, exempt: Iterable[int] = (),
                          max_imbalance: int = DEFAULT_MAX_LEADER_IMBALANCE,
                          expected: Iterable[int] = ()) -> LeadershipRestore:
    """Which partitions a gate elects, before judging leadership, to give the other brokers their preferred
    leadership back: the one rule every gate that judges leadership applies (issues 28 and 41).

    A broker cut off from ZooKeeper for a few seconds between two hosts of a roll loses its leaderships and
    comes back leading nothing, through nothing the run did; Kafka's auto-rebalance does not fire below its
    own threshold (and is often off). A gate that only judges refuses, and so does every resume, until
    someone runs the election by hand. So: when every broker is registered and every partition fully in
    sync, one preferred-replica election for the partitions those brokers are preferred leader of and do
    not lead — the seed's ``kafka preferred-replica-election``, narrowed to what is off — and then the gate
    judges. When a broker is missing or a partition lags, nothing is elected (a lagging preferred replica
    cannot lead, and an election is no answer to a cluster still recovering): the gate judges as before.

    Only brokers past ``max_imbalance`` are restored: a spread the operator accepted with
    ``--max-leader-imbalance`` is left as it is, and a broker a little off (within the threshold) is no
    gate's business. ``exempt`` brokers are never elected: the target (before its stop, its own election
    gives it back later; electing it first would only move its leaders twice) and the brokers rolled
    earlier in the run whose election is deferred or skipped by the run's design.

    Args:
        snapshot: The cluster as observed (or projected).
        exempt: Brokers the gate does not judge (nor restore).
        max_imbalance: Allowed share, in percent, of a broker's preferred partitions led elsewhere.
        expected: Brokers that must be registered for the cluster to count as whole (the inventory's);
            every broker named in a replica list is expected too.

    Returns:
        A :class:`LeadershipRestore`; its ``partitions`` are empty when nothing is to be elected now.
    """
    s = snapshot_scan(snapshot)
    spread = leader_spread(snapshot, max_imbalance)
    off = spread.over(exempt)
    live = set(snapshot.brokers)
    missing = tuple(sorted((set(expected) | s.replica_brokers) - live))
    not_in_sync = (*s.offline, *s.under_replicated)  # the figures cluster_health and the pre-flight judge
    partitions: tuple[PartitionState, ...] = ()
    if off and not missing and not not_in_sync:
        partitions = tuple(p for b in off for p in election_candidates(snapshot, b.broker_id)[0])
    return LeadershipRestore(off=off, partitions=partitions, missing=missing, not_in_sync=not_in_sync,
                             spread=spread)
