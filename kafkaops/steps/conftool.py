"""Pool steps: depool a host from its load-balanced services, and repool it — only if this run depooled it.

Depooling first is what makes the rest of a maintenance invisible to clients: the balancer stops
sending new connections, and the SYN gate then proves it. The original pool state is written to the
run's facts *before* the change, so the closing repool (and a rollback) restores exactly what was found,
and never repools a host somebody else had taken out for their own reasons.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.model import BROKER, Host
from kafkaops.stepkit.common import environment, target_host
from kafkaops.stepkit.projection import fact_key, pool_key, projected_fact, provenance


def _tags(host: Host, service: str | None) -> dict[str, str]:
    tags = dict(host.conftool_tags)
    if service:
        tags["service"] = service
    return tags


def _services(step: StepBase, host: Host) -> list[str]:
    """The pooled services to act on; none for a host that serves no load-balanced service (a stretched
    or analytics cluster's broker has no conftool object: its maintenance has nothing to depool)."""
    wanted = step.params.get("services") or []
    if not wanted and not host.conftool_tags:
        return []
    return [str(s) for s in wanted] or [host.conftool_tags.get("service", "")]


NO_POOL = "serves no load-balanced service (no conftool tags in the inventory): nothing to {}"


def _fact(host: Host, service: str) -> str:
    return f"pool_before/{host.name}/{service}"


def _pooled(ctx: RunContext, fqdn: str, service: str, live: str) -> str:
    """The pool state once the steps planned before have run (live in a real run)."""
    return str(ctx.projected.get(pool_key(fqdn, service), live))


def _observe(step: StepBase, ctx: RunContext) -> tuple[Host, dict[str, Any], str]:
    env = environment(ctx)
    host = target_host(ctx)
    states: dict[str, Any] = {}
    keys: list[str] = []
    for name in _services(step, host):
        tags = _tags(host, name)
        state = env.conftool.get(host.fqdn, tags)
        peers = [s for s in env.conftool.list({k: v for k, v in tags.items()}) if s.host != host.fqdn]
        peer_pooled = {p.host: _pooled(ctx, p.host, name, p.pooled) for p in peers}
        keys += [pool_key(host.fqdn, name), fact_key(_fact(host, name))] + [pool_key(p, name) for p in peer_pooled]
        weights = {host.fqdn: state.weight, **{p.host: p.weight for p in peers}}
        states[name] = {
            "pooled": _pooled(ctx, host.fqdn, name, state.pooled), "weight": state.weight,
            "expected_weight": env.cluster.pool_weight,
            "off_weight": {h: w for h, w in sorted(weights.items()) if w != env.cluster.pool_weight},
            "before_run": projected_fact(ctx, _fact(host, name)),
            "peers_pooled": sorted(p for p, v in peer_pooled.items() if v == "yes"),
            "peers_depooled": sorted(p for p, v in peer_pooled.items() if v != "yes"),
        }
    return host, states, provenance(ctx, keys)


def _refuse_unsafe_depool(host: str, states: dict[str, Any], todo: list[str]) -> None:
    """Raise :class:`SafetyRefusal` unless depooling ``host`` from each of ``todo`` is safe now."""
    for s in todo:
        # One host out of the pool at a time: another depooled host (someone else's maintenance, or
        # a run left stopped) means this depool would take capacity below what the service is sized for.
        if states[s]["peers_depooled"] or not states[s]["peers_pooled"]:
            out = states[s]["peers_depooled"]
            raise SafetyRefusal(f"refusing to depool {host} from {s}: {', '.join(out) or 'no other host'} "
                                f"{'is' if len(out) == 1 else 'are'} already out of the pool",
                                hint="finish or roll back that maintenance first (kafkaops runs list); "
                                "kafkaops takes one host out at a time")
        # The runbook's "you should see every host weight: 10": a pooled host at weight 0 takes no
        # traffic, so it is as good as out; any other weight means someone is steering load by hand.
        off = states[s].get("off_weight") or {}
        if off:
            expected = states[s]["expected_weight"]
            raise SafetyRefusal(f"refusing to depool {host} from {s}: "
                                + ", ".join(f"{h} has weight {w}" for h, w in off.items())
                                + f" (every host is expected at weight {expected})",
                                hint="restore the weight (confctl select 'name=HOST' set/weight=N) or set "
                                "conftool.weight in the inventory if the pool is sized differently")


def _confctl(action: str, fqdn: str, service: str) -> str:
    """The confctl command an operator would type for the same change (what the plan shows)."""
    return f"confctl {action} --hostname {fqdn} --service {service}"


class Depool(StepBase):
    """Depool the host from its services in conftool (the balancer stops sending new connections)."""

    def observe(self, ctx: RunContext) -> Observation:
        host, states, projected = _observe(self, ctx)
        summary = ", ".join(f"{s}: pooled={v['pooled']}, {len(v['peers_pooled'])} other host(s) pooled"
                            for s, v in states.items())
        return Observation({"host": host.fqdn, "name": host.name, "services": states},
                           summary=f"{host.name} {summary}{projected}")

    def plan(self, obs: Observation) -> Action | Noop:
        host, states = obs.data["host"], obs.data["services"]
        if not states:
            return Noop(f"{host} " + NO_POOL.format("depool"))
        todo = [s for s, v in states.items() if v["pooled"] == "yes"]
        if not todo:
            return Noop(f"{host} is already out of the pool ("
                        + ", ".join(f"{s}: pooled={v['pooled']}" for s, v in states.items()) + ")")
        _refuse_unsafe_depool(host, states, todo)
        impact = "; ".join(f"{s}: new connections go to {len(states[s]['peers_pooled'])} other host(s)"
                           + (f", {len(states[s]['peers_depooled'])} already depooled"
                              if states[s]["peers_depooled"] else "") for s in todo)
        return Action(
            description=f"depool {host} from {', '.join(todo)}",
            commands=tuple(_confctl("depool", host, s) for s in todo),
            impact=impact,
            rollback=f"confctl pool --hostname {host} (done by the closing repool step)",
            data={"services": todo},
        )

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Right before the depool, the pool is read again: a peer depooled since the plan (another
        maintenance, a balancer that marked a host down) would make this depool take the service below
        the capacity it is sized for."""
        host, states, _ = _observe(self, ctx)
        todo = [s for s in action.data["services"] if s in states]
        _refuse_unsafe_depool(host.fqdn, states, todo)
        return "; ".join(f"{s}: {len(states[s]['peers_pooled'])} other host(s) pooled at weight "
                         f"{states[s]['expected_weight']}" for s in todo)

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        host, states = obs.data["host"], obs.data["services"]
        out: dict[str, Any] = {}
        for s in action.data["services"]:
            out[pool_key(host, s)] = "no"
            if states[s]["before_run"] is None:
                out[fact_key(f"pool_before/{obs.data['name']}/{s}")] = states[s]["pooled"]
        return out

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        for name in action.data["services"]:
            tags = _tags(host, name)
            before = env.conftool.get(host.fqdn, tags)
            if facts.get(_fact(host, name)) is None:
                facts.set(_fact(host, name), before.pooled)  # remember before changing anything
            env.conftool.set_pooled(host.fqdn, tags, "no")

    def verify(self, ctx: RunContext) -> None:
        _host, states, _ = _observe(self, ctx)
        still = [s for s, v in states.items() if v["pooled"] == "yes"]
        if still:
            raise CheckFailed(f"{ctx.target} still pooled for {', '.join(still)}")


class Repool(StepBase):
    """Repool the host — only in the services this run depooled, to the state found before."""

    def observe(self, ctx: RunContext) -> Observation:
        host, states, projected = _observe(self, ctx)
        summary = ", ".join(f"{s}: pooled={v['pooled']} (before this run: {v['before_run'] or 'not recorded'})"
                            for s, v in states.items())
        return Observation({"host": host.fqdn, "services": states}, summary=f"{host.name} {summary}{projected}")

    def plan(self, obs: Observation) -> Action | Noop:
        host, states = obs.data["host"], obs.data["services"]
        if not states:
            return Noop(f"{host} " + NO_POOL.format("repool"))
        todo, left = [], []
        for s, v in states.items():
            before = v["before_run"]
            if v["pooled"] == "yes":
                continue
            elif before == "yes":
                todo.append(s)
            else:
                left.append(f"{s} (pooled={v['pooled']} before this run)")
        if not todo:
            reason = f"{host} is pooled" if not left else f"leaving {host} as found: {', '.join(left)}"
            return Noop(reason)
        return Action(
            description=f"repool {host} in {', '.join(todo)} (restores the state found before the run)",
            commands=tuple(_confctl("pool", host, s) for s in todo),
            impact="the balancer sends new connections to the host again within ~1 s",
            data={"services": todo},
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {pool_key(obs.data["host"], s): "yes" for s in action.data["services"]}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        for name in action.data["services"]:
            env.conftool.set_pooled(host.fqdn, _tags(host, name), "yes")

    def verify(self, ctx: RunContext) -> None:
        _host, states, _ = _observe(self, ctx)
        wrong = [s for s, v in states.items() if v["before_run"] == "yes" and v["pooled"] != "yes"]
        if wrong:
            raise CheckFailed(f"{ctx.target} not pooled again in {', '.join(wrong)}")


SERVICES = Param("services", "list", default=[], help="conftool services (default: the host's conftool tags)")
class Pool(Repool):
    """Pool the host in its services, whatever it was before: a host entering service (``broker add``), once
    it holds its share of the data. A host taken out for maintenance is put back with ``conftool.repool``,
    which restores only what the run found."""

    def plan(self, obs: Observation) -> Action | Noop:
        host, states = obs.data["host"], obs.data["services"]
        if not states:
            return Noop(f"{host} " + NO_POOL.format("pool"))
        todo = [s for s, v in states.items() if v["pooled"] != "yes"]
        if not todo:
            return Noop(f"{host} is pooled")
        return Action(description=f"pool {host} in {', '.join(todo)} (it enters service)",
                      commands=tuple(_confctl("pool", host, s) for s in todo),
                      impact="the balancer sends new connections to the host within ~1 s",
                      data={"services": todo})


register_step("conftool.depool", Depool, [SERVICES], effect="disruptive",
              compensate=Compensation("conftool.repool", note="repool what this run depooled"), roles=BROKER)
register_step("conftool.repool", Repool, [SERVICES], roles=BROKER)
register_step("conftool.pool", Pool, [SERVICES], roles=BROKER)
