"""Discovery records: which site's service clients are sent to (``confctl --object-type discovery``).

Depooling the source site's record is the seed's "simple depool of the primary datacenter": resolvers
stop answering with that site's service address once the record's TTL passes, so new connections stop
arriving there — which the SYN gate that follows proves. The state found before is written to the run's
facts before the change, so a rollback restores exactly what was found and nothing this run did not
change.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed
from kafkaops.steps.common import environment
from kafkaops.steps.sites import switched


def _fact(record: str, dc: str) -> str:
    return f"discovery_before/{record}/{dc}"


def _key(record: str, dc: str) -> str:
    return f"discovery/{record}/{dc}"


def _confctl(record: str, dc: str, pooled: bool) -> str:
    return f"confctl --object-type discovery select 'dnsdisc={record},name={dc}' set/pooled={str(pooled).lower()}"


def projected_states(ctx: RunContext, record: str) -> dict[str, bool]:
    """DC -> pooled for ``record``, as the steps planned before leave it (live in a real run)."""
    live = environment(ctx).discovery.states(record)
    return {dc: bool(ctx.projected.get(_key(record, dc), p)) for dc, p in live.items()}


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
        return {_key(action.data["record"], action.data["site"]): self.pooled}

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
register_step("discovery.depool", Depool, PARAMS, compensate=RESTORE)
register_step("discovery.pool", Pool, PARAMS, compensate=RESTORE)
register_step("discovery.restore", Restore, PARAMS)
