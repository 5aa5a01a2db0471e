"""Ending a run for good, and undoing what it changed: ``kafkaops runs abort RUN [--rollback]``.

Rollback never does more than the run did: it compensates, in reverse order, only the steps this run
journaled an ``applying`` intent for, each compensation itself a step through the runner's one sequence
(observe first: nothing to undo is a no-op; fenced, its precondition re-checked), then the checks the
compensations declare prove the whole is as before. A failed compensation stops there: re-running the
abort continues, and what was undone is not undone twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkaops.engine.binding import BoundRunbook, BoundStep, BoundTarget
from kafkaops.engine.context import Projection, RunContext, RunEnvironment
from kafkaops.engine.journal import Journal, RunState
from kafkaops.engine.lock import LockBackend, lock_info
from kafkaops.engine.retry import RetryPolicy
from kafkaops.engine.run_facts import RunFacts
from kafkaops.engine.run_types import RunMeta, RunResult, bind_params
from kafkaops.engine.step import (
    Action,
    Noop,
    Step,
    require_kind,
)
from kafkaops.errors import (
    ConfigError,
    RunFailed,
)


class Rollback:
    """Abort and rollback (mixed into :class:`~kafkaops.engine.runner.Runner`)."""

    if TYPE_CHECKING:  # the runner's, which this part of it uses
        echo: Callable[[str], None]

        def lock_for(self, env: RunEnvironment | None) -> LockBackend: ...
        def _open(self, run_id: str, *, verb: str) -> tuple[Journal, RunState, BoundRunbook, Mapping[str, Any]]: ...
        def _ctx(self, meta: RunMeta, target: str, step: BoundStep, params: Mapping[str, Any], env: RunEnvironment,
                 projected: Projection = ..., journal: Journal | None = ..., facts: RunFacts | None = ...,
                 steps: tuple[BoundStep, ...] = ...) -> RunContext: ...
        def _converge(self, obj: Step, ctx: RunContext, journal: Journal, meta: RunMeta, base: dict[str, Any],
                      step: BoundStep, label: str, *, phase: str = ...) -> Action | Noop: ...
        def _verify(self, obj: Step, ctx: RunContext, policy: RetryPolicy, journal: Journal, base: dict[str, Any],
                    target: BoundTarget, step: BoundStep) -> None: ...
        def _policy(self, bound: BoundRunbook, step: BoundStep) -> RetryPolicy: ...
        def _audit_end(self, meta: RunMeta, *, passed: bool, detail: str = ...) -> None: ...

    def abort(
        self,
        run_id: str,
        *,
        reason: str,
        operator: str,
        rollback: bool = False,
        env: RunEnvironment | None = None,
    ) -> RunResult:
        """End a run for good; with ``rollback``, first compensate (in reverse) what it changed.

        Raises:
            ConfigError: Unknown or already finished/aborted run, no reason, or no environment.
            LockHeldError: Rolling back while the cluster lock belongs to another run.
            RunFailed: A compensation failed (re-run the abort to continue the rollback).
        """
        if not reason or not reason.strip():
            raise ConfigError("aborting a run needs a reason", hint="pass --reason '...'")
        journal, state, bound, started = self._open(run_id, verb="abort")
        meta = RunMeta(
            run_id, bound.cluster, operator, reason, started.get("task"), bound.name, tuple(bound.target_names),
            bound.batches,
        )
        lock = self.lock_for(env)
        result = RunResult(run_id=run_id, status="aborted", journal=journal.path)
        if rollback:
            if env is None:  # the compensations are steps: they act through the run's environment
                raise ConfigError(f"rolling back run {run_id} needs the run's environment",
                                  hint="build it from the run's journaled identity (kafkaops runs abort does)")
            lock.acquire(
                lock_info(bound.cluster, run_id, started["operator"], started["reason"], started.get("task"))
            )
            self._rollback(journal, state, bound, env, meta, result)
        journal.append(
            "aborted", operator=operator, reason=reason, rollback=rollback, compensated=result.compensated
        )
        self._audit_end(
            meta, passed=False,
            detail="aborted" + (f", rolled back {result.compensated} change(s)" if rollback else ""),
        )
        lock.release(bound.cluster, run_id)
        return result

    def _rollback(
        self,
        journal: Journal,
        state: RunState,
        bound: BoundRunbook,
        env: RunEnvironment,
        meta: RunMeta,
        result: RunResult,
    ) -> None:
        by_key = {(t.name, s.index): (t, s) for t in bound.targets for s in t.steps}
        verify: dict[str, tuple[BoundTarget, BoundStep]] = {}
        for st in reversed(state.changed_steps()):
            if st.compensated or (st.target, st.index) not in by_key:
                continue
            target, step = by_key[(st.target, st.index)]
            base: dict[str, Any] = {"target": target.name, "step": step.index, "kind": step.kind}
            entry = require_kind(step.kind, step.label)
            comp = entry.compensate
            if comp is None:
                why = entry.irreversible or "no compensation declared; left as is"
                journal.append("compensate_skipped", reason=why, **base)
                result.notes.append(f"{target.name} {step.label}: {why}")
                continue
            if comp.verify:
                verify.setdefault(comp.verify, (target, step))
            comp_entry = require_kind(comp.kind, f"compensation of {step.kind}")
            params = bind_params(comp_entry, comp.params if comp.params is not None else step.params)
            comp_step = BoundStep(step.index, comp.kind, params, title=f"undo {step.kind}")
            obj = comp_entry.create(params)
            ctx = self._ctx(meta, target.name, comp_step, params, env, journal=journal)
            base_comp = {**base, "compensation": comp.kind}
            try:
                decision = self._converge(obj, ctx, journal, meta, base_comp, comp_step,
                                          f"{step.label}: undo via {comp.kind}", phase="compensate")
                if isinstance(decision, Noop):
                    journal.append("compensate_skipped", reason=decision.reason, **base_comp)
                    self.echo(f"{target.name} {step.label}: undo via {comp.kind}: no-op: {decision.reason}")
                    continue
                self._verify(obj, ctx, self._policy(bound, step), journal, base, target, comp_step)
                journal.append("compensate_verified", **base_comp)
                result.compensated += 1
                self.echo(f"{target.name} {step.label}: undone via {comp.kind}")
            except Exception as exc:
                journal.append("compensate_failed", error=str(exc), error_type=type(exc).__name__, **base)
                raise RunFailed(
                    f"rollback of run {meta.run_id} failed at {target.name} {step.label} "
                    f"({comp.kind}): {exc}",
                    hint="fix the cause and re-run "
                    f"`kafkaops runs abort {meta.run_id} --rollback --reason ...`; "
                    "what was already undone is not undone twice",
                ) from exc
        for kind, (target, step) in verify.items():
            self._verify_whole(journal, bound, target, step, kind, env, meta)

    def _verify_whole(self, journal: Journal, bound: BoundRunbook, target: BoundTarget, step: BoundStep,
                      kind: str, env: RunEnvironment, meta: RunMeta) -> None:
        """After the compensations: prove the whole is as before the run (a step kind the compensations
        declared), converging like any step — it may wait, or make the last change (an election)."""
        entry = require_kind(kind, f"rollback check {kind}")
        params = bind_params(entry, {})
        check = BoundStep(step.index, kind, params, title="after the rollback")
        obj = entry.create(params)
        ctx = self._ctx(meta, target.name, check, params, env, journal=journal)
        base: dict[str, Any] = {"target": target.name, "step": step.index, "kind": kind, "compensation": kind}
        try:
            decision = self._converge(obj, ctx, journal, meta, base, check, f"rollback check {kind}",
                                      phase="compensate")
            self._verify(obj, ctx, self._policy(bound, step), journal, base, target, check)
            journal.append("compensate_verified", **base)
        except Exception as exc:
            journal.append("compensate_failed", error=str(exc), error_type=type(exc).__name__, **base)
            raise RunFailed(
                f"rollback of run {meta.run_id}: every change was undone, but the check that the cluster is "
                f"whole again ({kind}) failed: {exc}",
                hint=f"look at `kafkaops status {bound.cluster}`; re-running "
                f"`kafkaops runs abort {meta.run_id} --rollback --reason ...` checks again",
            ) from exc
        self.echo(f"rollback check {kind}: " + (decision.reason if isinstance(decision, Noop) else "done"))
