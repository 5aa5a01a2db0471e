"""The runbook engine: durable, resumable, idempotent state machines with reviewable plans.

It knows nothing about Kafka and imports no client library (nor ``kafkaops.systems``/``kafkaops.steps``):
steps receive the caller's opaque environment object. See ``docs/engine.md``.

Typical use (the CLI wiring does this)::

    from kafkaops.catalog import find_runbook
    from kafkaops.engine import Runner, Target, bind_runbook

    rb = find_runbook("reboot")                       # step kinds must be registered first
    bound = bind_runbook(rb, cluster=cluster, targets=[Target(h.name, host=h) for h in hosts])
    runner = Runner(echo=console.print)
    plan = runner.dry_run(bound, env=env, operator=op, reason=why)
    result = runner.start(bound, env=env, operator=op, reason=why, task="T123")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkaops.engine.audit import (
        AuditLog,
        FileSink,
        MemorySink,
        current_operator,
        redact,
    )
    from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
    from kafkaops.engine.context import Projection, RunContext, RunEnvironment
    from kafkaops.engine.journal import Journal, RunState, kafkaops_home, list_runs, runs_dir
    from kafkaops.engine.lock import (
        FileLockBackend,
        LockBackend,
        LockInfo,
        force_unlock,
    )
    from kafkaops.engine.plan import Plan, PlannedStep, load_plan, save_plan
    from kafkaops.engine.retry import RetryPolicy
    from kafkaops.engine.run_types import RunResult
    from kafkaops.engine.runbook import Runbook, load_runbook
    from kafkaops.engine.runner import Runner
    from kafkaops.engine.step import (
        Action,
        Compensation,
        Noop,
        Observation,
        Param,
        Step,
        StepBase,
        get_step_kind,
        parse_duration,
        register_step,
        step_kind,
        step_kinds,
    )
    from kafkaops.engine.wait import FakeClock, SystemClock, WaitProgress, wait_until

_EXPORTS: dict[str, str] = {
    "Action": "kafkaops.engine.step",
    "AuditLog": "kafkaops.engine.audit",
    "BoundRunbook": "kafkaops.engine.binding",
    "Compensation": "kafkaops.engine.step",
    "FakeClock": "kafkaops.engine.wait",
    "FileLockBackend": "kafkaops.engine.lock",
    "FileSink": "kafkaops.engine.audit",
    "Journal": "kafkaops.engine.journal",
    "LockBackend": "kafkaops.engine.lock",
    "LockInfo": "kafkaops.engine.lock",
    "MemorySink": "kafkaops.engine.audit",
    "Noop": "kafkaops.engine.step",
    "Observation": "kafkaops.engine.step",
    "Param": "kafkaops.engine.step",
    "Plan": "kafkaops.engine.plan",
    "PlannedStep": "kafkaops.engine.plan",
    "RetryPolicy": "kafkaops.engine.retry",
    "Projection": "kafkaops.engine.context",
    "RunContext": "kafkaops.engine.context",
    "RunEnvironment": "kafkaops.engine.context",
    "RunResult": "kafkaops.engine.run_types",
    "RunState": "kafkaops.engine.journal",
    "Runbook": "kafkaops.engine.runbook",
    "Runner": "kafkaops.engine.runner",
    "Step": "kafkaops.engine.step",
    "StepBase": "kafkaops.engine.step",
    "SystemClock": "kafkaops.engine.wait",
    "Target": "kafkaops.engine.binding",
    "WaitProgress": "kafkaops.engine.wait",
    "bind_runbook": "kafkaops.engine.binding",
    "current_operator": "kafkaops.engine.audit",
    "force_unlock": "kafkaops.engine.lock",
    "get_step_kind": "kafkaops.engine.step",
    "kafkaops_home": "kafkaops.engine.journal",
    "list_runs": "kafkaops.engine.journal",
    "load_plan": "kafkaops.engine.plan",
    "load_runbook": "kafkaops.engine.runbook",
    "parse_duration": "kafkaops.engine.step",
    "redact": "kafkaops.engine.audit",
    "register_step": "kafkaops.engine.step",
    "runs_dir": "kafkaops.engine.journal",
    "save_plan": "kafkaops.engine.plan",
    "step_kind": "kafkaops.engine.step",
    "step_kinds": "kafkaops.engine.step",
    "wait_until": "kafkaops.engine.wait",
}


def __getattr__(name: str) -> Any:
    """Import submodules on first use: ``kafkaops runbooks list`` must not pay for the runner."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkaops.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Action",
    "AuditLog",
    "BoundRunbook",
    "Compensation",
    "FakeClock",
    "FileLockBackend",
    "FileSink",
    "Journal",
    "LockBackend",
    "LockInfo",
    "MemorySink",
    "Noop",
    "Observation",
    "Param",
    "Plan",
    "PlannedStep",
    "Projection",
    "RetryPolicy",
    "RunContext",
    "RunEnvironment",
    "RunResult",
    "RunState",
    "Runbook",
    "Runner",
    "Step",
    "StepBase",
    "SystemClock",
    "Target",
    "WaitProgress",
    "bind_runbook",
    "current_operator",
    "force_unlock",
    "get_step_kind",
    "kafkaops_home",
    "list_runs",
    "load_plan",
    "load_runbook",
    "parse_duration",
    "redact",
    "register_step",
    "runs_dir",
    "save_plan",
    "step_kind",
    "step_kinds",
    "wait_until",
]
