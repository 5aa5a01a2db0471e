"""Helpers shared by step kinds: the run's environment, the target host, progress lines, waits wired to Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.wait import WaitProgress, wait_until
from kafkaops.environment import Environment
from kafkaops.model import Host


def env(ctx: RunContext) -> Environment:
    """The run's :class:`~kafkaops.environment.Environment` (its adapters, facts and hosts)."""
    e = ctx.env
    if not isinstance(e, Environment):  # pragma: no cover - wiring error
        raise TypeError(f"step {ctx.kind} needs a kafkaops.environment.Environment, got {type(e).__name__}")
    return e


def target_host(ctx: RunContext) -> Host:
    return env(ctx).host(ctx.target)


def wait(ctx: RunContext, predicate: Callable[[], Any], *, what: str, timeout: float, interval: float = 0.5,
         stable_for: float = 0.0, fast: float | None = None) -> Any:
    """``wait_until`` with live progress (at most one line every 5 s) and Ctrl-C as cancellation; ``fast``:
    adaptive polling (see :func:`~kafkaops.engine.wait.wait_until`), for predicates as cheap as a
    metadata request."""
    last = [-10.0]

    def progress(p: WaitProgress) -> None:
        if p.elapsed - last[0] >= 5 or (p.ok and p.stable_elapsed >= p.stable_for):
            last[0] = p.elapsed
            ctx.progress(f"  {ctx.target}: {p.line()}")

    return wait_until(predicate, timeout=timeout, interval=interval, stable_for=stable_for, what=what,
                      progress=progress, cancelled=ctx.pause_requested, fast=fast)


def names(items: list[str], limit: int = 4) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
