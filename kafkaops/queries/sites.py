"""A service switched between sites (DCs): its inventory section, the lock owner, each site's health,
and the discovery records' state as the steps planned before will have left it."""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.environment import Environment
from kafkaops.errors import ConfigError, KafkaOpsError
from kafkaops.model import SwitchedService
from kafkaops.policy.availability import cluster_health
from kafkaops.stepkit.common import environment
from kafkaops.systems.http import get_json


def switched(env: Environment, name: str) -> SwitchedService:
    """The inventory's ``switchover:`` entry of service ``name``."""
    found = env.cluster.switched.get(name)
    if found is None:
        known = ", ".join(env.cluster.switched) or "none"
        raise ConfigError(f"{env.cluster.name} has no switchover service {name!r} ({env.cluster.source})",
                          hint=f"services it switches: {known}")
    return found


def lock_owner(env: Environment) -> str:
    """The run holding the sites' inventory's own lock ("" when none): the switchover itself, which holds
    every site's lock while it runs (:class:`~kafkaops.engine.lock.SiteLocks`), so a site lock held by that
    run is not "a run under way on the site". Asked of the lock rather than the step's context because a
    saved plan's apply re-observes before its run id reaches the steps."""
    holder = env.lock.holder(env.cluster.name)
    return holder.run_id if holder is not None else ""


def site_health(env: Environment, dc: str, service: str, owner: str) -> dict[str, Any]:
    """One site: no run but ``owner`` (:func:`lock_owner`) holding its lock, Kafka reachable and whole, the
    service answering its health path through the VIP."""

    site = env.site(dc)
    out: dict[str, Any] = {"cluster": site.cluster.name, "problems": []}
    try:
        # A site being rebooted or rolled is no site to send every client to (nor to take them from).
        holder = site.lock.holder(site.cluster.name)
        if holder is not None and holder.run_id != owner:
            out["problems"].append(f"run {holder.run_id} ({holder.operator}: {holder.reason}) holds its lock")
    except KafkaOpsError as exc:
        out["problems"].append(f"its lock is unreadable: {exc}")
    try:
        health = cluster_health(site.kafka.snapshot(with_configs=False))
        out["brokers"] = list(health.brokers)
        if health.offline:
            out["problems"].append(f"{len(health.offline)} offline partition(s)")
        if health.under_replicated:
            out["problems"].append(f"{len(health.under_replicated)} under-replicated partition(s)")
        missing = sorted({h.broker_id for h in site.cluster.hosts} - set(health.brokers))
        if missing:
            out["problems"].append(f"broker(s) {', '.join(map(str, missing))} not registered")
    except KafkaOpsError as exc:
        out["problems"].append(f"Kafka unreachable: {exc}")
    spec = next((s for h in site.cluster.hosts for s in h.services if s.name == service), None)
    if spec is None or not spec.vip or not spec.health_path:
        out["problems"].append(f"no {service} with a vip and health_path in {site.cluster.source}")
    else:
        check = get_json(f"http://{spec.vip}:{spec.port}{spec.health_path}", timeout=5)
        out["service"] = f"{check.url}: {check.status or check.error}"
        if check.status != 200:
            out["problems"].append(f"{service} at {spec.vip}:{spec.port} answers {check.status or check.error}")
    return out


def discovery_key(record: str, dc: str) -> str:
    return f"discovery/{record}/{dc}"


def projected_states(ctx: RunContext, record: str) -> dict[str, bool]:
    """DC -> pooled for ``record``, as the steps planned before leave it (live in a real run)."""
    live = environment(ctx).discovery.states(record)
    return {dc: bool(ctx.projected.get(discovery_key(record, dc), p)) for dc, p in live.items()}
