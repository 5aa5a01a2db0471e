"""The checks around a switchover: both sites healthy before, the service answering where it went after.

A switchover moves every client of a service to the other site at once, so it starts only when that
site can take them — its Kafka whole, its service answering behind its VIP — and when MirrorMaker is
close enough behind that the wait for it to drain (with the service depooled everywhere) is short.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, ConfigError, KafkaOpsError, SafetyRefusal
from kafkaops.queries.sites import lock_owner, site_health, switched
from kafkaops.stepkit.common import StableObservation, environment, names
from kafkaops.systems.mirror import MirrorLag


class Preflight(StepBase):
    """Refuse a switchover unless both sites are healthy, the source is the active site and MirrorMaker's
    lag on every mirrored partition is below the threshold."""

    def observe(self, ctx: RunContext) -> Observation:

        env = environment(ctx)
        src, dst = str(self.params["from_site"]), str(self.params["to_site"])
        service = switched(env, str(self.params["service"]))
        for dc in (src, dst):
            env.site(dc)  # an unknown site is a ConfigError naming the known ones
        if src == dst:
            raise ConfigError(f"--from and --to are both {src}", hint="name two different sites")
        records = env.discovery.states(service.discovery)
        owner = lock_owner(env)
        sites = {dc: site_health(env, dc, service.name, owner) for dc in (src, dst)}
        max_lag = int(self.params["max_lag"])
        try:
            lags = MirrorLag(env.cluster, src, dst, timeout=env.kafka_timeout).partitions()
            lag_rows: list[dict[str, Any]] = [{"partition": f"{p.topic}-{p.partition}", "lag": p.lag} for p in lags]
            lag_error = None
        except KafkaOpsError as exc:
            lag_rows, lag_error = [], str(exc)
        data = {"service": service.name, "record": service.discovery, "from": src, "to": dst, "records": records,
                "sites": sites, "max_lag": max_lag, "lag": lag_rows, "lag_error": lag_error,
                "groups": list(service.consumer_groups)}
        worst = max((int(r["lag"]) for r in lag_rows), default=0)
        over = sorted(r["partition"] for r in lag_rows if r["lag"] > max_lag)
        stable = {"records": records, "problems": {dc: v["problems"] for dc, v in sites.items()},
                  "lag_error": bool(lag_error), "over_max": over}
        return StableObservation(data, stable=stable, summary=f"discovery {service.discovery}: "
                           + ", ".join(f"{dc} {'pooled' if p else 'depooled'}" for dc, p in records.items())
                           + f"; mirror {src}->{dst}: {len(lag_rows)} partition(s), worst lag {worst}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        src, dst, records = d["from"], d["to"], d["records"]
        for dc in (src, dst):
            if dc not in records:
                raise SafetyRefusal(f"refusing to switch {d['service']}: no discovery record {d['record']}/{dc}",
                                    hint="create it in conftool (confctl --object-type discovery)")
        if not records[src] and records[dst]:
            return Noop(f"{d['service']} is already active in {dst} only (discovery {d['record']}/{dst} pooled)")
        if not records[src]:
            raise SafetyRefusal(f"refusing to switch {d['service']} from {src}: it is not active there "
                                f"(discovery {d['record']}/{src} depooled)",
                                hint="check `kafkaops status` of the sites: an earlier switchover may be half done "
                                     "(`kafkaops runs list`)")
        for dc in (src, dst):
            if d["sites"][dc]["problems"]:
                raise SafetyRefusal(f"refusing to switch {d['service']}: site {dc} is not healthy: "
                                    + "; ".join(d["sites"][dc]["problems"]),
                                    hint="let the site recover first (`kafkaops status` of its cluster)")
        if d["lag_error"]:
            raise SafetyRefusal(f"refusing to switch {d['service']}: MirrorMaker's lag {src}->{dst} is unknown: "
                                f"{d['lag_error']}", hint="check MirrorMaker 2 runs the flow")
        behind = [f"{r['partition']} ({r['lag']})" for r in d["lag"] if r["lag"] > d["max_lag"]]
        if behind:
            raise SafetyRefusal(f"refusing to switch {d['service']}: MirrorMaker {src}->{dst} is more than "
                                f"{d['max_lag']} records behind on {names(behind)}",
                                hint="wait for it to catch up, or raise --max-lag (the service stays depooled in "
                                     "both sites while the rest drains)")
        return Noop(f"gates pass: {src} active, both sites healthy, MirrorMaker {src}->{dst} at most "
                    f"{max((r['lag'] for r in d['lag']), default=0)} record(s) behind (threshold {d['max_lag']})")


class PostCheck(StepBase):
    """Both sites healthy, the service active in the target site only and answering there."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        src, dst = str(self.params["from_site"]), str(self.params["to_site"])
        service = switched(env, str(self.params["service"]))
        owner = lock_owner(env)
        return Observation({"service": service.name, "record": service.discovery, "from": src, "to": dst,
                            "records": env.discovery.states(service.discovery),
                            "sites": {dc: site_health(env, dc, service.name, owner) for dc in (src, dst)}},
                           summary="checked when the step runs")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        return Action(description=f"check {d['service']} is active in {d['to']} only and both sites are healthy",
                      commands=(f"confctl --object-type discovery select 'dnsdisc={d['record']}' get",
                                *(f"{dc}: metadata (offline, URP, brokers) + GET {v.get('service', '-')}"
                                  for dc, v in d["sites"].items())),
                      impact="read-only: the run's end state")

    def apply(self, ctx: RunContext, action: Action) -> None:
        return None

    def verify(self, ctx: RunContext) -> None:
        d = self.observe(ctx).data
        active = sorted(dc for dc, pooled in d["records"].items() if pooled)
        if active != [d["to"]]:
            raise CheckFailed(f"{d['service']} is active in {', '.join(active) or 'no site'}, not {d['to']} only")
        bad = {dc: v["problems"] for dc, v in d["sites"].items() if v["problems"]}
        if bad:
            raise CheckFailed("after the switchover: " + "; ".join(f"{dc}: {', '.join(p)}" for dc, p in bad.items()))
        ctx.progress(f"  {d['service']} active in {d['to']}; both sites whole; "
                     + "; ".join(f"{dc}: {v.get('service')}" for dc, v in d["sites"].items()))


SERVICE = Param("service", "str", required=True, help="the service of the inventory's switchover: section")
FROM = Param("from_site", "str", required=True, help="the site (DC) the service leaves")
TO = Param("to_site", "str", required=True, help="the site (DC) the service moves to")
register_step("sites.preflight", Preflight, [
    SERVICE, FROM, TO,
    Param("max_lag", "int", default=1000, min=0, help="records MirrorMaker may be behind per mirrored partition"),
], effect="read-only")
register_step("sites.post_check", PostCheck, [SERVICE, FROM, TO], effect="read-only")
