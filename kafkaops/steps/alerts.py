"""Alert steps: silence the host a run takes down, end that silence once its checks passed, and hold the
run while the cluster's monitoring sees something this run did not cause.

A reboot that pages the on-call is a reboot nobody runs twice: Wikimedia's cookbooks downtime each host
in Alertmanager before they touch it, and remove the downtime at the end. So, per host:

* ``alerts.silence`` (before the depool): one Alertmanager silence made of the inventory's
  ``monitoring.host_matchers`` for that host (``instance=~"kafka1001\\.eqiad\\.wmnet:.*"``), created by the
  operator, commented ``kafkaops <run id>: <reason> (<task>)``. It is found again by that comment, so a
  resumed run never makes a second one. It is *bounded* (:func:`silence_bound`): if kafkaops dies, the
  silence ends by itself instead of hiding a broken host for days.
* ``alerts.unsilence`` (after the host's checks and its repool): waits until none of the host's alerts
  still fires under the silence — ending a silence over a firing alert pages at once — then expires it.
* ``alerts.gate`` (before each host, and once after the last): no alert of the cluster (its
  ``monitoring.scope`` labels) fires unless silenced — by this run's silences, or by a silence an
  operator made (an alert someone acknowledged). Otherwise it waits, bounded, and stops the run
  resumable, naming the alerts (Koperator holds a roll the same way).

Without a ``monitoring:`` block (or without its ``alertmanager``), each is a no-op that says so.
"""

from __future__ import annotations

import time
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import (
    Action,
    Compensation,
    Noop,
    Observation,
    Param,
    StepBase,
    format_duration,
    register_step,
)
from kafkaops.errors import CheckFailed, WaitTimeout
from kafkaops.queries.silences import DEFAULT_MARGIN, clock, end_when_quiet, ending_observation, silence_bound
from kafkaops.stepkit.common import environment, names, target_host, wait
from kafkaops.systems.alertmanager import Alert, Matcher, Silence, run_prefix, silence_comment, utc


def silence_key(host: str) -> str:
    """The projection key of a planned silence (the dry-run's ``alerts.unsilence`` sees it)."""
    return f"silence/{host}"


def _no_monitoring(ctx: RunContext) -> str:
    """Why the monitoring steps do nothing here, or ``""`` when the cluster has an Alertmanager."""
    cluster = environment(ctx).cluster
    if cluster.monitoring is None:
        return f"no monitoring: configured for cluster {cluster.name} (inventory monitoring: block)"
    if not cluster.monitoring.alertmanager:
        return f"no monitoring: configured for cluster {cluster.name} (no monitoring.alertmanager)"
    return ""


def _host_matchers(ctx: RunContext) -> list[Matcher]:
    env = environment(ctx)
    assert env.cluster.monitoring is not None
    host = target_host(ctx)
    return [Matcher(label, value, is_regex=True)
            for label, value in env.cluster.monitoring.host_regexes(host, env.cluster.name)]


def _mine(silences: list[Silence], run_id: str, matchers: list[Matcher]) -> list[Silence]:
    prefix = run_prefix(run_id)
    return [s for s in silences if run_id and s.comment.startswith(prefix) and s.live and s.matches(matchers)]


class SilenceHost(StepBase):
    """Silence the host's alerts in Alertmanager before it is taken down (one bounded silence per host)."""

    def observe(self, ctx: RunContext) -> Observation:
        why = _no_monitoring(ctx)
        if why:
            return Observation({"none": why}, summary=why)
        env = environment(ctx)
        host = target_host(ctx)
        matchers = _host_matchers(ctx)
        duration, covers = silence_bound(ctx, float(self.params["margin"]))
        silences = env.alertmanager.silences() if matchers else []
        mine = _mine(silences, ctx.run_id, matchers)
        others = [s for s in silences if s.live and s.matches(matchers) and s not in mine]
        data = {"host": host.name, "alertmanager": env.alertmanager.url, "matchers": [m.to_api() for m in matchers],
                "shown": [str(m) for m in matchers], "duration": duration, "covers": covers,
                "mine": [s.to_dict() for s in mine], "others": [s.to_dict() for s in others]}
        if mine:
            summary = f"{host.name}: silenced by this run (silence {mine[0].id} until {clock(mine[0].ends_at)})"
        else:
            summary = f"{host.name}: no silence of this run yet"
        if others:
            summary += "; also silenced by " + ", ".join(f"{s.created_by} until {clock(s.ends_at)}" for s in others)
        return Observation(data, summary=summary)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if "none" in d:
            return Noop(d["none"])
        if not d["matchers"]:
            return Noop(f"{d['host']}: no monitoring.host_matchers in the inventory: nothing identifies its alerts")
        if d["mine"]:
            s = d["mine"][0]
            return Noop(f"{d['host']} is already silenced by this run (silence {s['id']}, until "
                        f"{clock(s['ends_at'])})")
        matchers = ", ".join(d["shown"])
        how_long = format_duration(d["duration"])
        return Action(
            description=f"silence {d['host']}'s alerts in Alertmanager for {how_long} ({matchers})",
            commands=(f"POST /api/v2/silences matchers [{matchers}], for {how_long} by "
                      f"the operator, comment 'kafkaops RUN: reason (task)'",),
            impact=f"alerts of {d['host']} notify no one until alerts.unsilence ends the silence after the host's "
                   f"checks, or for {how_long} at most (covers: {', '.join(d['covers']) or 'no timeout'}; "
                   "plus a margin)",
            rollback="expire the silence (alerts.unsilence)",
            data={"matchers": d["matchers"], "duration": d["duration"]},
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {silence_key(obs.data["host"]): "planned"}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        matchers = [Matcher(str(m["name"]), str(m["value"]), bool(m["isRegex"]), bool(m["isEqual"]))
                    for m in action.data["matchers"]]
        now = time.time()
        ends = now + float(action.data["duration"])
        sid = env.alertmanager.create_silence(matchers, starts_at=now, ends_at=ends, created_by=ctx.operator,
                                              comment=silence_comment(ctx.run_id, ctx.reason, ctx.task))
        ctx.record("silence_created", silence=sid, host=ctx.target, matchers=[str(m) for m in matchers],
                   ends_at=round(ends, 3))
        ctx.progress(f"  {ctx.target}: silence {sid} until {utc(ends)}")

    def verify(self, ctx: RunContext) -> None:
        if _no_monitoring(ctx):
            return
        if not _mine(environment(ctx).alertmanager.silences(), ctx.run_id, _host_matchers(ctx)):
            raise CheckFailed(f"{ctx.target}: Alertmanager holds no silence of this run for it after creating one")

    def renew(self, ctx: RunContext, at: int) -> str:
        """Make this run's silence of the host last past what is left of its maintenance (steps ``at`` on).

        Its bound was computed for a run that goes on; a run paused longer (a refused precondition, a
        fence, Ctrl-C over lunch) resumes past this step and would stop the broker with nothing silenced.
        So before every change of the host, and during long waits, the runner asks again: the silence is
        extended when it would end before the steps left (their timeouts, plus half the margin), and made
        again when it lapsed (found again by its comment either way).
        """
        if why := _no_monitoring(ctx):
            return why
        env = environment(ctx)
        matchers = _host_matchers(ctx)
        if not matchers:
            return f"{ctx.target}: no monitoring.host_matchers: nothing to renew"
        margin = float(self.params["margin"])
        left, _ = silence_bound(ctx, margin, after=at)
        now = time.time()
        mine = _mine(env.alertmanager.silences(), ctx.run_id, matchers)
        if not mine:
            ends = now + left
            sid = env.alertmanager.create_silence(matchers, starts_at=now, ends_at=ends, created_by=ctx.operator,
                                                  comment=silence_comment(ctx.run_id, ctx.reason, ctx.task))
            ctx.record("silence_created", silence=sid, host=ctx.target, matchers=[str(m) for m in matchers],
                       ends_at=round(ends, 3), renewal=True)
            ctx.progress(f"  {ctx.target}: this run's silence had lapsed; silence {sid} until {utc(ends)}")
            return f"{ctx.target}: silence had lapsed; made again as {sid} until {clock(ends)}"
        current = mine[0]
        if current.ends_at is not None and current.ends_at >= now + left - margin / 2:
            return f"{ctx.target}: silence {current.id} lasts until {clock(current.ends_at)}"
        ends = now + left
        sid = env.alertmanager.extend_silence(current, ends_at=ends)
        ctx.record("silence_extended", silence=sid, host=ctx.target, was=current.id, ends_at=round(ends, 3))
        ctx.progress(f"  {ctx.target}: silence {sid} extended until {utc(ends)}")
        return f"{ctx.target}: silence {current.id} would end at {clock(current.ends_at)}; extended as {sid} " \
               f"until {clock(ends)}"


class Unsilence(StepBase):
    """End this run's silence of the host once none of its alerts fires under it (its checks have passed)."""

    def observe(self, ctx: RunContext) -> Observation:
        why = _no_monitoring(ctx)
        if why:
            return Observation({"none": why}, summary=why)
        host = target_host(ctx)
        matchers = _host_matchers(ctx)
        mine = _mine(environment(ctx).alertmanager.silences(), ctx.run_id, matchers) if matchers else []
        planned = ctx.projected.get(silence_key(host.name)) == "planned"
        return ending_observation(ctx, mine, planned, "silence",
                                  "silenced by an earlier step of this plan" if planned else "no silence of this run")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if "none" in d:
            return Noop(d["none"])
        if not d["mine"] and not d["planned"]:
            return Noop(f"{d['host']} has no silence of this run that still silences")
        timeout = format_duration(float(self.params["timeout"]))
        return Action(
            description=f"end this run's silence of {d['host']} once none of its alerts fires under it "
                        f"(waits {timeout} at most)",
            commands=("GET /api/v2/alerts (until none is silenced by it), then DELETE /api/v2/silence/<id>",),
            impact=f"alerts of {d['host']} notify again",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        mine = _mine(environment(ctx).alertmanager.silences(), ctx.run_id, _host_matchers(ctx))
        end_when_quiet(ctx, mine, what=f"{ctx.target}'s alerts to stop firing under this run's silence",
                       timeout=float(self.params["timeout"]), event="silence_expired", stuck="still firing",
                       hint="look at the host; resume once its alerts clear (kafkaops resume RUN)")

    def verify(self, ctx: RunContext) -> None:
        if _no_monitoring(ctx):
            return
        left = _mine(environment(ctx).alertmanager.silences(), ctx.run_id, _host_matchers(ctx))
        if left:
            raise CheckFailed(f"{ctx.target}: this run's silence {left[0].id} still silences after it was ended")


def _blocking(ctx: RunContext) -> list[Alert]:
    """The cluster's alerts that fire and are silenced by no one (inhibited ones have a firing cause)."""
    env = environment(ctx)
    assert env.cluster.monitoring is not None
    scope = env.cluster.monitoring.scope_labels(env.cluster.name)
    return [a for a in env.alertmanager.alerts(scope, silenced=False, inhibited=False) if a.state == "active"]


class Gate(StepBase):
    """Hold until no alert of the cluster fires in Alertmanager unless silenced; stop naming them if it lasts."""

    def observe(self, ctx: RunContext) -> Observation:
        why = _no_monitoring(ctx)
        if why:
            return Observation({"none": why}, summary=why)
        if self.params["at_end"] and ctx.targets and ctx.target != ctx.targets[-1]:
            return Observation({"skip": f"not the last target: {ctx.targets[ctx.targets.index(ctx.target) + 1]}'s "
                                        "gate before it looks"}, summary="not the last target")
        env = environment(ctx)
        assert env.cluster.monitoring is not None
        scope = env.cluster.monitoring.scope_labels(env.cluster.name)
        firing = [a.line() for a in _blocking(ctx)]
        shown = ", ".join(f'{k}="{v}"' for k, v in scope) or "every alert"
        return Observation({"alertmanager": env.alertmanager.url, "scope": shown, "firing": firing},
                           summary=f"Alertmanager {env.alertmanager.url}: {len(firing)} alert(s) firing "
                                   f"unsilenced ({shown})"
                                   + (f": {names(firing)}" if firing else ""))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if "none" in d:
            return Noop(d["none"])
        if "skip" in d:
            return Noop(d["skip"])
        return Action(
            description=f"hold until no alert of {{{d['scope']}}} fires unsilenced in Alertmanager (this run's "
                        f"silences and operators' count as silenced; at most "
                        f"{format_duration(float(self.params['timeout']))})",
            commands=("GET /api/v2/alerts?active=true&silenced=false&inhibited=false",),
            impact="read-only",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        last: list[str] = []

        def quiet() -> tuple[bool, str]:
            last[:] = [a.line() for a in _blocking(ctx)]
            return not last, ("firing: " + names(last)) if last else "no alert firing"

        timeout = float(self.params["timeout"])
        try:
            wait(ctx, quiet, what="the cluster's alerts to clear", timeout=timeout, interval=2.0)
        except WaitTimeout:
            raise WaitTimeout(f"alerts of cluster {ctx.cluster} still firing after {format_duration(timeout)}: "
                              f"{names(last, limit=8)}; nothing more was changed",
                              hint="look at what they say; kafkaops resume RUN once they clear (or silence "
                                   "one you have acknowledged: a silenced alert does not hold the run)") from None


register_step("alerts.silence", SilenceHost, [
    Param("margin", "duration", default=DEFAULT_MARGIN, min=60, max=24 * 3600,
          help="added to the covered steps' timeouts: how long the silence lasts beyond them"),
], compensate=Compensation("alerts.unsilence", params={}, note="expire the host's silence"),
    lease_until="alerts.unsilence")
register_step("alerts.unsilence", Unsilence, [
    Param("timeout", "duration", default=120, min=0, max=3600,
          help="how long the host's alerts may take to stop firing under the silence before it is ended"),
])
register_step("alerts.gate", Gate, [
    Param("timeout", "duration", default=600, min=0, max=6 * 3600,
          help="how long unsilenced alerts of the cluster may fire before the run stops"),
    Param("at_end", "bool", default=False, help="only after the last target of the run (the gate before each "
          "host covers the others)"),
], effect="read-only")
