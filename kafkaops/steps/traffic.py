"""The SYN gate: wait until a depooled host receives no new connections for a whole window.

The runbook's ``tcpdump ... tcp-syn | pv -l`` made a step: after a depool the balancer stops new
connections within a second or so, but clients with a cached route or a slow resolver may still arrive.
Touching the service before the count is zero for a full window is how requests get dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed
from kafkaops.model import Host
from kafkaops.steps.common import env, target_host, wait


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


#: The short capture that must see no SYN before a whole window is started (see :class:`SynGate`).
PROBE = 1.0


class SynGate:
    """The gate's decision, one capture per call (``wait`` calls it until it says quiet).

    Proof of quiet is one whole ``window`` in which the capture saw no new SYN — never stitched together
    from shorter ones, since SYNs between two captures go unseen. Right after a depool the balancer may
    still route for its refresh interval (pybal: seconds), so a whole window started at once often sees
    one of those last SYNs and must start again: 2 windows for 1 of proof (17 s per host for a 10 s
    window, measured under load). A short probe first (``PROBE`` s) that must itself be quiet avoids most
    of those doomed windows; any SYN in a window goes back to probing.
    """

    def __init__(self, window: float, capture: Callable[[float], Any], *, deadline: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window, self.capture, self.deadline, self.clock = window, capture, deadline, clock
        self.probing = window > PROBE

    def __call__(self) -> tuple[bool, str]:
        left = self.deadline - self.clock()
        if left < self.window:
            return False, f"less than one {self.window:.0f}s window left before the timeout"
        seconds = PROBE if self.probing else self.window
        count = self.capture(seconds)
        seen = f"{count.syns} new SYN(s) in {seconds:.0f}s" + (f" from {', '.join(count.sources)}"
                                                              if count.sources else "")
        if self.probing:
            self.probing = not count.quiet
            return False, seen + (" (probe: quiet, now a whole window)" if count.quiet else " (probe)")
        if not count.quiet:
            self.probing = True
        return count.quiet, seen


class WaitZeroSyns(StepBase):
    """Wait until no new TCP SYN reaches the host's service port for a whole window."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        port, vip = _service(self, host)
        window = float(self.params["window"])
        if not port:
            return Observation({"host": host.name, "port": 0, "skip": _no_port(host)}, summary=_no_port(host))
        from kafkaops.systems.traffic import capture_command

        data = {"host": host.name, "port": port, "window": window, "timeout": self.params["timeout"],
                "command": capture_command(host, host.commands.get("syn_capture"), port, window, vip=vip)}
        # A capture takes a whole window; planning does not need one (the host is still pooled then).
        return Observation(data, summary=f"{host.name}:{port} (captured when the step runs)")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["port"]:
            return Noop(d["skip"])
        return Action(
            description=f"wait until {d['host']}:{d['port']} gets no new SYN for {d['window']:.0f}s "
                        f"(timeout {d['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['command']} | wc -l   (repeated until a window counts 0)",),
            impact="read-only: proves the balancer no longer routes to the host",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        from kafkaops.systems.traffic import count_syns

        svc = env(ctx)
        host = target_host(ctx)
        (port, vip), window = _service(self, host), float(self.params["window"])
        template = host.commands.get("syn_capture")

        deadline = time.monotonic() + float(self.params["timeout"])

        def capture(seconds: float) -> Any:
            return count_syns(svc.ssh(host), host, template, port, seconds, budget=deadline - time.monotonic(),
                              vip=vip)

        quiet = SynGate(window, capture, deadline=deadline)
        wait(ctx, quiet, what=f"no new SYN to {host.name}:{port}", timeout=float(self.params["timeout"]),
             interval=0.0)
        svc.facts(ctx.run_id).set(f"syn_gate_passed/{host.name}", time.time())

    def verify(self, ctx: RunContext) -> None:
        if not _service(self, target_host(ctx))[0]:
            return  # no service port: nothing was gated (the plan said so)
        if env(ctx).facts(ctx.run_id).get(f"syn_gate_passed/{ctx.target}") is None:
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
], check=_window_fits)
