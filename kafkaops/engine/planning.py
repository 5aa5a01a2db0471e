"""Plans: a dry-run of a bound runbook (observe and plan every step through the projection of what the
steps before it will have changed, change nothing), and applying exactly a reviewed plan (refused when
anything it observed has changed: the plan an operator approved is the plan that runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkaops.engine.binding import BoundRunbook, BoundStep, schedule
from kafkaops.engine.context import Projection, RunContext, RunEnvironment
from kafkaops.engine.journal import Journal, new_run_id
from kafkaops.engine.lock import LockBackend, held_error, lock_info
from kafkaops.engine.plan import Plan, PlannedStep, compute_fingerprint, diff_observations
from kafkaops.engine.read_only import read_only_scope
from kafkaops.engine.run_facts import RunFacts
from kafkaops.engine.run_types import RunMeta, RunResult
from kafkaops.engine.step import (
    Action,
    Noop,
    Observation,
    Step,
    require_kind,
)
from kafkaops.errors import (
    ConfigError,
    StalePlanError,
)


class Planning:
    """Dry-runs and saved plans (mixed into :class:`~kafkaops.engine.runner.Runner`)."""

    if TYPE_CHECKING:  # the runner's, which this part of it uses
        def lock_for(self, env: RunEnvironment | None) -> LockBackend: ...
        def _check_kinds(self, bound: BoundRunbook) -> None: ...
        def _ctx(self, meta: RunMeta, target: str, step: BoundStep, params: Mapping[str, Any], env: RunEnvironment,
                 projected: Projection = ..., journal: Journal | None = ..., facts: RunFacts | None = ...,
                 steps: tuple[BoundStep, ...] = ...) -> RunContext: ...
        def _precondition(self, obj: Step, ctx: RunContext, step: BoundStep, action: Action) -> None: ...
        def start(self, bound: BoundRunbook, *, env: RunEnvironment, operator: str, reason: str,
                  task: str | None = ..., run_id: str | None = ..., plan_fingerprint: str | None = ...,
                  confirmed: Mapping[str, str] | None = ..., ask: Callable[[str], bool] | None = ...) -> RunResult: ...

    def dry_run(
        self,
        bound: BoundRunbook,
        *,
        env: RunEnvironment,
        operator: str,
        reason: str = "",
        task: str | None = None,
        notes: tuple[str, ...] = (),
        owner: str | None = None,
    ) -> Plan:
        """Observe and plan every step, change nothing, and return the :class:`Plan`.

        Every step observes the live systems through the projection of what the steps planned before
        it will have changed (their ``effects``): the plan shows what each step will find when it runs.

        The lock is looked at first: while another run holds the cluster, its half-done changes would
        make every gate refuse with advice to act on the cluster ("start broker 1001..."), which is the
        last thing a second operator should do. ``owner``: the run that holds the lock itself (apply).

        Raises:
            LockHeldError: Another run holds the cluster lock (naming it).
        """
        self._check_kinds(bound)

        holder = self.lock_for(env).holder(bound.cluster)
        if holder is not None and holder.run_id != owner:
            raise held_error(holder)

        meta = RunMeta("", bound.cluster, operator, reason, task, bound.name, tuple(bound.target_names),
                     bound.batches)
        projection = Projection()
        facts = RunFacts(None)  # what a step remembers while planning lives as long as the plan
        planned: list[PlannedStep] = []
        for target, step in schedule(bound):
            entry = require_kind(step.kind, step.label)
            obj = entry.create(step.params)
            ctx = self._ctx(meta, target.name, step, step.params, env, projection.copy(), facts=facts,
                            steps=target.steps)
            with read_only_scope(f"{step.kind} (dry-run)"):
                obs = obj.observe(ctx)
                decision = obj.plan(obs)
                if isinstance(decision, Action):
                    self._precondition(obj, ctx, step, decision)
            if isinstance(decision, Action):
                source = f"{target.name} step {step.index} ({step.kind})"
                for key, value in (obj.effects(obs, decision) or {}).items():
                    projection.set(key, value, source)
            comp = entry.compensate
            rollback = entry.irreversible
            if comp is not None:
                rollback = f"{comp.kind}" + (f": {comp.note}" if comp.note else "")
            planned.append(
                PlannedStep(
                    target=target.name,
                    index=step.index,
                    kind=step.kind,
                    params=dict(step.params),
                    observed=_summary(obs),
                    fingerprint_data=_fp(obs),
                    action=decision.to_dict() if isinstance(decision, Action) else None,
                    noop_reason=decision.reason if isinstance(decision, Noop) else None,
                    gate=step.gate,
                    title=step.title,
                    rollback=rollback,
                )
            )
        lock_label = env.lock_label
        return Plan(
            runbook=bound.name,
            summary=bound.summary,
            cluster=bound.cluster,
            operator=operator,
            reason=reason,
            task=task,
            created_at=time.time(),
            bound=bound.to_dict(),
            steps=planned,
            environment=dict(env.identity()),
            notes=[
                *notes,
                *([f"lock: {lock_label}"] if lock_label else []),
                "dry-run: observations are from the live systems, each seen through what the steps "
                "before it will have changed",
            ],
        )

    def apply_plan(
        self, plan: Plan, *, env: RunEnvironment, operator: str, reason: str | None = None,
        task: str | None = None,
    ) -> RunResult:
        """Execute exactly the reviewed plan, refusing if what it observed has changed.

        Raises:
            StalePlanError: Naming every observation that changed.
        """
        bound = BoundRunbook.from_dict(plan.bound)
        why = reason or plan.reason
        if not why.strip():
            raise ConfigError("applying a plan needs a reason", hint="pass --reason")
        run_id = new_run_id(bound.name)
        lock = self.lock_for(env)
        lock.acquire(lock_info(bound.cluster, run_id, operator, why, task or plan.task))
        try:
            fresh = self.dry_run(bound, env=env, operator=operator, reason=why, task=task, owner=run_id)
            if plan.environment.get("sha256") != fresh.environment.get("sha256"):
                raise StalePlanError(
                    f"the plan is stale: the inventory {fresh.environment.get('inventory')} changed since it was "
                    "made", hint="review a fresh plan: re-run with --dry-run --save-plan FILE")
            if compute_fingerprint(fresh.steps) != compute_fingerprint(plan.steps):
                changes = diff_observations(plan.steps, fresh.steps) or ["observations differ"]
                listed = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
                raise StalePlanError(
                    f"the plan is stale: {len(changes)} observation(s) changed since it was made: {listed}",
                    hint="review a fresh plan: re-run with --dry-run --save-plan FILE",
                )
        except BaseException:
            lock.release(bound.cluster, run_id)
            raise
        return self.start(
            bound,
            env=env,
            operator=operator,
            reason=why,
            task=task or plan.task,
            run_id=run_id,
            plan_fingerprint=plan.fingerprint,
        )


def _summary(obs: Observation) -> str:
    summary = getattr(obs, "summary", "")
    return str(summary) if summary else str(getattr(obs, "data", obs))


def _fp(obs: Observation) -> Any:
    fn = getattr(obs, "fingerprint_data", None)
    return fn() if callable(fn) else getattr(obs, "data", None)
