"""KRaft steps: the controller quorum gate, stop, start, the wait for a caught-up voter; a retired broker unregistered.

These run on controller-only nodes (inventory ``controllers:``) of ``rolling-restart --role
controllers|all``; a broker target leaves them out (their role is ``controller``), as a controller node
leaves out the broker steps. Every answer about the quorum comes from the quorum itself
(``kafka-metadata-quorum`` through :class:`~kafkaops.systems.quorum.MetadataQuorum`), judged by
:mod:`kafkaops.policy.quorum`: a controller process that exited is not yet a quorum that has a new leader, and
one that started is not yet a voter that has caught up.

``kraft.unregister_broker`` runs on a broker target, the last change of ``broker-decommission``: a stopped
KRaft broker stays registered (fenced) until ``kafka-cluster unregister --id N`` (the inventory's
``kafka_cluster`` template); on ZooKeeper mode it is a no-op, the broker's ephemeral ``/brokers/ids/N`` having
gone with its session.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.model import BROKER, CONTROLLER, Host
from kafkaops.policy.quorum import QuorumView, judge, leader_clock, majority, restart_refusals
from kafkaops.queries.brokers import registrations, unregister_command
from kafkaops.stepkit.common import environment, first_line, target_host, wait
from kafkaops.stepkit.projection import STARTED, STOPPED, broker_key, controller_key, provenance


def _started_fact(host: Host) -> str:
    return f"controller_started_at/{host.name}"


def _since(ctx: RunContext, host: Host) -> int:
    """The leader's clock when this run started the controller (-1: it did not)."""
    return int(ctx.facts.get(_started_fact(host)) or -1)


def _view(ctx: RunContext, step: StepBase) -> QuorumView:
    return judge(environment(ctx).quorum().replication(), max_lag=int(step.params["max_lag"]),
                 max_behind_ms=int(float(step.params["max_behind"]) * 1000))


def _active(ctx: RunContext, host: Host) -> bool:
    env = environment(ctx)
    return env.run(host, env.command(host, "kafka_status"), timeout=30, check=False).exit_code == 0


def _process(ctx: RunContext, template: str) -> Observation:
    """Whether the controller's process runs (projected stopped after this run's stop, while planning),
    and the command ``template`` the step would send."""
    host = target_host(ctx)
    active = False if ctx.projected.get(controller_key(host.broker_id)) == STOPPED else _active(ctx, host)
    return Observation({"host": host.name, "node": host.broker_id, "active": active,
                        "command": environment(ctx).command(host, template)},
                       summary=f"controller {host.broker_id}: process {'active' if active else 'inactive'}"
                               + provenance(ctx, [controller_key(host.broker_id)]))


def _refusal(node: int, host: str, refusals: list[str]) -> SafetyRefusal:
    return SafetyRefusal(f"restarting controller {node} ({host}) now could cost the metadata quorum its majority: "
                         f"{'; '.join(refusals)}",
                         hint="wait until every voter has caught up (kafkaops status shows the quorum), then "
                              "resume the run")


class QuorumGate(StepBase):
    """Refuse unless the quorum has a leader, every other voter is caught up, and a majority stays caught up."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        view = _view(ctx, self)
        refusals = restart_refusals(view, host.broker_id)
        data = {"host": host.name, "node": host.broker_id, "leader": view.leader_id, "refusals": refusals,
                "voters": len(view.voters), "caught_up": list(view.caught_up), "summary": view.summary(),
                "asked": environment(ctx).quorum().asked}
        return Observation(data, summary=f"quorum: {view.summary()} (asked {data['asked']})")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["refusals"]:
            raise _refusal(d["node"], d["host"], d["refusals"])
        left = len([n for n in d["caught_up"] if n != d["node"]])
        role = "the active controller: one leader election follows" if d["leader"] == d["node"] else "a follower"
        return Noop(f"quorum gate passes: {d['summary']}; without {d['node']} ({role}), {left} of {d['voters']} "
                    f"voters stay caught up (a majority is {majority(d['voters'])})")


class StopController(StepBase):
    """Stop a KRaft controller node and wait until its process is gone and the quorum has a leader.

    Destructive: right before the stop the runner calls :meth:`precondition`, the quorum gate's own
    check asked of the quorum again. ``kraft.quorum_gate`` earlier in the runbook shows the quorum in the
    plan and refuses before the host is touched at all; it cannot vouch for the moment of the stop — a
    resumed run does not re-run a gate it journaled as verified, and a voter may have fallen behind since.
    """

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Refuse unless the quorum, asked now, has a leader, every other voter caught up and a majority
        caught up without this node (:func:`kafkaops.policy.quorum.restart_refusals`)."""
        host = target_host(ctx)
        view = _view(ctx, self)
        refusals = restart_refusals(view, host.broker_id)
        if refusals:
            raise _refusal(host.broker_id, host.name, refusals)
        return f"quorum: {view.summary()} (asked {environment(ctx).quorum().asked})"

    def observe(self, ctx: RunContext) -> Observation:
        return _process(ctx, "kafka_stop")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["active"]:
            return Noop(f"controller {d['node']} is already stopped (process inactive)")
        return Action(
            description=f"stop Kafka (controller {d['node']}) on {d['host']}; wait until it has exited and the "
                        "quorum has a leader",
            commands=(f"on {d['host']}: {d['command']}",
                      "kafka-metadata-quorum describe --replication, polled, until a leader other than "
                      f"{d['node']} leads"),
            impact="the quorum runs on the other voters; if it led, they elect a new leader",
            rollback=f"start it again: on {d['host']}: kafka_start template",
            idempotent=True,
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {controller_key(obs.data["node"]): STOPPED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_stop"), timeout=timeout)
        wait(ctx, lambda: (not _active(ctx, host), "still shutting down"),
             what=f"controller {host.broker_id} stopped", timeout=timeout)

        def led_by_another() -> tuple[bool, str]:
            view = judge(env.quorum().replication())
            return view.leader_id not in (None, host.broker_id), view.summary()

        wait(ctx, led_by_another, what="a quorum leader among the other voters", timeout=timeout, interval=0.5)


class StartController(StepBase):
    """Start a KRaft controller node and wait until its process runs."""

    def observe(self, ctx: RunContext) -> Observation:
        return _process(ctx, "kafka_start")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["active"]:
            return Noop(f"controller {d['node']} is running")
        return Action(description=f"start Kafka (controller {d['node']}) on {d['host']}",
                      commands=(f"on {d['host']}: {d['command']}",))

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {controller_key(obs.data["node"]): STARTED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        # The quorum leader's clock before the start: the wait after it counts only a catch-up later than
        # this (the leader keeps reporting the voter's last catch-up from before its stop for a while).
        started = leader_clock(env.quorum().replication())
        ctx.facts.set(_started_fact(host), started if started is not None else -1)
        env.change(host, env.command(host, "kafka_start"), timeout=timeout)
        wait(ctx, lambda: (_active(ctx, host), "starting"), what=f"controller {host.broker_id} running",
             timeout=timeout)


class WaitVoterCaughtUp(StepBase):
    """Wait until the restarted controller is a caught-up voter again and the quorum has a leader."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        if ctx.projected.get(controller_key(host.broker_id)) in (STOPPED, STARTED):
            return Observation({"host": host.name, "node": host.broker_id, "ok": False,
                                "summary": "restarted by this run"},
                               summary=f"controller {host.broker_id}"
                               + provenance(ctx, [controller_key(host.broker_id)]))
        view = _view(ctx, self)
        voter = view.voter(host.broker_id)
        since = _since(ctx, host)
        ok = view.leader_id is not None and voter is not None and voter.caught_up_since(since)
        return Observation({"host": host.name, "node": host.broker_id, "ok": ok, "summary": view.summary()},
                           summary=f"quorum: {view.summary()}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["ok"]:
            return Noop(f"controller {d['node']} is a caught-up voter ({d['summary']})")
        return Action(
            description=f"wait until controller {d['node']} is a caught-up voter again (lag <= "
                        f"{self.params['max_lag']} records, caught up within {self.params['max_behind']:.0f}s of "
                        f"the leader; timeout {self.params['timeout']:.0f}s)",
            commands=("kafka-metadata-quorum describe --replication, polled",),
            impact="read-only",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)
        since = _since(ctx, host)

        def caught_up() -> tuple[bool, str]:
            view = _view(ctx, self)
            voter = view.voter(host.broker_id)
            ok = view.leader_id is not None and voter is not None and voter.caught_up_since(since)
            return ok, view.summary()

        wait(ctx, caught_up, what=f"controller {host.broker_id} a caught-up voter",
             timeout=float(self.params["timeout"]), interval=0.5)


# --- a decommissioned broker's registration ------------------------------------------------------------------


class UnregisterBroker(StepBase):
    """On KRaft, unregister the stopped broker (``kafka-cluster unregister --id N``): a stopped KRaft broker stays
    registered, fenced, until then. ZooKeeper mode: nothing to do — its registration, an ephemeral
    ``/brokers/ids/N``, went with its session when it stopped."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        if not env.cluster.kraft:
            return Observation({"host": host.name, "node": host.broker_id, "kraft": False},
                               summary="ZooKeeper mode: registrations are ephemeral znodes")
        key = broker_key(host.broker_id)
        states, via = registrations(environment(ctx), host)
        state = "fenced" if ctx.projected.get(key) == STOPPED else states.get(host.broker_id)
        command = unregister_command(env, via, host.broker_id)[0]
        return Observation({"host": host.name, "node": host.broker_id, "kraft": True, "state": state,
                            "via": via.name, "command": command},
                           summary=f"broker {host.broker_id}: {state or 'not registered'}"
                                   + provenance(ctx, [key]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["kraft"]:
            return Noop("ZooKeeper mode: the stopped broker left /brokers/ids by itself (its session ended); "
                        "nothing to unregister")
        if d["state"] is None:
            return Noop(f"broker {d['node']} is not registered")
        if d["state"] != "fenced":
            raise SafetyRefusal(f"broker {d['node']} ({d['host']}) is {d['state']}: a running broker is not "
                                "unregistered", hint="stop it first (kafka.stop_broker), then resume the run")
        return Action(description=f"unregister broker {d['node']} (fenced: stopped for good) from the cluster's "
                                  "metadata",
                      commands=(f"on {d['via']}: {d['command']}",),
                      impact="the broker's registration leaves the metadata; its id can be registered again by a "
                             "new broker",
                      rollback="none needed: starting the broker again registers it anew")

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Asked now: the broker is fenced or gone (a broker started again since its stop is not unregistered
        under it)."""
        host = target_host(ctx)
        key = broker_key(host.broker_id)
        if ctx.projected.get(key) == STOPPED:
            return f"broker {host.broker_id} stopped by an earlier step" + provenance(ctx, [key])
        state = registrations(environment(ctx), host)[0].get(host.broker_id)
        if state not in (None, "fenced"):
            raise SafetyRefusal(f"broker {host.broker_id} ({host.name}) is {state} again: not unregistered",
                                hint="stop it first, then resume the run")
        return f"broker {host.broker_id}: {state or 'not registered'}"

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        _, via = registrations(env, host)
        command, stdin = unregister_command(env, via, host.broker_id)
        result = env.change(via, command, timeout=120, check=False, stdin=stdin)
        if result.exit_code != 0 and "is not currently registered" not in result.stdout + result.stderr:
            raise CheckFailed(f"kafka-cluster unregister --id {host.broker_id} failed (exit {result.exit_code}): "
                              f"{first_line(result.stderr or result.stdout)[:200]}")

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        env = environment(ctx)
        if not env.cluster.kraft:  # ZooKeeper mode: the stopped broker's ephemeral znode is gone by itself
            if host.broker_id in env.registered_brokers():
                raise CheckFailed(f"broker {host.broker_id} is still registered in ZooKeeper after its stop")
            return
        state = registrations(env, host)[0].get(host.broker_id)
        if state is not None:
            raise CheckFailed(f"broker {host.broker_id} is still registered ({state}) after kafka-cluster unregister")


TIMEOUT = Param("timeout", "duration", default=300.0, help="give up after this long")
CAUGHT_UP = [
    Param("max_lag", "int", default=1000, min=0, max=10_000_000,
          help="records a voter may be behind the leader's log end and still count as caught up"),
    Param("max_behind", "duration", default=5.0, min=0.5, max=600,
          help="how long ago (on the leader's clock) a voter may last have been caught up"),
]
register_step("kraft.quorum_gate", QuorumGate, CAUGHT_UP, roles=CONTROLLER, effect="read-only")
register_step("kraft.stop_controller", StopController, [TIMEOUT, *CAUGHT_UP], roles=CONTROLLER,
              compensate=Compensation("kraft.start_controller", params={}, note="start the controller again",
                                      verify="kafka.cluster_whole"), effect="disruptive")
register_step("kraft.start_controller", StartController, [TIMEOUT], roles=CONTROLLER)
register_step("kraft.unregister_broker", UnregisterBroker, [], roles=BROKER, effect="disruptive")
register_step("kraft.wait_voter_caught_up", WaitVoterCaughtUp, [Param("timeout", "duration", default=600.0),
                                                                 *CAUGHT_UP], roles=CONTROLLER, effect="read-only")
