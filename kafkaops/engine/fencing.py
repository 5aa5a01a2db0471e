"""The guards every change passes right before its intent is journaled (the runner's rules, see
:mod:`kafkaops.engine.runner`): a disruptive kind's precondition read from the live systems now, the
lock re-read from its store (fencing), and the target's expiring effects renewed (leases).

They are one part of the runner's one sequence (:class:`~kafkaops.engine.runner.Runner` mixes this in):
every path that reaches ``apply`` — a first run, a retry, a resume, a rollback, a dry-run's precondition —
calls them in the same order, from :meth:`Runner._converge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from kafkaops.engine.binding import BoundStep
from kafkaops.engine.context import RunContext, RunEnvironment
from kafkaops.engine.journal import STEP_DONE, Journal, RunState
from kafkaops.engine.lock import LockBackend
from kafkaops.engine.read_only import writes_allowed
from kafkaops.engine.run_types import RunMeta
from kafkaops.engine.step import (
    Action,
    DisruptiveStep,
    LeaseStep,
    Step,
    require_kind,
)
from kafkaops.engine.wait import Clock
from kafkaops.errors import (
    ConfigError,
    KafkaOpsError,
    LockHeldError,
    UnreachableError,
)


class Fenced(Exception):
    """The lock could not be confirmed right before a change: pause, then raise ``error``."""

    def __init__(self, error: KafkaOpsError) -> None:
        super().__init__(error.message)
        self.error = error


def live_leases(state: RunState, target: str, steps: Sequence[BoundStep], at: int) -> list[BoundStep]:
    """The lease steps of ``target`` whose effect is live at step index ``at``: verified before it, and
    no step of their ``lease_until`` kind verified between them and ``at``."""
    live: list[BoundStep] = []
    for step in steps:
        if step.index >= at:
            break
        if state.step(target, step.index).status != STEP_DONE:
            continue
        live = [lease for lease in live if require_kind(lease.kind, lease.label).lease_until != step.kind]
        if require_kind(step.kind, step.label).lease_until is not None:
            live.append(step)
    return live


class Fencing:
    """The runner's guards before a change (mixed into :class:`~kafkaops.engine.runner.Runner`)."""

    if TYPE_CHECKING:  # the runner's, which this part of it uses
        clock: Clock
        _renewed: dict[str, float]

        def lock_for(self, env: RunEnvironment | None) -> LockBackend: ...

    def _precondition(self, obj: Step, ctx: RunContext, step: BoundStep, action: Action) -> None:
        """A disruptive kind's safety precondition, read from the live systems now, before its intent is
        journaled: a refusal (:class:`~kafkaops.errors.SafetyRefusal`) leaves the step "not applied".

        Called on every path that reaches ``apply`` (first run, retry, resume, rollback), and in a
        dry-run, where the plan then shows the refusal. The gate step a runbook may have before it is no
        substitute: a resume never re-runs a gate it journaled as verified, and the world may have moved
        since.
        """
        if not require_kind(step.kind, step.label).disruptive:
            return
        found = cast(DisruptiveStep, obj).precondition(ctx, action)
        ctx.record("precondition_held", found=found)

    def _fence(self, ctx: RunContext, meta: RunMeta, step: BoundStep) -> None:
        """Before the intent of every step that is not read-only: the lock, re-read from its store now, is
        this run's.

        The lock's holder is read (the backend answers within its deadline or raises
        :class:`~kafkaops.errors.UnreachableError`); unreadable, absent or another run's, and the step is
        not applied: :class:`Fenced` makes :meth:`_run_step` pause the run (resumable) with exit 4 or 7.
        """
        env: RunEnvironment = ctx.env
        lock = self.lock_for(env)
        label = env.lock_label or f"the lock of cluster {meta.cluster}"
        error: KafkaOpsError
        try:
            holder = lock.holder(meta.cluster)
        except (UnreachableError, ConfigError) as exc:
            ctx.record("lock_unconfirmed", lock=label, error=str(exc))
            error = UnreachableError(
                f"cannot confirm the cluster lock ({label}) before {step.kind} on {ctx.target}: {exc.message}",
                hint="the lock's store did not answer; once it does, resume takes the lock back as the run's own")
            raise Fenced(error) from exc
        if holder is not None and holder.run_id == meta.run_id:
            ctx.record("lock_confirmed", lock=label)
            return
        found = f"held by {holder.describe()}" if holder is not None else "gone (removed by someone else)"
        ctx.record("lock_unconfirmed", lock=label, holder=holder.run_id if holder else None)
        raise Fenced(LockHeldError(
            f"the cluster lock ({label}) is no longer this run's before {step.kind} on {ctx.target}: it is {found}",
            hint="find out who removed or took it; resume takes it back only if no other run holds it"))

    def _renew_leases(self, journal: Journal, meta: RunMeta, ctx: RunContext, at: BoundStep) -> None:
        """Renew every effect of ``ctx.target`` that expires and is live at step ``at``: a lease kind's step
        verified before it whose releasing step (``lease_until``) is not verified yet. Journaled
        (``lease_renewed``); an error propagates, so the change about to be made is not made."""
        live = live_leases(journal.replay(), ctx.target, ctx.steps, at.index)
        for lease in live:
            if require_kind(lease.kind, lease.label).lease_until == at.kind:
                continue  # the step that ends it: renewing first would only make it end later
            obj = cast(LeaseStep, require_kind(lease.kind, lease.label).create(lease.params))
            lctx = replace(ctx, step_index=lease.index, kind=lease.kind, params=lease.params)
            with writes_allowed():
                found = obj.renew(lctx, at.index)
            journal.append("lease_renewed", target=ctx.target, step=lease.index, kind=lease.kind, at=at.index,
                           found=found)
        if live:
            self._renewed[ctx.target] = self.clock.monotonic()  # a wait's keep-alive counts from here
