"""Roll-alert steps: silence the alerts a broker's absence raises on the *other* brokers, only while it is
down.

A host's silence (``alerts.silence``) covers the alerts labelled with that host. Some alerts a roll causes
are not: Kafka counts under-replicated partitions on the partition's *leader*, so while kafka1001 is down
its peers raise ``KafkaUnderReplicatedPartitions`` labelled with *themselves*, and a reboot that lasts
longer than the rule's ``for:`` pages the on-call. The inventory names those alerts
(``monitoring.roll_alerts``); per broker:

* ``roll_alerts.silence`` (right before ``kafka.stop_broker``): **one** bounded silence of exactly those
  alerts of this cluster — ``alertname=~"A|B"`` plus the cluster's ``monitoring.scope`` labels
  (``cluster="lab"``) — commented like every silence of the run (``kafkaops <run id>: <reason> (<task>)``)
  and suffixed ``[roll alerts while <host> is down]``, so it is told apart from the host's own silence
  and found again on resume instead of made twice. Bounded like the host's silence (the timeouts of the
  steps it covers, up to ``roll_alerts.unsilence``, plus a margin): if kafkaops dies it ends by itself.
* ``roll_alerts.unsilence`` (right after ``kafka.wait_in_sync``: the broker is back in every ISR, so its
  peers' under-replication is over): waits until none of those alerts still fires under the silence —
  Prometheus resolves them a rule evaluation later, and ending a silence over a firing alert pages at
  once — then expires it.

Any other alert of the cluster stays unsilenced, so ``alerts.gate`` still holds the roll on it; and while
no broker of the run is down, a roll alert pages as it should (a replica that stays behind).

Without ``monitoring.roll_alerts`` (or without monitoring), both are no-ops that say so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
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
from kafkaops.errors import CheckFailed
from kafkaops.queries.silences import DEFAULT_MARGIN, clock, end_when_quiet, ending_observation, silence_bound
from kafkaops.stepkit.common import environment
from kafkaops.systems.alertmanager import Matcher, Silence, run_prefix, silence_comment, utc

#: The step that ends the roll's silence (and so the end of the steps its bound covers).
RELEASE = "roll_alerts.unsilence"
#: Only brokers hold replicas: a KRaft controller's restart under-replicates nothing.
BROKER = ("broker",)


def roll_key(host: str) -> str:
    """The projection key of a planned roll silence (the dry-run's ``roll_alerts.unsilence`` sees it)."""
    return f"roll-silence/{host}"


def roll_suffix(host: str) -> str:
    """What ends the comment of the roll's silence for ``host``: how an on-call, and the run itself, tell it
    from the host's own silence (same run prefix, other matchers)."""
    return f" [roll alerts while {host} is down]"


def _nothing_to_silence(ctx: RunContext) -> str:
    """Why there is no roll silence here, or ``""``: the cluster names roll alerts and has an Alertmanager."""
    cluster = environment(ctx).cluster
    m = cluster.monitoring
    if m is None:
        return f"no monitoring: configured for cluster {cluster.name} (inventory monitoring: block)"
    if not m.alertmanager:
        return f"no monitoring: configured for cluster {cluster.name} (no monitoring.alertmanager)"
    if not m.roll_alerts:
        return (f"no monitoring.roll_alerts for cluster {cluster.name}: no alert a broker's absence raises on its "
                "peers is silenced")
    return ""


def roll_matchers(ctx: RunContext) -> list[Matcher]:
    """``alertname=~"A|B"`` and the cluster's scope labels: these alerts of this cluster, from any broker.

    The names are validated alert names (no regex metacharacter), and the inventory refuses roll alerts
    without a scope, so the silence never reaches another cluster's alerts."""
    env = environment(ctx)
    m = env.cluster.monitoring
    assert m is not None and m.roll_alerts and m.scope
    return [Matcher("alertname", "|".join(m.roll_alerts), is_regex=True),
            *(Matcher(label, value) for label, value in m.scope_labels(env.cluster.name))]


def mine(silences: Iterable[Silence], ctx: RunContext, matchers: list[Matcher]) -> list[Silence]:
    """This run's live roll silences for this target: its run prefix, its host's suffix, these matchers."""
    prefix, suffix = run_prefix(ctx.run_id), roll_suffix(ctx.target)
    return [s for s in silences if ctx.run_id and s.live and s.comment.startswith(prefix)
            and s.comment.endswith(suffix) and s.matches(matchers)]


def _shown(matchers: list[Matcher]) -> str:
    return ", ".join(str(m) for m in matchers)


class SilenceRoll(StepBase):
    """Silence the alerts the broker's absence raises on its peers (roll_alerts) until it is back in sync."""

    def observe(self, ctx: RunContext) -> Observation:
        why = _nothing_to_silence(ctx)
        if why:
            return Observation({"none": why}, summary=why)
        env = environment(ctx)
        matchers = roll_matchers(ctx)
        duration, covers = silence_bound(ctx, float(self.params["margin"]), until=RELEASE)
        found = mine(env.alertmanager.silences(), ctx, matchers)
        data = {"host": ctx.target, "alertmanager": env.alertmanager.url, "matchers": [m.to_api() for m in matchers],
                "shown": _shown(matchers), "duration": duration, "covers": covers,
                "mine": [s.to_dict() for s in found]}
        if found:
            summary = (f"{ctx.target}: its peers' roll alerts silenced by this run (silence {found[0].id} until "
                       f"{clock(found[0].ends_at)})")
        else:
            summary = f"{ctx.target}: no roll silence of this run yet"
        return Observation(data, summary=summary)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if "none" in d:
            return Noop(d["none"])
        if d["mine"]:
            s = d["mine"][0]
            return Noop(f"the alerts {d['host']}'s absence raises elsewhere are already silenced by this run "
                        f"(silence {s['id']}, until {clock(s['ends_at'])})")
        how_long = format_duration(d["duration"])
        return Action(
            description=f"silence {d['shown']} in Alertmanager while {d['host']} is down, for {how_long} at most",
            commands=(f"POST /api/v2/silences matchers [{d['shown']}], for {how_long} by "
                      f"the operator, comment 'kafkaops RUN: reason (task)"
                      f"{roll_suffix(d['host'])}'",),
            impact=f"these alerts of the cluster, from any broker, notify no one until {RELEASE} ends the silence "
                   f"once {d['host']} is back in sync, or for {how_long} at most (covers: "
                   f"{', '.join(d['covers']) or 'no timeout'}; plus a margin); every other alert still notifies "
                   "and holds alerts.gate",
            rollback=f"expire the silence ({RELEASE})",
            data={"matchers": d["matchers"], "duration": d["duration"]},
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {roll_key(obs.data["host"]): "planned"}

    def apply(self, ctx: RunContext, action: Action) -> None:
        matchers = [Matcher(str(m["name"]), str(m["value"]), bool(m["isRegex"]), bool(m["isEqual"]))
                    for m in action.data["matchers"]]
        self._create(ctx, matchers, float(action.data["duration"]), "roll_silence_created")

    def _create(self, ctx: RunContext, matchers: list[Matcher], duration: float, event: str) -> str:
        now = time.time()
        ends = now + duration
        comment = silence_comment(ctx.run_id, ctx.reason, ctx.task) + roll_suffix(ctx.target)
        sid = environment(ctx).alertmanager.create_silence(matchers, starts_at=now, ends_at=ends,
                                                           created_by=ctx.operator, comment=comment)
        ctx.record(event, silence=sid, host=ctx.target, matchers=[str(m) for m in matchers], ends_at=round(ends, 3))
        ctx.progress(f"  {ctx.target}: roll silence {sid} ({_shown(matchers)}) until {utc(ends)}")
        return sid

    def verify(self, ctx: RunContext) -> None:
        if _nothing_to_silence(ctx):
            return
        if not mine(environment(ctx).alertmanager.silences(), ctx, roll_matchers(ctx)):
            raise CheckFailed(f"{ctx.target}: Alertmanager holds no roll silence of this run after creating one")

    def renew(self, ctx: RunContext, at: int | None = None) -> str:
        """Make this run's roll silence for the target last past the steps from index ``at`` (default: the
        step after ``ctx.step_index``) up to ``roll_alerts.unsilence``, plus the margin (half of it may be
        used up already); one line saying what was found and done.

        A run paused for hours, or held by a gate, would otherwise stop or restart a broker after its
        silence lapsed: gone, it is made again; ending too soon, a longer one is made *before* the old one
        is expired, so the alerts are never unsilenced in between."""
        why = _nothing_to_silence(ctx)
        if why:
            return f"no roll silence to renew: {why}"
        am = environment(ctx).alertmanager
        matchers = roll_matchers(ctx)
        start = ctx.step_index + 1 if at is None else at
        if not any(s.kind == RELEASE and s.index >= start for s in ctx.steps) and \
                any(s.kind == RELEASE for s in ctx.steps):
            return f"{ctx.target}: past {RELEASE}: the roll silence was ended, nothing to renew"
        margin = float(self.params["margin"])
        duration, _ = silence_bound(ctx, margin, after=start, until=RELEASE)
        needed = time.time() + duration
        found = mine(am.silences(), ctx, matchers)
        # Half the margin is slack: the runner asks before every change, and a silence made seconds ago
        # for the same steps ends seconds "too soon"; remade each time, it would churn for nothing.
        lasting = [s for s in found if s.ends_at is not None and s.ends_at >= needed - margin / 2]
        if lasting:
            return (f"{ctx.target}: roll silence {lasting[0].id} of this run lasts until {clock(lasting[0].ends_at)}, "
                    f"past the steps it still covers")
        sid = self._create(ctx, matchers, duration, "roll_silence_renewed")
        for s in found:
            am.expire_silence(s.id)
            ctx.record("roll_silence_expired", silence=s.id, host=ctx.target, replaced_by=sid)
        if found:
            return (f"{ctx.target}: roll silence {found[0].id} of this run ended at {clock(found[0].ends_at)}, "
                    f"before the steps it covers: replaced by {sid} until {clock(needed)}")
        return f"{ctx.target}: no roll silence of this run left (lapsed or expired): made {sid} until {clock(needed)}"


class UnsilenceRoll(StepBase):
    """End this run's roll silence once the broker is back in sync and none of its alerts fires under it."""

    def observe(self, ctx: RunContext) -> Observation:
        why = _nothing_to_silence(ctx)
        if why:
            return Observation({"none": why}, summary=why)
        found = mine(environment(ctx).alertmanager.silences(), ctx, roll_matchers(ctx))
        planned = ctx.projected.get(roll_key(ctx.target)) == "planned"
        return ending_observation(ctx, found, planned, "roll silence", "roll silence made by an earlier step of "
                                  "this plan" if planned else "no roll silence of this run")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if "none" in d:
            return Noop(d["none"])
        if not d["mine"] and not d["planned"]:
            return Noop(f"no roll silence of this run for {d['host']} still silences")
        timeout = format_duration(float(self.params["timeout"]))
        return Action(
            description=f"end this run's roll silence for {d['host']} (back in sync) once none of its alerts fires "
                        f"under it (waits {timeout} at most)",
            commands=("GET /api/v2/alerts (until none is silenced by it), then DELETE /api/v2/silence/<id>",),
            impact="the roll alerts of the cluster notify again",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        found = mine(environment(ctx).alertmanager.silences(), ctx, roll_matchers(ctx))
        end_when_quiet(ctx, found, what=f"the alerts {ctx.target}'s absence raised to stop firing",
                       timeout=float(self.params["timeout"]), event="roll_silence_expired",
                       stuck="still fire though it is back in sync",
                       hint="look at the brokers they name; resume once they clear (kafkaops resume RUN)")

    def verify(self, ctx: RunContext) -> None:
        if _nothing_to_silence(ctx):
            return
        left = mine(environment(ctx).alertmanager.silences(), ctx, roll_matchers(ctx))
        if left:
            raise CheckFailed(f"{ctx.target}: this run's roll silence {left[0].id} still silences after it was ended")


register_step("roll_alerts.silence", SilenceRoll, [
    Param("margin", "duration", default=DEFAULT_MARGIN, min=60, max=24 * 3600,
          help="added to the covered steps' timeouts: how long the roll silence lasts beyond them"),
], compensate=Compensation(RELEASE, params={}, note="expire the roll silence"), roles=BROKER, lease_until=RELEASE)
register_step(RELEASE, UnsilenceRoll, [
    Param("timeout", "duration", default=120, min=0, max=3600,
          help="how long the roll alerts may take to stop firing under the silence before it is ended"),
], roles=BROKER)
