"""Discovery records: which site's service clients are sent to (``confctl --object-type discovery``).

Depooling the source site's record is the seed's "simple depool of the primary datacenter": resolvers
stop answering with that site's service address once the record's TTL passes, so new connections stop
arriving there — which the SYN gate that follows proves. The state found before is written to the run's
facts before the change, so a rollback restores exactly what was found and nothing this run did not
change. Right before a depool, the records are read again (its precondition): another site stays pooled,
or — the switchover's cut — a later step of the run pools a site that is healthy now.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.queries.sites import discovery_key, lock_owner, projected_states, site_health, switched
from kafkaops.stepkit.common import environment
from kafkaops.stepkit.projection import provenance


def _fact(record: str, dc: str) -> str:
    return f"discovery_before/{record}/{dc}"


def _confctl(record: str, dc: str, pooled: bool) -> str:
    return f"confctl --object-type discovery select 'dnsdisc={record},name={dc}' set/pooled={str(pooled).lower()}"


class SetDiscovery(StepBase):
    """Pool or depool a service's discovery record in one site."""

    pooled = False

    def _observe(self, ctx: RunContext) -> dict[str, Any]:
        env = environment(ctx)
        service = switched(env, str(self.params["service"]))
        dc = str(self.params["site"])
        env.site(dc)
        projected = projected_states(ctx, service.discovery)
        return {"service": service.name, "record": service.discovery, "site": dc, "records": projected,
                "before_run": ctx.facts.get(_fact(service.discovery, dc))}

    def observe(self, ctx: RunContext) -> Observation:
        d = self._observe(ctx)
        return Observation(d, summary=f"{d['record']}: " + ", ".join(
            f"{dc} {'pooled' if p else 'depooled'}" for dc, p in d["records"].items()))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["site"] not in d["records"]:
            raise CheckFailed(f"no discovery record {d['record']}/{d['site']} in conftool")
        if d["records"][d["site"]] == self.pooled:
            return Noop(f"{d['record']}/{d['site']} is already {'pooled' if self.pooled else 'depooled'}")
        after = {dc: (self.pooled if dc == d["site"] else p) for dc, p in d["records"].items()}
        active = [dc for dc, p in after.items() if p]
        impact = (f"clients resolving {d['record']} are sent to {', '.join(active)}" if active else
                  f"no site serves {d['service']} until a later step pools one: clients retry (producers queue)")
        return Action(description=f"{'pool' if self.pooled else 'depool'} {d['service']} in {d['site']} "
                                  f"(discovery {d['record']}/{d['site']})",
                      commands=(_confctl(d["record"], d["site"], self.pooled),), impact=impact,
                      data={"record": d["record"], "site": d["site"]})

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {discovery_key(action.data["record"], action.data["site"]): self.pooled}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        record, dc = action.data["record"], action.data["site"]
        facts = ctx.facts
        if facts.get(_fact(record, dc)) is None:  # remember before changing anything
            facts.set(_fact(record, dc), env.discovery.states(record).get(dc))
        env.discovery.set(record, dc, self.pooled)

    def verify(self, ctx: RunContext) -> None:
        d = self._observe(ctx)
        if d["records"].get(d["site"]) != self.pooled:
            raise CheckFailed(f"{d['record']}/{d['site']} is not {'pooled' if self.pooled else 'depooled'}")


class Depool(SetDiscovery):
    """Depool a service's discovery record in one site: its clients go elsewhere (or wait)."""

    pooled = False

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Right before the depool, the record is read again (as the steps planned before leave it): depool
        only while another site's record stays pooled, so clients always have a site to go to — a record
        another run or an operator depooled since the plan would otherwise leave the service served nowhere.

        One gap is deliberate: a switchover depools the source before it pools the target, so that no two
        sites take writes at once (runbooks/switchover.yaml). It is allowed only when a later step of this
        run pools another site's record, and that site, asked now, can take every client
        (:func:`~kafkaops.steps.sites.site_health`: no other run on it, Kafka whole, the service answering
        behind its VIP) — a resume after a pause re-asks it, as the verified ``sites.preflight`` is not re-run.
        """
        env = environment(ctx)
        record, dc = str(action.data["record"]), str(action.data["site"])
        others = {d: p for d, p in projected_states(ctx, record).items() if d != dc}
        seen = provenance(ctx, [discovery_key(record, d) for d in others])
        pooled = sorted(d for d, p in others.items() if p)
        if pooled:
            return f"{record}/{', '.join(pooled)} stays pooled{seen}: clients go there"
        later = next((s for s in ctx.steps if s.index > ctx.step_index and s.kind == "discovery.pool"
                      and s.params.get("service") == self.params["service"] and s.params.get("site") != dc), None)
        if later is None:
            raise SafetyRefusal(f"refusing to depool {record}/{dc}: no other site's record is pooled{seen} "
                                f"({', '.join(others) or 'none'}), so no site would serve {self.params['service']}",
                                hint="pool another site first, or run a switchover, which pools the target "
                                     "after the cut")
        to = str(later.params["site"])
        problems = site_health(env, to, str(self.params["service"]), lock_owner(env))["problems"]
        if problems:
            raise SafetyRefusal(f"refusing to depool {record}/{dc}: {to}, which {later.label} pools, cannot take "
                                f"its clients: {'; '.join(problems)}",
                                hint="let that site recover first (`kafkaops status` of its cluster)")
        return (f"no site pooled{seen} until {later.label} pools {record}/{to}; {to} is healthy and answers "
                "behind its VIP now")


class Pool(SetDiscovery):
    """Pool a service's discovery record in one site: clients are sent there."""

    pooled = True


class Restore(SetDiscovery):
    """Put a discovery record back as this run found it (a rollback's step)."""

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        before = d["before_run"]
        if before is None:
            return Noop(f"this run did not change {d['record']}/{d['site']}")
        self.pooled = bool(before)
        return super().plan(obs)

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        before = ctx.facts.get(_fact(action.data["record"], action.data["site"]))
        env.discovery.set(action.data["record"], action.data["site"], bool(before))

    def verify(self, ctx: RunContext) -> None:
        d = self._observe(ctx)
        if d["before_run"] is not None and d["records"].get(d["site"]) != bool(d["before_run"]):
            raise CheckFailed(f"{d['record']}/{d['site']} is not back as found")


PARAMS = [Param("service", "str", required=True, help="the service of the inventory's switchover: section"),
          Param("site", "str", required=True, help="the site (DC) whose record changes")]
RESTORE = Compensation("discovery.restore", note="put the record back as this run found it")
register_step("discovery.depool", Depool, PARAMS, compensate=RESTORE, effect="disruptive")
register_step("discovery.pool", Pool, PARAMS, compensate=RESTORE)
register_step("discovery.restore", Restore, PARAMS)
