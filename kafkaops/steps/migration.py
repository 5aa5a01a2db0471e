"""The ZooKeeper → KRaft migration's steps: where the cluster stands, each node's configuration phase,
the controllers' storage and start, and the wait for the phase a stage ends in (issue 33).

Kafka's migration guide (KIP-866) changes the cluster by changing each node's configuration and
restarting it; the state it reaches is spread over ZooKeeper (``/controller``, ``/migration``), the KRaft
quorum and every node's ``server.properties``. These steps read all of it (:func:`migration_view`) and let
:mod:`kafkaops.policy.migration` judge the phase, so that a stage resumed after a crash — or run after a
step done by hand — starts from what the cluster *is*, never from what a journal believes.

Writing a node's configuration is the inventory's business (``kafka_configure {phase}``: in production
what configuration management writes for the phase; on the lab ``hostctl kafka-config``): kafkaops says
*when*, one node at a time, with every gate of a rolling restart around the restart that makes it count.

Why one module of ~750 lines: it holds every ``migration.*`` step kind (nine of them), and a kind lives in
the module named after its prefix; where the migration stands — the view, the phase, the quorum's
leader — is :mod:`kafkaops.queries.migration`'s, the judgement :mod:`kafkaops.policy.migration`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.health.nodes import CLUSTER_ID, NODE_PHASES, configured_phase, kafka_running, storage_id
from kafkaops.model import CONTROLLER, Host
from kafkaops.policy.acl_migration import compare
from kafkaops.policy.availability import cluster_health
from kafkaops.policy.migration import (
    NO_RETURN,
    PHASES,
    REVERT_STAGES,
    MigrationView,
    Stage,
    can_revert,
    controller_fencing,
    revert_order_problem,
    stage,
    stage_reached,
)
from kafkaops.queries.brokers import cluster_snapshot
from kafkaops.queries.migration import judge_phase, migration_view
from kafkaops.stepkit.common import NodeSettingStep, environment, first_line, target_host, wait
from kafkaops.stepkit.projection import provenance

#: The Kafka release that bridges the migration: the only one whose brokers and controllers speak both.
BRIDGE = "3.9"



def _stopped_key(node: int) -> str:
    """The projection's key for a controller the revert stops (``migration.stop_controller``)."""
    return f"migration/controller/{node}/stopped"


def _running_now(ctx: RunContext, env: Environment, host: Host) -> bool:
    """The controller runs — unless an earlier step of the plan being made stops it."""
    return not ctx.projected.get(_stopped_key(host.broker_id)) and kafka_running(env, host)


def phases_line(current: str, this: Stage) -> str:
    """The migration's phases on one line for the plan: where the cluster is, what this run reaches, and
    the point of no return."""
    out = []
    for p in PHASES:
        mark = p
        if p == current:
            mark = f"[{p}: now]"
        elif p == this.end:
            mark = f"{p} (this run)"
        if p == NO_RETURN:
            mark = "| no way back from here | " + mark
        out.append(mark)
    return " -> ".join(out)


def revert_order(this: Stage, view: MigrationView, current: str) -> str | None:
    """For a revert stage the cluster is in a phase of, why Kafka's revert order forbids it now
    (:func:`~kafkaops.policy.migration.revert_order_problem`); None for a forward stage, or when it may run."""
    if this not in REVERT_STAGES or current not in this.start:
        return None
    return revert_order_problem(this, view)


def stage_refusal(this: Stage, current: str, order: str | None) -> SafetyRefusal | None:
    """Why stage ``this`` may not run — or go on — with the cluster in phase ``current`` (None: it may): the
    phase is not one the stage starts or resumes from, or (``order``, :func:`revert_order`) a revert stage
    is out of Kafka's order. The stage's gate asks it before the first change; each node's configuration
    write asks it again right before the write (:meth:`Configure.precondition`)."""
    if current not in this.start:
        later = PHASES.index(current) > PHASES.index(this.end)
        return SafetyRefusal(
            f"stage {this.name} runs from {' or '.join(this.start)}, but the cluster is in phase {current}",
            hint="`kafkaops migrate-to-kraft CLUSTER` runs the stage the cluster is ready for"
                 + ("" if later else " (an earlier stage is not finished)"))
    if order:
        return SafetyRefusal(f"revert stage {this.name} cannot run now: {order}",
                             hint="`kafkaops migrate-to-kraft CLUSTER --revert` runs the revert's next stage")
    return None


def run_stage(ctx: RunContext) -> Stage:
    """The migration stage this run is: the one its ``migration.phase_gate`` names (every stage's runbook
    starts with it). A step that changes the cluster for a stage judges the phase against it.

    Raises:
        SafetyRefusal: The run has no phase gate, so no stage to judge the phase against.
    """
    gate = next((s for s in ctx.steps if s.kind == "migration.phase_gate"), None)
    if gate is None:
        raise SafetyRefusal(f"{ctx.kind or 'this step'} on {ctx.target}: no migration.phase_gate in this run, so "
                            "no migration stage whose phases it may change the cluster in",
                            hint="run a migration stage's runbook (`kafkaops migrate-to-kraft CLUSTER`), or put "
                                 "migration.phase_gate {stage: ...} before this step")
    return stage(str(gate.params["stage"]))


# --- the gate ---------------------------------------------------------------------------------------------


#: How an operator gets a broker controller with a high enough epoch (what ``migration.release_zookeeper``
#: does itself, in one transaction, when it deletes the KRaft controller's ``/controller``).
FENCING_HINT = ("set ZooKeeper's /controller_epoch to the partition states' epoch, then delete /controller: the "
                "broker elected next holds one more (KAFKA-20488; `kafkaops docs migration`); then resume")


def _controller_fenced(env: Environment) -> str:
    """Why the broker controller cannot change partition state now ("" when it can), read from ZooKeeper:
    :func:`~kafkaops.policy.migration.controller_fencing`."""
    with env.zookeeper() as zk:
        if zk is None:
            return ""
        return controller_fencing(zk.controller_record(), zk.controller_epoch(),
                                  zk.highest_partition_controller_epoch())


class PhaseGate(StepBase):
    """Refuse unless the cluster is in a phase this stage starts (or resumes) from; the first stage also
    checks every broker runs the bridge release with its inter-broker protocol pinned to it."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        this = stage(str(self.params["stage"]))
        view = migration_view(env)
        current = judge_phase(view)
        data: dict[str, Any] = {"stage": this.name, "phase": current, "start": list(this.start), "end": this.end,
                                "no_return": this.no_return, "line": phases_line(current, this), "problems": [],
                                "revert": this in REVERT_STAGES, "order": None}
        if this.name == "controllers" and current == "zookeeper":
            data["problems"] = self._bridge_problems(env)
        if this.name == "revert-brokers-zk":
            fenced = _controller_fenced(env)
            data["problems"] = [fenced] if fenced else []
        data["order"] = revert_order(this, view, current)
        return Observation(data, summary=f"migration phase: {current}; {data['line']}")

    def _bridge_problems(self, env: Environment) -> list[str]:
        problems = []
        for h in env.cluster.hosts:
            version = first_line(env.run(h, env.command(h, "kafka_version"), timeout=60).stdout)
            if not version.startswith(BRIDGE + "."):
                problems.append(f"{h.name} runs Kafka {version[:20] or '(unknown)'}, not {BRIDGE}")
        ids = [h.broker_id for h in env.cluster.hosts]
        settings = env.kafka.broker_settings(ids, ["inter.broker.protocol.version"])
        for b in ids:
            ibp = (settings.get(b) or {}).get("inter.broker.protocol.version", "")
            if not ibp.startswith(BRIDGE):
                problems.append(f"broker {b}: inter.broker.protocol.version is {ibp or '(unknown)'}, not {BRIDGE}")
        return problems

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["problems"] and d["stage"] == "revert-brokers-zk":
            raise SafetyRefusal(f"no broker can roll back yet: {'; '.join(d['problems'])}",
                                hint=FENCING_HINT)
        if d["problems"]:
            raise SafetyRefusal(f"not ready to migrate: {'; '.join(d['problems'])}",
                                hint=f"upgrade every broker to Kafka {BRIDGE} with inter.broker.protocol.version="
                                     f"{BRIDGE} first (Kafka's upgrade notes), then run migrate-to-kraft again")
        refusal = stage_refusal(stage(d["stage"]), d["phase"], d.get("order"))
        if refusal is not None:
            raise refusal
        if d.get("revert"):
            return Noop(f"revert gate passes: phase {d['phase']}; this run: {d['stage']}, back towards ZooKeeper mode "
                        f"(Kafka's revert, `kafkaops docs migration`). Phases: {d['line']}")
        back = ("after this run there is NO way back to ZooKeeper (Kafka documents no revert once a controller "
                "left migration mode)" if d["no_return"] else
                "until the finalize stage, `kafkaops runs abort RUN --rollback` and Kafka's revert steps lead back "
                "to ZooKeeper")
        return Noop(f"migration gate passes: phase {d['phase']}; this run: {d['stage']} (to {d['end']}); {back}. "
                    f"Phases: {d['line']}")


class AclsMatch(StepBase):
    """Refuse the point of no return unless the ACLs the cluster serves from KRaft are the ones ZooKeeper holds,
    entry by entry (:mod:`kafkaops.policy.acl_migration`: why, and which two stores).

    Read where the finalize stage starts: every broker then runs in KRaft mode and answers DescribeAcls from the
    metadata log, while ZooKeeper still holds what the ZooKeeper-mode brokers enforced (the controllers' dual
    writes keep it current). Both read, per controller, each time."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        with env.zookeeper() as zk:
            held = zk.kafka_acls() if zk is not None else []
        served = env.kafka.acls()
        diff = compare(held, served or [])
        data = {"zookeeper": len(held), "kraft": None if served is None else len(served),
                "missing": [str(e) for e in diff.missing], "extra": [str(e) for e in diff.extra],
                "described": diff.describe()}
        kraft = "no authorizer" if served is None else f"{len(served)} ACL(s)"
        return Observation(data, summary=f"ACLs: ZooKeeper {len(held)}, KRaft {kraft}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["kraft"] is None and not d["zookeeper"]:
            return Noop("no authorizer and no ACL in ZooKeeper: no ACL to compare")
        if not d["kraft"] and d["zookeeper"]:
            # No authorizer answers SECURITY_DISABLED, or (Kafka 4.3 KRaft brokers on the lab) an empty list.
            raise SafetyRefusal(f"ZooKeeper holds {d['zookeeper']} ACL(s) but the KRaft brokers serve none (no "
                                "authorizer?): after the migration every client could do anything",
                                hint="configure the brokers' KRaft phase with authorizer.class.name=org.apache."
                                     "kafka.metadata.authorizer.StandardAuthorizer and the same super.users, roll "
                                     "them again (the brokers-kraft stage), then finalize")
        if d["missing"] or d["extra"]:
            raise SafetyRefusal(f"the ACLs in KRaft are not ZooKeeper's: {d['described']}",
                                hint="until the finalize stage ZooKeeper still holds the ACLs: compare with "
                                     "`kafka-acls --list` on a ZooKeeper-mode broker's view, fix the KRaft side "
                                     "(kafka-acls --add/--remove), then run migrate-to-kraft again")
        return Noop(f"the ACLs in KRaft are ZooKeeper's: {d['described']}")


# --- a node's configuration ---------------------------------------------------------------------------------


def _configured_key(host: str) -> str:
    """The projection's key for the phase ``migration.configure`` writes on ``host`` (a host name)."""
    return f"configured/{host}"


def projected_view(ctx: RunContext, env: Environment, view: MigrationView) -> tuple[MigrationView, list[str]]:
    """``view`` as the steps planned before this one leave it: the configuration phases this dry-run's earlier
    ``migration.configure`` steps write, in place of what the nodes say now (a controller not provisioned
    stays out: its configuration counts from its format); and the projection's keys used (none in a real
    run)."""
    used: list[str] = []

    def overlay(nodes: Sequence[Host], configs: Mapping[int, str]) -> dict[int, str]:
        out = dict(configs)
        for h in nodes:
            key = _configured_key(h.name)
            if key in ctx.projected and h.broker_id in out:
                out[h.broker_id] = str(ctx.projected[key])
                used.append(key)
        return out

    if not ctx.projected:
        return view, used
    cluster = env.cluster
    return dataclasses.replace(view, broker_configs=overlay(cluster.hosts, view.broker_configs),
                               controller_configs=overlay(cluster.controllers, view.controller_configs)), used


class Configure(NodeSettingStep):
    """Write the node's configuration for a migration phase (it takes effect at the node's next start).

    Disruptive: the node runs with it from its next start. Right before the write the phase is judged again
    (:meth:`precondition`), as the stage's gate judged it: a stage resumed days later, after the cluster moved
    on (a controller finalized by hand, a revert run from another admin host), must not write a phase that
    leaves the cluster in none."""

    param, template, what = "phase", "kafka_configure", "configured for"

    def read(self, env: Environment, host: Host) -> str:
        return configured_phase(env, host)

    def change(self, d: Mapping[str, Any]) -> Action:
        return Action(description=f"configure {d['host']} for {d['want']} (was {d['now']}); the start after it "
                                  "makes it count",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="a file on the host; nothing runs differently until Kafka restarts there",
                      rollback=f"configure it for {d['now']} again (kafka_configure) before the next start",
                      data={"was": d["now"]})

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {_configured_key(obs.data["host"]): self.params["phase"]}

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The cluster, read now as ``migration.phase_gate`` reads it, in a phase the run's stage configures
        nodes from (and, for a revert stage, the revert's order kept); in a dry-run with the phases the earlier
        configuration writes leave."""
        this = run_stage(ctx)
        env = environment(ctx)
        view, keys = projected_view(ctx, env, migration_view(env))
        current = judge_phase(view)
        refusal = stage_refusal(this, current, revert_order(this, view, current))
        if refusal is not None:
            raise SafetyRefusal(f"{ctx.target} not configured for {self.params['phase']}: {refusal.message}",
                                hint=refusal.hint)
        return (f"phase {current}{provenance(ctx, keys)}: stage {this.name} configures nodes from "
                f"{' or '.join(this.start)}")


# --- a controller's storage and first start ----------------------------------------------------------------


def _cluster_id(env: Environment) -> str:
    with env.zookeeper() as zk:
        found = zk.cluster_id() if zk is not None else None
    if not found or not CLUSTER_ID.match(found):
        raise CheckFailed(f"ZooKeeper's /cluster/id of {env.cluster.name} is {found!r}, not a Kafka cluster id")
    return found


def _foreign_storage(host: str, has: str | None, want: str) -> SafetyRefusal | None:
    """A storage formatted for another cluster than ``want`` is never reformatted: refused (None: it is not)."""
    if not has or has == want:
        return None
    return SafetyRefusal(f"{host}'s storage is formatted for cluster {has}, not this cluster's {want}",
                         hint="a controller of another cluster? check the inventory's controllers: (kafkaops "
                              "never reformats a node)")


class FormatStorage(StepBase):
    """Format the controller's storage with the cluster's own id (ZooKeeper's ``/cluster/id``): a quorum
    formatted with another id would be another cluster.

    Disruptive: right before the format both facts are read again (:meth:`precondition`), and the format uses
    the id the plan read and the precondition confirmed."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        want = _cluster_id(env)
        has = storage_id(env, host)
        return Observation({"host": host.name, "has": has, "want": want,
                            "command": env.command(host, "kafka_format", cluster_id=want)},
                           summary=f"{host.name}: storage " + (f"formatted for {has}" if has else "not formatted"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["has"] == d["want"]:
            return Noop(f"{d['host']}'s storage is formatted for cluster {d['want']}")
        refusal = _foreign_storage(d["host"], d["has"], d["want"])
        if refusal is not None:
            raise refusal
        return Action(description=f"format {d['host']}'s Kafka storage for cluster {d['want']} (ZooKeeper's "
                                  "/cluster/id)",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="the node's empty log directory; nothing else",
                      rollback="none needed: an unused formatted directory is removed with the node",
                      data={"cluster_id": d["want"]})

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Read again right before the format: ZooKeeper's ``/cluster/id`` is still the id the action formats
        with (the plan may be hours old; an inventory now pointing at another ensemble is another cluster), and
        the node's storage was not formatted since for another cluster."""
        env = environment(ctx)
        host = target_host(ctx)
        planned, now = str(action.data["cluster_id"]), _cluster_id(env)
        if now != planned:
            raise SafetyRefusal(f"ZooKeeper's /cluster/id is now {now}, not the {planned} this step was planned to "
                                f"format {host.name}'s storage with",
                                hint="check the inventory's zookeeper: of this cluster, then plan the stage again "
                                     "(`kafkaops migrate-to-kraft CLUSTER --dry-run`)")
        has = storage_id(env, host)
        refusal = _foreign_storage(host.name, has, now)
        if refusal is not None:
            raise refusal
        return (f"ZooKeeper's /cluster/id is {now}, as planned; {host.name}'s storage "
                + ("already formatted for it" if has else "not formatted"))

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        cluster_id = str(action.data["cluster_id"])  # the id the precondition confirmed ZooKeeper still holds
        env.change(host, env.command(host, "kafka_format", cluster_id=cluster_id), timeout=120)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        if storage_id(env, host) != _cluster_id(env):
            raise CheckFailed(f"{host.name}'s storage is not formatted for the cluster after kafka_format")


def _controller_process(ctx: RunContext, template: str) -> Observation:
    """Whether the target controller's Kafka process runs, and the command (``template``) that changes it."""
    env = environment(ctx)
    host = target_host(ctx)
    active = kafka_running(env, host)
    return Observation({"host": host.name, "node": host.broker_id, "active": active,
                        "command": env.command(host, template)},
                       summary=f"controller {host.broker_id}: process {'active' if active else 'inactive'}")


class StartNewController(StepBase):
    """Start a newly provisioned controller: its process only (one voter of three forms no quorum alone;
    ``migration.wait_phase`` after the last one waits for the quorum)."""

    def observe(self, ctx: RunContext) -> Observation:
        return _controller_process(ctx, "kafka_start")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["active"]:
            return Noop(f"controller {d['node']} is running")
        return Action(description=f"start Kafka (controller {d['node']}, migration mode) on {d['host']}",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="a new voter of the quorum; the brokers do not know it yet",
                      rollback=f"stop it: on {d['host']}: kafka_stop template")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_start"), timeout=timeout)
        wait(ctx, lambda: (kafka_running(env, host), "starting"), what=f"controller {host.broker_id} running",
             timeout=timeout)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if not kafka_running(environment(ctx), host):
            raise CheckFailed(f"controller {host.broker_id} is not running after its start")


# --- the revert: the quorum deprovisioned, ZooKeeper's controllership handed back -----------------------------


class StopController(StepBase):
    """Stop a controller for good (Kafka's revert deprovisions the whole quorum: no quorum gate, no restart).
    The second of three stopped leaves the cluster without a controller until ``migration.release_zookeeper``
    hands the controllership back to the brokers: the runbook does that right after the last stop.

    Disruptive: a stop for good is Kafka's revert only before the point of no return; right before it the
    phase is judged again (:meth:`precondition`)."""

    def observe(self, ctx: RunContext) -> Observation:
        return _controller_process(ctx, "kafka_stop")

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The migration not finalized, judged now from the cluster: once a controller runs without ZooKeeper
        (``finalizing``), ZooKeeper no longer receives the metadata and the quorum is the cluster's only
        copy of it — stopping a controller for good is then an outage with no way back, not a revert."""
        node = target_host(ctx).broker_id
        current = judge_phase(migration_view(environment(ctx)))
        if not can_revert(current):
            raise SafetyRefusal(f"no stop of controller {node} for good: the migration is {current} — a controller "
                                "already runs without ZooKeeper, which no longer receives the metadata, and Kafka "
                                "documents no way back",
                                hint="finish the migration (`kafkaops migrate-to-kraft CLUSTER`); end this run "
                                     "without --rollback (`kafkaops runs abort RUN --reason ...`)")
        return f"phase {current}: before the point of no return ({NO_RETURN}), Kafka's revert applies"

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["active"]:
            return Noop(f"controller {d['node']} is stopped")
        return Action(description=f"stop controller {d['node']} on {d['host']} for good (the revert)",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="one voter fewer; once a majority is stopped the cluster has no controller until "
                             "ZooKeeper's /controller is deleted (this runbook's next steps)",
                      rollback="none: the migration starts again from its first stage")

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {_stopped_key(obs.data["node"]): True}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_stop"), timeout=timeout)
        wait(ctx, lambda: (not kafka_running(env, host), "stopping"), what=f"controller {host.broker_id} stopped",
             timeout=timeout)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if kafka_running(environment(ctx), host):
            raise CheckFailed(f"controller {host.broker_id} still runs after its stop")


def _running_controllers(ctx: RunContext, env: Environment) -> list[int]:
    """The controllers whose process runs now (in a dry-run, but for those an earlier step stops)."""
    return [c.broker_id for c in env.cluster.controllers if _running_now(ctx, env, c)]


def _release_refusal(running: Sequence[int]) -> SafetyRefusal | None:
    """ZooKeeper's ``/controller`` is not released while a controller of the quorum runs (None: none does)."""
    if not running:
        return None
    return SafetyRefusal(f"controllers {', '.join(map(str, running))} still run: deleting /controller now would let "
                         "a KRaft controller and a broker both act as the controller",
                         hint="stop every controller first (this runbook's migration.stop_controller)")


class ReleaseZooKeeper(StepBase):
    """After the last controller's stop: delete ZooKeeper's ``/controller`` (a KRaft controller's) and
    ``/migration``, as Kafka's revert does with ``zookeeper-shell``. Until then no broker can be elected
    controller (the znode names a controller that is gone): the guide asks for it quickly, so it is the step
    right after the last stop. ``/migration`` goes too, so that a later migration starts afresh."""

    def _last(self, ctx: RunContext) -> bool:
        return not ctx.targets or ctx.target == ctx.targets[-1]

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Every controller of the quorum stopped, read now (each one's process; in a dry-run the stops
        planned before this step count): deleting ``/controller`` while a KRaft controller still runs would let
        it and the broker ZooKeeper elects both act as the cluster's controller."""
        env = environment(ctx)
        refusal = _release_refusal(_running_controllers(ctx, env))
        if refusal is not None:
            raise refusal
        nodes = [c.broker_id for c in env.cluster.controllers]
        return (f"every controller stopped ({', '.join(map(str, nodes))})"
                + provenance(ctx, [_stopped_key(n) for n in nodes]))

    def observe(self, ctx: RunContext) -> Observation:
        if not self._last(ctx):
            return Observation({"skip": True}, summary="after the last controller's stop")
        env = environment(ctx)
        with env.zookeeper() as zk:
            record = zk.controller_record() if zk is not None else None
            migration = zk.migration_record() if zk is not None else None
            view = MigrationView({}, controller_record=record, migration_record=migration)
            raised = zk.controller_epoch_raise(int((record or {})["kraftControllerEpoch"])) \
                if zk is not None and view.kraft_controls else None
        epochs = raised[:2] if raised else None
        left = (["/controller (KRaft controller " + str((record or {}).get("brokerid")) + ")"]
                if view.kraft_controls else []) + (["/migration"] if migration is not None else [])
        running = _running_controllers(ctx, env) if left else []
        return Observation({"skip": False, "left": left, "running": running, "zookeeper": env.cluster.zookeeper,
                            "epoch_raise": epochs},
                           summary="ZooKeeper holds " + (", ".join(left) or "nothing of the migration")
                                   + (f"; /controller_epoch {epochs[0]} is below the partition states' {epochs[1]}"
                                      if epochs else ""))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["skip"]:
            return Noop("after the last controller's stop: delete ZooKeeper's /controller and /migration")
        if not d["left"]:
            return Noop("ZooKeeper holds nothing of the migration: a broker can be (or is) the controller")
        refusal = _release_refusal(d["running"])
        if refusal is not None:
            raise refusal
        raise_ = d.get("epoch_raise")
        bump = (f"set /controller_epoch {raise_[1]} (from {raise_[0]}: the epoch the KRaft controller wrote the "
                "partition states with, KAFKA-20488) and " if raise_ else "")
        return Action(description=f"delete {' and '.join(d['left'])} in ZooKeeper: a broker is elected controller"
                                  + (f" at epoch {raise_[1] + 1}, above every partition state's" if raise_ else ""),
                      commands=(f"zookeeper {d['zookeeper']}: {bump}delete "
                                f"{' '.join(p.split()[0] for p in d['left'])} "
                                + ("(at the versions read, in one transaction)" if raise_
                                   else "(at the version read)"),),
                      impact="a controller election among the brokers (seconds); the migration's state in "
                             "ZooKeeper is gone, so a later migration starts from its first stage",
                      rollback="none: the KRaft controllers that wrote them are deprovisioned")

    def apply(self, ctx: RunContext, action: Action) -> None:
        with environment(ctx).zookeeper() as zk:
            if zk is not None:
                done = zk.delete_migration_state()
                ctx.progress(f"  ZooKeeper: {', '.join(done) or 'nothing of the migration left'}")

    def verify(self, ctx: RunContext) -> None:
        if not self._last(ctx):
            return
        with environment(ctx).zookeeper() as zk:
            if zk is None:
                return
            view = MigrationView({}, controller_record=zk.controller_record(), migration_record=zk.migration_record())
        if view.kraft_controls or view.migration_record is not None:
            raise CheckFailed("ZooKeeper still holds the migration's /controller or /migration after their deletion")


def _in_use(node: int) -> SafetyRefusal:
    """A running controller's storage is never removed."""
    return SafetyRefusal(f"controller {node} runs: its storage is in use",
                         hint="stop it first (migration.stop_controller)")


class Deprovision(StepBase):
    """Remove a stopped controller's storage (the inventory's ``kafka_deprovision``): Kafka's revert
    "deprovisions the KRaft controller quorum", and a later migration must format it afresh — a quorum that
    kept its log would start again from a copy of the metadata that is no longer the cluster's.

    Disruptive: right before the removal the controller's process is read again (:meth:`precondition`)."""

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The controller's process not running, read now (in a dry-run, stopped by an earlier step counts):
        its storage is removed only once nothing uses it — a controller started again since the plan would
        lose its log under it."""
        env = environment(ctx)
        host = target_host(ctx)
        if _running_now(ctx, env, host):
            raise _in_use(host.broker_id)
        return (f"controller {host.broker_id}: process not running"
                + provenance(ctx, [_stopped_key(host.broker_id)]))

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        has = storage_id(env, host)
        return Observation({"host": host.name, "node": host.broker_id, "has": has,
                            "active": bool(has) and _running_now(ctx, env, host),
                            "command": env.command(host, "kafka_deprovision")},
                           summary=f"{host.name}: storage " + (f"formatted for {has}" if has else "not formatted"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["has"]:
            return Noop(f"{d['host']} holds no Kafka storage (deprovisioned)")
        if d["active"]:
            raise _in_use(d["node"])
        return Action(description=f"deprovision {d['host']}: remove its KRaft storage (cluster {d['has']})",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="the controller's metadata log, a copy of ZooKeeper's; nothing the brokers use",
                      rollback="none: the next migration formats it again")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        env.change(host, env.command(host, "kafka_deprovision"), timeout=120)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        if storage_id(env, host) is not None:
            raise CheckFailed(f"{host.name}'s storage is still formatted after kafka_deprovision")


# --- the end of a stage -----------------------------------------------------------------------------------


def _unhealthy(ctx: RunContext) -> str:
    """Why the cluster is not whole ("" when it is): a partition offline or out of its full ISR."""
    s = cluster_health(cluster_snapshot(ctx, configs=True))
    return "" if s.healthy else f"{len(s.under_replicated)} URP, {len(s.offline)} offline"


def _revert_left(ctx: RunContext, env: Environment) -> str:
    """What the revert's controller stage still waits for once a broker holds ``/controller`` ("" for
    nothing): a controller that can change partition state, then every partition back in its full ISR.
    The KRaft quorum's last minutes shrank ISRs it could no longer commit; the broker controller restores
    them as followers catch up. The next stage rolls brokers, and its pre-flight rightly refuses to stop one
    while partitions sit under min ISR: the stage that caused the dip waits it out, not the operator."""
    return _controller_fenced(env) or _unhealthy(ctx)


class WaitPhase(StepBase):
    """After the stage's last node: wait until the cluster shows the phase the stage ends in (the quorum
    formed; the metadata copied and a KRaft controller in charge; every broker a KRaft broker; finalized;
    reverted to a broker controller with every partition back in its ISR)."""

    def _last(self, ctx: RunContext) -> bool:
        return not ctx.targets or ctx.target == ctx.targets[-1]

    def observe(self, ctx: RunContext) -> Observation:
        this = stage(str(self.params["stage"]))
        if not self._last(ctx):
            return Observation({"skip": True, "end": this.end},
                               summary=f"after the last target: the cluster in phase {this.end}")
        if len(ctx.projected):
            return Observation({"skip": False, "end": this.end, "now": None},
                               summary="the nodes before it change in this run")
        env = environment(ctx)
        view = migration_view(env)
        now = judge_phase(view)
        reached = stage_reached(this, view) and not (this.name == "revert-controllers" and _revert_left(ctx, env))
        return Observation({"skip": False, "end": this.end, "now": now, "reached": reached},
                           summary=f"migration phase: {now}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["skip"]:
            return Noop(f"after the last target: wait for phase {d['end']}")
        if d.get("reached"):
            return Noop(f"the cluster is in phase {d['end']}, where this stage leaves it")
        return Action(description=f"wait until the cluster is in phase {d['end']} (timeout "
                                  f"{self.params['timeout']:.0f}s)",
                      commands=("each node's kafka_configured, ZooKeeper's /controller and /migration, "
                                "kafka-metadata-quorum describe --replication; polled",),
                      impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        this = stage(str(self.params["stage"]))

        def reached() -> tuple[bool, str]:
            view = migration_view(env)
            left = _revert_left(ctx, env) if this.name == "revert-controllers" and stage_reached(this, view) else ""
            return stage_reached(this, view) and not left, _where(view) + (f"; {left}" if left else "")

        wait(ctx, reached, what=f"the cluster where stage {this.name} leaves it (phase {this.end})",
             timeout=float(self.params["timeout"]), interval=2.0)

    def verify(self, ctx: RunContext) -> None:
        if not self._last(ctx):
            return
        this = stage(str(self.params["stage"]))
        env = environment(ctx)
        view = migration_view(env)
        if not stage_reached(this, view):
            raise CheckFailed(f"the cluster is not where stage {this.name} leaves it: {_where(view)}")
        fenced = _controller_fenced(env) if this.name == "revert-controllers" else ""
        if fenced:
            raise CheckFailed(f"the cluster has no working controller: {fenced}", hint=FENCING_HINT)
        unhealthy = _unhealthy(ctx) if this.name == "revert-controllers" else ""
        if unhealthy:
            raise CheckFailed(f"the broker controller has not brought the cluster back whole: {unhealthy}")


def _where(view: MigrationView) -> str:
    """Where a migration stands, in one line for a wait's progress and a failed check."""
    brokers = ",".join(f"{b}={c}" for b, c in sorted(view.broker_configs.items()))
    record = view.controller_record or {}
    return (f"phase {judge_phase(view)}; brokers {brokers}; controllers provisioned "
            f"{len(view.controller_configs)}; /controller {record.get('brokerid', 'absent')}"
            + (" (KRaft)" if view.kraft_controls else "") + "; /migration "
            + ("present" if view.migration_record is not None else "absent"))


def _check_stage(params: Any) -> str | None:
    try:
        stage(str(params["stage"]))
    except ValueError as exc:
        return str(exc)
    return None


def _check_phase(params: Any) -> str | None:
    if params["phase"] not in NODE_PHASES:
        return f"phase {params['phase']!r} is not a node configuration phase ({', '.join(NODE_PHASES)})"
    return None


STAGE = Param("stage", "str", required=True, help="the migration stage: controllers, brokers-migration, "
                                                   "brokers-kraft, finalize; or a revert stage: revert-brokers-kraft, "
                                                   "revert-controllers, revert-brokers-zk")
def _check_gate(params: Any) -> str | None:
    """The stage known, and a broker stage's roll writing the stage's own configuration."""
    problem = _check_stage(params)
    if problem:
        return problem
    this, mode = stage(str(params["stage"])), params.get("mode")
    if mode and this.brokers is not None and mode != this.brokers:
        return f"stage {this.name} configures the brokers for {this.brokers}, not {mode}"
    return None


register_step("migration.phase_gate", PhaseGate, [
    STAGE, Param("mode", "str", default="", help="a broker stage: the configuration its roll writes (checked to be "
                                                 "the stage's)"),
], check=_check_gate, effect="read-only")
register_step("migration.acls_match", AclsMatch, [], effect="read-only")
register_step("migration.configure", Configure, [
    Param("phase", "str", required=True, help="the node's configuration phase: zk, migration or kraft"),
], check=_check_phase, effect="disruptive",
    irreversible="the node keeps the configuration written; Kafka's revert writes the earlier phase's")
register_step("migration.format", FormatStorage, [], roles=CONTROLLER, effect="disruptive",
              irreversible="a formatted storage stays formatted (unused until the node starts)")
register_step("migration.start_controller", StartNewController,
              [Param("timeout", "duration", default=300.0, help="give up after this long")], roles=CONTROLLER,
              irreversible="the controller keeps running; Kafka's revert stops it (`kafkaops docs migration`)")
register_step("migration.stop_controller", StopController,
              [Param("timeout", "duration", default=300.0, help="give up after this long")], roles=CONTROLLER,
              effect="disruptive",
              irreversible="a deprovisioned controller stays stopped; the migration starts again from its first stage")
register_step("migration.release_zookeeper", ReleaseZooKeeper, [], roles=CONTROLLER, effect="disruptive",
              irreversible="the migration's /controller and /migration stay deleted (Kafka's revert)")
register_step("migration.deprovision", Deprovision, [], roles=CONTROLLER, effect="disruptive",
              irreversible="the controller's storage stays removed; the next migration formats it again")
register_step("migration.wait_phase", WaitPhase, [
    STAGE, Param("timeout", "duration", default=600.0, help="give up after this long"),
], check=_check_stage, effect="read-only")
