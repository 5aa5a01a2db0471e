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
from collections.abc import Mapping, Sequence
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
    offline: tuple[TopicPartition, ...]  # no replica left
    under_min_isr: tuple[TopicPartition, ...]  # fewer replicas left than min.insync.replicas: acks=all fails
    leaders_moved: int  # preferred leaders in that DC: their partitions elect a leader in another DC

    def to_dict(self) -> dict[str, object]:
        return {"dc": self.dc, "offline": [f"{t}-{p}" for t, p in self.offline],
                "under_min_isr": [f"{t}-{p}" for t, p in self.under_min_isr], "leaders_moved": self.leaders_moved}


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
    """The check of an assignment: the rules broken per partition, the DC-loss analysis, the leader balance."""

    partitions: int
    hits: Mapping[TopicPartition, tuple[_Hit, ...]]  # only partitions that break a rule
    dc_loss: tuple[DcLoss, ...]
    leaders: LeaderBalance
    dcs: tuple[str, ...] = field(default_factory=tuple)
    tally: Mapping[tuple[_Hit, ...], int] = field(default_factory=dict)  # partitions per set of rules broken

    @property
    def violations(self) -> tuple[Violation, ...]:
        """Every (partition, rule) broken, in partition order (built on demand: 2.5 million on a large
        cluster laid out by Kafka's default)."""
        return tuple(Violation(t, p, h.rule, h.severity, h.detail)
                     for (t, p), found in sorted(self.hits.items()) for h in found)

    @property
    def critical(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.severity == CRITICAL)

    def critical_partitions(self) -> int:
        return sum(n for found, n in self.tally.items() if any(h.severity == CRITICAL for h in found))

    @property
    def ok(self) -> bool:
        """No violation at all and leaders balanced."""
        return not self.hits and self.leaders.balanced

    def counts(self) -> dict[str, int]:
        """Partitions per rule broken (a partition breaking the DC-loss rule for two DCs counts once)."""
        counts: Counter[str] = Counter()
        for found, partitions in self.tally.items():
            for rule in {h.rule for h in found}:
                counts[rule] += partitions
        return dict(sorted(counts.items()))

    def to_dict(self) -> dict[str, object]:
        return {"partitions": self.partitions, "dcs": list(self.dcs), "ok": self.ok,
                "critical": self.critical_partitions(), "counts": self.counts(),
                "violations": [v.to_dict() for v in self.violations],
                "dc_loss": [d.to_dict() for d in self.dc_loss], "leaders": self.leaders.to_dict()}


def dcs_of(dc_of: Mapping[int, str]) -> tuple[str, ...]:
    """The cluster's DCs in a stable order (first appearance by broker id)."""
    return tuple(dict.fromkeys(dc_of[b] for b in sorted(dc_of)))


@dataclass(frozen=True, eq=False)
class _Hit:
    """A rule broken by a DC pattern: shared by every partition with that pattern (compared and hashed by
    identity, as the one object it is: the generated field hash cost 2 s on 500,000 partitions)."""

    rule: str
    severity: str
    detail: str
    dc: int = -1  # the DC whose loss it is about (dc_loss_* rules)


def _pattern_hits(pattern: tuple[int, ...], dcs: Sequence[str], min_isr: int, per_dc: int) -> tuple[_Hit, ...]:
    """The rules a replica list whose brokers are in the DCs ``pattern`` (indexes into ``dcs``, -1: a broker in
    no known DC) breaks. Replica lists sharing a pattern break the same rules: a cluster of 500,000
    partitions has a handful of patterns, so each is judged once (``check_layout`` memoizes this)."""
    out: list[_Hit] = []
    wanted_rf = per_dc * len(dcs)
    if len(pattern) < wanted_rf:
        out.append(_Hit("rf", WARNING, f"RF {len(pattern)} < {wanted_rf} ({per_dc} per DC over {len(dcs)} DCs)"))
    short = [f"{dc} {pattern.count(i)}" for i, dc in enumerate(dcs) if pattern.count(i) < per_dc]
    if short:
        out.append(_Hit("dc_short", WARNING, f"fewer than {per_dc} replicas in: {', '.join(short)}"))
    if len(pattern) >= 2 and pattern[0] != pattern[1]:
        out.append(_Hit("leaders_split", WARNING, "first two replicas in different DCs"))
    runs = [d for i, d in enumerate(pattern) if i == 0 or pattern[i - 1] != d]
    if len(runs) != len(set(runs)):
        out.append(_Hit("dc_not_grouped", WARNING, "replicas of a DC not grouped"))
    for i, dc in enumerate(dcs):
        left = sum(1 for d in pattern if d != i)
        if left == 0:
            out.append(_Hit("dc_loss_offline", CRITICAL, f"offline if {dc} is lost (every replica is there)", i))
        elif left < min_isr:
            out.append(_Hit("dc_loss_min_isr", CRITICAL, f"{left} replica(s) left if {dc} is lost, "
                                                         f"min.insync.replicas {min_isr}: acks=all producers fail",
                            i))
    return tuple(out)


def leader_balance(assignment: Assignment, dc_of: Mapping[int, str], dcs: Sequence[str]) -> LeaderBalance:
    """Preferred leaders per broker and DC; a topic is unbalanced when two brokers (or two DCs) lead its
    partitions by more than one apart — what no assignment of that many partitions can avoid is allowed."""
    by_topic: dict[str, list[int]] = {}
    for (topic, _), replicas in assignment.items():
        if replicas:
            by_topic.setdefault(topic, []).append(replicas[0])
    per_broker: Counter[int] = Counter(dict.fromkeys(dc_of, 0))
    per_dc: Counter[str] = Counter(dict.fromkeys(dcs, 0))
    unbalanced = []
    for topic, leaders in sorted(by_topic.items()):
        counts = Counter(leaders)
        per_broker.update(counts)
        in_dc: Counter[str] = Counter()
        for b, n in counts.items():
            in_dc[dc_of.get(b, "?")] += n
        per_dc.update(in_dc)
        if _spread(counts, len(dc_of)) > 1 or _spread(in_dc, len(dcs)) > 1:
            unbalanced.append(topic)
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

    Linear in the partitions with a small constant: each partition costs one tuple of DC indexes and one
    dictionary look-up of its (pattern, min ISR), judged once per pattern (``bench/bench_placement.py``).

    Args:
        assignment: ``{(topic, partition): replicas}``.
        dc_of: Every broker of the cluster and its DC.
        min_isr: ``min.insync.replicas`` per topic (1 when absent).
        per_dc: Replicas each DC must hold.
    """
    dcs = dcs_of(dc_of)
    index = {b: dcs.index(dc) for b, dc in dc_of.items()}
    # (pattern, min ISR) -> (rules broken, the DC-loss lists the partition goes to)
    judged: dict[tuple[tuple[int | None, ...], int], tuple[tuple[_Hit, ...], tuple[list[TopicPartition], ...]]] = {}
    hits: dict[TopicPartition, tuple[_Hit, ...]] = {}
    offline: list[list[TopicPartition]] = [[] for _ in dcs]
    under: list[list[TopicPartition]] = [[] for _ in dcs]
    led_in = [0] * len(dcs)
    get = index.get
    tally: Counter[tuple[_Hit, ...]] = Counter()
    for tp, replicas in assignment.items():
        pattern = tuple(map(get, replicas))  # None: a broker in no DC of the inventory
        key = (pattern, min_isr.get(tp[0], 1))
        seen = judged.get(key)
        if seen is None:
            found = _pattern_hits(tuple(-1 if d is None else d for d in pattern), dcs, key[1], per_dc)
            seen = judged[key] = (found, tuple((offline if h.rule == "dc_loss_offline" else under)[h.dc]
                                               for h in found if h.dc >= 0))
        if pattern and pattern[0] is not None:
            led_in[pattern[0]] += 1
        found, losses_of = seen
        if found:
            tally[found] += 1
            hits[tp] = found
            for lost in losses_of:
                lost.append(tp)
    losses = tuple(DcLoss(dc, tuple(offline[i]), tuple(under[i]), led_in[i])  # in the assignment's order
                   for i, dc in enumerate(dcs))
    return LayoutReport(len(assignment), hits, losses, leader_balance(assignment, dc_of, dcs), dcs, tally)


def moves(current: Assignment, target: Assignment) -> int:
    """Replicas ``target`` adds to a broker that does not hold them now: each is a copy of the whole
    partition over the network (a reorder, or a replica dropped, moves no data)."""
    return sum(len(set(replicas) - set(current.get(tp, ()))) for tp, replicas in target.items())
