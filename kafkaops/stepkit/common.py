"""Helpers shared by step kinds: the run's environment, the target host, progress lines, waits wired to Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, StepBase
from kafkaops.engine.wait import WaitProgress, wait_until
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed
from kafkaops.health.nodes import first_line as first_line
from kafkaops.model import Host


def environment(ctx: RunContext) -> Environment:
    """The run's :class:`~kafkaops.environment.Environment` (its adapters and hosts)."""
    e = ctx.env
    if not isinstance(e, Environment):  # pragma: no cover - wiring error
        raise TypeError(f"step {ctx.kind} needs a kafkaops.environment.Environment, got {type(e).__name__}")
    return e


def target_host(ctx: RunContext) -> Host:
    return environment(ctx).host(ctx.target)


def wait(ctx: RunContext, predicate: Callable[[], Any], *, what: str, timeout: float, interval: float = 0.5,
         stable_for: float = 0.0, fast: float | None = None) -> Any:
    """``wait_until`` with progress and Ctrl-C as cancellation; ``fast``: adaptive polling (see
    :func:`~kafkaops.engine.wait.wait_until`), for predicates as cheap as a metadata request.

    Progress goes two ways. On a terminal, the live status (:attr:`RunContext.status`) is redrawn at every
    poll: what it waits for, the value, elapsed/timeout. For logs, one plain line (:attr:`RunContext.progress`)
    per change of state — the value changed, or the wait is done — at most one a second, and one every
    30 s while nothing changes (so a long wait still shows it is alive); never a carriage return.
    """
    last = {"t": -100.0, "value": object()}

    def progress(p: WaitProgress) -> None:
        ctx.keep_alive()  # a long wait never lets the target's silence lapse (the runner throttles it)
        line = f"  {ctx.target}: {p.line()}"
        ctx.status(line.strip())
        done = p.ok and p.stable_elapsed >= p.stable_for
        changed = p.value != last["value"] and p.elapsed - float(last["t"]) >= 1  # type: ignore[arg-type]
        if done or changed or p.elapsed - float(last["t"]) >= 30:  # type: ignore[arg-type]
            last.update(t=p.elapsed, value=p.value)
            ctx.progress(line)

    try:
        return wait_until(predicate, timeout=timeout, interval=interval, stable_for=stable_for, what=what,
                          progress=progress, cancelled=ctx.pause_requested, fast=fast)
    finally:
        ctx.status(None)


def names(items: list[str], limit: int = 4) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"


@dataclass(frozen=True)
class StableObservation(Observation):
    """An observation whose saved-plan fingerprint is ``stable`` — what decides the step — not every figure
    of ``data``: a consumer's position or MirrorMaker's lag moves every second, and a plan must go stale on
    a changed verdict, not on traffic."""

    stable: Any = None

    def fingerprint_data(self) -> Any:
        return self.stable


class NodeSettingStep(StepBase):
    """A setting of the target node written by an inventory template and read back by another — a phase's
    configuration, an installed release — which takes effect at the node's next start: the runbook writes it
    between the node's stop and its start. Subclasses say which parameter holds the wanted value
    (``param``), which template writes it (``template``, given the value under ``param``), how it is read
    (:meth:`read`) and what the change is (:meth:`change`)."""

    param = ""
    template = ""
    what = ""  # "configured for", "Kafka ... installed": the summary's words

    def read(self, env: Environment, host: Host) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def change(self, d: Mapping[str, Any]) -> Action:  # pragma: no cover - abstract
        raise NotImplementedError

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        now, want = self.read(env, host), self.params[self.param]
        return Observation({"host": host.name, "now": now, "want": want,
                            "command": env.command(host, self.template, **{self.param: want})},
                           summary=f"{host.name}: {self.what} {now}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["now"] == d["want"]:
            return Noop(f"{d['host']}: already {self.what} {d['want']}")
        return self.change(d)

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        env.change(host, env.command(host, self.template, **{self.param: self.params[self.param]}), timeout=600)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        now = self.read(env, host)
        if now != self.params[self.param]:
            raise CheckFailed(f"{host.name}: {self.what} {now} after writing {self.params[self.param]}")
