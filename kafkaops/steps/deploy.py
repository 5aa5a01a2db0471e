"""Deploy steps: deploy one target from the deploy host, verify the revision it serves, roll it back.

The "Deploying" section of the EventBus runbook: a straight ``scap deploy`` restarts the service on every
target at once; instead, for each target, depool → ``scap deploy -l TARGET`` → repool. kafkaops only runs
the inventory's ``deploy`` template on the inventory's ``deploy_host`` (``scap deploy -l {host.fqdn}
"{message}"`` in production, ``labdeploy`` in the lab); it never copies code itself.

Why each piece:

* **No-op when the target already serves the revision**, asked of the target's own health endpoint: a
  resumed or re-run deploy never deploys a target twice (each deploy restarts the service).
* **The revision served before is written to the run's facts before deploying**, so a failure can print
  (and ``kafkaops runs abort RUN --rollback`` can run) the exact rollback: deploy that revision again.
* **Verify the served revision and health** before the repool: a deploy tool's exit code says the files
  were copied and a process started, not that the new code serves.
* **Canary** (the first N targets, see :mod:`kafkaops.steps.canary`): a bad revision stops on the first
  host, depooled, while every other host still serves the old revision.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal, WaitTimeout
from kafkaops.model import Host
from kafkaops.queries.deploy_host import (
    checked_out_revision,
    deploy_before_key,
    deploy_command,
    deploy_host,
    revision_matches,
    rollback_hint,
    ships_rev,
)
from kafkaops.queries.service import check_health, health_url, host_time, service_of, since_key
from kafkaops.stepkit.common import environment, names, target_host, wait
from kafkaops.stepkit.projection import pool_key, provenance, served_key, service_key

# --- pure helpers (unit-tested) -----------------------------------------------------------------------

def _run_deploy(env: Environment, target: Host, *, rev: str, message: str, repo: str, timeout: float) -> None:
    d = deploy_host(env)
    cmd = deploy_command(env, target, rev=rev, message=message, repo=repo)
    result = env.change(d, cmd, timeout=timeout, check=False)
    if result.exit_code != 0:
        tail = (result.stderr.strip() or result.stdout.strip())[-400:]
        raise DeployFailed(f"deploying {rev} to {target.name} failed on {d.name} (exit {result.exit_code}): {tail}")


def _earlier_attempt_finished(ctx: RunContext, host: Host, service: str, rev: str, before: Mapping[str, Any],
                              timeout: float) -> bool:
    """An interrupted attempt of this run may still be deploying: killing kafkaops ends its SSH session, not
    the deploy tool on the deploy host, which finishes (and restarts the service) on its own. Deploying
    again now would restart the target twice (the second run of the tool waits for the first's lock, then
    deploys again). So, within the earlier attempt's own bound, wait for the target to serve the revision;
    True when it did (nothing left to do). Past the bound the earlier attempt is over either way."""
    started = before.get("started")
    if not isinstance(started, (int, float)) or before.get("to") != rev:
        return False
    left = float(started) + timeout - time.time()
    if left <= 0:
        return False
    svc = service_of(host, service)
    ctx.progress(f"  {host.name}: an earlier attempt of this run deploys {rev} (started "
                 f"{time.time() - float(started):.0f}s ago); waiting up to {left:.0f}s for it to finish")
    try:
        wait(ctx, lambda: revision_matches(check_health(host, svc).revision, rev),
             what=f"{host.name} to serve {rev} (the earlier attempt's deploy)", timeout=left, interval=1.0)
    except WaitTimeout:
        return False
    ctx.record("deploy_in_flight_finished", host=host.name, rev=rev)
    return True


class DeployFailed(CheckFailed):
    """The deploy command failed (retryable: e.g. another deploy still holds the deploy lock)."""


def _observe_target(step: StepBase, ctx: RunContext, rev: str) -> tuple[Host, dict[str, Any]]:
    env = environment(ctx)
    host = target_host(ctx)
    service = service_of(host, str(step.params["service"]))
    check = check_health(host, service)
    repo = str(step.params["repo"])
    data: dict[str, Any] = {
        "host": host.name, "service": service.name, "rev": rev, "served": check.revision,
        "healthy": check.healthy, "line": check.line(), "url": check.url, "deploy_host": deploy_host(env).name,
        "command": deploy_command(env, host, rev=rev, message=str(step.params["message"]), repo=repo),
        "checked_out": None if ships_rev(env, host) else checked_out_revision(env, repo),
    }
    return host, data


def _serving_elsewhere(ctx: RunContext, service: str, doing: str) -> str:
    """The precondition of a deploy and of a rollback: each restarts ``service`` on the target, so the target
    must be out of its conftool pool already (the runbook's ``conftool.depool``: clients go elsewhere), or
    another host of the service must be pooled and answer its health check now. Either way the restart
    never takes the last serving host out — a run resumed hours later, or a rollback run after the other
    hosts went down, re-asks it. Pool states are as the steps planned before leave them (a dry-run)."""
    env = environment(ctx)
    host = target_host(ctx)
    tags = dict(host.conftool_tags)
    pooled: set[str] | None = None  # fqdns in the target's pool; None: it has no pool (no conftool tags)
    if tags:
        name = tags.get("service", "")
        own = env.conftool.get(host.fqdn, tags)
        if str(ctx.projected.get(pool_key(host.fqdn, name), own.pooled)) != "yes":
            return (f"{host.name} is out of the {name} pool{provenance(ctx, [pool_key(host.fqdn, name)])}: no "
                    "client is sent to it while it restarts")
        pooled = {p.host for p in env.conftool.list(tags) if str(ctx.projected.get(pool_key(p.host, name), p.pooled))
                  == "yes"}
    failing = []
    for peer in env.cluster.hosts:
        spec = peer.service(service)
        if peer.name == host.name or spec is None or (pooled is not None and peer.fqdn not in pooled):
            continue
        check = check_health(peer, spec)
        if check.healthy:
            return f"{peer.name} is pooled and answers {check.line()}: it serves {service} while {host.name} restarts"
        failing.append(f"{peer.name}: {check.line()}")
    raise SafetyRefusal(f"refusing to {doing}: {host.name} is pooled and no other pooled host of {service} answers its "
                        "health check" + (f" ({names(failing)})" if failing else ""),
                        hint=f"depool {host.name} first (conftool.depool), or bring another host of {service} back "
                             "into the pool")


def _require_checkout(d: Mapping[str, Any]) -> None:
    if d["checked_out"] is not None and not revision_matches(d["checked_out"], d["rev"]):
        raise SafetyRefusal(f"the deploy command ships what {d['deploy_host']} has checked out ({d['checked_out']}), "
                            f"not {d['rev']}", hint=f"check out {d['rev']} on {d['deploy_host']} first")


# --- steps ----------------------------------------------------------------------------------------------


class Deploy(StepBase):
    """Deploy the revision to this one target from the deploy host (no-op when it already serves it)."""

    def observe(self, ctx: RunContext) -> Observation:
        host, data = _observe_target(self, ctx, str(self.params["rev"]))
        data["before"] = ctx.facts.get(deploy_before_key(host, data["service"]))
        return Observation(data, summary=f"{data['service']} on {host.name}: {data['line']}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if revision_matches(d["served"], d["rev"]):
            return Noop(f"{d['host']} already serves {d['rev']}")
        _require_checkout(d)
        return Action(
            description=f"deploy {d['rev']} to {d['host']} from {d['deploy_host']} "
                        f"(it serves {d['served'] or 'nothing'} now)",
            commands=(f"on {d['deploy_host']}: {d['command']}",),
            impact=f"{d['service']} restarts on {d['host']}; the host is depooled, so no client sees it",
            rollback=f"deploy {d['served']} again (kafkaops runs abort RUN --rollback)" if d["served"] else "",
            data={"served": d["served"]},
            idempotent=False,
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        d = obs.data
        return {service_key(d["host"], d["service"]): "restarted", served_key(d["host"], d["service"]): d["rev"]}

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The deploy restarts the service: never on the last host that serves it (:func:`_serving_elsewhere`)."""
        return _serving_elsewhere(ctx, str(self.params["service"]), f"deploy {self.params['rev']} to {ctx.target}")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        name = str(self.params["service"])
        rev = str(self.params["rev"])
        facts = ctx.facts
        timeout = float(self.params["timeout"])
        before = facts.get(deploy_before_key(host, name))
        if before is not None and _earlier_attempt_finished(ctx, host, name, rev, before, timeout):
            return
        if before is None:  # before the deploy: the rollback needs it
            facts.set(deploy_before_key(host, name), {"rev": action.data.get("served") or "", "to": rev,
                                                "repo": str(self.params["repo"]), "started": time.time()})
        else:
            facts.set(deploy_before_key(host, name), {**before, "started": time.time()})
        if facts.get(since_key(host, name)) is None:
            facts.set(since_key(host, name), host_time(env, host))
        _run_deploy(env, host, rev=rev, message=str(self.params["message"]), repo=str(self.params["repo"]),
                    timeout=timeout)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        service = service_of(host, str(self.params["service"]))
        check = check_health(host, service)
        if not revision_matches(check.revision, str(self.params["rev"])):
            raise CheckFailed(f"{host.name} serves {check.line()}, not {self.params['rev']}")


class VerifyRevision(StepBase):
    """Wait until the target serves the revision and its health path answers HTTP 200."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        service = service_of(host, str(self.params["service"]))
        keys = [service_key(host.name, service.name), served_key(host.name, service.name)]
        if keys[0] in ctx.projected:
            url, served, healthy = health_url(host, service), ctx.projected.get(keys[1]), None
            line = f"deployed {served}: to be seen serving it, healthy"
        else:
            check = check_health(host, service)
            url, served, healthy, line = check.url, check.revision, check.healthy, check.line()
        data = {"host": host.name, "service": service.name, "rev": self.params["rev"], "url": url,
                "served": served, "healthy": healthy, "line": line, "timeout": self.params["timeout"]}
        return Observation(data, summary=f"{service.name} on {host.name}: {line}{provenance(ctx, keys)}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["healthy"] and revision_matches(d["served"], d["rev"]):
            return Noop(f"{d['host']} serves {d['rev']} and {d['url']} answers HTTP 200")
        return Action(
            description=f"wait until {d['host']} serves {d['rev']} and {d['url']} answers HTTP 200 "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=(f"GET {d['url']}",),
            impact="read-only; if it never does, the run stops with the host depooled and prints the rollback",
        )

    def _ok(self, host: Host) -> tuple[bool, str]:
        check = check_health(host, service_of(host, str(self.params["service"])))
        return check.healthy and revision_matches(check.revision, str(self.params["rev"])), check.line()

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)
        try:
            wait(ctx, lambda: self._ok(host), what=f"{host.name} serving {self.params['rev']}, healthy",
                 timeout=float(self.params["timeout"]), interval=1.0)
        except WaitTimeout as exc:
            hint = rollback_hint(environment(ctx), ctx, host, str(self.params["service"]))
            raise RevisionCheckFailed(f"{host.name} does not serve {self.params['rev']} healthily: {exc}. "
                                      f"{host.name} stays depooled. {hint}".rstrip()) from exc

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        ok, line = self._ok(host)
        if not ok:
            hint = rollback_hint(environment(ctx), ctx, host, str(self.params["service"]))
            raise CheckFailed(f"{host.name} does not serve {self.params['rev']} healthily ({line}). {hint}".rstrip())


class RevisionCheckFailed(CheckFailed):
    """The target never served the revision healthily within the timeout (not retried: the wait was the retry)."""

    retryable = False


class Rollback(StepBase):
    """Deploy back the revision the target served before this run deployed to it (compensation of deploy)."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        name = service_of(host, str(self.params["service"])).name
        before = ctx.facts.get(deploy_before_key(host, name)) or {}
        prev = str(before.get("rev") or "")
        _host, data = _observe_target(self, ctx, prev or str(self.params["rev"]))
        data["previous"] = prev
        return Observation(data, summary=f"{name} on {host.name}: {data['line']}"
                                         + (f" (before this run: {prev})" if prev else ""))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["previous"]:
            return Noop(f"this run recorded no revision of {d['host']} before deploying to it: nothing to roll back")
        if d["healthy"] and revision_matches(d["served"], d["previous"]):
            return Noop(f"{d['host']} serves {d['previous']} (as before this run)")
        _require_checkout(d)
        return Action(
            description=f"roll {d['host']} back to {d['previous']} from {d['deploy_host']} "
                        f"(it serves {d['served'] or 'nothing'} now) and wait until it serves it, healthy",
            commands=(f"on {d['deploy_host']}: {d['command']}", f"GET {d['url']}"),
            impact=f"{d['service']} restarts on {d['host']} (still depooled)",
            idempotent=False,
            data={"previous": d["previous"]},
        )

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The rollback restarts the service too: never on the last host that serves it
        (:func:`_serving_elsewhere`)."""
        return _serving_elsewhere(ctx, str(self.params["service"]),
                                  f"roll {ctx.target} back to {action.data['previous']}")

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)
        prev = str(action.data["previous"])
        service = service_of(host, str(self.params["service"]))
        _run_deploy(environment(ctx), host, rev=prev, message=f"rollback to {prev}: {self.params['message']}",
                    repo=str(self.params["repo"]), timeout=float(self.params["timeout"]))

        def back() -> tuple[bool, str]:
            check = check_health(host, service)
            return check.healthy and revision_matches(check.revision, prev), check.line()

        wait(ctx, back, what=f"{host.name} serving {prev}, healthy", timeout=120.0, interval=1.0)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        service = service_of(host, str(self.params["service"]))
        prev = (ctx.facts.get(deploy_before_key(host, service.name)) or {}).get("rev")
        check = check_health(host, service)
        if prev and not (check.healthy and revision_matches(check.revision, prev)):
            raise CheckFailed(f"{host.name} serves {check.line()}, not {prev} healthily")


SERVICE = Param("service", "str", required=True, help="service name from the inventory (services:)")
REV = Param("rev", "str", required=True, help="the revision to deploy (what the target must serve after)")
DEPLOY_PARAMS = [
    SERVICE, REV,
    Param("message", "str", required=True, help="deploy message, as for scap deploy (logged, SAL)"),
    Param("repo", "str", default="", help="repository on the deploy host ({repo} in the deploy template)"),
    Param("timeout", "duration", default=600.0, help="how long the deploy command may take"),
]
register_step("deploy.deploy", Deploy, DEPLOY_PARAMS, effect="disruptive",
              compensate=Compensation("deploy.rollback", note="deploy the revision served before this run"))
register_step("deploy.rollback", Rollback, DEPLOY_PARAMS, effect="disruptive")
register_step("deploy.verify_revision", VerifyRevision, [
    SERVICE, REV,
    Param("timeout", "duration", default=60.0, help="how long the target may take to serve it, healthy"),
], effect="read-only")
