"""Checking an assignment against the stretch layout, and what the loss of a whole DC would do.

An *assignment* maps ``(topic, partition)`` to its ordered replica list (``replicas[0]`` is the preferred
leader), exactly what ``kafka-reassign-partitions`` reads and writes. A *DC map* says which DC each
broker is in (the inventory's ``dc``, which the lab and production also set as ``broker.rack``).

Severity: a partition that would go offline, or fall under ``min.insync.replicas`` (``acks=all``
producers then fail), if one DC were lost is **critical** — that is the availability a stretch cluster
exists for. The other rules (two replicas per DC, first two in one DC, DCs grouped, leaders balanced)
are **warnings**: they cost cross-DC reads, producer reconnections to the other DC or uneven load, not
availability.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
Assignment = Mapping[TopicPartition, Sequence[int]]

#: Replicas every DC must hold: with two, a consumer of that DC survives one broker failure without
#: reading across DCs (follower fetching), and a DC loss leaves the other DC two in-sync replicas.
PER_DC = 2

CRITICAL = "critical"
WARNING = "warning"


@dataclass(frozen=True)
class Violation:
    """One partition breaking one rule."""

    topic: str
    partition: int
    rule: str  # rf | dc_short | leaders_split | dc_not_grouped | dc_loss_offline | dc_loss_min_isr
    severity: str
    detail: str

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_dict(self) -> dict[str, object]:
        return {"partition": self.name, "rule": self.rule, "severity": self.severity, "detail": self.detail}


@dataclass(frozen=True)
class DcLoss:
    """What losing every broker of ``dc`` at once would do to the partitions checked."""

    dc: str
    offline: tuple[str, ...]  # no replica left
    under_min_isr: tuple[str, ...]  # fewer replicas left than min.insync.replicas: acks=all produce fails
    leaders_moved: int  # preferred leaders in that DC: their partitions elect a leader in another DC

    def to_dict(self) -> dict[str, object]:
        return {"dc": self.dc, "offline": list(self.offline), "under_min_isr": list(self.under_min_isr),
                "leaders_moved": self.leaders_moved}


@dataclass(frozen=True)
class LeaderBalance:
    """Preferred leaders per broker and per DC over the partitions checked (what a balanced election gives)."""

    per_broker: Mapping[int, int]
    per_dc: Mapping[str, int]
    unbalanced_topics: tuple[str, ...]  # topics whose leaders differ by more than one between brokers or DCs

    @property
    def balanced(self) -> bool:
        return not self.unbalanced_topics

    def to_dict(self) -> dict[str, object]:
        return {"per_broker": {str(b): n for b, n in sorted(self.per_broker.items())},
                "per_dc": dict(sorted(self.per_dc.items())), "unbalanced_topics": list(self.unbalanced_topics)}


@dataclass(frozen=True)
class LayoutReport:
    """The check of an assignment: violations, the DC-loss analysis and the leader balance."""

    partitions: int
    violations: tuple[Violation, ...]
    dc_loss: tuple[DcLoss, ...]
    leaders: LeaderBalance
    dcs: tuple[str, ...] = field(default_factory=tuple)

    @property
    def critical(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.severity == CRITICAL)

    @property
    def ok(self) -> bool:
        """No violation at all and leaders balanced."""
        return not self.violations and self.leaders.balanced

    def partitions_violating(self) -> set[TopicPartition]:
        return {(v.topic, v.partition) for v in self.violations}

    def counts(self) -> dict[str, int]:
        """Partitions per rule broken."""
        return dict(sorted(Counter(v.rule for v in self.violations).items()))

    def to_dict(self) -> dict[str, object]:
        return {"partitions": self.partitions, "dcs": list(self.dcs), "ok": self.ok,
                "critical": len(self.critical), "counts": self.counts(),
                "violations": [v.to_dict() for v in self.violations],
                "dc_loss": [d.to_dict() for d in self.dc_loss], "leaders": self.leaders.to_dict()}


def dcs_of(dc_of: Mapping[int, str]) -> tuple[str, ...]:
    """The cluster's DCs in a stable order (first appearance by broker id)."""
    return tuple(dict.fromkeys(dc_of[b] for b in sorted(dc_of)))


def grouped(replicas: Sequence[int], dc_of: Mapping[int, str]) -> bool:
    """Each DC's replicas stand together in the list (``[A1, A2, B1, B2]``, not ``[A1, B1, A2, B2]``)."""
    seen: list[str] = []
    for b in replicas:
        dc = dc_of.get(b, "?")
        if seen and seen[-1] == dc:
            continue
        if dc in seen:
            return False
        seen.append(dc)
    return True


def partition_violations(tp: TopicPartition, replicas: Sequence[int], dc_of: Mapping[int, str],
                         dcs: Sequence[str], min_isr: int, *, per_dc: int = PER_DC) -> list[Violation]:
    """The rules ``replicas`` breaks (the DC-loss ones included)."""
    topic, partition = tp
    out: list[Violation] = []

    def add(rule: str, severity: str, detail: str) -> None:
        out.append(Violation(topic, partition, rule, severity, detail))

    in_dc = Counter(dc_of.get(b, "?") for b in replicas)
    wanted_rf = per_dc * len(dcs)
    if len(replicas) < wanted_rf:
        add("rf", WARNING, f"RF {len(replicas)} < {wanted_rf} ({per_dc} per DC over {len(dcs)} DCs)")
    short = [f"{dc} {in_dc.get(dc, 0)}" for dc in dcs if in_dc.get(dc, 0) < per_dc]
    if short:
        add("dc_short", WARNING, f"fewer than {per_dc} replicas in: {', '.join(short)}")
    if len(replicas) >= 2 and dc_of.get(replicas[0]) != dc_of.get(replicas[1]):
        add("leaders_split", WARNING, f"first two replicas in different DCs ({replicas[0]} "
                                      f"{dc_of.get(replicas[0], '?')}, {replicas[1]} {dc_of.get(replicas[1], '?')})")
    if not grouped(replicas, dc_of):
        add("dc_not_grouped", WARNING, "replicas of a DC not grouped: " + " ".join(
            f"{b}({dc_of.get(b, '?')})" for b in replicas))
    for dc in dcs:
        left = sum(1 for b in replicas if dc_of.get(b) != dc)
        if left == 0:
            add("dc_loss_offline", CRITICAL, f"offline if {dc} is lost (every replica is there)")
        elif left < min_isr:
            add("dc_loss_min_isr", CRITICAL, f"{left} replica(s) left if {dc} is lost, min.insync.replicas "
                                             f"{min_isr}: acks=all producers fail")
    return out


def dc_loss(assignment: Assignment, dc_of: Mapping[int, str], dcs: Sequence[str],
            min_isr: Mapping[str, int]) -> tuple[DcLoss, ...]:
    """For each DC: the partitions offline or under min ISR without it, and the leaders that move away."""
    out = []
    for dc in dcs:
        offline, under, moved = [], [], 0
        for (topic, p), replicas in sorted(assignment.items()):
            left = sum(1 for b in replicas if dc_of.get(b) != dc)
            if left == 0:
                offline.append(f"{topic}-{p}")
            elif left < min_isr.get(topic, 1):
                under.append(f"{topic}-{p}")
            if replicas and dc_of.get(replicas[0]) == dc:
                moved += 1
        out.append(DcLoss(dc, tuple(offline), tuple(under), moved))
    return tuple(out)


def leader_balance(assignment: Assignment, dc_of: Mapping[int, str], dcs: Sequence[str]) -> LeaderBalance:
    """Preferred leaders per broker and DC; a topic is unbalanced when two brokers (or two DCs) lead its
    partitions by more than one apart — what no assignment of that many partitions can avoid is allowed."""
    per_broker: Counter[int] = Counter(dict.fromkeys(dc_of, 0))
    per_dc: Counter[str] = Counter(dict.fromkeys(dcs, 0))
    by_topic: dict[str, list[int]] = {}
    for (topic, _), replicas in assignment.items():
        if replicas:
            by_topic.setdefault(topic, []).append(replicas[0])
            per_broker[replicas[0]] += 1
            per_dc[dc_of.get(replicas[0], "?")] += 1
    unbalanced = [topic for topic, leaders in sorted(by_topic.items())
                  if _spread(Counter(leaders), len(dc_of)) > 1
                  or _spread(Counter(dc_of.get(x, "?") for x in leaders), len(dcs)) > 1]
    return LeaderBalance(dict(per_broker), dict(per_dc), tuple(unbalanced))


def _spread(counts: Counter[int] | Counter[str], members: int) -> int:
    """max - min of ``counts`` over ``members`` keys, those absent counting 0 (linear in the counts, not in
    the members: a topic of 8 partitions on a 1,000-broker cluster costs 8 steps, not 1,000)."""
    if not counts:
        return 0
    low = min(counts.values()) if len(counts) >= members else 0
    return max(counts.values()) - low


def check_layout(assignment: Assignment, dc_of: Mapping[int, str], min_isr: Mapping[str, int], *,
                 per_dc: int = PER_DC) -> LayoutReport:
    """Every rule for every partition of ``assignment``, the DC-loss analysis and the leader balance.

    Args:
        assignment: ``{(topic, partition): replicas}``.
        dc_of: Every broker of the cluster and its DC.
        min_isr: ``min.insync.replicas`` per topic (1 when absent).
        per_dc: Replicas each DC must hold.
    """
    dcs = dcs_of(dc_of)
    violations: list[Violation] = []
    for tp, replicas in sorted(assignment.items()):
        violations += partition_violations(tp, replicas, dc_of, dcs, min_isr.get(tp[0], 1), per_dc=per_dc)
    return LayoutReport(len(assignment), tuple(violations), dc_loss(assignment, dc_of, dcs, min_isr),
                        leader_balance(assignment, dc_of, dcs), dcs)


def moves(current: Assignment, target: Assignment) -> int:
    """Replicas ``target`` adds to a broker that does not hold them now: each is a copy of the whole
    partition over the network (a reorder, or a replica dropped, moves no data)."""
    return sum(len(set(replicas) - set(current.get(tp, ()))) for tp, replicas in target.items())


def changed(current: Assignment, target: Assignment) -> list[TopicPartition]:
    """Partitions whose replica list (or order) differs: what a reassignment must submit."""
    return sorted(tp for tp, replicas in target.items() if tuple(current.get(tp, ())) != tuple(replicas))


def partitions_of(assignment: Assignment, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, ...]]:
    wanted = set(topics)
    return {tp: tuple(r) for tp, r in assignment.items() if tp[0] in wanted}
