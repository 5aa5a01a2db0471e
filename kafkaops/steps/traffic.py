"""The SYN gate: wait until a depooled host receives no new connections for a whole window.

The runbook's ``tcpdump ... tcp-syn | pv -l`` made a step: after a depool the balancer stops new
connections within a second or so, but clients with a cached route or a slow resolver may still arrive.
Touching the service before the count is zero for a full window is how requests get dropped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, ConfigError
from kafkaops.model import BROKER, Host
from kafkaops.queries.sites import switched
from kafkaops.stepkit.common import environment, target_host
from kafkaops.systems.traffic import Capture, capture_command, watch_syns, watch_syns_on


def _service(step: StepBase, host: Host) -> tuple[int, str | None]:
    """The gated port and its service address (VIP): the ``port`` parameter, else the host's first
    service. ``(0, None)`` when the host runs no load-balanced service: there is no traffic to drain."""
    port = int(step.params.get("port") or 0)
    service = next((s for s in host.services if s.port == port), None) if port else (
        host.services[0] if host.services else None)
    if service is not None:
        return service.port, service.vip
    return port, None


def _no_port(host: Host) -> str:
    return (f"{host.name} runs no load-balanced service (no services: in the inventory), so no client connects "
            f"to it through the balancer: no SYN gate")


class WaitZeroSyns(StepBase):
    """Wait until no new TCP SYN reaches the host's service port for a whole window."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        port, vip = _service(self, host)
        window = float(self.params["window"])
        if not port:
            return Observation({"host": host.name, "port": 0, "skip": _no_port(host)}, summary=_no_port(host))

        # The capture's own limit is the step's timeout: one capture for the whole wait.
        data = {"host": host.name, "port": port, "window": window, "timeout": self.params["timeout"],
                "command": capture_command(host, host.commands.get("syn_capture"), port,
                                           float(self.params["timeout"]), vip=vip)}
        # A capture takes a whole window; planning does not need one (the host is still pooled then).
        return Observation(data, summary=f"{host.name}:{port} (captured when the step runs)")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["port"]:
            return Noop(d["skip"])
        return Action(
            description=f"wait until {d['host']}:{d['port']} gets no new SYN for {d['window']:.0f}s "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['command']}",),
            impact=f"read-only: proves the balancer no longer routes to the host (one capture, read as it runs; "
                   f"ends {d['window']:.0f}s after tcpdump starts listening or after the last SYN, whichever is "
                   "later)",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:

        env = environment(ctx)
        host = target_host(ctx)
        (port, vip), window = _service(self, host), float(self.params["window"])
        shown = [0.0]

        def restarted(source: str, count: int) -> None:
            # At most one line (and one journal record) a second: a busy host must not flood the log, nor
            # the journal, while it drains; the record says how many SYNs the line stands for.
            if time.monotonic() - shown[0] >= 1.0:
                shown[0] = time.monotonic()
                ctx.progress(f"  {host.name}: new SYN from {source} ({count} so far): the {window:.0f}s window "
                             f"starts again")
                ctx.record("wait_restarted", reason=f"new SYN from {source}", syns=count)

        ctx.progress(f"  {host.name}: capturing SYNs to :{port} until {window:.0f}s pass without one")
        quiet = watch_syns(env.ssh(host), host, host.commands.get("syn_capture"), port, window,
                           budget=float(self.params["timeout"]), vip=vip, on_syn=restarted,
                           cancelled=ctx.pause_requested)
        ctx.progress(f"  {host.name}: no new SYN to :{port} for {window:.0f}s (waited {quiet.waited:.1f}s, "
                     f"{quiet.syns} SYN(s) before" + (f" from {', '.join(quiet.sources)})" if quiet.sources else ")"))
        facts = ctx.facts
        facts.set(f"syn_gate/{host.name}", {"window": window, "waited": round(quiet.waited, 3),
                                            "syns": quiet.syns, "sources": list(quiet.sources)})
        facts.set(f"syn_gate_passed/{host.name}", time.time())

    def verify(self, ctx: RunContext) -> None:
        if not _service(self, target_host(ctx))[0]:
            return  # no service port: nothing was gated (the plan said so)
        if ctx.facts.get(f"syn_gate_passed/{ctx.target}") is None:
            raise CheckFailed(f"SYN gate for {ctx.target} did not record a quiet window")


def _window_fits(params: Mapping[str, Any]) -> str | None:
    if float(params["window"]) >= float(params["timeout"]):
        return (f"the SYN window ({params['window']:.0f}s) must be shorter than the step's timeout "
                f"({params['timeout']:.0f}s): not one quiet window could pass")
    return None


register_step("traffic.wait_zero_syns", WaitZeroSyns, [
    Param("port", "int", default=0, min=0, max=65535, help="service port (default: the host's first service)"),
    Param("window", "duration", default=10.0, min=1, max=3600, help="how long the count must stay at zero"),
    Param("timeout", "duration", default=300.0, min=1, max=86400, help="give up (and stop the run) after this long"),
], check=_window_fits, roles=BROKER, effect="read-only")


class WaitZeroSynsAtSite(StepBase):
    """Wait until no new SYN reaches any host behind a site's service address (its VIP) for a whole window.

    After a site's discovery record is depooled, clients still holding the old DNS answer keep connecting
    to that site's VIP until their TTL runs out. MirrorMaker can only be drained — and consumers moved —
    once nothing new is produced there: this is the gate that proves it. Behind an LVS in direct routing
    each realserver sees only the connections scheduled to it, so one host's capture proves nothing about
    the others (a client pinned to another host by source hashing goes unseen): the gate captures on every
    host of the site that runs the service, at once, and the window counts only while all of them are quiet.
    """

    def _where(self, ctx: RunContext) -> tuple[Any, tuple[Host, ...], int, str]:
        """The site's environment, the hosts behind its VIP (the ones running the service), port and VIP."""

        env = environment(ctx)
        service = switched(env, str(self.params["service"]))
        site = env.site(str(self.params["site"]))
        hosts = tuple(h for h in site.cluster.hosts if any(s.name == service.name for s in h.services))
        spec = next((s for h in hosts for s in h.services if s.name == service.name), None)
        if spec is None or not spec.vip:
            raise ConfigError(f"{site.cluster.name} has no {service.name} service with a vip ({site.cluster.source})",
                              hint="add services.<name>.vip to the site's inventory")
        return site, hosts, spec.port, spec.vip

    def observe(self, ctx: RunContext) -> Observation:

        _site, hosts, port, vip = self._where(ctx)
        timeout = float(self.params["timeout"])
        captures = [{"host": h.name, "command": capture_command(h, h.commands.get("vip_syn_capture"), port, timeout,
                                                                 vip=vip)} for h in hosts]
        return Observation({"site": self.params["site"], "vip": vip, "port": port, "captures": captures,
                            "window": float(self.params["window"]), "timeout": timeout},
                           summary=f"{vip}:{port} on {', '.join(h.name for h in hosts)} (captured when the step runs)")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        hosts = [c["host"] for c in d["captures"]]
        return Action(
            description=f"wait until {d['site']}'s service address {d['vip']}:{d['port']} gets no new SYN for "
                        f"{d['window']:.0f}s on any of its {len(hosts)} host(s) {', '.join(hosts)}, captured on "
                        f"each at once: each sees only its own share of the VIP's connections "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=tuple(f"on {c['host']}: {c['command']}   (with the other captures; ends {d['window']:.0f}s "
                           "after the last SYN on any host)" for c in d["captures"]),
            impact=f"read-only: proves no client connects to {d['site']} any more",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:

        site, hosts, port, vip = self._where(ctx)
        window = float(self.params["window"])
        names = ", ".join(h.name for h in hosts)
        shown: dict[str, float] = {}

        def restarted(host: str, source: str, count: int) -> None:
            # At most one line (and one journal record) a second per host: a busy site must not flood the
            # log, nor the journal, while it drains; the record names the host and its count so far.
            if time.monotonic() - shown.get(host, 0.0) >= 1.0:
                shown[host] = time.monotonic()
                ctx.progress(f"  {host}: new SYN to {vip}:{port} from {source} ({count} so far): the "
                             f"{window:.0f}s window starts again")
                ctx.record("wait_restarted", reason=f"new SYN at {host} from {source}", host=host, syns=count)

        ctx.progress(f"  {self.params['site']}: capturing SYNs to {vip}:{port} on {names} at once until "
                     f"{window:.0f}s pass without one on any of them")
        quiet = watch_syns_on([Capture(site.ssh(h), h, h.commands.get("vip_syn_capture")) for h in hosts], port,
                              window, budget=float(self.params["timeout"]), vip=vip,
                              label=f"{vip}:{port} at {self.params['site']} ({names})",
                              hint=f"clients still reach {self.params['site']} through its service address: find "
                                   "them (a stale DNS answer, an address set by hand); resume once they are gone, "
                                   "or undo the switchover with `kafkaops runs abort RUN --rollback`",
                              on_syn=restarted, cancelled=ctx.pause_requested)
        waited, syns = quiet[0].waited, sum(q.syns for q in quiet)
        ctx.progress(f"  {vip}:{port}: no new SYN on {names} for {window:.0f}s (waited {waited:.1f}s, {syns} SYN(s) "
                     "before)")
        ctx.facts.set(f"site_syn_gate/{self.params['site']}", {
            "window": window, "waited": round(waited, 3), "syns": syns,
            "hosts": {q.host: {"syns": q.syns, "sources": list(q.sources)} for q in quiet}})

    def verify(self, ctx: RunContext) -> None:
        if ctx.facts.get(f"site_syn_gate/{self.params['site']}") is None:
            raise CheckFailed(f"SYN gate at {self.params['site']}'s service address did not record a quiet window")


register_step("traffic.wait_zero_syns_at_site", WaitZeroSynsAtSite, [
    Param("service", "str", required=True, help="the service of the inventory's switchover: section"),
    Param("site", "str", required=True, help="the site (DC) whose service address must go quiet"),
    Param("window", "duration", default=10.0, min=1, max=3600, help="how long the count must stay at zero"),
    Param("timeout", "duration", default=300.0, min=1, max=86400, help="give up (and stop the run) after this long"),
], check=_window_fits, effect="read-only")
