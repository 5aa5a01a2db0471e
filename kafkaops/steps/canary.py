"""The canary gate: after the first N targets of a roll, stop and let the operator look before going on.

A deploy (or a restart with a new config) that passes every automatic check can still be wrong in ways
only dashboards, client error rates or a colleague notice. Rolling it to one host first, then pausing,
bounds the damage to that host: the rest of the fleet still serves the old revision. The gate runs
between targets (``targets.gate`` of a rolling runbook) and only acts after the last canary target.

How it asks: the CLI gives :class:`~kafkaops.steps.services.Environment` a ``confirm`` callback (a prompt
on the terminal; ``--yes`` answers yes in advance). With no callback, or on "no", the run *pauses*
(resumable, lock kept) and ``kafkaops resume RUN`` is the confirmation: resuming a run that paused at
its canary gate is an explicit "go on". The decision is written to the run's facts, so a crash after
it never asks twice.
"""

from __future__ import annotations

import time

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, Interrupted
from kafkaops.stepkit.common import environment, names

CONFIRMED = "canary_confirmed"
PAUSED = "canary_paused"


class ConfirmCanary(StepBase):
    """After the last canary target: ask the operator (or pause the run) before rolling the rest."""

    def observe(self, ctx: RunContext) -> Observation:
        canary = [str(c) for c in self.params["canary"]]
        facts = ctx.facts
        data = {"target": ctx.target, "canary": canary, "is_end": bool(canary) and ctx.target == canary[-1],
                "confirmed": facts.get(CONFIRMED), "paused": facts.get(PAUSED) is not None}
        return Observation(data, summary=f"canary: {names(canary) if canary else 'none'}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["canary"]:
            return Noop("no canary: the roll goes on")
        if not d["is_end"]:
            return Noop(f"{d['target']} is not the last canary target ({d['canary'][-1]} is)")
        if d["confirmed"]:
            return Noop(f"canary confirmed ({d['confirmed']})")
        return Action(
            description=f"canary {names(d['canary'])} done: ask the operator before rolling the rest "
                        "(--yes: go on; no answer: pause, `kafkaops resume RUN` goes on)",
            commands=("confirm on the terminal, or `kafkaops resume RUN` after the pause",),
            impact="none: the canary hosts are repooled; no other host has been touched yet",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        facts = ctx.facts
        canary = names([str(c) for c in self.params["canary"]])
        if facts.get(PAUSED) is not None and env.confirm is None:
            facts.set(CONFIRMED, f"resumed by {ctx.operator} at {time.strftime('%H:%M:%S')}")
            ctx.progress(f"  canary {canary}: confirmed by resuming the run")
            return
        question = f"Canary {canary} is deployed, healthy and repooled. Roll the remaining targets?"
        if env.confirm is not None and env.confirm(question):
            facts.set(CONFIRMED, f"{ctx.operator} at {time.strftime('%H:%M:%S')}")
            return
        facts.set(PAUSED, time.time())
        raise Interrupted(f"canary {canary} done; check it (dashboards, logs, `kafkaops runs show "
                          f"{ctx.run_id}`), then `kafkaops resume {ctx.run_id}` to roll the rest")

    def verify(self, ctx: RunContext) -> None:
        canary = [str(c) for c in self.params["canary"]]
        if canary and ctx.target == canary[-1] and not ctx.facts.get(CONFIRMED):
            raise CheckFailed("the canary was not confirmed")


register_step("canary.confirm", ConfirmCanary, [
    Param("canary", "list", default=[], help="the canary targets; the gate acts after the last of them"),
], effect="read-only")
