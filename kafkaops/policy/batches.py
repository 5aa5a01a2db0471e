"""Which brokers a roll may stop together: the largest safe batches, from the live replica placement.

A roll one broker at a time costs N times (floor + safety windows): hours on a 50-broker cluster. Most of
those brokers could go down together: when replicas are spread over racks or DCs, a whole rack (or DC)
can restart while every partition keeps ``min.insync.replicas`` (+ headroom) live in-sync replicas.
Strimzi and the Wikimedia cookbook take a batch size from the operator; this module computes the *safe*
batches from the snapshot, so the batch size is a consequence of the placement, not a guess.

The rule, per partition ``p``: at most ``allow(p) = |ISR(p)| - max(min.insync.replicas + headroom, 1)``
of its in-sync replicas may be stopped at once, and never less than one — a batch is never worse for a
partition than stopping one of its brokers alone, which the single-broker pre-flight already judges
(a partition whose RF does not exceed min ISR is that gate's report, not a reason to stop the roll). A
batch is safe when no partition has more of its in-sync replicas in the batch than it allows.

Constraints besides the data: the controller's batch goes last (one controller election per roll: the
controller moves once, to a broker already restarted);
brokers serving the same load-balanced service go at most ``max_depooled`` to a batch (the seed's "one
host at a time" for eventbus: default 1); ``max_size`` caps a batch (``--batch N``).

Three strategies are computed and the one with the fewest batches wins, ties going to the first: one
batch per rack/DC (split where a rack cannot go whole), first fit in the roll's order (the greedy
baseline), first fit from the broker with the most partitions. Each batch boundary is explained by the
partition that forbids the next broker from joining an earlier batch.

numpy carries the counting (an extra, ``kafkaops[batches]``: a roll one at a time needs none): a batch
is a vector of per-partition counts, and "may broker b join?" is one vectorised comparison over b's
partitions (~1,500 of them per broker at 1,000 brokers and 500,000 partitions, for each batch tried):
under a second for the whole cluster (``bench/bench_batches.py``).

:func:`roll_batches` is the roll's entry: the hosts of a roll (in roll order) and ``--batch`` in, batches of
hosts and the plan's notes out — KRaft controller nodes one at a time (a quorum may lose only one voter),
the brokers cut by :func:`plan_batches`. Pure: the caller takes the snapshot, only when
:func:`needs_snapshot` says the answer depends on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkaops.errors import ConfigError
from kafkaops.model import ClusterSnapshot, Host


def _numpy() -> Any:
    """numpy, which only rolls of more than one broker at a time need: an extra (73 MB an admin host that
    rolls one at a time never installs), imported when a batch is cut."""
    try:
        import numpy
    except ImportError:
        raise ConfigError("--batch with more than one broker at a time needs numpy, which is not installed",
                          hint="pip install 'kafkaops[batches]', or roll one at a time (--batch 1)") from None
    return numpy


@dataclass(frozen=True)
class BatchPlan:
    """The batches of a roll, in order, and why they are cut where they are."""

    batches: tuple[tuple[int, ...], ...]
    strategy: str  # "rack-aligned" | "first-fit" | "most-partitions-first" | "one at a time"
    reasons: tuple[str, ...] = field(default_factory=tuple)  # why brokers could not go together

    def to_dict(self) -> dict[str, Any]:
        return {"batches": [list(b) for b in self.batches], "strategy": self.strategy, "reasons": list(self.reasons)}


class _Counts:
    """The in-sync replicas a batch would stop, per partition."""

    def __init__(self, model: _Model) -> None:
        np = _numpy()
        self.model = model
        self.counts = np.zeros(len(model.allow), dtype=np.int16)
        self.brokers: list[int] = []
        self.services: dict[str, int] = {}

    def blocker(self, broker: int) -> str | None:
        """Why ``broker`` may not join (None: it may)."""
        m = self.model
        idx = m.index[broker]
        full = self.counts[idx] >= m.allow[idx] if len(idx) else None
        if full is not None and full.any():  # the data first: it is why a cluster cannot batch at all
            p = int(idx[int(full.argmax())])
            topic, part, isr, need = m.partitions[p]
            together = [b for b in self.brokers if b in isr]
            return (f"{broker} cannot go with {', '.join(map(str, together))}: partition {topic}-{part} has in-sync "
                    f"replicas {', '.join(map(str, isr))} and must keep {need} of them")
        for svc in m.services.get(broker, ()):
            if self.services.get(svc, 0) >= m.max_depooled:
                return (f"{broker} cannot go with {', '.join(map(str, self.brokers))}: both serve {svc}, at most "
                        f"{m.max_depooled} of its hosts out at once")
        return None

    def add(self, broker: int) -> None:
        self.counts[self.model.index[broker]] += 1
        self.brokers.append(broker)
        for svc in self.model.services.get(broker, ()):
            self.services[svc] = self.services.get(svc, 0) + 1


@dataclass
class _Model:
    index: dict[int, Any]  # broker -> numpy array of the partitions it is an in-sync replica of
    allow: Any  # numpy array: how many in-sync replicas of each partition may stop at once
    partitions: list[tuple[str, int, tuple[int, ...], int]]  # (topic, partition, ISR, replicas to keep)
    services: Mapping[int, Sequence[str]]
    max_depooled: int


def _model(snap: ClusterSnapshot, brokers: Sequence[int], headroom: int, services: Mapping[int, Sequence[str]],
           max_depooled: int) -> _Model:
    np = _numpy()
    members: dict[int, list[int]] = {b: [] for b in brokers}
    allow: list[int] = []
    partitions: list[tuple[str, int, tuple[int, ...], int]] = []
    for i, p in enumerate(snap.partitions):
        keep = max(snap.min_isr(p.topic) + headroom, 1)
        allow.append(max(len(p.isr) - keep, 1))
        partitions.append((p.topic, p.partition, tuple(p.isr), keep))
        for b in p.isr:
            if b in members:
                members[b].append(i)
    index = {b: np.asarray(v, dtype=np.int64) for b, v in members.items()}
    return _Model(index, np.asarray(allow, dtype=np.int16), partitions, services, max_depooled)


def _first_fit(model: _Model, order: Sequence[int], max_size: int | None) -> tuple[list[list[int]], list[str]]:
    batches: list[_Counts] = []
    reasons: list[str] = []
    for b in order:
        why = []
        for batch in batches:
            if max_size is not None and len(batch.brokers) >= max_size:
                continue
            blocker = batch.blocker(b)
            if blocker is None:
                batch.add(b)
                break
            why.append(blocker)
        else:
            if why:
                reasons.append(why[0])
            fresh = _Counts(model)
            fresh.add(b)
            batches.append(fresh)
    return [c.brokers for c in batches], reasons


def _aligned(model: _Model, order: Sequence[int], group_of: Mapping[int, str],
             max_size: int | None) -> tuple[list[list[int]], list[str]]:
    """One batch per rack/DC, in the order the roll meets them; a group that cannot go whole is split by
    first fit inside it."""
    groups: dict[str, list[int]] = {}
    for b in order:
        groups.setdefault(group_of.get(b, "?"), []).append(b)
    out: list[list[int]] = []
    reasons: list[str] = []
    for members in groups.values():
        split, why = _first_fit(model, members, max_size)
        out += split
        reasons += why
    return out, reasons


def plan_batches(snap: ClusterSnapshot, order: Sequence[int], *, group_of: Mapping[int, str] | None = None,
                 headroom: int = 0, max_size: int | None = None, services: Mapping[int, Sequence[str]] | None = None,
                 max_depooled: int = 1) -> BatchPlan:
    """The batches of a roll over ``order`` (the brokers in the roll's order, controller last).

    Args:
        snap: The cluster now (ISR, min ISR per topic, the controller).
        order: Every broker of the roll, in the order the roll takes them.
        group_of: Broker -> rack or DC, for the aligned strategy (default: none).
        headroom: In-sync replicas to keep above min ISR.
        max_size: At most this many brokers per batch (``--batch N``); None: as many as safe.
        services: Broker -> the load-balanced services its host serves.
        max_depooled: Hosts of one service out at once.
    """
    if max_size == 1 or len(order) <= 1:
        return BatchPlan(tuple((b,) for b in order), "one at a time")
    model = _model(snap, order, headroom, services or {}, max_depooled)
    candidates: list[tuple[str, list[list[int]], list[str]]] = []
    if group_of:
        candidates.append(("rack-aligned", *_aligned(model, order, group_of, max_size)))
    candidates.append(("first-fit", *_first_fit(model, order, max_size)))
    busiest = sorted(order, key=lambda b: (-len(model.index[b]), order.index(b)))
    candidates.append(("most-partitions-first", *_first_fit(model, busiest, max_size)))
    strategy, batches, _ = min(candidates, key=lambda c: len(c[1]))
    notes = _boundaries(model, batches, max_size, group_of or {})
    controller = snap.controller
    last = [b for b in batches if controller in b]
    if last:
        batches = [b for b in batches if controller not in b] + last
        notes.append(f"the batch of controller {controller} goes last (one controller election for the roll)")
    return BatchPlan(tuple(tuple(b) for b in batches), strategy, tuple(notes))


def _boundaries(model: _Model, batches: Sequence[Sequence[int]], max_size: int | None,
                group_of: Mapping[int, str]) -> list[str]:
    """Why each batch starts where it does: what keeps its first broker out of the batch before it."""
    notes = []
    for before, batch in itertools.pairwise(batches):
        counts = _Counts(model)
        for b in before:
            counts.add(b)
        first = batch[0]
        if max_size is not None and len(before) >= max_size:
            notes.append(f"{first} starts a new batch: the one before holds {max_size} (--batch {max_size})")
            continue
        notes.append(counts.blocker(first) or f"{first} starts a new batch with its rack/DC "
                                                  f"{group_of.get(first, '?')} (as few batches either way)")
    return notes


def batch_is_safe(snap: ClusterSnapshot, batch: Sequence[int], headroom: int = 0) -> bool:
    """Brute force, for tests: stopping ``batch`` together leaves every partition at least what stopping any
    one of its brokers alone would (min ISR + headroom, at least one in-sync replica)."""
    stopped = set(batch)
    for p in snap.partitions:
        keep = max(snap.min_isr(p.topic) + headroom, 1)
        out = sum(1 for b in p.isr if b in stopped)
        if out > max(len(p.isr) - keep, 1):
            return False
    return True


def parse_batch(spec: str) -> int | None:
    """``--batch``: ``auto`` (None: as many as safe) or a positive number.

    Raises:
        ValueError: Anything else.
    """
    text = str(spec).strip().lower()
    if text == "auto":
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"{spec!r} is not auto or a number of brokers (1 or more)")


def needs_snapshot(hosts: Sequence[Host], spec: str) -> bool:
    """Whether :func:`roll_batches` of ``hosts`` under ``--batch spec`` depends on the cluster's placement:
    only when two brokers or more might go together (a one-at-a-time roll never asks the cluster)."""
    return parse_batch(spec) != 1 and sum(1 for h in hosts if h.role != "controller") >= 2


def roll_batches(hosts: Sequence[Host], spec: str, snap: ClusterSnapshot | None, *,
                 headroom: int = 0) -> tuple[list[list[Host]], list[str]]:
    """``hosts`` (in roll order) cut into the batches ``--batch`` asks for, and notes for the plan.

    ``1`` (or one host): one at a time. KRaft controller nodes always go one at a time, first. ``auto``:
    as many brokers as safe together (:func:`plan_batches`: a DC — or a rack, on a one-DC cluster — at once
    where every partition keeps min ISR + ``headroom``; the controller's batch last; hosts of a pooled
    service one at a time). ``N``: at most N per batch, judged the same way.

    Args:
        snap: The cluster now, with topic configs; required when :func:`needs_snapshot` says so.

    Raises:
        ValueError: ``spec`` is not ``auto`` or a positive number.
    """
    max_size = parse_batch(spec)
    if max_size == 1 or len(hosts) < 2:
        return [[h] for h in hosts], []
    controllers = [[h] for h in hosts if h.role == "controller"]
    if controllers:  # a quorum loses one voter at a time, whatever --batch says for the brokers
        batches, notes = roll_batches([h for h in hosts if h.role != "controller"], spec, snap, headroom=headroom)
        return controllers + batches, ["controller nodes one at a time (a quorum may lose only one voter)", *notes]
    if snap is None:
        raise TypeError("batching two brokers or more needs the cluster's snapshot (see needs_snapshot)")
    by_id = {h.broker_id: h for h in hosts}
    several_dcs = len({h.dc for h in hosts}) > 1
    plan = plan_batches(snap, [h.broker_id for h in hosts],
                        group_of={h.broker_id: h.dc if several_dcs else h.rack for h in hosts},
                        headroom=headroom, max_size=max_size,
                        services={h.broker_id: [s.name for s in h.services] if h.conftool_tags else []
                                  for h in hosts})
    batches = [[by_id[b] for b in batch] for batch in plan.batches]
    shown = " then ".join("[" + ", ".join(h.name for h in b) + "]" for b in batches)
    return batches, [f"--batch {spec}: {len(batches)} batch(es), {plan.strategy}: {shown}",
                     *(f"batch boundary: {r}" for r in plan.reasons)]
