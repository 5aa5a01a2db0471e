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

Why one sequence in four modules, this one of ~700 lines: a dry-run, a run, a resume, a retry and a
rollback are one state machine. Every path goes through the same sequence — build the step's context,
observe, plan, re-check a disruptive step's precondition, fence, renew the target's leases, journal the
intent, apply, verify (:meth:`Runner._converge`, :meth:`Runner._verify`) — under the same lock, pause and
failure rules; the rules above are claims about that one sequence, and it stays here, with start, resume
and the pause. The jobs around it are the runner's parts, mixed into :class:`Runner`: the guards the
sequence calls before an intent (:mod:`kafkaops.engine.fencing`), abort and rollback
(:mod:`kafkaops.engine.rollback`), dry-runs and saved plans (:mod:`kafkaops.engine.planning`); the retry
policy and the run's records are :mod:`kafkaops.engine.retry` and :mod:`kafkaops.engine.run_types`. What
is not the runner already lives beside it: the journal, lock, plan, wait, audit, context and run facts
modules.

Nothing here knows about Kafka: steps get the caller's opaque environment in a
:class:`~kafkaops.engine.context.RunContext`, and the run's lock, identity and sampler come from that
environment through the typed :class:`~kafkaops.engine.context.RunEnvironment` protocol.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NoReturn

from kafkaops.engine import debug_log
from kafkaops.engine.audit import AuditLog, default_audit
from kafkaops.engine.binding import BoundRunbook, BoundStep, BoundTarget, schedule
from kafkaops.engine.context import NO_PROJECTION, Projection, RunContext, RunEnvironment
from kafkaops.engine.fencing import Fenced, Fencing
from kafkaops.engine.journal import (
    Journal,
    RunState,
    StepState,
    kafkaops_home,
    new_run_id,
    process_alive,
)
from kafkaops.engine.lock import LockBackend, lock_info
from kafkaops.engine.planning import Planning, _summary
from kafkaops.engine.read_only import read_only_scope
from kafkaops.engine.retry import RetryPolicy
from kafkaops.engine.rollback import Rollback
from kafkaops.engine.run_facts import FACTS_FILE, RunFacts
from kafkaops.engine.run_types import RunMeta, RunResult
from kafkaops.engine.step import (
    Action,
    Noop,
    Step,
    require_kind,
)
from kafkaops.engine.wait import Clock, SystemClock
from kafkaops.errors import (
    ConfigError,
    Interrupted,
    KafkaOpsError,
    NotConfirmed,
    RunFailed,
)

#: Seconds between two renewals of a target's expiring effects during one wait (a renewal is one read, and
#: a write only when the effect would not last: cheap, but not at every poll).
LEASE_KEEPALIVE = 60.0

Hook = Callable[[str, str, BoundStep], None]
"""``hook(point, target, step)`` called at ``before_apply``, ``after_apply``, ``after_applied_record``
and ``after_verified`` (tests inject crashes here)."""


def _discard(_: str) -> None:
    return None


class Runner(Planning, Fencing, Rollback):
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
        #: When this process last renewed each target's expiring effects (clock.monotonic()).
        self._renewed: dict[str, float] = {}

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

    def _record(self, meta: RunMeta, **fields: Any) -> None:
        """One audit line for this run (run, operator, reason and task filled in)."""
        self.audit.record(run=meta.run_id, operator=meta.operator, reason=meta.reason, task=meta.task, **fields)

    def _hook(self, point: str, target: str, step: BoundStep) -> None:
        if self.hook is not None:
            self.hook(point, target, step)

    def _ctx(
        self,
        meta: RunMeta,
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

        def keep_alive() -> None:
            """During a wait of this step: the target's expiring effects renewed when this process has not
            renewed them for a LEASE_KEEPALIVE (a change renews them right before its intent, so a wait right
            after one does not ask again; a resumed process asks at its first wait's first poll)."""
            if journal is None or self.clock.monotonic() - self._renewed.get(target, float("-inf")) < LEASE_KEEPALIVE:
                return
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


    @staticmethod
    def _check_kinds(bound: BoundRunbook) -> None:
        for t in bound.targets:
            for s in t.steps:
                require_kind(s.kind, f"runbook {bound.name}: {t.name} {s.label}")

    # --- dry-run / plans --------------------------------------------------------------------------

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
        meta = RunMeta(run_id, bound.cluster, operator, reason, task, bound.name, tuple(bound.target_names),
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
        meta = RunMeta(
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
        self, journal: Journal, state: RunState, bound: BoundRunbook, env: RunEnvironment, meta: RunMeta
    ) -> RunResult:
        """The one loop every run goes through (started, resumed or applied from a plan)."""
        result = RunResult(run_id=meta.run_id, status="running", journal=journal.path)
        self._pause_requested = False
        # The cluster's state while this process runs, for the run's chart (``runs show --chart``).
        sampler = env.run_sampler(journal.path.parent)
        if sampler is not None:
            sampler.start()
        try:
            with debug_log.recorded(journal.path.parent):  # how each system answered, beside the journal
                return self._steps(journal, state, bound, env, meta, result)
        finally:
            if sampler is not None:
                sampler.stop()

    def _steps(self, journal: Journal, state: RunState, bound: BoundRunbook, env: RunEnvironment, meta: RunMeta,
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

    def _audit_start(self, meta: RunMeta, *, resumed: bool = False) -> None:
        self.audit.start(run=meta.run_id, runbook=meta.runbook + (" (resume)" if resumed else ""),
                         targets=meta.targets, operator=meta.operator, reason=meta.reason, task=meta.task)

    def _audit_end(self, meta: RunMeta, *, passed: bool, detail: str = "") -> None:
        self.audit.end(run=meta.run_id, runbook=meta.runbook, targets=meta.targets, operator=meta.operator,
                       reason=meta.reason, task=meta.task, passed=passed, detail=detail)

    def _audit_host(self, meta: RunMeta, host: str, *, passed: bool | None = None, resumed: bool = False,
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
        self, journal: Journal, meta: RunMeta, target: BoundTarget, step: BoundStep, detail: str = "",
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
        meta: RunMeta,
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
                journal.append("step_observed", observed=_summary(obs), **base)
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


    def _run_step(
        self,
        journal: Journal,
        prior: StepState,
        bound: BoundRunbook,
        target: BoundTarget,
        step: BoundStep,
        env: RunEnvironment,
        meta: RunMeta,
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
            except Fenced as exc:
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
        meta: RunMeta,
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


def _changes_so_far(state: RunState, target: str) -> str:
    """What the run has changed on ``target`` and not undone, in order — the operator's "where are
    we" when a run stops (e.g. "kafka1002 so far: depool ...; stop the broker ...")."""
    changes = [s.action for s in sorted(state.steps.values(), key=lambda s: s.first_change_seq)
               if s.target == target and s.changed and not s.compensated and s.action]
    return (f"{target} so far: " + "; ".join(changes)) if changes else f"no change made on {target}"


