"""Gates on what monitoring sees: the inventory's PromQL gates, against a baseline taken at the run's start.

``metrics.baseline`` (once per run, cluster-wide) evaluates every gate of the inventory's
``monitoring.gates`` and keeps the values in the run's facts (``facts.json``): a run resumed days later
compares against the cluster as it was when *this* run began, not as it is after half a roll.

``metrics.gate`` (before each broker stop, host reboot, service restart or deploy) evaluates every gate
now and judges it (:mod:`kafkaops.policy.metric_gates`): all within their ceilings, the roll goes on;
otherwise it waits (bounded by ``timeout``, its progress shown like every wait) and, if the figures do
not come back, stops at a safe point naming each gate with its value, baseline and limit — nothing of
this host has been stopped yet, and ``kafkaops resume RUN`` takes it up again (after a relaxed gate:
``--accept-inventory-change``). Its plan is the same action whatever the figures (check; hold while one
is exceeded): a plan says what the run will do. Each value goes into the plan (the observation),
the journal (``metric_gate`` / ``metric_baseline`` events: ``runs show``, its JSON and markdown) and the
chart (``runs show --chart`` marks each gate's verdict on the host's lane).

A gate whose query answers no series (or only NaN) is blind — its exporter down, its target no longer
scraped — and holds the roll like an exceeded one, naming the gate and the query that saw nothing: a
roll that took hosts down while monitoring could not see them would be exactly the roll the gate exists
to stop.

A cluster with no ``monitoring:``, no ``prometheus:`` URL or no gates gets no-ops that say so: gates are
the site's choice, not a requirement to run a maintenance.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import UnreachableError, WaitTimeout
from kafkaops.policy.metric_gates import GateReading, judge, summary, worst
from kafkaops.stepkit.common import StableObservation, environment, wait

#: The run's fact holding the baseline: ``{"at": epoch seconds, "values": {gate: value or None}}``.
BASELINE_FACT = "metrics_baseline"
#: The projection key by which a dry-run's gates see the baseline the run's first step will take.
PROJECTED_BASELINE = "metrics/baseline"


def unconfigured(env: Environment) -> str | None:
    """Why there is nothing to gate on for this cluster, or None when there is."""
    mon = env.cluster.monitoring
    where = env.cluster.source or "the inventory"
    if mon is None:
        return f"no monitoring: in {where} (no metric gates)"
    if not mon.prometheus:
        return f"no monitoring.prometheus URL in {where} (no metric gates)"
    if not mon.gates:
        return f"no monitoring.gates in {where}"
    return None


def evaluate(env: Environment) -> dict[str, tuple[float | None, str]]:
    """Every gate's worst value now and the series it came from (one instant query per gate; in a plan, once).

    Raises:
        UnreachableError: Prometheus did not answer.
        ConfigError: Prometheus refused a gate's query (it names the gate).
    """
    mon = env.cluster.monitoring
    assert mon is not None

    def ask() -> dict[str, tuple[float | None, str]]:
        out: dict[str, tuple[float | None, str]] = {}
        for gate in mon.gates:
            samples = env.prometheus.query(gate.promql(env.cluster.name), what=f"gate {gate.name}")
            out[gate.name] = worst([(s.labels, s.value) for s in samples])
        return out

    return dict(env.in_this_instant("metric gates", ask))  # a plan asks once (Environment.one_instant)


def readings(env: Environment, now: Mapping[str, tuple[float | None, str]],
             baseline: Mapping[str, float | None] | None) -> list[GateReading]:
    """Each gate judged on ``now`` against ``baseline`` (None: no baseline taken)."""
    mon = env.cluster.monitoring
    assert mon is not None
    base = baseline or {}
    return [judge(g.name, now[g.name][0], base.get(g.name), high=g.max, ratio=g.max_ratio, series=now[g.name][1],
                  query=g.promql(env.cluster.name))
            for g in mon.gates]


def _queries(env: Environment) -> tuple[str, ...]:
    mon = env.cluster.monitoring
    assert mon is not None and mon.prometheus
    return tuple(f"Prometheus {mon.prometheus}: {g.name} = {g.promql(env.cluster.name)}" for g in mon.gates)


def _baseline(ctx: RunContext) -> Mapping[str, float | None] | None:
    """The run's baseline values: taken (facts), or — while planning — the one ``metrics.baseline`` will take."""
    taken = ctx.facts.get(BASELINE_FACT)
    if isinstance(taken, Mapping):
        return dict(taken.get("values") or {})
    projected = ctx.projected.get(PROJECTED_BASELINE)
    return dict(projected) if isinstance(projected, Mapping) else None


class Baseline(StepBase):
    """Evaluate every gate once, at the run's start, and keep the values with the run (its facts)."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        why = unconfigured(env)
        if why:
            return StableObservation({"configured": False, "why": why}, summary=why, stable={"configured": False})
        taken = ctx.facts.get(BASELINE_FACT)
        if isinstance(taken, Mapping):
            values = dict(taken.get("values") or {})
            return StableObservation({"configured": True, "taken": values, "now": {}},
                                     summary="baseline taken: " + _values_text(values),
                                     stable={"configured": True, "taken": True})
        projected = ctx.projected.get(PROJECTED_BASELINE)
        if isinstance(projected, Mapping):  # a dry-run: an earlier target's step takes the run's baseline
            by = ctx.projected.source(PROJECTED_BASELINE) or "an earlier step"
            return StableObservation({"configured": True, "taken": dict(projected), "now": {}},
                                     summary=f"baseline taken by {by}: " + _values_text(projected),
                                     stable={"configured": True, "taken": True})
        now = {name: value for name, (value, _) in evaluate(env).items()}
        return StableObservation({"configured": True, "taken": None, "now": now, "queries": list(_queries(env))},
                                 summary="gates now (the baseline): " + _values_text(now),
                                 stable={"configured": True, "taken": False})

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["configured"]:
            return Noop(d["why"])
        if d["taken"] is not None:
            return Noop(f"metric baseline already taken for this run: {_values_text(d['taken'])}")
        return Action(description="take the metric baseline: every monitoring gate's value now, kept with the run "
                                  "(a resume compares against the same values)",
                      commands=tuple(d["queries"]), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        values = {name: value for name, (value, _) in evaluate(env).items()}
        ctx.facts.set(BASELINE_FACT, {"at": time.time(), "values": values})
        ctx.record("metric_baseline", values=values)
        ctx.progress(f"  metric baseline: {_values_text(values)}")

    def effects(self, obs: Observation, action: Action) -> Mapping[str, Any]:
        return {PROJECTED_BASELINE: dict(obs.data.get("now") or {})}


class Gate(StepBase):
    """Every gate within its ceiling now, or wait (bounded) and stop safely naming the gates."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        why = unconfigured(env)
        if why:
            return StableObservation({"configured": False, "why": why}, summary=why, stable={"configured": False})
        baseline = _baseline(ctx)
        seen = readings(env, evaluate(env), baseline)
        ctx.record("metric_gate", held=all(r.ok for r in seen), readings=[r.to_dict() for r in seen])
        note = "" if baseline is not None else " (no baseline taken by this run: max_ratio not applied)"
        verdict = "metric gates hold: " if all(r.ok for r in seen) else "metric gates exceeded: "
        return StableObservation({"configured": True, "readings": [r.to_dict() for r in seen],
                                  "queries": list(_queries(env)), "baseline": baseline is not None},
                                 summary=verdict + summary(seen) + note,
                                 stable={"configured": True, "held": {r.name: r.ok for r in seen}})

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["configured"]:
            return Noop(d["why"])
        # Always the same action, whatever the figures are now: a plan says what the run will do (check, and
        # hold while a gate is exceeded); what the gates read now is the observation, shown beside it.
        return Action(
            description=f"check every metric gate; hold while one exceeds its ceiling (at most "
                        f"{self.params['timeout']:.0f}s), then stop here, resumable",
            commands=tuple(d["queries"]),
            impact="read-only: holds the roll before this host is taken down")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        baseline = _baseline(ctx)
        last: list[GateReading] = []

        def within() -> tuple[bool, str]:
            nonlocal last
            try:
                last = readings(env, evaluate(env), baseline)
            except UnreachableError as exc:  # a monitoring blip is waited out like an exceeded gate
                return False, f"Prometheus unreachable: {exc.message}"
            bad = [r for r in last if not r.ok]
            return not bad, summary(bad or last)

        try:
            wait(ctx, within, what="metric gates within their ceilings", timeout=float(self.params["timeout"]),
                 interval=float(self.params["interval"]), stable_for=float(self.params["stable_for"]))
        except WaitTimeout:
            ctx.record("metric_gate", held=False, readings=[r.to_dict() for r in last])
            bad = [r for r in last if not r.ok] or last
            raise WaitTimeout(
                f"metric gates still exceeded after {self.params['timeout']:.0f}s, before {ctx.target} is taken "
                "down: " + (summary(bad) if bad else "Prometheus did not answer"),
                hint="nothing of this host was stopped; when the figures are back (or the gate is changed in the "
                     "inventory: resume --accept-inventory-change) `kafkaops resume RUN` goes on") from None
        ctx.record("metric_gate", held=True, readings=[r.to_dict() for r in last])


def _values_text(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {'no data' if v is None else f'{float(v):.4g}'}" for k, v in values.items()) or "none"


register_step("metrics.baseline", Baseline, effect="read-only")
register_step("metrics.gate", Gate, [
    Param("timeout", "duration", default=600.0, min=1.0, max=86400.0,
          help="how long the gates may stay exceeded before the run stops (resumable)"),
    Param("interval", "duration", default=5.0, min=0.5, max=300.0, help="seconds between two evaluations"),
    Param("stable_for", "duration", default=0.0, min=0.0, max=3600.0,
          help="how long every gate must hold in a row (0: one evaluation)"),
], effect="read-only")
