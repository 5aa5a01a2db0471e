"""The runner: observe -> plan -> apply -> verify, per step, per target; journaled, resumable, pausable.

Operational rules this module enforces, and why:

* **Intent before side effect.** Before ``apply`` the runner appends (and fsyncs) ``step_applying``; after
  it, ``step_applied``. A crash between the two leaves a journal that says "this step may be half done".
* **Resume re-observes the in-flight step instead of trusting the journal.** After a crash we cannot
  know whether ``apply`` ran, half-ran or never ran; only ``observe`` + ``plan`` returning ``Noop`` *now*
  proves the effect holds. Otherwise the step is applied again -- which is safe precisely because
  ``plan`` only ever asks for what closes the observed gap, so a non-idempotent operation (an election,
  a counter) is never repeated when its effect already holds. Steps the journal records as *verified*
  are not re-run: later steps may legitimately undo their effect (``depool`` ... ``repool``), and
  re-running them would undo the procedure.
* **What a kind may do is declared once, and every guarantee follows from it** (:data:`~kafkaops.engine.step.Effect`).
  No step kind opts in to safety: a kind that can apply is fenced unless it declares itself
  ``read-only``, and a ``read-only`` kind applies with every adapter write refused. ``observe``, ``plan``,
  ``verify`` and ``precondition`` of every kind run read-only too. ``tests/unit/engine/test_step_effects.py``
  enumerates the registry, so a new kind cannot slip through.
* **A disruptive step re-checks its own safety precondition right before acting.** A kind registered
  ``effect="disruptive"`` (a depool, a stop, a restart, a reboot, a deploy, a delete, a rewrite) declares
  ``precondition(ctx, action)``; the runner calls it after ``plan`` and before the intent record, every
  time the step is about to apply — first run, retry, resume, rollback. A gate step earlier in the
  runbook only says what held *then*; a resume skips a verified gate, and a paused run may wait for days.
  A refusal is a safe stop: nothing applied, the run stopped resumable
  (:class:`~kafkaops.errors.RunFailed`, exit 11, naming the refusal).
* **No change on a lock the run cannot see as its own (fencing).** The lock is persistent by design (it
  outlives sessions and crashes), so nothing tells a run that a human removed it (``runs unlock
  --force``), that another run took it, that a restored store lost it, or that the store is out of
  reach. Right before the intent of every step that is not ``read-only`` (after its precondition) the
  runner re-reads the holder from the store: unreadable within the backend's deadline, or not this
  run's, and the run pauses there (journal ``lock_unconfirmed`` + ``paused``; exit 4
  :class:`~kafkaops.errors.UnreachableError` or 7 :class:`~kafkaops.errors.LockHeldError`, one line naming
  the lock). ``resume`` takes the lock back as its own once the store answers (refused if another run
  took it meanwhile).
* **Nothing that expires is trusted across a pause (leases).** A kind registered with ``lease_until``
  (a silence, ended by ``alerts.unsilence``) leaves an effect that lapses by itself. While it is live
  for a target — verified, its releasing step not yet verified — the runner asks the kind to
  ``renew(ctx, at)`` it right before every change of that target and, throttled, during every wait: a run
  resumed after lunch, or held long by a gate, extends its silence (or makes it again) before it stops a
  broker, instead of stopping it with nothing silenced. A renewal that fails stops the step before it
  applies.
* **Pause only at safe points.** Ctrl-C sets a flag; the run stops between steps (or inside a
  read-only wait), journals ``paused`` and tells the operator the exact resume command. A second
  Ctrl-C stops immediately (the journal still shows the in-flight step).
* **Fail loudly, resumably.** A failed step is journaled and raised as
  :class:`~kafkaops.errors.RunFailed` whose message says where the run stopped, whether that step may
  be partly applied, and the ``kafkaops resume`` / ``kafkaops runs abort --rollback`` commands. The
  cluster lock stays with the run.
* **Retry as data.** :class:`RetryPolicy` (attempts, backoff) applies to ``verify`` and to errors that
  say they are retryable (``exc.retryable``, e.g. :class:`~kafkaops.errors.CheckFailed`); a retry always
  starts again from ``observe``.
* **Rollback never does more than the run did.** ``abort --rollback`` compensates, in reverse order,
  only steps for which this run journaled an ``applying`` intent, and each compensation is itself a step
  (observe first: nothing to undo is a no-op).

Why one module of ~1,100 lines: a dry-run, a run, a resume, a retry and a rollback are one state machine.
Every path goes through the same sequence — build the step's context, observe, plan, re-check a
disruptive step's precondition, fence, renew the target's leases, journal the intent, apply, verify
(:meth:`Runner._converge`, :meth:`Runner._verify`) — under the same lock, pause and failure rules; the
rules above are claims about that one sequence. Cut into a plan half, a run half and a rollback half,
each would reach into the others' private steps (or a mixin would scatter the sequence over three
files). What is not that sequence already lives beside it: the journal, lock, plan, wait, audit,
context and run facts modules.

Nothing here knows about Kafka: steps get the caller's opaque environment in a
:class:`~kafkaops.engine.context.RunContext`, and the run's lock, identity and sampler come from that
environment through the typed :class:`~kafkaops.engine.context.RunEnvironment` protocol.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, cast

from kafkaops.engine.audit import AuditLog, default_audit
from kafkaops.engine.binding import BoundRunbook, BoundStep, BoundTarget, schedule
from kafkaops.engine.context import NO_PROJECTION, Projection, RunContext, RunEnvironment
from kafkaops.engine.journal import (
    STEP_DONE,
    Journal,
    RunState,
    StepState,
    kafkaops_home,
    new_run_id,
    process_alive,
)
from kafkaops.engine.lock import LockBackend, held_error, lock_info
from kafkaops.engine.plan import Plan, PlannedStep, compute_fingerprint, diff_observations
from kafkaops.engine.run_facts import FACTS_FILE, RunFacts
from kafkaops.engine.step import (
    Action,
    DisruptiveStep,
    LeaseStep,
    Noop,
    Observation,
    Step,
    StepKind,
    coerce_param,
    parse_duration,
    read_only_scope,
    require_kind,
    writes_allowed,
)
from kafkaops.engine.wait import Clock, SystemClock
from kafkaops.errors import (
    ConfigError,
    Interrupted,
    KafkaOpsError,
    LockHeldError,
    NotConfirmed,
    RunFailed,
    StalePlanError,
    UnreachableError,
)

#: Seconds between two renewals of a target's expiring effects during one wait (a renewal is one read, and
#: a write only when the effect would not last: cheap, but not at every poll).
LEASE_KEEPALIVE = 60.0

Hook = Callable[[str, str, BoundStep], None]
"""``hook(point, target, step)`` called at ``before_apply``, ``after_apply``, ``after_applied_record``
and ``after_verified`` (tests inject crashes here)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attributes:
        attempts: Total tries (1 = no retry).
        backoff: Seconds before the first retry.
        multiplier: Backoff growth per retry.
        max_backoff: Cap on a single delay.
        retry_on: Extra exception types to treat as retryable (besides ``exc.retryable``).
    """

    attempts: int = 3
    backoff: float = 5.0
    multiplier: float = 2.0
    max_backoff: float = 60.0
    retry_on: tuple[type[BaseException], ...] = ()

    def delay(self, failures: int) -> float:
        """Delay after the ``failures``-th failure (1-based)."""
        return float(min(self.backoff * self.multiplier ** max(failures - 1, 0), self.max_backoff))

    def retryable(self, exc: BaseException) -> bool:
        return bool(getattr(exc, "retryable", False)) or isinstance(exc, self.retry_on)

    def merged(self, overrides: Mapping[str, Any] | None) -> RetryPolicy:
        """A copy with a runbook's or step's ``retry:`` mapping applied."""
        if not overrides:
            return self
        return RetryPolicy(
            attempts=int(overrides.get("attempts", self.attempts)),
            backoff=parse_duration(overrides["backoff"]) if "backoff" in overrides else self.backoff,
            multiplier=float(overrides.get("multiplier", self.multiplier)),
            max_backoff=parse_duration(overrides["max_backoff"])
            if "max_backoff" in overrides
            else self.max_backoff,
            retry_on=self.retry_on,
        )


@dataclass
class RunResult:
    """Outcome of ``start``/``resume``/``abort``/``apply_plan``."""

    run_id: str
    status: str
    applied: int = 0
    skipped: int = 0
    compensated: int = 0
    journal: Path | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Meta:
    run_id: str
    cluster: str
    operator: str
    reason: str
    task: str | None
    runbook: str
    targets: tuple[str, ...]
    batches: tuple[tuple[str, ...], ...] = ()


class _Fenced(Exception):
    """The lock could not be confirmed right before a change: pause, then raise ``error``."""

    def __init__(self, error: KafkaOpsError) -> None:
        super().__init__(error.message)
        self.error = error


def _discard(_: str) -> None:
    return None


def _bind_params(entry: StepKind, raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in entry.params:
        if p.name in raw:
            out[p.name] = coerce_param(p, raw[p.name])
        elif p.default is not None:
            out[p.name] = coerce_param(p, p.default)
    return out


class Runner:
    """Runs bound runbooks.

    Args:
        home: State directory (default ``$KAFKAOPS_HOME``); journals go to ``home/runs``.
        lock: Lock backend overriding the environment's (tests); by default every run takes
            ``env.lock`` — there is no fallback: an environment without a lock cannot run.
        audit: Audit log; default :func:`~kafkaops.engine.audit.default_audit`.
        retry: Default retry policy (a runbook's or step's ``retry:`` overrides it).
        clock: Sleeper for backoffs (inject a fake in tests).
        hook: Called at the crash-relevant points (see :data:`Hook`).
        handle_sigint: Install the Ctrl-C-pauses handler while running (main thread only).
        echo: Progress lines for the operator.
        confirmed: Manual checkpoints the operator confirmed for this invocation (name -> how: the
            command line's ``--confirmed NAME``, or the terminal prompt); handed to steps as
            ``ctx.confirmed``. A step refusing with :class:`~kafkaops.errors.NotConfirmed` pauses the run
            there (lock kept, nothing failed): ``kafkaops resume RUN --confirmed NAME`` goes on.
        ask: Asks a checkpoint's question on a terminal (``ctx.ask``); None: nobody to ask.
    """

    def __init__(
        self,
        *,
        home: Path | None = None,
        lock: LockBackend | None = None,
        audit: AuditLog | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        hook: Hook | None = None,
        handle_sigint: bool = True,
        echo: Callable[[str], None] | None = None,
        confirmed: Mapping[str, str] | tuple[str, ...] | list[str] = (),
        ask: Callable[[str], bool] | None = None,
        status: Callable[[str | None], None] | None = None,
    ) -> None:
        self.home = home or kafkaops_home()
        self.confirmed: dict[str, str] = (
            dict(confirmed) if isinstance(confirmed, Mapping) else dict.fromkeys(confirmed, "--confirmed"))
        self.ask = ask
        self._lock = lock
        self._audit = audit
        self.retry = retry or RetryPolicy()
        self.clock: Clock = clock or SystemClock()
        self.hook = hook
        self.handle_sigint = handle_sigint
        self.echo = echo or _discard
        self.status = status  # a live status line on a terminal (RunContext.status); None: none
        self._pause_requested = False

    # --- plumbing ------------------------------------------------------------------------------

    @property
    def audit(self) -> AuditLog:
        if self._audit is None:
            self._audit = default_audit(self.home)
        return self._audit

    def lock_for(self, env: RunEnvironment | None) -> LockBackend:
        """The lock guarding ``env``'s cluster: the environment's own (or the runner's override)."""
        if self._lock is not None:
            return self._lock
        lock = env.lock if env is not None else None
        if lock is None:
            raise ConfigError(
                "this run's environment provides no cluster lock; kafkaops never runs unlocked",
                hint="build the run's environment with kafkaops.environment.Environment",
            )
        return lock

    def request_pause(self) -> None:
        """Ask the run to pause at the next safe point (what Ctrl-C does)."""
        self._pause_requested = True

    def pause_requested(self) -> bool:
        return self._pause_requested

    @contextmanager
    def _sigint(self) -> Iterator[None]:
        if not self.handle_sigint or threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self._pause_requested:
                raise KeyboardInterrupt  # second Ctrl-C: stop now; the journal shows the in-flight step
            self._pause_requested = True
            self.echo("Ctrl-C: pausing at the next safe point (press Ctrl-C again to stop immediately)")

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _record(self, meta: _Meta, **fields: Any) -> None:
        """One audit line for this run (run, operator, reason and task filled in)."""
        self.audit.record(run=meta.run_id, operator=meta.operator, reason=meta.reason, task=meta.task, **fields)

    def _hook(self, point: str, target: str, step: BoundStep) -> None:
        if self.hook is not None:
            self.hook(point, target, step)

    def _ctx(
        self,
        meta: _Meta,
        target: str,
        step: BoundStep,
        params: Mapping[str, Any],
        env: RunEnvironment,
        projected: Projection = NO_PROJECTION,
        journal: Journal | None = None,
        facts: RunFacts | None = None,
        steps: tuple[BoundStep, ...] = (),
    ) -> RunContext:
        """The context of one step. ``facts``: the dry-run's in-memory store; a run's is the file beside
        its ``journal``."""
        def record(event: str, **fields: Any) -> None:
            if journal is not None:
                journal.append("event", target=target, step=step.index, kind=step.kind, event=event, **fields)

        last_renewal = [float("-inf")]

        def keep_alive() -> None:
            """During a wait of this step: the target's expiring effects renewed, once a LEASE_KEEPALIVE."""
            now = self.clock.monotonic()
            if journal is None or now - last_renewal[0] < LEASE_KEEPALIVE:
                return
            last_renewal[0] = now
            self._renew_leases(journal, meta, ctx, step)

        ctx = RunContext(
            run_id=meta.run_id,
            operator=meta.operator,
            reason=meta.reason,
            task=meta.task,
            target=target,
            params=params,
            env=env,
            projected=projected,
            cluster=meta.cluster,
            step_index=step.index,
            kind=step.kind,
            pause_requested=self.pause_requested,
            progress=self.echo,
            **({"status": self.status} if self.status is not None else {}),
            targets=meta.targets,
            batch=next((b for b in meta.batches if target in b), (target,)),
            record=record,
            confirmed=dict(self.confirmed),
            ask=self.ask,
            facts=RunFacts(journal.path.parent / FACTS_FILE) if journal is not None else facts or RunFacts(None),
            steps=steps,
            keep_alive=keep_alive,
        )
        return ctx

    def _renew_leases(self, journal: Journal, meta: _Meta, ctx: RunContext, at: BoundStep) -> None:
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

    @staticmethod
    def _check_kinds(bound: BoundRunbook) -> None:
        for t in bound.targets:
            for s in t.steps:
                require_kind(s.kind, f"runbook {bound.name}: {t.name} {s.label}")

    # --- dry-run / plans --------------------------------------------------------------------------

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
        import time

        holder = self.lock_for(env).holder(bound.cluster)
        if holder is not None and holder.run_id != owner:
            raise held_error(holder)

        meta = _Meta("", bound.cluster, operator, reason, task, bound.name, tuple(bound.target_names),
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

    # --- runs -------------------------------------------------------------------------------------

    def start(
        self,
        bound: BoundRunbook,
        *,
        env: RunEnvironment,
        operator: str,
        reason: str,
        task: str | None = None,
        run_id: str | None = None,
        plan_fingerprint: str | None = None,
        confirmed: Mapping[str, str] | None = None,
        ask: Callable[[str], bool] | None = None,
    ) -> RunResult:
        """Start a new run: take the cluster lock, journal ``run_started`` (with the environment's
        identity), run every step.

        ``confirmed`` and ``ask`` are this run's manual checkpoints, confirmed before the start (name ->
        how), and how a step asks one during the run; when given they replace the constructor's (a plan
        is made before the operator has confirmed anything, by the same runner).

        Raises:
            ConfigError: No reason, or an unregistered step kind.
            LockHeldError: Another run holds the cluster.
            RunFailed: A step failed (the run is resumable).
            Interrupted: The operator paused the run (resumable).
        """
        if not reason or not reason.strip():
            raise ConfigError(
                "a reason is required for anything that changes state", hint="pass --reason '...'"
            )
        if confirmed is not None:
            self.confirmed = dict(confirmed)
        if ask is not None:
            self.ask = ask
        self._check_kinds(bound)
        run_id = run_id or new_run_id(bound.name)
        lock = self.lock_for(env)
        lock.acquire(lock_info(bound.cluster, run_id, operator, reason, task))
        try:
            journal = Journal.create(run_id, self.home)
            journal.append(
                "run_started",
                run_id=run_id,
                runbook=bound.to_dict(),
                cluster=bound.cluster,
                operator=operator,
                reason=reason,
                task=task,
                pid=os.getpid(),
                hostname=socket.gethostname(),
                plan_fingerprint=plan_fingerprint,
                environment=dict(env.identity()),
            )
        except BaseException:
            lock.release(bound.cluster, run_id)
            raise
        meta = _Meta(run_id, bound.cluster, operator, reason, task, bound.name, tuple(bound.target_names),
                     bound.batches)
        self._audit_start(meta)
        self.echo(f"run {run_id}: {bound.name} on {', '.join(meta.targets)} (journal {journal.path})")
        return self._drive(journal, journal.replay(), bound, env, meta)

    def resume(
        self,
        run_id: str,
        *,
        env: RunEnvironment,
        operator: str | None = None,
        accepted_changes: tuple[str, ...] | list[str] = (),
    ) -> RunResult:
        """Continue a paused, failed or crashed run where it stopped (re-observing the in-flight step).

        Args:
            env: The environment rebuilt from the run's journaled identity.
            accepted_changes: Differences between the recorded and the current inventory that the
                operator accepted explicitly; journaled before anything else happens.

        Raises:
            ConfigError: Unknown run, or the run is finished/aborted.
            LockHeldError: The cluster lock now belongs to another run.
        """
        journal, state, bound, started = self._open(run_id, verb="resume")
        meta = _Meta(
            run_id,
            bound.cluster,
            operator or started["operator"],
            started["reason"],
            started.get("task"),
            bound.name,
            tuple(bound.target_names),
            bound.batches,
        )
        self.lock_for(env).acquire(
            lock_info(bound.cluster, run_id, started["operator"], started["reason"], started.get("task"))
        )
        if accepted_changes:
            journal.append("environment_changed", operator=meta.operator, accepted=list(accepted_changes))
        cursor = state.cursor()
        journal.append(
            "resumed",
            operator=meta.operator,
            pid=os.getpid(),
            hostname=socket.gethostname(),
            previous_status=state.status,
            cursor=list(cursor) if cursor else None,
        )
        self._audit_start(meta, resumed=True)
        self.echo(
            f"resuming run {run_id} at {cursor[0]} step {cursor[1]}" if cursor else f"resuming run {run_id}"
        )
        return self._drive(journal, state, bound, env, meta)

    def _open(self, run_id: str, *, verb: str) -> tuple[Journal, RunState, BoundRunbook, Mapping[str, Any]]:
        """The journal of a run that can still be resumed or aborted, replayed."""
        journal = Journal.open(run_id, self.home)
        state = journal.replay()
        if not state.started:
            raise ConfigError(f"run {run_id}: journal {journal.path} has no run_started record")
        if state.terminal:
            raise ConfigError(f"run {run_id} is already {state.status}; nothing to {verb}",
                              hint="start a new run instead")
        if state.status == "running" and process_alive(state) and state.pid != os.getpid():
            raise ConfigError(
                f"run {run_id} is still being driven by pid {state.pid} on this host",
                hint=f"press Ctrl-C in that terminal to pause it first, then {verb}",
            )
        bound = BoundRunbook.from_dict(state.started["runbook"])
        self._check_kinds(bound)
        return journal, state, bound, state.started

    def _drive(
        self, journal: Journal, state: RunState, bound: BoundRunbook, env: RunEnvironment, meta: _Meta
    ) -> RunResult:
        """The one loop every run goes through (started, resumed or applied from a plan)."""
        result = RunResult(run_id=meta.run_id, status="running", journal=journal.path)
        self._pause_requested = False
        # The cluster's state while this process runs, for the run's chart (``runs show --chart``).
        sampler = env.run_sampler(journal.path.parent)
        if sampler is not None:
            sampler.start()
        try:
            return self._steps(journal, state, bound, env, meta, result)
        finally:
            if sampler is not None:
                sampler.stop()

    def _steps(self, journal: Journal, state: RunState, bound: BoundRunbook, env: RunEnvironment, meta: _Meta,
               result: RunResult) -> RunResult:
        with self._sigint():
            started = {t for t, _ in state.steps}
            earlier = set(started)  # begun by an earlier process of this run (a resume takes them up)
            announced: set[str] = set()
            for target, step in schedule(bound):
                if target.name in state.targets_done:
                    continue
                if target.name not in started:
                    journal.append("target_started", target=target.name)
                    started.add(target.name)
                if target.name not in announced:
                    announced.add(target.name)
                    self._audit_host(meta, target.name, resumed=target.name in earlier)
                if not state.is_done(target.name, step.index):
                    if self._pause_requested:
                        self._pause(journal, meta, target, step)
                    self._run_step(
                        journal, state.step(target.name, step.index), bound, target, step, env, meta, result
                    )
                if step is target.steps[-1]:
                    journal.append("target_finished", target=target.name)
                    self._audit_host(meta, target.name, passed=True)
            journal.append("finished", applied=result.applied, skipped=result.skipped)
        self._audit_end(meta, passed=True)
        self.lock_for(env).release(bound.cluster, meta.run_id)
        result.status = "finished"
        self.echo(f"run {meta.run_id} finished: {result.applied} change(s), {result.skipped} no-op(s)")
        return result

    def _audit_start(self, meta: _Meta, *, resumed: bool = False) -> None:
        self.audit.start(run=meta.run_id, runbook=meta.runbook + (" (resume)" if resumed else ""),
                         targets=meta.targets, operator=meta.operator, reason=meta.reason, task=meta.task)

    def _audit_end(self, meta: _Meta, *, passed: bool, detail: str = "") -> None:
        self.audit.end(run=meta.run_id, runbook=meta.runbook, targets=meta.targets, operator=meta.operator,
                       reason=meta.reason, task=meta.task, passed=passed, detail=detail)

    def _audit_host(self, meta: _Meta, host: str, *, passed: bool | None = None, resumed: bool = False,
                    detail: str = "") -> None:
        """A host's maintenance starts (``passed`` None) or ends, as its own SAL line — in a run of several
        hosts only: a single-host run's START/END lines already are that host's."""
        if len(meta.targets) < 2 or host not in meta.targets:
            return
        position = (meta.targets.index(host) + 1, len(meta.targets))
        if passed is None:
            self.audit.host_start(run=meta.run_id, runbook=meta.runbook, host=host, position=position,
                                  operator=meta.operator, reason=meta.reason, task=meta.task, resumed=resumed)
        else:
            self.audit.host_end(run=meta.run_id, runbook=meta.runbook, host=host, position=position,
                                operator=meta.operator, reason=meta.reason, task=meta.task, passed=passed,
                                detail=detail)

    def _pause(
        self, journal: Journal, meta: _Meta, target: BoundTarget, step: BoundStep, detail: str = "",
        refusal: NotConfirmed | None = None, fenced: KafkaOpsError | None = None,
    ) -> NoReturn:
        journal.append("paused", target=target.name, step=step.index, kind=step.kind, detail=detail)
        self._record(meta, target=target.name, step=step.label, action="pause", outcome="paused")
        if fenced is not None:  # the lock is not confirmed as this run's: its code (4 or 7), paused
            error = type(fenced)(
                f"run {meta.run_id} paused before {target.name} {step.label}: {fenced.message}. "
                f"State: {_changes_so_far(journal.replay(), target.name)}",
                hint=(f"{fenced.hint}; " if fenced.hint else "") + f"then `kafkaops resume {meta.run_id}`",
            )
            raise error
        if refusal is not None:  # a checkpoint nobody confirmed: the run waits for the operator
            raise NotConfirmed(
                f"run {meta.run_id} paused before {target.name} {step.label}: {refusal.message}",
                hint=(f"{refusal.hint}; " if refusal.hint else "")
                + f"then `kafkaops resume {meta.run_id} --confirmed NAME`; the cluster lock stays with the run",
            )
        raise Interrupted(
            f"run {meta.run_id} paused before {target.name} {step.label}"
            + (f" ({detail})" if detail else "")
            + f". State: {_changes_so_far(journal.replay(), target.name)}; the cluster lock stays with the run",
            hint=f"continue with `kafkaops resume {meta.run_id}`, or undo it with "
            f"`kafkaops runs abort {meta.run_id} --rollback --reason ...`",
        )

    def _policy(self, bound: BoundRunbook, step: BoundStep) -> RetryPolicy:
        return self.retry.merged(bound.retry).merged(step.retry)

    def _converge(
        self,
        obj: Step,
        ctx: RunContext,
        journal: Journal,
        meta: _Meta,
        base: Mapping[str, Any],
        step: BoundStep,
        label: str,
        *,
        phase: str = "step",
        attempt: int = 1,
    ) -> Action | Noop:
        """Observe, plan and — when the plan is an action — journal the intent, audit, apply, journal
        the result. The one sequence behind a step and behind a rollback's compensation.

        ``phase`` names the journal records: ``step_applying``/``step_applied`` or
        ``compensate_applying``/``compensate_applied``.
        """
        entry = require_kind(step.kind, step.label)
        with read_only_scope(f"{step.kind} observe"):
            obs = obj.observe(ctx)
            if phase == "step":
                journal.append("step_observed", sync=False, observed=_summary(obs), **base)
            decision = obj.plan(obs)
            if isinstance(decision, Noop):
                return decision
            self._precondition(obj, ctx, step, decision)
        if not entry.read_only:
            self._fence(ctx, meta, step)
            self._renew_leases(journal, meta, ctx, step)
        journal.append(f"{phase}_applying", action=decision.to_dict(), attempt=attempt, **base)
        self._record(meta, target=ctx.target, step=label, action=decision.description,
                     outcome="applying" if phase == "step" else "rollback-applying",
                     commands=list(decision.commands))
        self.echo(f"{ctx.target} {label}: {decision.description}")
        self._hook("before_apply", ctx.target, step)
        with read_only_scope(f"{step.kind} apply (a read-only kind)") if entry.read_only else nullcontext():
            obj.apply(ctx, decision)
        self._hook("after_apply", ctx.target, step)
        journal.append(f"{phase}_applied", **base)
        self._hook("after_applied_record", ctx.target, step)
        self._record(meta, target=ctx.target, step=label, action=decision.description,
                     outcome="applied" if phase == "step" else "rolled-back")
        return decision

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

    def _fence(self, ctx: RunContext, meta: _Meta, step: BoundStep) -> None:
        """Before the intent of every step that is not read-only: the lock, re-read from its store now, is
        this run's.

        The lock's holder is read (the backend answers within its deadline or raises
        :class:`~kafkaops.errors.UnreachableError`); unreadable, absent or another run's, and the step is
        not applied: :class:`_Fenced` makes :meth:`_run_step` pause the run (resumable) with exit 4 or 7.
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
            raise _Fenced(error) from exc
        if holder is not None and holder.run_id == meta.run_id:
            ctx.record("lock_confirmed", lock=label)
            return
        found = f"held by {holder.describe()}" if holder is not None else "gone (removed by someone else)"
        ctx.record("lock_unconfirmed", lock=label, holder=holder.run_id if holder else None)
        raise _Fenced(LockHeldError(
            f"the cluster lock ({label}) is no longer this run's before {step.kind} on {ctx.target}: it is {found}",
            hint="find out who removed or took it; resume takes it back only if no other run holds it"))

    def _run_step(
        self,
        journal: Journal,
        prior: StepState,
        bound: BoundRunbook,
        target: BoundTarget,
        step: BoundStep,
        env: RunEnvironment,
        meta: _Meta,
        result: RunResult,
    ) -> None:
        entry = require_kind(step.kind, step.label)
        policy = self._policy(bound, step)
        obj: Step = entry.create(step.params)
        ctx = self._ctx(meta, target.name, step, step.params, env, journal=journal, steps=target.steps)
        base: dict[str, Any] = {"target": target.name, "step": step.index, "kind": step.kind}
        # The step's place among this target's own steps (a KRaft controller node runs fewer than a broker).
        label = f"[{target.steps.index(step) + 1}/{len(target.steps)}] {step.kind}"
        failures = 0
        while True:
            try:
                decision = self._converge(obj, ctx, journal, meta, base, step, label, attempt=failures + 1)
                if isinstance(decision, Noop):
                    why = decision.reason
                    if prior.changed:
                        why += " (the earlier, interrupted attempt took effect)"
                    journal.append("step_skipped", reason=why, **base)
                    self.echo(f"{target.name} {label}: no-op: {why}")
                    result.skipped += 1
                else:
                    result.applied += 1
                break
            except Interrupted as exc:
                self._pause(journal, meta, target, step, detail=str(exc))
            except NotConfirmed as exc:
                self._pause(journal, meta, target, step, detail=exc.message, refusal=exc)
            except _Fenced as exc:
                self._pause(journal, meta, target, step, detail=str(exc), fenced=exc.error)
            except Exception as exc:
                failures += 1
                if policy.retryable(exc) and failures < policy.attempts:
                    delay = policy.delay(failures)
                    journal.append("step_retry", error=str(exc), attempt=failures, delay=delay, **base)
                    self.echo(f"{target.name} {step.label}: {exc}; retrying in {delay:.0f}s")
                    self.clock.sleep(delay)
                    continue
                self._fail(journal, meta, bound, target, step, exc, journal.replay())
        try:
            self._verify(obj, ctx, policy, journal, base, target, step)
        except Interrupted as exc:
            self._pause(journal, meta, target, step, detail=str(exc))
        except Exception as exc:
            self._fail(journal, meta, bound, target, step, exc, journal.replay())
        journal.append("step_verified", **base)
        self._hook("after_verified", target.name, step)

    def _verify(
        self,
        obj: Step,
        ctx: RunContext,
        policy: RetryPolicy,
        journal: Journal,
        base: Mapping[str, Any],
        target: BoundTarget,
        step: BoundStep,
    ) -> None:
        failures = 0
        while True:
            try:
                with read_only_scope(f"{step.kind} verify"):
                    obj.verify(ctx)
                return
            except Interrupted:
                raise
            except Exception as exc:
                failures += 1
                if not policy.retryable(exc) or failures >= policy.attempts:
                    raise
                delay = policy.delay(failures)
                journal.append(
                    "step_retry", phase="verify", error=str(exc), attempt=failures, delay=delay, **base
                )
                self.echo(f"{target.name} {step.label}: verify: {exc}; retrying in {delay:.0f}s")
                self.clock.sleep(delay)

    def _fail(
        self,
        journal: Journal,
        meta: _Meta,
        bound: BoundRunbook,
        target: BoundTarget,
        step: BoundStep,
        exc: Exception,
        state: RunState,
    ) -> NoReturn:
        code = exc.exit_code if isinstance(exc, KafkaOpsError) else 1
        journal.append(
            "step_failed",
            target=target.name,
            step=step.index,
            kind=step.kind,
            error=str(exc),
            error_type=type(exc).__name__,
            exit_code=code,
        )
        self._record(meta, target=target.name, step=step.label, action=step.kind, outcome="failed", error=str(exc))
        done = sum(1 for s in state.steps.values() if s.status == "verified")
        st = state.step(target.name, step.index)
        partly = (
            "may be partly applied (the journal shows an apply attempt)" if st.changed else "was not applied"
        )
        self._audit_host(meta, target.name, passed=False, detail=f"stopped at {step.label}; resumable")
        self._audit_end(meta, passed=False, detail=f"stopped at {target.name} {step.label}; resumable")
        where = _changes_so_far(state, target.name)
        raise RunFailed(
            f"run {meta.run_id} stopped at {target.name} {step.label} of {len(target.steps)}: "
            f"{type(exc).__name__}: {exc}. State: {where}; {done} step(s) verified; this step {partly}; "
            f"the cluster lock on {bound.cluster} stays with the run",
            hint=f"fix the cause and `kafkaops resume {meta.run_id}`, or undo what this run changed with "
            f"`kafkaops runs abort {meta.run_id} --rollback --reason ...`",
        ) from exc

    # --- abort / rollback --------------------------------------------------------------------------

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
        meta = _Meta(
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
        meta: _Meta,
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
            params = _bind_params(comp_entry, comp.params if comp.params is not None else step.params)
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
                      kind: str, env: RunEnvironment, meta: _Meta) -> None:
        """After the compensations: prove the whole is as before the run (a step kind the compensations
        declared), converging like any step — it may wait, or make the last change (an election)."""
        entry = require_kind(kind, f"rollback check {kind}")
        params = _bind_params(entry, {})
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


def _changes_so_far(state: RunState, target: str) -> str:
    """What the run has changed on ``target`` and not undone, in order — the operator's "where are
    we" when a run stops (e.g. "kafka1002 so far: depool ...; stop the broker ...")."""
    changes = [s.action for s in sorted(state.steps.values(), key=lambda s: s.first_change_seq)
               if s.target == target and s.changed and not s.compensated and s.action]
    return (f"{target} so far: " + "; ".join(changes)) if changes else f"no change made on {target}"


def _summary(obs: Observation) -> str:
    summary = getattr(obs, "summary", "")
    return str(summary) if summary else str(getattr(obs, "data", obs))


def _fp(obs: Observation) -> Any:
    fn = getattr(obs, "fingerprint_data", None)
    return fn() if callable(fn) else getattr(obs, "data", None)
