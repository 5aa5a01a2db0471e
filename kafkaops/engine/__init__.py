"""The runbook engine: durable, resumable, idempotent state machines with reviewable plans.

It knows nothing about Kafka and imports no client library (nor ``kafkaops.systems``/``kafkaops.steps``):
steps receive the caller's opaque ``services`` object. See ``docs/engine.md``.

Typical use (the CLI wiring does this)::

    from kafkaops.engine import Runner, Target, bind_runbook, find_runbook

    rb = find_runbook("reboot")                       # step kinds must be registered first
    bound = bind_runbook(rb, cluster=cluster, targets=[Target(h.name, host=h) for h in hosts])
    runner = Runner(echo=console.print)
    plan = runner.dry_run(bound, services=services, operator=op, reason=why)
    result = runner.start(bound, services=services, operator=op, reason=why, task="T123")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkaops.engine.audit import (
        AuditLog,
        FileSink,
        MemorySink,
        TcpSink,
        WebhookSink,
        current_operator,
        redact,
    )
    from kafkaops.engine.context import (
        ContextFactory,
        RunContext,
        build_services,
        get_context_factory,
        set_context_factory,
    )
    from kafkaops.engine.journal import Journal, RunState, kafkaops_home, list_runs, runs_dir
    from kafkaops.engine.lock import (
        FileLockBackend,
        LockBackend,
        LockInfo,
        ZooKeeperLockBackend,
        force_unlock,
        lock_backend_for,
        set_lock_factory,
    )
    from kafkaops.engine.plan import Plan, PlannedStep, load_plan, save_plan
    from kafkaops.engine.runbook import (
        BoundRunbook,
        Runbook,
        Target,
        bind_runbook,
        find_runbook,
        load_runbook,
        render_markdown,
        runbook_files,
    )
    from kafkaops.engine.runner import RetryPolicy, Runner, RunResult
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
    "BoundRunbook": "kafkaops.engine.runbook",
    "Compensation": "kafkaops.engine.step",
    "ContextFactory": "kafkaops.engine.context",
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
    "RetryPolicy": "kafkaops.engine.runner",
    "RunContext": "kafkaops.engine.context",
    "RunResult": "kafkaops.engine.runner",
    "RunState": "kafkaops.engine.journal",
    "Runbook": "kafkaops.engine.runbook",
    "Runner": "kafkaops.engine.runner",
    "Step": "kafkaops.engine.step",
    "StepBase": "kafkaops.engine.step",
    "SystemClock": "kafkaops.engine.wait",
    "Target": "kafkaops.engine.runbook",
    "TcpSink": "kafkaops.engine.audit",
    "WaitProgress": "kafkaops.engine.wait",
    "WebhookSink": "kafkaops.engine.audit",
    "ZooKeeperLockBackend": "kafkaops.engine.lock",
    "bind_runbook": "kafkaops.engine.runbook",
    "build_services": "kafkaops.engine.context",
    "current_operator": "kafkaops.engine.audit",
    "find_runbook": "kafkaops.engine.runbook",
    "force_unlock": "kafkaops.engine.lock",
    "get_context_factory": "kafkaops.engine.context",
    "get_step_kind": "kafkaops.engine.step",
    "kafkaops_home": "kafkaops.engine.journal",
    "list_runs": "kafkaops.engine.journal",
    "load_plan": "kafkaops.engine.plan",
    "load_runbook": "kafkaops.engine.runbook",
    "lock_backend_for": "kafkaops.engine.lock",
    "parse_duration": "kafkaops.engine.step",
    "redact": "kafkaops.engine.audit",
    "register_step": "kafkaops.engine.step",
    "render_markdown": "kafkaops.engine.runbook",
    "runbook_files": "kafkaops.engine.runbook",
    "runs_dir": "kafkaops.engine.journal",
    "save_plan": "kafkaops.engine.plan",
    "set_context_factory": "kafkaops.engine.context",
    "set_lock_factory": "kafkaops.engine.lock",
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
    "ContextFactory",
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
    "RetryPolicy",
    "RunContext",
    "RunResult",
    "RunState",
    "Runbook",
    "Runner",
    "Step",
    "StepBase",
    "SystemClock",
    "Target",
    "TcpSink",
    "WaitProgress",
    "WebhookSink",
    "ZooKeeperLockBackend",
    "bind_runbook",
    "build_services",
    "current_operator",
    "find_runbook",
    "force_unlock",
    "get_context_factory",
    "get_step_kind",
    "kafkaops_home",
    "list_runs",
    "load_plan",
    "load_runbook",
    "lock_backend_for",
    "parse_duration",
    "redact",
    "register_step",
    "render_markdown",
    "runbook_files",
    "runs_dir",
    "save_plan",
    "set_context_factory",
    "set_lock_factory",
    "step_kind",
    "step_kinds",
    "wait_until",
]
