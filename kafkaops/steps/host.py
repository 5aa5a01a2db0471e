"""Reboot a host and wait until it is back: boot id changed and SSH answering.

Reboot detection is by boot id, not by "SSH went away and came back": a host can refuse SSH for other
reasons, and a reboot command can fail silently. The boot id seen before the reboot is written to the
run's facts first, so a run killed in the middle resumes correctly: if the id has changed since, the
reboot already happened and is not done again.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, UnreachableError, WaitTimeout
from kafkaops.facts import MalformedAnswer
from kafkaops.facts.boot import parse_boot_id
from kafkaops.model import Host
from kafkaops.steps.common import env, target_host, wait
from kafkaops.steps.projection import STARTED, broker_key, fact_key


def _fact_name(host: str) -> str:
    return f"boot_id_before_reboot/{host}"


def _fact(host: Host) -> str:
    return _fact_name(host.name)


def _boot_id(svc: Environment, host: Host, *, coming_back: bool = False) -> str | None:
    """The host's boot id (a UUID, validated: it decides whether a reboot happened), or None when SSH
    does not answer. ``coming_back``: a host still booting may answer before its boot id is readable;
    that counts as "not back yet" instead of an error."""
    command = svc.command(host, "boot_id")
    try:
        out = svc.run(host, command, timeout=20).stdout
    except (UnreachableError, WaitTimeout):
        svc.reconnect(host)
        return None
    try:
        return parse_boot_id(out, host=host.name, command=command).value
    except MalformedAnswer:
        if coming_back:
            return None
        raise


class Reboot(StepBase):
    """Reboot the host and wait for a new boot id and SSH."""

    def observe(self, ctx: RunContext) -> Observation:
        svc = env(ctx)
        host = target_host(ctx)
        before = svc.facts(ctx.run_id).get(_fact(host))
        now = _boot_id(svc, host)
        summary = f"{host.name} boot id {now or 'unreachable'}" + (f" (before reboot: {before})" if before else "")
        data = {"host": host.name, "broker": host.broker_id, "boot_id_before": before, "boot_id": now,
                "reboot": svc.command(host, "reboot"), "boot_id_cmd": svc.command(host, "boot_id")}
        return Observation(data, summary=summary)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["boot_id_before"] and d["boot_id"] and d["boot_id"] != d["boot_id_before"]:
            return Noop(f"{d['host']} already rebooted (boot id {d['boot_id_before'][:8]}… → {d['boot_id'][:8]}…)")
        return Action(
            description=f"reboot {d['host']} and wait for a new boot id and SSH "
                        f"(timeout {self.params['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['reboot']}", f"on {d['host']}: {d['boot_id_cmd']}   (until it changes)"),
            impact="the host is unreachable until it is back",
            idempotent=False,
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        """Kafka starts at boot: the broker comes back registered, catching up (not yet in sync)."""
        d = obs.data
        out: dict[str, Any] = {broker_key(d["broker"]): STARTED}
        if d["boot_id_before"] is None and d["boot_id"]:
            out[fact_key(_fact_name(d["host"]))] = d["boot_id"]
        return out

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        host = target_host(ctx)
        facts = svc.facts(ctx.run_id)
        before = facts.get(_fact(host)) or _boot_id(svc, host)
        if before is None:
            raise UnreachableError(f"cannot read the boot id of {host.name} before rebooting it",
                                   hint="check SSH to the host")
        facts.set(_fact(host), before)  # before the reboot: a resumed run knows it happened
        try:
            svc.change(host, svc.command(host, "reboot"), timeout=60, check=True)
        except UnreachableError:
            pass  # the connection may drop while the host goes down; the boot id decides
        svc.reconnect(host)

        def back() -> tuple[bool, str]:
            now = _boot_id(svc, host, coming_back=True)
            return (now is not None and now != before), (f"boot id {now[:8]}…" if now else "SSH not answering")

        wait(ctx, back, what=f"{host.name} back with a new boot id", timeout=float(self.params["timeout"]),
             interval=2.0)

    def verify(self, ctx: RunContext) -> None:
        svc = env(ctx)
        host = target_host(ctx)
        before = svc.facts(ctx.run_id).get(_fact(host))
        now = _boot_id(svc, host)
        if not now or now == before:
            raise CheckFailed(f"{host.name} has not rebooted (boot id {now or 'unreachable'})")


register_step("host.reboot", Reboot, [
    Param("timeout", "duration", default=900.0, help="how long the host may take to come back"),
])
