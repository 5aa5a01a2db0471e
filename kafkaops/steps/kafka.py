"""Broker steps: pre-flight gate, stop/start, leadership and ISR checks, preferred election, health gate.

Every "is it done?" question is answered from the cluster's side — registrations, leaders, ISR — not
from a command's exit code: a stop command that returns early (Yelp #148) or a broker that starts but
has not caught up must not let the run proceed. Waits are gates on observed state, never fixed sleeps.

Why one module of ~950 lines: it holds every ``kafka.*`` step kind (twelve of them), and a kind lives in
the module named after its prefix (a runbook, plan or journal says ``kafka.stop_broker``; a maintainer
opens this file, tests/unit/test_step_modules.py). The decisions are not here — the gates are
:mod:`kafkaops.policy`, the unit watch :mod:`kafkaops.stepkit.broker_unit` — each kind is its observe, plan,
apply and verify. The gates that judge leadership (``kafka.preflight``, ``kafka.verify_leaders``) may change
it: another broker's preferred leadership, lost through nothing the run did, is elected back through one
helper (:func:`restore_preferred_leadership`) under one rule
(:func:`kafkaops.policy.leaders.leadership_to_restore`).
"""

from __future__ import annotations

import time
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, ConfigError, SafetyRefusal, WaitTimeout
from kafkaops.model import BROKER, ClusterSnapshot, Host
from kafkaops.policy.availability import broker_dc_map, cluster_health
from kafkaops.policy.leaders import (
    DEFAULT_MAX_LEADER_IMBALANCE,
    BrokerLeadership,
    LeadershipRestore,
    LeaderSpread,
    election_candidates,
    leader_spread,
    leaders_not_preferred,
    leadership_to_restore,
)
from kafkaops.policy.preflight import PreflightResult, preflight
from kafkaops.policy.snapshot_scan import partition_name
from kafkaops.policy.stop_impact import cross_dc_impact, partitions_not_in_isr, stop_impact
from kafkaops.queries.brokers import cluster_snapshot, registered_brokers, stop_keeps_min_isr
from kafkaops.stepkit.broker_unit import UnitWatch
from kafkaops.stepkit.common import environment, names, target_host, wait
from kafkaops.stepkit.projection import (
    CLUSTER_ELECTED,
    ELECTED,
    IN_SYNC,
    STARTED,
    STOPPED,
    broker_key,
    broker_keys,
    provenance,
)

#: The first pause of a metadata wait while the state is moving (adaptive polling, see
#: :func:`kafkaops.engine.wait.wait_until`): a metadata request costs milliseconds, a late poll costs the
#: whole roll up to an interval each time a broker leaves, returns or an election lands.
FAST_POLL = 0.1

#: The longest pause of the wait for a returning broker's ISRs (was 0.5 s): the roll waits on nothing else
#: then, so the time between its last ISR and the poll that sees it is the roll's (issue 47); a broker
#: recovering its logs for minutes is still asked only four times a second.
IN_SYNC_POLL = 0.25


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


def _earlier_brokers(ctx: RunContext) -> list[int]:
    """Brokers of the targets this run handled before the current one (a roll goes one at a time)."""
    if ctx.target not in ctx.targets:
        return []
    env = environment(ctx)
    return [env.host(t).broker_id for t in ctx.targets[:ctx.targets.index(ctx.target)]]


def _spread_text(spread: LeaderSpread) -> str:
    return f"leaders now/preferred per broker: {spread.line()} (max {spread.max_imbalance}% off)"


class _SpreadObservation(Observation):
    """An observation whose per-broker leader figures are shown but not fingerprinted: a saved plan goes
    stale on what decides (the gate's verdict, this broker's own leadership in ``state``), not on every
    leader count of the cluster, which would also push the decisive differences out of the stale message."""

    def fingerprint_data(self) -> Any:
        out = {k: v for k, v in self.data.items() if k not in ("spread", "leaders", "restore")}
        restore = self.data.get("restore")
        if restore is not None:  # who would be elected back, and whether now; not the partition lists
            out["restore"] = {"brokers": restore["brokers"], "now": bool(restore["partitions"])}
        return out


#: How long a gate that ran a preferred election waits for the new leaders to show in the metadata before
#: it judges. Kafka answers the election once the controller has made it; the metadata reaches the broker
#: the AdminClient asks within a second or two. Past this, the gate judges what it sees (and refuses).
RESTORE_SETTLE = 60.0


def _inventory_brokers(ctx: RunContext) -> list[int]:
    """The brokers the inventory says the cluster has: all of them registered is part of "whole"."""
    return sorted(h.broker_id for h in environment(ctx).cluster.hosts)


def restore_preferred_leadership(ctx: RunContext, restore: LeadershipRestore) -> dict[str, str]:
    """Run the preferred-replica election :func:`~kafkaops.policy.leaders.leadership_to_restore` decided,
    for brokers off their preferred leadership through nothing this run did: the one place a gate changes
    leadership.

    Shown (``ctx.progress``) and journaled (event ``leadership_restored``: brokers, partitions, the leaders
    before) *before* Kafka is asked — intent first, so a journal read after a crash says an election may
    have run — then asked through the adapter's ``elect_preferred_leaders`` (a ``@write``: refused in a
    dry-run).

    Returns:
        Kafka's refusals, ``{"topic-N": error}``; empty when every partition was elected (or already led
        by its preferred replica).
    """
    todo = [partition_name(p) for p in restore.partitions]
    ctx.progress(f"  {ctx.target}: {restore.describe()}, not through this run: preferred-replica election for "
                 f"{len(todo)} partition(s) ({names(todo)})")
    ctx.record("leadership_restored", brokers=restore.brokers(), partitions=todo,
               leaders_before=restore.spread.line())
    return environment(ctx).kafka.elect_preferred_leaders([(p.topic, p.partition) for p in restore.partitions])


def restore_note(when: str) -> str:
    """What a leadership gate's plan says about the election it may run when its turn comes (a dry-run
    plans it against a cluster led as assigned: the skew it may repair is not there yet)."""
    return f"others' lost leaderships elected back {when} if all are in sync (journaled)"


class Preflight(StepBase):
    """Refuse when the cluster is unhealthy or skewed, or stopping this broker would drop a partition below min ISR.

    The leader-spread gate is the seed runbook's "brokers distributed uniformly among the partition
    Leaders" before the stop, measured per broker against its own preferred partitions (see
    :func:`kafkaops.policy.leaders.leader_spread`). Brokers rolled earlier in the same run are not judged: with
    ``--election-at-end`` or ``--no-election`` they lead nothing by this run's design.

    Another broker past the threshold is given its preferred leadership back before the gate judges, under
    the rule :func:`~kafkaops.policy.leaders.leadership_to_restore` holds for every gate that judges
    leadership (issue 41): only when every broker is registered and every partition fully in sync, one
    preferred-replica election for the partitions it is preferred leader of and does not lead, journaled
    (``leadership_restored``) and shown; then the whole gate is judged again on a fresh snapshot. A broker
    cut off from ZooKeeper for a few seconds between two hosts comes back leading nothing; without this
    the next host's pre-flight, and every resume, refused until someone elected by hand. The target is
    never elected here (its stop follows; its own election after the restart gives it back), nor are the
    brokers rolled earlier. When a broker is missing or a partition lags, nothing is elected and the gate
    refuses as before, naming the skew and why it did not elect.
    """

    def _judge(self, ctx: RunContext) -> tuple[ClusterSnapshot, PreflightResult, LeadershipRestore]:
        """The gates' verdict and the election the leadership rule allows, on one fresh snapshot."""
        host = target_host(ctx)
        snap = cluster_snapshot(ctx, configs=True)
        exempt = _earlier_brokers(ctx)
        limit = int(self.params["max_leader_imbalance"])
        result = preflight(snap, host.broker_id, allow_urp=bool(self.params["allow_urp"]),
                           isr_headroom=int(self.params["isr_headroom"]),
                           max_leader_imbalance=limit, leader_exempt=exempt)
        restore = leadership_to_restore(snap, exempt=[host.broker_id, *exempt], max_imbalance=limit,
                                        expected=_inventory_brokers(ctx))
        return snap, result, restore

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        snap, result, restore = self._judge(ctx)
        impact = result.impact
        assert result.spread is not None
        data = {
            "broker": host.broker_id, "host": host.name, "ok": result.ok,
            "violations": [v.to_dict() for v in result.violations], "warnings": list(result.warnings),
            "message": result.message() if not result.ok else "", "hint": result.hint() if not result.ok else "",
            "state": _state(snap, host.broker_id),
            "moves": len(impact.leadership_moves), "loses_isr": len(impact.loses_isr_replica),
            "rf_not_above_min_isr": list(impact.rf_not_above_min_isr),
            "spread": result.spread.to_dict(), "leaders": _spread_text(result.spread),
            "restore": restore.to_dict(),
        }
        return _SpreadObservation(data, summary=f"broker {host.broker_id}: {_lead_summary(data['state'])}"
                                                + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        restore = d.get("restore") or {}
        codes = {v["code"] for v in d["violations"]}
        if not d["ok"] and codes == {"leader_imbalance"} and restore.get("partitions"):
            todo = [f"{t}-{p}" for t, p in restore["partitions"]]
            return Action(
                description=f"preferred-replica election for {len(todo)} partition(s) whose preferred leader "
                            f"(broker(s) {', '.join(map(str, restore['brokers']))}) is registered and in sync but "
                            "does not lead, through nothing this run did; then the pre-flight's gates judged again",
                commands=(f"AdminClient.elect_leaders(PREFERRED, [{names(todo)}])",
                          "AdminClient metadata: leaders, polled until they are back; the gates judged again"),
                impact=f"{len(todo)} leader(s) move back to their preferred replica ({'; '.join(restore['off'])}); "
                       f"{d['leaders']}",
                data={"partitions": restore["partitions"]},
            )
        if not d["ok"]:
            blocked = restore.get("blocked") if "leader_imbalance" in codes else ""
            raise SafetyRefusal(d["message"] + (f" (no preferred election: {blocked})" if blocked else ""),
                                hint=d["hint"])
        notes = [f"{d['moves']} leader(s) will move off {d['broker']}",
                 f"{d['loses_isr']} partition(s) drop one replica from their ISR while it is down",
                 d["leaders"]]
        notes += d["warnings"]
        return Noop("gates pass (no offline, no under-min-ISR, no URP; stop keeps min ISR; leaders spread as "
                    "assigned): " + "; ".join(notes) + "; " + restore_note("first"))

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(b): ELECTED for b in obs.data["restore"]["brokers"]}

    def apply(self, ctx: RunContext, action: Action) -> None:
        _, _, restore = self._judge(ctx)
        failed = restore_preferred_leadership(ctx, restore) if restore.elect else {}
        if not failed and restore.elect:
            def back() -> tuple[bool, str]:
                again = self._judge(ctx)[2]
                return not again.needed, again.describe() or _spread_text(again.spread)

            try:
                wait(ctx, back, what="the restored brokers leading their preferred partitions",
                     timeout=RESTORE_SETTLE, fast=FAST_POLL)
            except WaitTimeout:
                pass  # judged below, with the numbers
        _, result, after = self._judge(ctx)
        if not result.ok:
            refused = (f"; Kafka refused the preferred election for {names(sorted(failed))}: "
                       f"{next(iter(failed.values()))}") if failed else ""
            raise SafetyRefusal(result.message() + refused, hint=result.hint())
        ctx.progress(f"  {ctx.target}: pre-flight gates pass after the election; {_spread_text(after.spread)}")


class StopBroker(StepBase):
    """Stop the Kafka broker and wait until the cluster no longer has it registered."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        snap = cluster_snapshot(ctx, configs=True)
        state = _state(snap, host.broker_id)
        # The host is asked only about a broker the cluster does not list: a registered one is stopped
        # whatever its process says (a crashed one still registered is stopped and waited out just the
        # same), and asking costs an SSH command per broker in the plan and again in the run.
        asked = not state["registered"] and ctx.projected.get(broker_key(host.broker_id)) != STOPPED
        active = state["registered"] or (
            asked and env.run(host, env.command(host, "kafka_status"), timeout=30, check=False).exit_code == 0)
        impact = stop_impact(snap, host.broker_id)
        moves: dict[int, int] = {}
        for _p, new in impact.leadership_moves:
            if new is not None:
                moves[new] = moves.get(new, 0) + 1
        data: dict[str, Any] = {
                "host": host.name, "broker": host.broker_id, "active": active, "state": state,
                "command": env.command(host, "kafka_stop"), "kraft": env.cluster.kraft,
                "impact": {"moves": {str(k): v for k, v in sorted(moves.items())},
                           "loses_isr": [partition_name(p) for p in impact.loses_isr_replica],
                           "below_min_isr": [partition_name(p) for p in impact.below_min_isr],
                           "offline": [partition_name(p) for p in impact.goes_offline],
                           "is_controller": impact.is_controller}}
        cross = cross_dc_impact(snap, host.broker_id, broker_dc_map(env.cluster))
        if cross is not None:
            data["impact"]["cross_dc"] = cross.describe() or "no leader leaves the DC; min ISR holds in each DC"
        process = f"process {'active' if active else 'inactive'}, " if asked or not active else ""
        return Observation(data, summary=f"broker {host.broker_id}: {process}{_lead_summary(state)}"
                                         + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["active"] and not d["state"]["registered"]:
            return Noop(f"broker {d['broker']} is already stopped (process inactive, not registered)")
        moves = d["impact"]["moves"]
        impact = (f"{sum(moves.values())} leader(s) move: " + ", ".join(f"{n} to {b}" for b, n in moves.items())
                  if moves else "it leads nothing")
        impact += f"; {len(d['impact']['loses_isr'])} partition(s) lose a replica"
        if d["impact"]["loses_isr"]:
            impact += f" ({names(d['impact']['loses_isr'])})"
        if d["impact"]["is_controller"]:
            impact += "; it is the controller: a controller election follows"
        if d["impact"].get("cross_dc"):
            impact += f"; across DCs: {d['impact']['cross_dc']}"
        return Action(
            description=f"stop Kafka on {d['host']} and wait until broker {d['broker']} is "
                        + ("fenced" if d.get("kraft") else "unregistered"),
            # KRaft has no /brokers/ids: a stopped broker is fenced by the controller and leaves the metadata.
            commands=(f"on {d['host']}: {d['command']}",
                      (f"wait until broker {d['broker']} is fenced (gone from the cluster's metadata)" if d.get("kraft")
                       else f"wait until /brokers/ids/{d['broker']} is gone")
                      + f" (timeout {self.params['timeout']:.0f}s)"),
            impact=impact,
            rollback=f"start it again: on {d['host']}: kafka_start template",
            idempotent=True,
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(obs.data["broker"]): STOPPED}

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The last word before the stop, whatever the pre-flight said minutes ago, on a snapshot taken
        now: never take a partition offline or below min ISR. There is no --force for this one."""
        broker = target_host(ctx).broker_id
        return stop_keeps_min_isr(ctx, broker, f"stopping broker {broker}")


    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        facts = ctx.facts
        sent = f"kafka_stop_sent/{host.name}"
        if host.broker_id not in registered_brokers(ctx):
            if facts.get(sent) is not None:
                # Resumed mid-stop: this run sent the stop and the broker has already left the cluster; its
                # process is still shutting down. Wait for it to exit, never stop it a second time.
                def exited() -> tuple[bool, str]:
                    active = env.run(host, env.command(host, "kafka_status"), timeout=30, check=False).exit_code == 0
                    return not active, "still shutting down" if active else "stopped"

                wait(ctx, exited, what=f"Kafka on {host.name} stopped (the stop was sent before the resume)",
                     timeout=timeout)
                return
            # Only a source that saw the broker before the stop can confirm the stop: an empty
            # /brokers/ids (a wrong chroot) would "confirm" a stop it never saw.
            raise ConfigError(f"broker {host.broker_id} runs on {host.name} but the cluster does not list it as "
                              "registered: its stop could not be confirmed", hint="check the inventory's "
                              "zookeeper (address and chroot) and bootstrap_servers")
        facts.set(sent, time.time())  # before the command: a resumed run knows the stop may be under way
        env.change(host, env.command(host, "kafka_stop"), timeout=timeout)
        wait(ctx, lambda: _unregistered(ctx, host), what=f"broker {host.broker_id} unregistered", timeout=timeout,
             fast=FAST_POLL)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if host.broker_id in registered_brokers(ctx):
            raise CheckFailed(f"broker {host.broker_id} is still registered after its stop")


def _unregistered(ctx: RunContext, host: Host) -> tuple[bool, str]:
    registered = registered_brokers(ctx)
    return host.broker_id not in registered, f"registered brokers {registered}"


class StartBroker(StepBase):
    """Start the Kafka broker and wait until it registers with the cluster."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        registered = host.broker_id in registered_brokers(ctx)
        return Observation({"host": host.name, "broker": host.broker_id, "registered": registered,
                            "command": env.command(host, "kafka_start")},
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
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_start"), timeout=timeout)
        wait(ctx, lambda: (host.broker_id in registered_brokers(ctx), "registered?"),
             what=f"broker {host.broker_id} registered", timeout=timeout, fast=FAST_POLL)


class _BrokerStateStep(StepBase):
    """Observes one broker's registration, leadership and ISR membership (for the waits below)."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        state = _state(cluster_snapshot(ctx), host.broker_id)
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
            s = _state(cluster_snapshot(ctx), host.broker_id)
            in_isr = s["hosted"] - len(s["out_of_isr"])
            return not s["leads"] and in_isr == 0, f"leads {len(s['leads'])}, in {in_isr} ISRs"

        wait(ctx, gone, what=f"broker {host.broker_id} out of leadership and ISR",
             timeout=float(self.params["timeout"]), fast=FAST_POLL)


class VerifyLeadsNothing(_BrokerStateStep):
    """Wait until a running broker leads no partition (``broker demote``): its replicas stay in sync, so a
    maintenance done by hand on it moves no leader and fails no producer."""

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["state"]["leads"]:
            return Noop(f"broker {d['broker']} leads nothing")
        return Action(description=f"wait until broker {d['broker']} leads nothing (leads {len(d['state']['leads'])})",
                      commands=("AdminClient metadata: the leader of every partition, polled",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        def off() -> tuple[bool, str]:
            leads = _state(cluster_snapshot(ctx), host.broker_id)["leads"]
            return not leads, f"leads {len(leads)}" + (f" ({names(leads)})" if leads else "")

        wait(ctx, off, what=f"broker {host.broker_id} out of leadership", timeout=float(self.params["timeout"]),
             fast=FAST_POLL)


class VerifyEmpty(_BrokerStateStep):
    """A broker about to be stopped for good holds nothing: no replica, no leadership, no reassignment in
    flight to or from it. Checked from the cluster's side after the moves, so a decommission never stops a
    broker that still holds the only copy of anything (an earlier step's bug, or someone else's reassignment)."""

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["state"]["hosted"] and not d["state"]["leads"]:
            return Noop(f"broker {d['broker']} holds no replica and leads nothing")
        return Action(description=f"check broker {d['broker']} holds no replica (holds {d['state']['hosted']} now: "
                                  "the moves before empty it)",
                      commands=("AdminClient metadata: every partition's replicas; kafka-reassign-partitions "
                                "--list",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        self.verify(ctx)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        state = _state(cluster_snapshot(ctx), host.broker_id)
        moving = [f"{t}-{p}" for (t, p), r in environment(ctx).reassigner().list().items()
                  if host.broker_id in (*r.replicas, *r.adding, *r.removing)]
        if state["hosted"] or state["leads"] or moving:
            raise CheckFailed(f"broker {host.broker_id} is not empty: holds {state['hosted']} replica(s), leads "
                              f"{len(state['leads'])}, {len(moving)} reassignment(s) in flight with it"
                              + (f" ({names(moving)})" if moving else ""),
                              hint="resume the run once they are done; it stops nothing that holds data")


class WaitInSync(_BrokerStateStep):
    """Wait until the broker is registered and back in the ISR of every partition it hosts.

    While it is not registered, its host is asked whether its unit runs (:class:`UnitWatch`): a broker
    still recovering its logs is waited for, with Kafka's own recovery count shown; one whose unit failed
    (a broken configuration, a disk it cannot read) stops the run at once, naming the unit state and its
    last log lines, instead of at the wait's timeout half an hour later.
    """

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
        unit = UnitWatch(ctx, host)

        def in_sync() -> tuple[bool, str]:
            snap = cluster_snapshot(ctx)
            if host.broker_id not in snap.brokers:
                return False, f"not registered yet ({unit.check()})"
            missing = partitions_not_in_isr(snap, host.broker_id)
            hosted = sum(1 for p in snap.partitions if host.broker_id in p.replicas)
            return not missing, f"in sync in {hosted - len(missing)}/{hosted} partitions"

        wait(ctx, in_sync, what=f"broker {host.broker_id} back in every ISR", timeout=float(self.params["timeout"]),
             interval=IN_SYNC_POLL, fast=FAST_POLL)


def _election_mode(step: StepBase, ctx: RunContext) -> str:
    """Which election this step runs for the current target.

    ``off`` (--no-election); ``broker`` (after each host, the partitions this broker is preferred leader
    of: the default scope); ``cluster`` (after each host, every partition: ``--election-scope cluster``,
    the seed's ``kafka preferred-replica-election``); ``deferred`` (``--election-at-end``, not the last
    target yet); ``all`` (``--election-at-end`` on the last target: one election for the whole cluster).
    """
    if not step.params["enabled"]:
        return "off"
    if step.params["at_end"]:
        return "all" if not ctx.targets or ctx.target == ctx.targets[-1] else "deferred"
    return "cluster" if step.params.get("scope", "broker") == "cluster" else "broker"


_WHOLE = ("cluster", "all")  # modes that elect every partition of the cluster


def _skipped(mode: str, ctx: RunContext) -> str:
    """Why no election runs now, and until when the host stays without its leaders."""
    if mode == "off":
        return "--no-election: until an election is run by hand"
    last = ctx.targets[-1] if ctx.targets else "the last target"
    return f"--election-at-end: until the election after {last}"


def _leaderless(d: Any) -> str:
    """``kafka1002 is repooled while leading nothing (0 of the 12 partitions it is preferred leader of)``."""
    leading = "nothing" if not d["leads"] else f"only {d['leads']} partition(s)"
    return (f"{d['host']} is repooled while leading {leading} ({d['preferred_led']} of the {d['preferred']} "
            f"partitions it is preferred leader of; the others stay led by other brokers, {d['until']})")


def _leadership(ctx: RunContext, snap: ClusterSnapshot, broker: int, mode: str) -> dict[str, Any]:
    """The target's leadership now, for the plain statement of a skipped election."""
    spread = {b.broker_id: b for b in leader_spread(snap).brokers}
    me = spread.get(broker)
    return {"leads": me.leaders if me else 0, "preferred": me.preferred if me else 0,
            "preferred_led": me.preferred_led if me else 0,
            "until": _skipped(mode, ctx) if mode in ("off", "deferred") else ""}


class PreferredElection(StepBase):
    """Run a preferred-replica election for the partitions this broker should lead, or for the whole cluster.

    Scope ``broker`` (the default) elects the partitions this broker is preferred leader of; scope
    ``cluster`` and the closing election of ``--election-at-end`` elect every partition.

    Why ``broker`` is the default, where the seed runs a cluster-wide ``kafka preferred-replica-election``:
    a reboot of one host should move only the leaders that host gave away. A cluster-wide election also
    moves partitions that are off their preferred leader for reasons this run knows nothing of (a broker
    someone drained on purpose, a reassignment in progress), each move a round of NOT_LEADER errors and
    metadata refreshes for their clients. The pre-flight already refused a skewed cluster, so after a
    ``broker`` election the cluster is led as it was found, this host included; ``cluster`` is there for
    the seed's behaviour and for repairing a skew the pre-flight was told to accept.

    A cluster-wide election asks only for partitions whose preferred replica is registered and in the
    ISR (Kafka refuses the others); the plan names those it leaves.
    """

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        snap = cluster_snapshot(ctx)
        mode = _election_mode(self, ctx)
        broker = None if mode in _WHOLE else host.broker_id
        electable, blocked = election_candidates(snap, broker)
        total = len(snap.partitions) if broker is None else \
            sum(1 for p in snap.partitions if p.preferred_leader == broker)
        data: dict[str, Any] = {
            "host": host.name, "broker": host.broker_id, "mode": mode, "total": total,
            "todo": [[p.topic, p.partition] for p in electable], "blocked": [partition_name(p) for p in blocked],
            **_leadership(ctx, snap, host.broker_id, mode),
        }
        if mode == "cluster":  # who leads its preferred partitions once it ran (the projection of later steps)
            data["in_sync"] = [b for b in snap.brokers if not partitions_not_in_isr(snap, b)]
        whose = "the cluster's" if broker is None else f"broker {host.broker_id}'s"
        pending = len(electable) + len(blocked)
        return Observation(data, summary=f"{total - pending} of {whose} {total} partitions "
                                         "led by their preferred leader" + provenance(ctx, broker_keys(ctx)))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["mode"] == "off":
            return Noop("preferred-replica election disabled (--no-election): " + _leaderless(d))
        if d["mode"] == "deferred":
            return Noop("preferred-replica election deferred to the end of the roll (--election-at-end): "
                        + _leaderless(d))
        todo = d["todo"]
        blocked = d.get("blocked") or []
        left = (f"; {len(blocked)} partition(s) whose preferred replica is not in their ISR stay as they are: "
                f"{names(blocked)}") if blocked else ""
        if not todo:
            return Noop(f"all {d['total'] - len(blocked)} electable partitions already led by their preferred "
                        "leader" + left)
        listed = names([f"{t}-{p}" for t, p in todo])
        whose = {"all": "of the whole cluster (--election-at-end)",
                 "cluster": "of the whole cluster (--election-scope cluster)"}.get(
                     d["mode"], f"whose preferred leader is {d['broker']}")
        return Action(
            description=f"preferred-replica election for {len(todo)} partition(s) {whose}",
            commands=(f"AdminClient.elect_leaders(PREFERRED, [{listed}])",),
            impact=f"{len(todo)} leader(s) move back to their preferred replica" + left,
            data={"partitions": todo},
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        if obs.data["mode"] == "all":
            return {CLUSTER_ELECTED: True}
        if obs.data["mode"] == "cluster":
            # Not CLUSTER_ELECTED: that fact would also hand leadership to a host stopped and restarted
            # later in the roll, before its own election. Each broker in sync now is elected now.
            return {broker_key(b): ELECTED for b in obs.data["in_sync"]}
        return {broker_key(obs.data["broker"]): ELECTED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        failed = env.kafka.elect_preferred_leaders([(t, int(p)) for t, p in action.data["partitions"]])
        if failed:
            raise CheckFailed(f"preferred election failed for {names(sorted(failed))}: "
                              f"{next(iter(failed.values()))}")


class LeadershipNotRestored(CheckFailed):
    """Another broker is off its preferred leadership and this step could not restore it. Not retried:
    what it waits for (a broker back and in sync) is said in the message, with the command that goes on."""

    retryable = False


class VerifyLeaders(StepBase):
    """Wait until the broker leads its preferred partitions again and the leader spread is within bounds.

    The seed's "the host is again among the partition leaders", and every live broker within the allowed
    leader imbalance.

    A host's leadership is judged on that host: strict where an election can act — every partition of
    the election's scope whose preferred replica is in its ISR must be led by it. Another broker past
    ``max_leader_imbalance`` is not this host's to wait for: a broker that crashed and came back mid-roll
    leads nothing, through nothing this run did, and no wait here moves its leaders back. Once every
    broker is registered and the cluster in sync, one preferred-replica election for *its* preferred
    partitions — the seed's own ``kafka preferred-replica-election``, narrowed to what is off — restores
    it, journaled (``leadership_restored``) and shown, and the roll goes on. When that cannot be done (a
    broker still down or lagging when the step's time is up, Kafka refusing the election), the run stops
    naming the broker, why, and the one command that goes on once it holds (``kafkaops resume RUN``).
    """

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        mode = _election_mode(self, ctx)
        snap = cluster_snapshot(ctx)
        pending, spread = self._check(snap, host.broker_id, mode)
        data = {"broker": host.broker_id, "host": host.name, "mode": mode, "pending": pending,
                "over": [b.describe() for b in spread.over()],
                "others": [b.broker_id for b in spread.over(exempt=[host.broker_id])],
                "leaders": _spread_text(spread)}
        return Observation(data, summary=f"broker {host.broker_id}: {len(pending)} preferred partition(s) led "
                                         f"elsewhere; {_spread_text(spread)}" + provenance(ctx, broker_keys(ctx)))

    def _check(self, snap: ClusterSnapshot, broker: int, mode: str) -> tuple[list[str], LeaderSpread]:
        if mode in _WHOLE:
            electable, _ = election_candidates(snap, None)
            pending = [partition_name(p) for p in electable]
        else:
            pending = [partition_name(p) for p in leaders_not_preferred(snap, broker)]
        return pending, leader_spread(snap, int(self.params["max_leader_imbalance"]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["mode"] in ("off", "deferred"):
            return Noop("leadership check skipped with the election (" + ("--no-election" if d["mode"] == "off"
                        else "deferred to the end of the roll") + "): " + d.get("leaders", ""))
        over = d.get("over") or []
        if not d["pending"] and not over:
            done = ("every electable partition is led by its preferred leader" if d["mode"] in _WHOLE
                    else f"broker {d['broker']} leads all of its preferred partitions")
            return Noop(f"{done}; {d.get('leaders', '')}; {restore_note('then')}")
        what = ("every electable partition is led by its preferred leader" if d["mode"] in _WHOLE
                else f"broker {d['broker']} leads its preferred partitions")
        others = d.get("others") or []
        restore = (f"; then, broker(s) {', '.join(map(str, others))} being off their preferred leadership through "
                   "nothing this run did: once every broker is registered and in sync, a preferred-replica "
                   "election for their preferred partitions") if others else ""
        return Action(description=f"wait until {what} ({len(d['pending'])} pending) and every live broker is "
                                  f"within the leader imbalance" + (f" ({'; '.join(over)})" if over else "") + restore,
                      commands=("AdminClient metadata: leaders, polled",
                                *(("AdminClient.elect_leaders(PREFERRED, [the partitions those brokers are "
                                   "preferred leader of and do not lead])",) if others else ())),
                      impact="leaders move back to the brokers off their preferred leadership" if others
                      else "read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)
        mode = _election_mode(self, ctx)
        timeout = float(self.params["timeout"])
        deadline = time.monotonic() + timeout

        def led() -> tuple[bool, str]:
            pending, spread = self._check(cluster_snapshot(ctx), host.broker_id, mode)
            mine = [b for b in spread.over() if b.broker_id == host.broker_id]
            return not pending and not mine, f"{len(pending)} pending; {_spread_text(spread)}"

        wait(ctx, led, what=f"broker {host.broker_id} leading its preferred partitions", timeout=timeout,
             fast=FAST_POLL)
        self._restore_others(ctx, host, max(deadline - time.monotonic(), 30.0))

    def _restore_others(self, ctx: RunContext, host: Host, timeout: float) -> None:
        """Put the leaders of every other broker past the imbalance back, once the cluster can take them
        (:func:`~kafkaops.policy.leaders.leadership_to_restore`, the rule every leadership gate shares)."""
        limit = int(self.params["max_leader_imbalance"])
        expected = _inventory_brokers(ctx)
        name = {h.broker_id: h.name for h in environment(ctx).cluster.hosts}

        def now() -> LeadershipRestore:
            return leadership_to_restore(cluster_snapshot(ctx, configs=True), exempt=[host.broker_id],
                                         max_imbalance=limit, expected=expected)

        if not now().needed:
            return

        def stop(off: tuple[BrokerLeadership, ...], why: str, until: str) -> LeadershipNotRestored:
            who = "; ".join(f"{b.describe()} on {name.get(b.broker_id, '?')}" for b in off)
            left = f"; {host.name} stays depooled" if host.services else ""
            return LeadershipNotRestored(
                f"{who}, past the {limit}% allowed, through nothing this run did; {why}{left}",
                hint=f"once {until}, `kafkaops resume {ctx.run_id}` restores its leaders with a preferred "
                     "election and goes on")

        def ready() -> tuple[bool, str]:
            r = now()
            return not r.needed or r.whole, r.blocked() or "every broker registered and in sync"

        try:
            wait(ctx, ready, what="every broker registered and in sync, for a preferred election of the brokers "
                                  "off their preferred leadership", timeout=timeout, interval=1.0)
        except WaitTimeout as exc:
            raise stop(now().off, f"it cannot get its leaders back while the cluster is not whole ({exc.message})",
                       "every broker is registered and in every ISR") from exc
        restore = now()
        if not restore.elect:
            return
        failed = restore_preferred_leadership(ctx, restore)
        if failed:
            raise stop(restore.off, f"Kafka refused the preferred election for {names(sorted(failed))}: "
                                    f"{next(iter(failed.values()))}", "the cause Kafka names is fixed")

        def within() -> tuple[bool, str]:
            r = now()
            return not r.needed, _spread_text(r.spread)

        try:
            wait(ctx, within, what="every broker within its preferred leadership after the election",
                 timeout=timeout, fast=FAST_POLL)
        except WaitTimeout as exc:
            raise stop(now().off, "the preferred election did not move its leaders back (a preferred replica out "
                                  "of its ISR cannot lead)", "it is back in the ISR of its partitions") from exc


class WaitHealthy(StepBase):
    """Gate between two hosts of a roll: the cluster is healthy (no URP, no offline, full ISR) — for
    ``stable_for`` here, or (``stable_for: 0``, the rolling runbooks) only now, with the stability window
    counted by the run's stability watch, started here, and enforced by ``kafka.wait_stable`` right before the
    next broker stops: the next host's depool and SYN window run inside the window, not after it."""

    def observe(self, ctx: RunContext) -> Observation:
        summary = cluster_health(cluster_snapshot(ctx, configs=True))
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
            s = cluster_health(cluster_snapshot(ctx, configs=True))
            return s.healthy, f"{len(s.under_replicated)} URP, {len(s.offline)} offline"

        wait(ctx, healthy, what="cluster healthy", timeout=float(self.params["timeout"]),
             stable_for=float(self.params["stable_for"]), fast=FAST_POLL)
        environment(ctx).stability_watch()  # from here on, the next host's kafka.wait_stable counts healthy time
        if float(self.params["grace"]):
            time.sleep(float(self.params["grace"]))


class WaitStable(StepBase):
    """Before a roll stops its next broker: the cluster has been healthy without a break for ``stable_for``.

    The window is counted by the run's stability watch (:mod:`kafkaops.systems.stability_watch`) from the gate
    after the previous host, so it overlaps this host's pre-flight, depool and zero-SYN window instead of
    adding to them; those touch only the pool, never Kafka, and "at most one host depooled" still holds
    (the previous host is repooled before its gate). The broker stop still waits for both. A resumed run
    has no watch yet: it waits the whole window here. The first host of a roll has no previous host (the
    pre-flight just found the cluster healthy): no wait.
    """

    def observe(self, ctx: RunContext) -> Observation:
        first = not ctx.targets or ctx.target == ctx.targets[0]
        batch = tuple(getattr(ctx, "batch", ()) or ())
        lead = batch[0] if len(batch) > 1 and ctx.target != batch[0] else ""
        return Observation({"first": first, "stable_for": float(self.params["stable_for"]), "batch_lead": lead},
                           summary="first host of the roll" if first else "after the previous host's gate")

    def plan(self, obs: Observation) -> Action | Noop:
        if obs.data.get("batch_lead"):  # the batch stops together: its first host waited for all of it
            return Noop(f"in {obs.data['batch_lead']}'s batch: the window was waited for once, before the batch")
        if obs.data["first"] or not obs.data["stable_for"]:
            return Noop("first host of the roll: the pre-flight found the cluster healthy"
                        if obs.data["first"] else "no stability window (--stable-for 0)")
        return Action(
            description=f"wait until the cluster has been healthy for {obs.data['stable_for']:.0f}s without a "
                        "break, counted since the previous host's gate (this host's depool and SYN window ran "
                        "inside it)",
            commands=("AdminClient metadata, sampled every 0.5 s in the background",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        watch = environment(ctx).stability_watch()
        need = float(self.params["stable_for"])

        def stable() -> tuple[bool, str]:
            held = watch.stable_for()
            why = watch.reason()
            return held >= need, f"healthy for {held:.1f}s of {need:.0f}s" + (f"; now: {why}" if why else "")

        wait(ctx, stable, what=f"cluster healthy for {need:.0f}s", timeout=float(self.params["timeout"]),
             interval=0.25)


class RestoreBroker(StepBase):
    """Undo a stop: start the broker if it is down and wait until it is back in every ISR it belongs to."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        state = _state(cluster_snapshot(ctx), host.broker_id)
        return Observation({"host": host.name, "broker": host.broker_id, "state": state,
                            "command": env.command(host, "kafka_start")},
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
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        if host.broker_id not in registered_brokers(ctx):
            env.change(host, env.command(host, "kafka_start"), timeout=min(timeout, 300.0))

        def in_sync() -> tuple[bool, str]:
            snap = cluster_snapshot(ctx)
            if host.broker_id not in snap.brokers:
                return False, "not registered yet (starting, or recovering its logs)"
            missing = partitions_not_in_isr(snap, host.broker_id)
            return not missing, f"{len(missing)} partition(s) without it in their ISR"

        wait(ctx, in_sync, what=f"broker {host.broker_id} back in every ISR", timeout=timeout, interval=1.0)


class ClusterWhole(StepBase):
    """After a rollback: every inventory broker registered, no URP, every partition led by its preferred
    replica (one election for the partitions that are not)."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        snap = cluster_snapshot(ctx, configs=True)
        health = cluster_health(snap)
        expected = sorted(h.broker_id for h in env.cluster.hosts)
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
        env = environment(ctx)
        expected = sorted(h.broker_id for h in env.cluster.hosts)

        def whole() -> tuple[bool, str]:
            snap = cluster_snapshot(ctx, configs=True)
            health = cluster_health(snap)
            missing = [b for b in expected if b not in snap.brokers]
            return (not missing and health.healthy,
                    f"missing {missing or 'none'}, {len(health.under_replicated)} URP, {len(health.offline)} offline")

        wait(ctx, whole, what="every broker registered and in sync", timeout=float(self.params["timeout"]),
             interval=1.0)
        pending = [(p.topic, p.partition) for p in leaders_not_preferred(cluster_snapshot(ctx), None)]
        if pending:
            failed = env.kafka.elect_preferred_leaders(pending)
            if failed:
                raise CheckFailed(f"preferred election failed for {names(sorted(failed))}: "
                                  f"{next(iter(failed.values()))}")

    def verify(self, ctx: RunContext) -> None:
        pending = leaders_not_preferred(cluster_snapshot(ctx), None)
        if pending:
            raise CheckFailed(f"{len(pending)} partition(s) still off their preferred leader")


TIMEOUT = Param("timeout", "duration", default=300.0, help="give up after this long")
MAX_LEADER_IMBALANCE = Param(
    "max_leader_imbalance", "int", default=DEFAULT_MAX_LEADER_IMBALANCE, min=0, max=100,
    help="refuse / fail when a live broker does not lead more than this percentage of the partitions it is "
         "preferred leader of (Kafka's leader.imbalance.per.broker.percentage; 100 accepts any spread)")
register_step("kafka.preflight", Preflight, [
    Param("allow_urp", "bool", default=False, help="proceed despite URP elsewhere (--force)"),
    Param("isr_headroom", "int", default=0, help="require this many ISR replicas above min.insync.replicas"),
    MAX_LEADER_IMBALANCE,
], roles=BROKER)
register_step("kafka.stop_broker", StopBroker, [TIMEOUT], compensate=Compensation(
    "kafka.restore_broker", params={}, note="start the broker again and wait until it is back in every ISR",
    verify="kafka.cluster_whole"), roles=BROKER, effect="disruptive")
register_step("kafka.restore_broker", RestoreBroker, [Param("timeout", "duration", default=1800.0, max=86400)],
              roles=BROKER)
# It elects the partitions left off their preferred leader after a rollback: a change, not a check.
register_step("kafka.cluster_whole", ClusterWhole, [Param("timeout", "duration", default=1800.0, max=86400)])
register_step("kafka.start_broker", StartBroker, [TIMEOUT], roles=BROKER)
register_step("kafka.verify_not_leader", VerifyNotLeader, [Param("timeout", "duration", default=120.0)], roles=BROKER,
              effect="read-only")
register_step("kafka.verify_leads_nothing", VerifyLeadsNothing, [Param("timeout", "duration", default=120.0)],
              roles=BROKER, effect="read-only")
register_step("kafka.verify_empty", VerifyEmpty, [], roles=BROKER, effect="read-only")
register_step("kafka.wait_in_sync", WaitInSync, [Param("timeout", "duration", default=1800.0)], roles=BROKER,
              effect="read-only")
ELECTION_SCOPES = ("broker", "cluster")
ELECTION = [Param("enabled", "bool", default=True, help="false skips the election (--no-election)"),
            Param("at_end", "bool", default=False,
                  help="one election for every partition after the last target (--election-at-end)"),
            Param("scope", "str", default="broker",
                  help="after each target, elect the partitions it is preferred leader of (broker) or every "
                       "partition (cluster, --election-scope cluster)")]


def _check_scope(params: Any) -> str | None:
    scope = params.get("scope", "broker")
    return None if scope in ELECTION_SCOPES else f"scope {scope!r} is not one of {', '.join(ELECTION_SCOPES)}"


register_step("kafka.preferred_election", PreferredElection, ELECTION, check=_check_scope,
              irreversible="nothing to undo: the election only puts leaders back on their preferred replicas",
              roles=BROKER)
register_step("kafka.verify_leaders", VerifyLeaders, [Param("timeout", "duration", default=120.0), *ELECTION,
                                                      MAX_LEADER_IMBALANCE], check=_check_scope, roles=BROKER)
register_step("kafka.wait_healthy", WaitHealthy, [
    Param("stable_for", "duration", default=5.0, help="how long the cluster must stay healthy"),
    Param("timeout", "duration", default=1800.0),
    Param("grace", "duration", default=0.0, help="extra fixed pause after the gate (--grace)"),
], effect="read-only")
register_step("kafka.wait_stable", WaitStable, [
    Param("stable_for", "duration", default=5.0, min=0, max=3600,
          help="how long the cluster must have been healthy without a break before this broker stops"),
    Param("timeout", "duration", default=1800.0),
], effect="read-only")
