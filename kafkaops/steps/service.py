"""Service steps: restart a load-balanced service, check it is serving, scan its log since the restart.

The "HTTP proxy restart" procedure of the EventBus runbook: the eventbus service stops accepting
connections while it restarts, so a bare ``systemctl restart`` loses events. The runbook therefore only
restarts *after* the host is depooled and the SYN gate has proven no new connection arrives; these steps
then make the rest of the wiki page checkable:

* **restart** records the service's main pid in the run's facts *before* restarting, so a run killed in
  the middle resumes correctly: a different live pid means the restart already happened and is not done
  again (a restart is cheap, but an unexpected second one is a second window of refused connections).
* **verify_health** asks the host's own port (never the VIP, which any pooled host would answer) for the
  service's health path: a process that is running but not serving must not be repooled.
* **scan_log** replaces "``journalctl -f`` and make sure everything looks good": it reads the service's
  log from the moment of the restart (the host's own clock, recorded before the restart) and stops the
  run, host still depooled, when a line matches one of the inventory's ``error_patterns`` (e.g.
  ``Failed processing event``, ``0 out of 1 events were accepted``), naming the lines. An eyeballed tail
  is how such lines were missed; a failed scan leaves the host out of the pool for someone to look at.

Without a ``service`` parameter, ``verify_health`` and ``scan_log`` check **every service the host
runs**: that is how the broker runbooks (reboot, restart, rolling) end the seed's Host Reboot with its
"Check that everything looks good in the logs" *before* the repool. A reboot restarts eventbus too, and a
host whose eventbus did not come back must not be put back behind the VIP. There the scan reads from the
moment the run started disrupting the host (:func:`disruption_key`, recorded by ``logs.mark_start``
before the broker is stopped), so lines logged while it went down and came back are all covered. A host
that runs no service has nothing to check: the step is a no-op saying so.
"""

from __future__ import annotations

import time
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal, WaitTimeout
from kafkaops.facts.log_lines import LogErrorsFound, describe_matches, find_error_lines
from kafkaops.facts.systemd import parse_main_pid, parse_unit_activity
from kafkaops.model import BROKER, Host, Service
from kafkaops.queries.deploy_host import rollback_hint
from kafkaops.queries.service import (
    check_health,
    disruption_key,
    health_url,
    host_time,
    scan_start,
    service_of,
    services_to_check,
    since_key,
)
from kafkaops.stepkit.common import environment, target_host, wait
from kafkaops.stepkit.projection import fact_key, pool_key, provenance, service_key

# --- pure helpers (unit-tested) -----------------------------------------------------------------------


# --- shared with the deploy steps ----------------------------------------------------------------------


def _pid_key(host: Host, service: str) -> str:
    return f"service_pid_before/{host.name}/{service}"


def _reported_key(host: Host, service: str) -> str:
    """Fact: log lines a failed scan already reported (a resumed scan reports only others)."""
    return f"log_reported/{host.name}/{service}"


def _rollback_hint(env: Environment, ctx: RunContext, host: Host, service: str) -> str:
    return rollback_hint(env, ctx, host, service)


# --- restart -----------------------------------------------------------------------------------------------


def _pid(env: Environment, host: Host, service: str) -> int:
    """The service's main pid (0: none). A malformed answer stops the step: the pid decides whether the
    restart already happened, so it is never guessed."""
    command = env.command(host, "service_pid", service=service)
    out = env.run(host, command, timeout=30).stdout
    return parse_main_pid(out, host=host.name, command=command).pid or 0


def _active(env: Environment, host: Host, service: str) -> bool:
    """Active when the status command says so in words *and* by its exit code."""
    command = env.command(host, "service_status", service=service)
    result = env.run(host, command, timeout=30, check=False)
    return result.exit_code == 0 and parse_unit_activity(result.stdout, host=host.name, command=command).active


class Restart(StepBase):
    """Restart the service on the host and wait until a new process runs (pid recorded first)."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        name = service_of(host, str(self.params["service"])).name
        before = ctx.facts.get(_pid_key(host, name))
        pid, active = _pid(env, host, name), _active(env, host, name)
        data = {"host": host.name, "service": name, "pid": pid, "active": active, "pid_before": before,
                "command": env.command(host, "service_restart", service=name), "timeout": self.params["timeout"]}
        return Observation(data, summary=f"{name} on {host.name}: {'active' if active else 'inactive'}, pid {pid}"
                                         + (f" (before the restart: {before})" if before is not None else ""))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["pid_before"] is not None and d["active"] and d["pid"] not in (0, d["pid_before"]):
            return Noop(f"{d['service']} on {d['host']} already restarted (pid {d['pid_before']} → {d['pid']})")
        return Action(
            description=f"restart {d['service']} on {d['host']} and wait for a new process "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['command']}",),
            impact="the service refuses connections for a few seconds; the host is depooled, so no client sees it",
            idempotent=False,
        )

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Right before the restart the host's pool state is read again: the service refuses connections
        while it restarts, which no client notices only while the balancer sends it none. A host repooled
        since the depool (by hand, or by a run that should not have) would drop live requests."""
        env = environment(ctx)
        host = target_host(ctx)
        if not host.conftool_tags:
            return f"{host.name} serves no load-balanced service (no conftool tags): no client reaches it by the VIP"
        service = host.conftool_tags.get("service", "")
        live = env.conftool.get(host.fqdn, dict(host.conftool_tags)).pooled
        pooled = str(ctx.projected.get(pool_key(host.fqdn, service), live))
        if pooled == "yes":
            raise SafetyRefusal(f"refusing to restart {self.params['service']} on {host.name}: it is pooled in "
                                f"{service or 'its service'} (the balancer still sends it connections)",
                                hint="depool it first (the runbook's conftool.depool and SYN gate), or "
                                     "kafkaops resume RUN once a run's depool holds")
        return f"{host.name} is out of the pool ({service or 'its service'}: pooled={pooled})"

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {service_key(obs.data["host"], obs.data["service"]): "restarted"}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        name = str(self.params["service"])
        facts = ctx.facts
        before = facts.get(_pid_key(host, name))
        if before is None:
            before = _pid(env, host, name)
            facts.set(_pid_key(host, name), before)  # before the restart: a resumed run can tell it happened
        if facts.get(since_key(host, name)) is None:
            facts.set(since_key(host, name), host_time(env, host))
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "service_restart", service=name), timeout=timeout)

        def restarted() -> tuple[bool, str]:
            pid, active = _pid(env, host, name), _active(env, host, name)
            return active and pid not in (0, before), f"pid {pid or '-'}, {'active' if active else 'inactive'}"

        wait(ctx, restarted, what=f"{name} on {host.name} running a new process", timeout=timeout, interval=1.0)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        name = str(self.params["service"])
        before = ctx.facts.get(_pid_key(host, name))
        pid, active = _pid(env, host, name), _active(env, host, name)
        if not active or pid in (0, before):
            raise CheckFailed(f"{name} on {host.name} has not restarted (pid {before} → {pid or '-'}, "
                              f"{'active' if active else 'inactive'})")


# --- health ------------------------------------------------------------------------------------------------


def _none_to_check(host: Host) -> Noop:
    return Noop(f"{host.name} runs no service (services: in the inventory): nothing to check")


class VerifyHealth(StepBase):
    """Wait until the service (default: every service of the host) answers HTTP 200 on the host's own port.

    Asked of the host itself, never of the VIP (which any pooled host answers)."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        services = services_to_check(host, str(self.params["service"]))
        disrupted = fact_key(disruption_key(host)) in ctx.projected
        checks, lines, keys = [], [], []
        for service in services:
            key = service_key(host.name, service.name)
            keys.append(key)
            if key in ctx.projected:
                url, status, line = health_url(host, service), None, "restarted: its health is to be seen again"
            elif disrupted:
                url, status, line = health_url(host, service), None, "to be seen again after the maintenance"
            else:
                check = check_health(host, service)
                url, status, line = check.url, check.status, check.line()
            checks.append({"service": service.name, "url": url, "status": status, "line": line})
            lines.append(f"{service.name} {line}")
        data = {"host": host.name, "checks": checks, "timeout": self.params["timeout"]}
        summary = f"{host.name}: " + ("; ".join(lines) if lines else "no service")
        if disrupted:
            keys.append(fact_key(disruption_key(host)))
        return Observation(data, summary=summary + provenance(ctx, keys))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["checks"]:
            return Noop(f"{d['host']} runs no service (services: in the inventory): no health to check")
        waiting = [c for c in d["checks"] if c["status"] != 200]
        if not waiting:
            return Noop("; ".join(f"{c['service']} on {d['host']} answers HTTP 200 on {c['url']}" for c in d["checks"]))
        urls = ", ".join(c["url"] for c in waiting)
        return Action(
            description=f"wait until {urls} answer{'s' if len(waiting) == 1 else ''} HTTP 200 "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=tuple(f"GET {c['url']}" for c in waiting),
            impact="read-only; if one never does, the run stops with the host still depooled",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        for service in services_to_check(host, str(self.params["service"])):
            def healthy(service: Service = service) -> tuple[bool, str]:
                check = check_health(host, service)
                return check.healthy, check.line()

            try:
                wait(ctx, healthy, what=f"{service.name} on {host.name} healthy",
                     timeout=float(self.params["timeout"]), interval=1.0, stable_for=float(self.params["stable_for"]))
            except WaitTimeout as exc:
                hint = _rollback_hint(env, ctx, host, service.name)
                raise WaitTimeout(
                    f"health check failed: {exc}; {host.name} stays depooled"
                    + (f". {hint}" if hint else
                       f" (bring {service.name} back, e.g. `systemctl start {service.name}`, then resume)")
                ) from exc

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        for service in services_to_check(host, str(self.params["service"])):
            check = check_health(host, service)
            if not check.healthy:
                hint = _rollback_hint(environment(ctx), ctx, host, service.name)
                raise CheckFailed(f"health check failed: {service.name} on {host.name} is not healthy: "
                                  f"{check.url}: {check.line()}" + (f". {hint}" if hint else ""))


# --- log scan ----------------------------------------------------------------------------------------------


def _when(start: int | None, default: str) -> str:
    return time.strftime("%H:%M:%S", time.localtime(start)) if start else default


class ScanLog(StepBase):
    """Scan the service's log (default: every service's) for its error patterns since the restart or maintenance.

    Since this run's restart or deploy of the service, else since the run started disrupting the host
    (``logs.mark_start``); a match stops the run with the host still depooled."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        # Before a restart this run makes, or (broker runbooks) the start of the host's maintenance.
        maintained = fact_key(disruption_key(host)) in ctx.projected or facts.get(disruption_key(host)) is not None
        start_word = "stop" if maintained and not str(self.params["service"]) else "restart"
        scans: list[dict[str, Any]] = []
        for service in services_to_check(host, str(self.params["service"])):
            start = scan_start(facts, host, service.name)
            reported = facts.get(_reported_key(host, service.name)) or []
            cmd = env.command(host, "service_log", service=service.name,
                              since=start if start else f"<{start_word} time>")
            scans.append({"service": service.name, "patterns": list(service.error_patterns), "since": start,
                          "resumed_after_report": bool(reported), "command": cmd, "from": start_word})
        data = {"host": host.name, "scans": scans, "window": self.params["window"]}
        what = ", ".join(f"{s['service']} log since {_when(s['since'], 'the ' + start_word)}" for s in scans)
        return Observation(data, summary=f"{host.name}: {what or 'no service'}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["scans"]:
            return Noop(f"{d['host']} runs no service (services: in the inventory): no service log to scan")
        scans = [s for s in d["scans"] if s["patterns"]]
        if not scans:
            return Noop("no error_patterns for " + ", ".join(s["service"] for s in d["scans"])
                        + " in the inventory: nothing to scan for")
        watch = f", after watching it for {d['window']:.0f}s" if d["window"] else ""
        again = " (lines already reported to the operator excepted)" \
            if any(s["resumed_after_report"] for s in scans) else ""
        since = f"since the {scans[0]['from']}" if all(s["since"] is None for s in scans) else \
            "since " + ", ".join(_when(s["since"], "the " + s["from"]) for s in scans)
        n = sum(len(s["patterns"]) for s in scans)
        commands: list[str] = []
        for s in scans:
            commands += [f"on {d['host']}: {s['command']}", "match: " + " | ".join(s["patterns"])]
        return Action(
            description=f"scan the {', '.join(s['service'] for s in scans)} log on {d['host']} {since}{again} "
                        f"for {n} error pattern(s){watch}",
            commands=tuple(commands),
            impact="read-only; a matching line stops the run with the host still depooled",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        services = [s for s in services_to_check(host, str(self.params["service"])) if s.error_patterns]
        window = float(self.params["window"])
        if window > 0 and services:
            end = time.monotonic() + window
            names = ", ".join(s.name for s in services)

            def watched() -> tuple[bool, str]:
                left = end - time.monotonic()
                return left <= 0, f"watching the log, {max(left, 0):.0f}s left"

            wait(ctx, watched, what=f"{window:.0f}s of {names} log on {host.name}", timeout=window + 30,
                 interval=min(1.0, window))
        problems: list[str] = []
        for service in services:
            problem = self._scan(ctx, env, host, service, window)
            if problem:
                problems.append(problem)
        if problems:
            hints = [h for s in services if (h := _rollback_hint(env, ctx, host, s.name))]
            raise LogErrorsFound(
                "\n".join(problems) + f"\n{host.name} stays depooled. " + "".join(h + ". " for h in hints[:1])
                + "Once they are understood, resuming scans again and stops only on lines not reported here",
            )

    def _scan(self, ctx: RunContext, env: Environment, host: Host, service: Service, window: float) -> str:
        """Scan one service's log; returns what to tell the operator about new matches ("" when clean)."""
        facts = ctx.facts
        start = scan_start(facts, host, service.name)
        if not start:
            start = host_time(env, host) - int(window) - 1  # no recorded restart: the watched window only
        cmd = env.command(host, "service_log", service=service.name, since=int(start))
        out = env.run(host, cmd, timeout=60).stdout
        reported = list(facts.get(_reported_key(host, service.name)) or [])
        matches = [m for m in find_error_lines(out.splitlines(), service.error_patterns) if m.line not in reported]
        if not matches:
            ctx.progress(f"  {host.name}: {service.name} log clean since {_when(start, '?')} "
                         f"({len(out.splitlines())} lines)")
            return ""
        facts.set(_reported_key(host, service.name), (reported + [m.line for m in matches])[-1000:])
        return (f"log scan failed: {len(matches)} line(s) of the {service.name} log on {host.name} since "
                f"{_when(start, '?')} match the error patterns ({cmd}):\n{describe_matches(matches)}")


SERVICE = Param("service", "str", required=True, help="service name from the inventory (services:)")
EVERY_SERVICE = Param("service", "str", default="",
                      help="service name from the inventory (services:); empty: every service the host runs")
register_step("service.restart", Restart, effect="disruptive", params=[
    SERVICE, Param("timeout", "duration", default=120.0, help="how long the restart may take"),
])
register_step("service.verify_health", VerifyHealth, [
    EVERY_SERVICE,
    Param("timeout", "duration", default=60.0, help="how long the service may take to answer HTTP 200"),
    Param("stable_for", "duration", default=0.0, help="how long it must keep answering 200"),
], roles=BROKER, effect="read-only")
register_step("service.scan_log", ScanLog, [
    EVERY_SERVICE,
    Param("window", "duration", default=0.0, help="watch the log this long before scanning"),
], roles=BROKER, effect="read-only")
