"""Broker steps: pre-flight gate, stop/start, leadership and ISR checks, preferred election, health gate.

Every "is it done?" question is answered from the cluster's side — registrations, leaders, ISR — not
from a command's exit code: a stop command that returns early (Yelp #148) or a broker that starts but
has not caught up must not let the run proceed. Waits are gates on observed state, never fixed sleeps.
"""

from __future__ import annotations

import time
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, ConfigError
from kafkaops.model import ClusterSnapshot, Host
from kafkaops.safety import (
    cluster_health,
    leaders_not_preferred,
    partition_name,
    partitions_not_in_isr,
    preflight,
    stop_impact,
)
from kafkaops.steps.common import env, names, target_host, wait
from kafkaops.steps.projection import (
    CLUSTER_ELECTED,
    ELECTED,
    IN_SYNC,
    STARTED,
    STOPPED,
    broker_key,
    broker_keys,
    project_registered,
    project_snapshot,
    provenance,
)


def _snapshot(ctx: RunContext, *, configs: bool = False) -> ClusterSnapshot:
    """Leaders/ISR always; topic configs (min ISR) only where a decision needs them. Every snapshot taken
    during a run is also a URP sample for the post-check's chart. While planning, the cluster as the
    steps planned before will have left it (:mod:`kafkaops.steps.projection`)."""
    svc = env(ctx)
    snap = svc.kafka.snapshot(with_configs=configs)
    svc.sample_urp(ctx.run_id, snap)
    return project_snapshot(snap, ctx)


def _registered(ctx: RunContext) -> list[int]:
    return project_registered(env(ctx).registered_brokers(), ctx)


def _state(snap: ClusterSnapshot, broker: int) -> dict[str, Any]:
    """What a plan fingerprints about one broker: registration, leadership, ISR membership."""
    hosted = [p for p in snap.partitions if broker in p.replicas]
    return {
        "registered": broker in snap.brokers,
        "controller": snap.controller,
        "leads": sorted(partition_name(p) for p in hosted if p.leader == broker),
        "out_of_isr": sorted(partition_name(p) for p in hosted if broker not in p.isr),
        "hosted": len(hosted),
    }


def _lead_summary(state: Any) -> str:
    return (f"{'registered' if state['registered'] else 'not registered'}, leads {len(state['leads'])}, "
            f"out of ISR in {len(state['out_of_isr'])} of {state['hosted']} partitions")


class Preflight(StepBase):
    """Refuse when the cluster is unhealthy or stopping this broker would drop a partition below min ISR."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        snap = _snapshot(ctx, configs=True)
        result = preflight(snap, host.broker_id, allow_urp=bool(self.params["allow_urp"]),
                           isr_headroom=int(self.params["isr_headroom"]))
        impact = result.impact
        data = {
            "broker": host.broker_id, "host": host.name, "ok": result.ok,
            "violations": [v.to_dict() for v in result.violations], "warnings": list(result.warnings),
            "message": result.message() if not result.ok else "", "hint": result.hint() if not result.ok else "",
            "state": _state(snap, host.broker_id),
            "moves": len(impact.leadership_moves), "loses_isr": len(impact.loses_isr_replica),
            "rf_not_above_min_isr": list(impact.rf_not_above_min_isr),
        }
        return Observation(data, summary=f"broker {host.broker_id}: {_lead_summary(data['state'])}"
                                         + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        from kafkaops.errors import SafetyRefusal

        d = obs.data
        if not d["ok"]:
            raise SafetyRefusal(d["message"], hint=d["hint"])
        notes = [f"{d['moves']} leader(s) will move off {d['broker']}",
                 f"{d['loses_isr']} partition(s) drop one replica from their ISR while it is down"]
        notes += d["warnings"]
        return Noop("gates pass (no offline, no under-min-ISR, no URP; stop keeps min ISR): " + "; ".join(notes))


class StopBroker(StepBase):
    """Stop the Kafka broker and wait until the cluster no longer has it registered."""

    def observe(self, ctx: RunContext) -> Observation:
        svc = env(ctx)
        host = target_host(ctx)
        snap = _snapshot(ctx, configs=True)
        if ctx.projected.get(broker_key(host.broker_id)) == STOPPED:
            active = False
        else:
            active = svc.run(host, svc.command(host, "kafka_status"), timeout=30, check=False).exit_code == 0
        impact = stop_impact(snap, host.broker_id)
        moves: dict[int, int] = {}
        for _p, new in impact.leadership_moves:
            if new is not None:
                moves[new] = moves.get(new, 0) + 1
        data = {"host": host.name, "broker": host.broker_id, "active": active, "state": _state(snap, host.broker_id),
                "command": svc.command(host, "kafka_stop"),
                "impact": {"moves": {str(k): v for k, v in sorted(moves.items())},
                           "loses_isr": [partition_name(p) for p in impact.loses_isr_replica],
                           "below_min_isr": [partition_name(p) for p in impact.below_min_isr],
                           "offline": [partition_name(p) for p in impact.goes_offline],
                           "is_controller": impact.is_controller}}
        return Observation(data, summary=f"broker {host.broker_id}: process {'active' if active else 'inactive'}, "
                                         f"{_lead_summary(data['state'])}" + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["active"] and not d["state"]["registered"]:
            return Noop(f"broker {d['broker']} is already stopped (process inactive, not registered)")
        # The last word before the stop, whatever the pre-flight said minutes ago: never take a partition
        # offline or below min ISR. There is no --force for this one.
        hurt = d["impact"]["offline"] + d["impact"]["below_min_isr"]
        if hurt:
            from kafkaops.errors import SafetyRefusal

            raise SafetyRefusal(f"stopping broker {d['broker']} now would take {len(hurt)} partition(s) offline or "
                                f"below min.insync.replicas: {names(hurt)}",
                                hint="wait until their ISR is complete again, then resume the run")
        moves = d["impact"]["moves"]
        impact = (f"{sum(moves.values())} leader(s) move: " + ", ".join(f"{n} to {b}" for b, n in moves.items())
                  if moves else "it leads nothing")
        impact += f"; {len(d['impact']['loses_isr'])} partition(s) lose a replica"
        if d["impact"]["loses_isr"]:
            impact += f" ({names(d['impact']['loses_isr'])})"
        if d["impact"]["is_controller"]:
            impact += "; it is the controller: a controller election follows"
        return Action(
            description=f"stop Kafka on {d['host']} and wait until broker {d['broker']} is unregistered",
            commands=(f"on {d['host']}: {d['command']}",
                      f"wait until /brokers/ids/{d['broker']} is gone (timeout {self.params['timeout']:.0f}s)"),
            impact=impact,
            rollback=f"start it again: on {d['host']}: kafka_start template",
            idempotent=True,
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(obs.data["broker"]): STOPPED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        if host.broker_id not in _registered(ctx):
            # Only a source that saw the broker before the stop can confirm the stop: an empty
            # /brokers/ids (a wrong chroot) would "confirm" a stop it never saw.
            raise ConfigError(f"broker {host.broker_id} runs on {host.name} but the cluster does not list it as "
                              "registered: its stop could not be confirmed", hint="check the inventory's "
                              "zookeeper (address and chroot) and bootstrap_servers")
        svc.change(host, svc.command(host, "kafka_stop"), timeout=timeout)
        wait(ctx, lambda: _unregistered(ctx, host), what=f"broker {host.broker_id} unregistered", timeout=timeout)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if host.broker_id in _registered(ctx):
            raise CheckFailed(f"broker {host.broker_id} is still registered after its stop")


def _unregistered(ctx: RunContext, host: Host) -> tuple[bool, str]:
    registered = _registered(ctx)
    return host.broker_id not in registered, f"registered brokers {registered}"


class StartBroker(StepBase):
    """Start the Kafka broker and wait until it registers with the cluster."""

    def observe(self, ctx: RunContext) -> Observation:
        svc = env(ctx)
        host = target_host(ctx)
        registered = host.broker_id in _registered(ctx)
        return Observation({"host": host.name, "broker": host.broker_id, "registered": registered,
                            "command": svc.command(host, "kafka_start")},
                           summary=f"broker {host.broker_id} {'registered' if registered else 'not registered'}"
                                   + provenance(ctx, [broker_key(host.broker_id)]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["registered"]:
            return Noop(f"broker {d['broker']} is registered")
        return Action(description=f"start Kafka on {d['host']} and wait until broker {d['broker']} registers",
                      commands=(f"on {d['host']}: {d['command']}",))

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(obs.data["broker"]): STARTED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        svc.change(host, svc.command(host, "kafka_start"), timeout=timeout)
        wait(ctx, lambda: (host.broker_id in _registered(ctx), "registered?"),
             what=f"broker {host.broker_id} registered", timeout=timeout)


class _BrokerStateStep(StepBase):
    """Observes one broker's registration, leadership and ISR membership (for the waits below)."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        state = _state(_snapshot(ctx), host.broker_id)
        return Observation({"host": host.name, "broker": host.broker_id, "state": state},
                           summary=f"broker {host.broker_id}: {_lead_summary(state)}"
                                   + provenance(ctx, broker_keys(ctx)))


class VerifyNotLeader(_BrokerStateStep):
    """Wait until the stopped broker leads no partition and has left the ISRs."""

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        in_isr = d["state"]["hosted"] - len(d["state"]["out_of_isr"])
        if not d["state"]["leads"] and in_isr == 0:
            return Noop(f"broker {d['broker']} leads nothing and is in no ISR")
        return Action(
            description=f"wait until broker {d['broker']} leads nothing and has left every ISR"
                        f" (leads {len(d['state']['leads'])}, in {in_isr} ISRs)",
            commands=("AdminClient metadata: leaders and ISR of every partition, polled",),
            impact="read-only",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        def gone() -> tuple[bool, str]:
            s = _state(_snapshot(ctx), host.broker_id)
            in_isr = s["hosted"] - len(s["out_of_isr"])
            return not s["leads"] and in_isr == 0, f"leads {len(s['leads'])}, in {in_isr} ISRs"

        wait(ctx, gone, what=f"broker {host.broker_id} out of leadership and ISR",
             timeout=float(self.params["timeout"]))


class WaitInSync(_BrokerStateStep):
    """Wait until the broker is registered and back in the ISR of every partition it hosts."""

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["state"]["registered"] and not d["state"]["out_of_isr"]:
            return Noop(f"broker {d['broker']} is registered and in the ISR of all {d['state']['hosted']} partitions")
        return Action(
            description=f"wait until broker {d['broker']} is registered and back in all "
                        f"{d['state']['hosted']} ISRs (log recovery and catch-up; "
                        f"timeout {self.params['timeout']:.0f}s)",
            commands=("AdminClient metadata: ISR of the broker's partitions, polled",),
            impact="read-only",
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(obs.data["broker"]): IN_SYNC}

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        def in_sync() -> tuple[bool, str]:
            snap = _snapshot(ctx)
            if host.broker_id not in snap.brokers:
                return False, "not registered yet (starting, or recovering its logs)"
            missing = partitions_not_in_isr(snap, host.broker_id)
            hosted = sum(1 for p in snap.partitions if host.broker_id in p.replicas)
            return not missing, f"in sync in {hosted - len(missing)}/{hosted} partitions"

        wait(ctx, in_sync, what=f"broker {host.broker_id} back in every ISR", timeout=float(self.params["timeout"]),
             interval=0.5)


def _election_mode(step: StepBase, ctx: RunContext) -> str:
    """``off``; ``broker`` (this broker's partitions, after each host); ``deferred`` (at_end, not the last
    target yet); ``all`` (at_end on the last target: one election for the whole cluster)."""
    if not step.params["enabled"]:
        return "off"
    if not step.params["at_end"]:
        return "broker"
    return "all" if not ctx.targets or ctx.target == ctx.targets[-1] else "deferred"


class PreferredElection(StepBase):
    """Run a preferred-replica election for the partitions this broker should lead."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        snap = _snapshot(ctx)
        mode = _election_mode(self, ctx)
        broker = None if mode == "all" else host.broker_id
        preferred = [p for p in snap.partitions if broker is None or p.preferred_leader == broker]
        pending = [partition_name(p) for p in leaders_not_preferred(snap, broker)]
        whose = "the cluster's" if broker is None else f"broker {host.broker_id}'s"
        return Observation({"host": host.name, "broker": host.broker_id, "mode": mode,
                            "preferred": [[p.topic, p.partition] for p in preferred], "pending": pending},
                           summary=f"{len(preferred) - len(pending)} of {whose} {len(preferred)} partitions "
                                   "led by their preferred leader" + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["mode"] == "off":
            return Noop("preferred-replica election disabled (--no-election)")
        if d["mode"] == "deferred":
            return Noop("preferred-replica election deferred to the end of the roll (--election-at-end)")
        todo = [tp for tp in d["preferred"] if f"{tp[0]}-{tp[1]}" in d["pending"]]
        if not todo:
            return Noop(f"all {len(d['preferred'])} partitions already led by their preferred leader")
        listed = names([f"{t}-{p}" for t, p in todo])
        whose = "of the whole cluster" if d["mode"] == "all" else f"whose preferred leader is {d['broker']}"
        return Action(
            description=f"preferred-replica election for {len(todo)} partition(s) {whose}",
            commands=(f"AdminClient.elect_leaders(PREFERRED, [{listed}])",),
            impact=f"{len(todo)} leader(s) move back to their preferred replica",
            data={"partitions": todo},
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        if obs.data["mode"] == "all":
            return {CLUSTER_ELECTED: True}
        return {broker_key(obs.data["broker"]): ELECTED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        failed = svc.kafka.elect_preferred_leaders([(t, int(p)) for t, p in action.data["partitions"]])
        if failed:
            raise CheckFailed(f"preferred election failed for {names(sorted(failed))}: "
                              f"{next(iter(failed.values()))}")


class VerifyLeaders(StepBase):
    """Wait until the broker leads every partition whose preferred leader it is."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        mode = _election_mode(self, ctx)
        pending = [partition_name(p) for p in
                   leaders_not_preferred(_snapshot(ctx), None if mode == "all" else host.broker_id)]
        return Observation({"broker": host.broker_id, "pending": pending, "mode": mode},
                           summary=f"broker {host.broker_id}: {len(pending)} preferred partition(s) led elsewhere"
                                   + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["mode"] in ("off", "deferred"):
            return Noop("leadership check skipped with the election (" + ("--no-election)" if d["mode"] == "off"
                                                                         else "deferred to the end of the roll)"))
        if not d["pending"]:
            return Noop(f"broker {d['broker']} leads all of its preferred partitions")
        return Action(description=f"wait until broker {d['broker']} leads its preferred partitions"
                                  f" ({len(d['pending'])} pending)",
                      commands=("AdminClient metadata: leaders, polled",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        broker = None if _election_mode(self, ctx) == "all" else host.broker_id

        def led() -> tuple[bool, str]:
            pending = leaders_not_preferred(_snapshot(ctx), broker)
            return not pending, f"{len(pending)} pending"

        wait(ctx, led, what=f"broker {host.broker_id} leading its preferred partitions",
             timeout=float(self.params["timeout"]))


class WaitHealthy(StepBase):
    """Gate: the cluster is healthy (no URP, no offline, full ISR) for a stability window."""

    def observe(self, ctx: RunContext) -> Observation:
        summary = cluster_health(_snapshot(ctx, configs=True))
        return Observation({"urp": len(summary.under_replicated), "offline": len(summary.offline)},
                           summary=f"{len(summary.under_replicated)} URP, {len(summary.offline)} offline")

    def plan(self, obs: Observation) -> Action | Noop:
        grace = float(self.params["grace"])
        return Action(
            description=f"wait until the cluster has no URP and no offline partition for "
                        f"{self.params['stable_for']:.0f}s" + (f", then {grace:.0f}s of grace" if grace else ""),
            commands=("AdminClient metadata, polled",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:

        def healthy() -> tuple[bool, str]:
            s = cluster_health(_snapshot(ctx, configs=True))
            return s.healthy, f"{len(s.under_replicated)} URP, {len(s.offline)} offline"

        wait(ctx, healthy, what="cluster healthy", timeout=float(self.params["timeout"]),
             stable_for=float(self.params["stable_for"]))
        if float(self.params["grace"]):
            time.sleep(float(self.params["grace"]))


class RestoreBroker(StepBase):
    """Undo a stop: start the broker if it is down and wait until it is back in every ISR it belongs to."""

    def observe(self, ctx: RunContext) -> Observation:
        svc = env(ctx)
        host = target_host(ctx)
        state = _state(_snapshot(ctx), host.broker_id)
        return Observation({"host": host.name, "broker": host.broker_id, "state": state,
                            "command": svc.command(host, "kafka_start")},
                           summary=f"broker {host.broker_id}: {_lead_summary(state)}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["state"]["registered"] and not d["state"]["out_of_isr"]:
            return Noop(f"broker {d['broker']} is registered and in the ISR of all {d['state']['hosted']} partitions")
        start = () if d["state"]["registered"] else (f"on {d['host']}: {d['command']}",)
        return Action(
            description=("" if d["state"]["registered"] else f"start Kafka on {d['host']}, then ")
                        + f"wait until broker {d['broker']} is back in all {d['state']['hosted']} ISRs "
                        f"(timeout {self.params['timeout']:.0f}s)",
            commands=(*start, "AdminClient metadata: ISR of the broker's partitions, polled"),
            impact="the broker rejoins; it leads nothing until the closing election",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        if host.broker_id not in _registered(ctx):
            svc.change(host, svc.command(host, "kafka_start"), timeout=min(timeout, 300.0))

        def in_sync() -> tuple[bool, str]:
            snap = _snapshot(ctx)
            if host.broker_id not in snap.brokers:
                return False, "not registered yet (starting, or recovering its logs)"
            missing = partitions_not_in_isr(snap, host.broker_id)
            return not missing, f"{len(missing)} partition(s) without it in their ISR"

        wait(ctx, in_sync, what=f"broker {host.broker_id} back in every ISR", timeout=timeout, interval=1.0)


class ClusterWhole(StepBase):
    """After a rollback: every inventory broker registered, no URP, every partition led by its preferred
    replica (one election for the partitions that are not)."""

    def observe(self, ctx: RunContext) -> Observation:
        svc = env(ctx)
        snap = _snapshot(ctx, configs=True)
        health = cluster_health(snap)
        expected = sorted(h.broker_id for h in svc.cluster.hosts)
        pending = [[p.topic, p.partition] for p in leaders_not_preferred(snap, None)]
        missing = [b for b in expected if b not in snap.brokers]
        data = {"missing": missing, "urp": len(health.under_replicated), "offline": len(health.offline),
                "pending": pending}
        return Observation(data, summary=f"{len(missing)} broker(s) missing, {data['urp']} URP, "
                                         f"{len(pending)} partition(s) off their preferred leader")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["missing"] and not d["urp"] and not d["offline"] and not d["pending"]:
            return Noop("the cluster is whole: every broker registered, no URP, preferred leaders")
        return Action(
            description="wait until every broker is registered and no partition is under-replicated, then a "
                        "preferred-replica election for the partitions off their preferred leader",
            commands=("AdminClient metadata, polled", "AdminClient.elect_leaders(PREFERRED, ...)"),
            impact="leaders move back to their preferred replicas",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = env(ctx)
        expected = sorted(h.broker_id for h in svc.cluster.hosts)

        def whole() -> tuple[bool, str]:
            snap = _snapshot(ctx, configs=True)
            health = cluster_health(snap)
            missing = [b for b in expected if b not in snap.brokers]
            return (not missing and health.healthy,
                    f"missing {missing or 'none'}, {len(health.under_replicated)} URP, {len(health.offline)} offline")

        wait(ctx, whole, what="every broker registered and in sync", timeout=float(self.params["timeout"]),
             interval=1.0)
        pending = [(p.topic, p.partition) for p in leaders_not_preferred(_snapshot(ctx), None)]
        if pending:
            failed = svc.kafka.elect_preferred_leaders(pending)
            if failed:
                raise CheckFailed(f"preferred election failed for {names(sorted(failed))}: "
                                  f"{next(iter(failed.values()))}")

    def verify(self, ctx: RunContext) -> None:
        pending = leaders_not_preferred(_snapshot(ctx), None)
        if pending:
            raise CheckFailed(f"{len(pending)} partition(s) still off their preferred leader")


TIMEOUT = Param("timeout", "duration", default=300.0, help="give up after this long")
register_step("kafka.preflight", Preflight, [
    Param("allow_urp", "bool", default=False, help="proceed despite URP elsewhere (--force)"),
    Param("isr_headroom", "int", default=0, help="require this many ISR replicas above min.insync.replicas"),
])
register_step("kafka.stop_broker", StopBroker, [TIMEOUT], compensate=Compensation(
    "kafka.restore_broker", params={}, note="start the broker again and wait until it is back in every ISR",
    verify="kafka.cluster_whole"))
register_step("kafka.restore_broker", RestoreBroker, [Param("timeout", "duration", default=1800.0, max=86400)])
register_step("kafka.cluster_whole", ClusterWhole, [Param("timeout", "duration", default=1800.0, max=86400)])
register_step("kafka.start_broker", StartBroker, [TIMEOUT])
register_step("kafka.verify_not_leader", VerifyNotLeader, [Param("timeout", "duration", default=120.0)])
register_step("kafka.wait_in_sync", WaitInSync, [Param("timeout", "duration", default=1800.0)])
ELECTION = [Param("enabled", "bool", default=True, help="false skips the election (--no-election)"),
            Param("at_end", "bool", default=False,
                  help="one election for every partition after the last target (--election-at-end)")]
register_step("kafka.preferred_election", PreferredElection, ELECTION,
              irreversible="nothing to undo: the election only puts leaders back on their preferred replicas")
register_step("kafka.verify_leaders", VerifyLeaders, [Param("timeout", "duration", default=120.0), *ELECTION])
register_step("kafka.wait_healthy", WaitHealthy, [
    Param("stable_for", "duration", default=5.0, help="how long the cluster must stay healthy"),
    Param("timeout", "duration", default=1800.0),
    Param("grace", "duration", default=0.0, help="extra fixed pause after the gate (--grace)"),
])
