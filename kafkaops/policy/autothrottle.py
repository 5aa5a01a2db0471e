"""The autothrottle's policy: the next replication rate of a catch-up, from the cluster's gates alone.

A replaced broker (``kafkaops broker replace``: the same broker id on an empty disk) copies every partition it
holds from the leaders. Unthrottled, that copy takes the leaders' disks and network from the producers —
Wikimedia's T373189. Throttled at a fixed rate it is either slow for nothing or still too fast when the
cluster is busy. So, like kafka-kit's autothrottle and Cruise Control's executor, the run adjusts the rate
while it watches what the copy may cost:

* **every gate holds** (no partition offline, none under min ISR, no *other* broker out of an ISR, and the
  inventory's metric gates — produce p99 — within their ceilings) for ``hold`` polls in a row: the rate
  goes up by ``raise_factor``, never above ``maximum``;
* **a gate fails**: the rate goes down by ``lower_factor`` at once, never below ``minimum`` (a catch-up
  that stops altogether never ends, and the broker stays out of the ISR: the cluster one failure away from
  an under-min-ISR partition for longer); the count of good polls starts again, so the rate is raised
  again only after the cluster held for ``hold`` polls at the lower rate.

Multiplicative both ways: from a low start the copy reaches the maximum in a few steps on an idle cluster,
and backs off as fast when it is not. The policy is pure — numbers in, a decision out, with the reason in
words for the journal and the progress line — so it is tested without a cluster
(tests/unit/test_autothrottle.py); the step (:mod:`kafkaops.steps.replace`) does the asking and the setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kafkaops.model import ClusterSnapshot

Change = Literal["raise", "lower", "hold"]


@dataclass(frozen=True)
class Bounds:
    """The rates a catch-up may use, bytes/s per broker, and how fast it moves between them.

    Attributes:
        minimum: The rate it never goes below (a catch-up must end).
        maximum: The rate it never goes above (the inventory's or the operator's ceiling).
        raise_factor: Multiplier when the gates held for ``hold`` polls (> 1).
        lower_factor: Multiplier when a gate fails (< 1).
        hold: Good polls in a row before a raise (>= 1).
    """

    minimum: float
    maximum: float
    raise_factor: float = 2.0
    lower_factor: float = 0.5
    hold: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.minimum <= self.maximum:
            raise ValueError(f"the rates must satisfy 0 < minimum ({self.minimum:g}) <= maximum ({self.maximum:g})")
        if self.raise_factor <= 1 or not 0 < self.lower_factor < 1:
            raise ValueError("raise_factor must be > 1 and lower_factor between 0 and 1")
        if self.hold < 1:
            raise ValueError("hold must be at least one poll")

    def clamp(self, rate: float) -> float:
        """``rate`` within [minimum, maximum]."""
        return min(self.maximum, max(self.minimum, rate))


@dataclass(frozen=True)
class Gates:
    """What the cluster looks like at one poll of the catch-up.

    Attributes:
        offline: Partitions without a leader.
        under_min_isr: Partitions whose ISR is below the topic's ``min.insync.replicas``.
        other_urp: Partitions with a replica out of the ISR that is *not* the broker catching up (its own
            are expected: that is the catch-up).
        failing_metrics: One line per metric gate that does not hold (exceeded, or blind).
    """

    offline: int = 0
    under_min_isr: int = 0
    other_urp: int = 0
    failing_metrics: Sequence[str] = ()

    def failures(self) -> list[str]:
        """The gates that fail, in words (empty: all hold)."""
        out = [f"{n} partition(s) {what}" for n, what in ((self.offline, "offline"),
                                                           (self.under_min_isr, "under min ISR"),
                                                           (self.other_urp, "under-replicated on another broker"))
               if n]
        return out + list(self.failing_metrics)


@dataclass(frozen=True)
class Decision:
    """The rate for the next interval and why.

    Attributes:
        rate: Bytes/s per broker to set (equal to the current rate for ``hold``).
        change: ``raise``, ``lower`` or ``hold`` (unchanged: at a bound, or not yet held long enough).
        good_polls: Good polls in a row after this one (the next call's ``good_polls``).
        reason: One line for the journal and the progress output.
    """

    rate: float
    change: Change
    good_polls: int
    reason: str


def next_rate(rate: float, gates: Gates, bounds: Bounds, good_polls: int = 0) -> Decision:
    """The rate after one poll: lower at once when a gate fails, raise after ``bounds.hold`` good polls.

    Args:
        rate: The rate in force (bytes/s per broker); clamped to the bounds first.
        gates: What this poll saw.
        bounds: The rates allowed and the steps between them.
        good_polls: Good polls in a row before this one.
    """
    now = bounds.clamp(rate)
    failing = gates.failures()
    if failing:
        lower = bounds.clamp(now * bounds.lower_factor)
        why = "; ".join(failing)
        if lower < now:
            return Decision(lower, "lower", 0, f"{why}: lowered")
        return Decision(now, "hold", 0, f"{why}: held at the minimum")
    good = good_polls + 1
    if good < bounds.hold:
        return Decision(now, "hold" if now == rate else "lower" if now < rate else "raise", good,
                        f"gates hold ({good}/{bounds.hold} polls)")
    higher = bounds.clamp(now * bounds.raise_factor)
    if higher > now:
        return Decision(higher, "raise", 0, f"gates held for {good} poll(s): raised")
    return Decision(now, "hold" if now == rate else "lower", good, "gates hold; at the maximum")


def cluster_gates(snapshot: ClusterSnapshot, broker: int) -> Gates:
    """The metadata gates of one poll: partitions offline, under their topic's ``min.insync.replicas``
    (``snapshot`` with topic configs; a topic without a config is not judged), and under-replicated through
    a broker other than ``broker`` — its own replicas out of the ISR are the catch-up itself. Judged over
    every partition of the cluster (Kafka's URP count is a leader's, so a subset would miss some)."""
    parts = snapshot.partitions
    under_min = sum(1 for p in parts if p.topic in snapshot.topics
                    and len(p.isr) < snapshot.topics[p.topic].min_insync_replicas)
    other = sum(1 for p in parts if any(r not in p.isr for r in p.replicas if r != broker))
    return Gates(offline=sum(1 for p in parts if p.offline), under_min_isr=under_min, other_urp=other)


def seconds_at(total_bytes: float, rate: float) -> float:
    """How long ``total_bytes`` take at ``rate`` bytes/s (the plan's estimate; 0 for nothing to copy)."""
    return total_bytes / rate if total_bytes > 0 and rate > 0 else 0.0
