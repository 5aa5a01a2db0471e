"""Reboot a host and wait until it is back (new boot id, SSH answering); resend only a reboot that never arrived.

Reboot detection is by boot id, not by "SSH went away and came back": a host can refuse SSH for other
reasons, and a reboot command can fail silently.

A reboot is the textbook *effect pending* step: the command returns at once and its effect shows only
later, while a real host keeps SSH up for tens of seconds as it stops its services. A run killed just
after sending it, and resumed, sees the *old* boot id and would conclude "not rebooted yet" — and a
second reboot hits a host in the middle of its shutdown, or a broker in the middle of its log recovery.
So the step keeps two records, both written (fsynced) to the run's facts and journaled as events:

* the **intent**, before the command: the boot id before the reboot and the time;
* the **outcome** of the command: accepted, or the connection dropped (normal: the host is going down).

On resume with an intent recorded and the boot id unchanged, it does **not** resend: it waits up to
``grace`` (default 5 min) for the host to go down or come back with a new boot id. Only if the host stayed
up with the old boot id for the whole grace period *and* shows no sign of shutting down (its system state,
``systemctl is-system-running``, is not ``stopping``) does it send the command again, saying so on screen
and in the journal. A reboot command the host *refuses* (``sudo`` denied, a typo in the inventory) stops
the run at once, naming the state — it does not wait out the timeout with the broker stopped.
"""

from __future__ import annotations

import time
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, UnreachableError, WaitTimeout
from kafkaops.facts import MalformedAnswer
from kafkaops.facts.boot import parse_boot_id
from kafkaops.facts.systemd import parse_system_state
from kafkaops.model import Host
from kafkaops.queries.brokers import stop_keeps_min_isr
from kafkaops.stepkit.common import environment, target_host, wait
from kafkaops.stepkit.projection import STARTED, broker_key, fact_key
from kafkaops.systems.ssh import RemoteCommandError


class RebootRefused(CheckFailed):
    """The host refused the reboot command (non-zero exit): retrying will not help, a human must look."""

    retryable = False


def _fact_name(host: str) -> str:
    return f"boot_id_before_reboot/{host}"


def _fact(host: Host) -> str:
    return _fact_name(host.name)


def _intent(host: Host) -> str:
    return f"reboot_intent/{host.name}"


def _outcome(host: Host) -> str:
    return f"reboot_outcome/{host.name}"


def _boot_id(env: Environment, host: Host, *, coming_back: bool = False) -> str | None:
    """The host's boot id (a UUID, validated: it decides whether a reboot happened), or None when SSH
    does not answer. ``coming_back``: a host still booting may answer before its boot id is readable;
    that counts as "not back yet" instead of an error."""
    command = env.command(host, "boot_id")
    try:
        out = env.run(host, command, timeout=20).stdout
    except (UnreachableError, WaitTimeout):
        env.reconnect(host)
        return None
    try:
        return parse_boot_id(out, host=host.name, command=command).value
    except MalformedAnswer:
        if coming_back:
            return None
        raise


def _shutting_down(env: Environment, host: Host) -> bool | None:
    """Whether the host says it is shutting down (None: it cannot say — no template, or no answer)."""
    if "system_state" not in host.commands:
        return None
    command = env.command(host, "system_state")
    try:
        result = env.run(host, command, timeout=20, check=False)
        return parse_system_state(result.stdout, host=host.name, command=command).shutting_down
    except (UnreachableError, WaitTimeout, MalformedAnswer):
        env.reconnect(host)
        return None


class Reboot(StepBase):
    """Reboot the host and wait for a new boot id and SSH (resent only if the first evidently never arrived)."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        before = facts.get(_fact(host))
        intent = facts.get(_intent(host))
        now = _boot_id(env, host)
        summary = f"{host.name} boot id {now or 'unreachable'}" + (f" (before reboot: {before})" if before else "")
        if intent:
            summary += f"; reboot command sent at {time.strftime('%H:%M:%S', time.localtime(intent['at']))}"
        data = {"host": host.name, "broker": host.broker_id, "boot_id_before": before, "boot_id": now,
                "intent": intent, "outcome": facts.get(_outcome(host)),
                "reboot": env.command(host, "reboot"), "boot_id_cmd": env.command(host, "boot_id")}
        return Observation(data, summary=summary)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["boot_id_before"] and d["boot_id"] and d["boot_id"] != d["boot_id_before"]:
            return Noop(f"{d['host']} already rebooted (boot id {d['boot_id_before'][:8]}… → {d['boot_id'][:8]}…)")
        grace = float(self.params["grace"])
        if d["intent"]:
            return Action(
                description=f"await the reboot of {d['host']} already sent (do not send it again unless the host "
                            f"stays up with its old boot id and not shutting down for {grace:.0f}s), then wait for "
                            f"a new boot id and SSH (timeout {self.params['timeout']:.0f}s)",
                commands=(f"on {d['host']}: {d['boot_id_cmd']}   (until it changes)",),
                impact="the host is unreachable until it is back",
                data={"pending": True},
                idempotent=False,
            )
        return Action(
            description=f"reboot {d['host']} and wait for a new boot id and SSH "
                        f"(timeout {self.params['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['reboot']}", f"on {d['host']}: {d['boot_id_cmd']}   (until it changes)"),
            impact="the host is unreachable until it is back",
            rollback="nothing to undo: a reboot cannot be taken back (the broker comes back by itself)",
            idempotent=False,
        )

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """A reboot takes the host's broker down with it: refused, on a snapshot taken now, when that would
        take a partition offline or below min ISR — its broker started again since the run stopped it, or
        a runbook that reboots without stopping it first while a peer is out of the ISR."""

        host = target_host(ctx)
        return stop_keeps_min_isr(ctx, host.broker_id, f"rebooting {host.name} (broker {host.broker_id})")

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        """Kafka starts at boot: the broker comes back registered, catching up (not yet in sync)."""
        d = obs.data
        out: dict[str, Any] = {broker_key(d["broker"]): STARTED}
        if d["boot_id_before"] is None and d["boot_id"]:
            out[fact_key(_fact_name(d["host"]))] = d["boot_id"]
        return out

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        if action.data.get("pending"):
            before = facts.get(_fact(host))
            self._await_pending(ctx, env, host, before, facts.get(_intent(host)))
        else:
            before = facts.get(_fact(host)) or _boot_id(env, host)
            if before is None:
                raise UnreachableError(f"cannot read the boot id of {host.name} before rebooting it",
                                       hint="check SSH to the host")
            facts.set(_fact(host), before)
            self._send(ctx, env, host, before, resent=False)

        def back() -> tuple[bool, str]:
            now = _boot_id(env, host, coming_back=True)
            return (now is not None and now != before), (f"boot id {now[:8]}…" if now else "SSH not answering")

        wait(ctx, back, what=f"{host.name} back with a new boot id", timeout=float(self.params["timeout"]),
             interval=2.0, fast=0.5)

    def _send(self, ctx: RunContext, env: Environment, host: Host, before: str, *, resent: bool) -> None:
        """Journal the intent, send the command, journal its outcome."""

        facts = ctx.facts
        facts.set(_intent(host), {"at": time.time(), "boot_id": before, "resent": resent})
        ctx.record("reboot_intent", boot_id=before, resent=resent)
        command = env.command(host, "reboot")
        try:
            env.change(host, command, timeout=60, check=True)
            outcome = "accepted"
        except RemoteCommandError as exc:
            facts.set(_outcome(host), {"at": time.time(), "outcome": "refused", "error": str(exc)})
            ctx.record("reboot_refused", error=str(exc))
            raise RebootRefused(
                f"{host.name} refused the reboot command ({exc}); it was not rebooted",
                hint="fix the inventory's reboot template or the host's sudo rules, then resume",
            ) from exc
        except (UnreachableError, WaitTimeout) as exc:
            outcome = f"connection dropped ({type(exc).__name__}): expected while the host goes down"
        facts.set(_outcome(host), {"at": time.time(), "outcome": outcome})
        ctx.record("reboot_sent", outcome=outcome)
        env.reconnect(host)

    def _await_pending(self, ctx: RunContext, env: Environment, host: Host, before: str | None,
                       intent: dict[str, Any] | None) -> None:
        """A resumed reboot: wait for the one already sent to show; resend only when it evidently was lost."""
        grace = float(self.params["grace"])
        ctx.progress(f"  {host.name}: a reboot command was sent before the run stopped; waiting up to {grace:.0f}s "
                     "for it to take effect before considering sending it again")
        seen: list[str] = []

        def shows() -> tuple[bool, str]:
            now = _boot_id(env, host, coming_back=True)
            if now is None:
                seen.append("down")
                return True, "SSH not answering: going down"
            if now != before:
                seen.append("rebooted")
                return True, "new boot id"
            stopping = _shutting_down(env, host)
            if stopping:
                seen.append("stopping")
            return False, "old boot id" + (", system stopping" if stopping else "")

        try:
            wait(ctx, shows, what=f"the pending reboot of {host.name} to show", timeout=grace, interval=2.0)
            ctx.record("reboot_pending_took_effect", seen=seen[-1] if seen else "")
            return
        except WaitTimeout:
            if "stopping" in seen or _shutting_down(env, host):
                ctx.record("reboot_pending_slow", grace=grace)
                ctx.progress(f"  {host.name}: still shutting down after {grace:.0f}s; not sending the reboot again")
                return
        assert before is not None
        ctx.progress(f"  {host.name}: still up with boot id {before[:8]}… and not shutting down after {grace:.0f}s: "
                     "the reboot command was lost; sending it again")
        ctx.record("reboot_resend", grace=grace, intent=intent)
        self._send(ctx, env, host, before, resent=True)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        before = ctx.facts.get(_fact(host))
        now = _boot_id(env, host)
        if not now or now == before:
            raise CheckFailed(f"{host.name} has not rebooted (boot id {now or 'unreachable'})")


register_step("host.reboot", Reboot, params=[
    Param("timeout", "duration", default=900.0, min=1, max=86400, help="how long the host may take to come back"),
    Param("grace", "duration", default=300.0, min=0, max=3600,
          help="resumed after the reboot command was sent: how long to wait for it before sending it again"),
], irreversible="a reboot cannot be undone; the broker starts again at boot, and undoing the stop waits until "
                "it is back in sync", effect="disruptive")
