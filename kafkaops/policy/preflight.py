"""The availability gate before stopping a broker (runbook step ``kafka.preflight``): allowed, or why not.

It refuses to make an outage: when any partition of the cluster is offline or under min ISR, when the
cluster has URP (unless ``--force``), when stopping this broker would leave one of its partitions offline
or below ``min.insync.replicas`` (+ headroom), or when leadership is skewed (on a whole cluster the step
first elects another broker's preferred leaders back, :mod:`kafkaops.policy.leaders`). Each refusal is a
:class:`Violation` naming the partitions and how to proceed; topics whose RF is <= min ISR are a
*permanent* violation, so a wait loop stops and asks the operator (raise RF, lower min ISR) instead of
retrying forever (Strimzi #2964). Nothing but the URP gate is passed by ``--force``, and no hint says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.errors import SafetyRefusal
from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.policy.leaders import LeaderSpread, leader_spread
from kafkaops.policy.snapshot_scan import (
    partition_names,
    plural,
    snapshot_scan,
    summarize_names,
    summarize_partitions,
)
from kafkaops.policy.stop_impact import StopImpact, stop_impact


@dataclass(frozen=True)
class Violation:
    """One reason the pre-flight gate refuses.

    Attributes:
        code: Stable name: ``broker_not_registered``, ``offline_partitions``, ``under_min_isr``,
            ``under_replicated``, ``stop_takes_offline``, ``stop_below_min_isr``,
            ``rf_not_above_min_isr``, ``leader_imbalance``.
        message: One line saying what is wrong, naming (a truncated list of) partitions.
        partitions: Every partition concerned, as ``topic-N``.
        topics: Topics concerned (for ``rf_not_above_min_isr``).
        permanent: Waiting will not clear it (a topic layout, not a transient state); a wait loop must
            stop and surface it rather than retry.
        hint: How to proceed.
    """

    code: str
    message: str
    partitions: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    permanent: bool = False
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "code": self.code,
            "message": self.message,
            "partitions": list(self.partitions),
            "topics": list(self.topics),
            "permanent": self.permanent,
            "hint": self.hint,
        }


@dataclass(frozen=True)
class PreflightResult:
    """The verdict of :func:`preflight` for stopping one broker.

    Attributes:
        broker_id: The broker to stop.
        violations: Why it is refused (empty = allowed).
        warnings: Non-blocking notes (URP allowed by ``--force``, broker is the controller...).
        impact: The simulated stop (leaders that move, partitions that lose a replica) for the plan.
        spread: Leaders per broker now vs as assigned (``None`` when the spread gate was not asked for).
    """

    broker_id: int
    violations: tuple[Violation, ...]
    warnings: tuple[str, ...]
    impact: StopImpact
    spread: LeaderSpread | None = None

    @property
    def ok(self) -> bool:
        """True when no gate refuses."""
        return not self.violations

    @property
    def permanent(self) -> bool:
        """True when some violation cannot clear by waiting (stop retrying; ask the operator)."""
        return any(v.permanent for v in self.violations)

    @property
    def codes(self) -> tuple[str, ...]:
        """The violation codes, in order."""
        return tuple(v.code for v in self.violations)

    def message(self) -> str:
        """One line: what refuses, naming the partitions (``""`` when ok)."""
        if self.ok:
            return ""
        return f"refusing to stop broker {self.broker_id}: " + "; ".join(v.message for v in self.violations)

    def hint(self) -> str:
        """How to proceed: the violations' hints, de-duplicated. Only the URP gate names ``--force``:
        nothing overrides the min-ISR and offline gates, so no hint may suggest it does."""
        hints: list[str] = []
        for v in self.violations:
            if v.hint and v.hint not in hints:
                hints.append(v.hint)
        return "; ".join(hints)

    def raise_if_refused(self) -> None:
        """Raise :class:`~kafkaops.errors.SafetyRefusal` (exit code 6) when any gate refuses.

        Raises:
            SafetyRefusal: With a one-line message naming the partitions and a hint on how to proceed.
        """
        if not self.ok:
            raise SafetyRefusal(self.message(), hint=self.hint())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "broker_id": self.broker_id,
            "ok": self.ok,
            "permanent": self.permanent,
            "violations": [v.to_dict() for v in self.violations],
            "warnings": list(self.warnings),
            "impact": self.impact.to_dict(),
            "spread": self.spread.to_dict() if self.spread is not None else None,
        }


def _violation(
    code: str, what: str, parts: Sequence[PartitionState], hint: str, *, permanent: bool = False
) -> Violation:
    names = partition_names(parts)
    return Violation(
        code=code,
        message=f"{plural(len(names), 'partition')} {what}: {summarize_names(names)}",
        partitions=tuple(names),
        permanent=permanent,
        hint=hint,
    )


def preflight(
    snapshot: ClusterSnapshot,
    broker_id: int,
    *,
    allow_urp: bool = False,
    isr_headroom: int = 0,
    max_leader_imbalance: int | None = None,
    leader_exempt: Iterable[int] = (),
) -> PreflightResult:
    """The availability gate before stopping ``broker_id`` (runbook step ``kafka.preflight``).

    Refuses when the broker is not registered, when any partition of the cluster is offline or under
    min ISR, when the cluster has URP (unless ``allow_urp``), or when stopping this broker would leave
    one of its partitions offline or below ``min.insync.replicas + isr_headroom``. Topics whose RF is
    <= min ISR (+ headroom) get their own *permanent* violation so a retry loop stops and asks.

    With ``max_leader_imbalance``, also refuses when leadership is skewed (the seed runbook's "brokers
    distributed uniformly among the partition Leaders" before the stop): some live broker leads less
    than ``100 - max_leader_imbalance`` percent of the partitions it is preferred leader of (see
    :func:`leader_spread` for why this measure). Stopping a broker on top of a skew piles its leaders
    onto brokers that may already lead more than their share, and the run could not tell the skew it
    found from one it made. This function only judges: the ``kafka.preflight`` step first gives such a
    broker its preferred leadership back with one election when every broker is registered and every
    partition in sync (:func:`~kafkaops.policy.leaders.leadership_to_restore`, the rule every leadership
    gate shares), then judges again; what is refused here is a skew on a cluster that is not whole, or one
    the election could not repair. The broker to stop is exempt (the run's own election restores it: this is
    how a broker an earlier maintenance left leading nothing is repaired), and so are
    ``leader_exempt`` (brokers rolled earlier in the same run whose election is deferred or skipped).
    No ``--force`` passes it: the override is the threshold itself, ``--max-leader-imbalance 100``,
    so the plan and the journal say what was accepted.

    Args:
        snapshot: The cluster as observed.
        broker_id: The broker about to be stopped.
        allow_urp: Accept cluster-wide under-replicated partitions (``--force``); the per-broker
            min-ISR gate still applies.
        isr_headroom: See :func:`stop_impact`.
        max_leader_imbalance: Allowed share (percent, 0-100) of a live broker's preferred partitions
            led elsewhere; ``None`` skips the spread gate.
        leader_exempt: Brokers the spread gate does not judge besides ``broker_id``.

    Returns:
        A :class:`PreflightResult`; call :meth:`PreflightResult.raise_if_refused` to enforce it.
    """
    s = snapshot_scan(snapshot)
    impact = stop_impact(snapshot, broker_id, isr_headroom)
    violations: list[Violation] = []
    warnings: list[str] = []

    if broker_id not in snapshot.brokers:
        violations.append(
            Violation(
                code="broker_not_registered",
                message=f"broker {broker_id} is not registered (already down?)",
                hint=f"start broker {broker_id} and wait until it is back in every ISR",
            )
        )
    if s.offline:
        violations.append(
            _violation(
                "offline_partitions",
                "offline",
                s.offline,
                "bring the offline partitions' brokers back first",
            )
        )
    if s.under_min_isr:
        violations.append(
            _violation(
                "under_min_isr",
                "under min.insync.replicas",
                s.under_min_isr,
                "wait for the ISR to recover (kafkaops status) and retry",
            )
        )
    if s.under_replicated:
        if allow_urp:
            warnings.append(
                f"{plural(len(s.under_replicated), 'partition')} under-replicated "
                f"(allowed by --force): {summarize_partitions(s.under_replicated)}"
            )
        else:
            violations.append(
                _violation(
                    "under_replicated",
                    "under-replicated",
                    s.under_replicated,
                    "fix URP first (wait for the ISR to recover, `kafkaops status`), or pass --force if that URP is "
                    "understood and elsewhere",
                )
            )
    if impact.goes_offline:
        violations.append(
            _violation(
                "stop_takes_offline",
                f"would go offline (broker {broker_id} is their only live in-sync replica)",
                impact.goes_offline,
                "wait for the other replicas to rejoin the ISR",
            )
        )
    going_offline = {id(p) for p in impact.goes_offline}
    recoverable = [p for p in impact.below_min_isr_recoverable if id(p) not in going_offline]
    if recoverable:
        need = "min.insync.replicas" + (f" + {isr_headroom}" if isr_headroom else "")
        violations.append(
            _violation(
                "stop_below_min_isr",
                f"would drop below {need}",
                recoverable,
                "wait for the lagging replicas to rejoin the ISR and retry",
            )
        )
    if impact.rf_not_above_min_isr:
        topics = impact.rf_not_above_min_isr
        affected = impact.below_min_isr_permanent
        need = "min.insync.replicas" + (f" + --isr-headroom {isr_headroom}" if isr_headroom else "")
        violations.append(
            Violation(
                code="rf_not_above_min_isr",
                message=(
                    f"{plural(len(topics), 'topic')} with replication factor <= {need} "
                    f"({summarize_names(list(topics))}): stopping any of their replicas breaks "
                    f"acks=all writes; waiting cannot fix this"
                ),
                partitions=tuple(partition_names(affected)),
                topics=topics,
                permanent=True,
                hint="raise the replication factor or lower min.insync.replicas of those topics",
            )
        )
    spread = None
    if max_leader_imbalance is not None:
        spread = leader_spread(snapshot, max_leader_imbalance)
        exempt = {broker_id, *leader_exempt}
        over = spread.over(exempt)
        if over:
            worst = sorted(over, key=lambda b: (-b.imbalance, b.broker_id))
            violations.append(
                Violation(
                    code="leader_imbalance",
                    message=(
                        f"leadership is skewed past {max_leader_imbalance}% per broker: "
                        + "; ".join(b.describe() for b in worst)
                        + f" (leaders now/preferred: {spread.line()})"
                    ),
                    hint=(
                        "once every broker is registered and every partition in sync, the pre-flight elects the "
                        "preferred leaders of "
                        + ", ".join(f"broker {b.broker_id}" for b in worst)
                        + " back itself (resume the run, or run it again); or accept this spread with "
                        "--max-leader-imbalance N"
                    ),
                )
            )
        mine = [b for b in spread.brokers if b.live and b.broker_id in exempt and b.exceeds(max_leader_imbalance)]
        for b in mine:
            why = ("the target: its election in this run restores it" if b.broker_id == broker_id
                   else "rolled earlier in this run: the closing election restores it")
            warnings.append(f"{b.describe()} ({why})")
    if impact.is_controller:
        warnings.append(f"broker {broker_id} is the active controller: stopping it triggers an election")

    return PreflightResult(
        broker_id=broker_id, violations=tuple(violations), warnings=tuple(warnings), impact=impact, spread=spread
    )
