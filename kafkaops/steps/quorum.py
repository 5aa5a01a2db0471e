"""KRaft quorum membership (KIP-853): a controller joins or leaves the voters (``kafkaops controllers add|remove``).

Kafka's own tool does the change — ``kafka-metadata-quorum add-controller`` run on the new node (it reads
the node's id, directory id and listener from the node's own configuration) and ``remove-controller
--controller-id N --controller-directory-id D`` asked of the quorum — and these steps make it safe:

* ``quorum.membership_gate``: refused on a static quorum (``kraft.version`` 0, with the documented way to a
  dynamic one); for a removal, never below ``min_voters`` nor without a caught-up majority of the smaller
  set (:mod:`kafkaops.policy.quorum_membership`);
* ``quorum.format_controller``: the new node's storage formatted for this cluster (``kafka_format``:
  ``kafka-storage format --no-initial-controllers``, which gives its log directory its directory id and
  leaves the voters to the quorum);
* ``quorum.wait_observer``: the started node replicates the metadata log as an observer and has caught up;
* ``quorum.add_voter`` / ``quorum.remove_voter``: the change itself, each a disruptive step whose
  precondition asks the quorum again right before it (a resumed run never trusts a gate from before);
* ``quorum.stop_removed``: the removed controller stopped — only once the quorum no longer counts it;
* ``quorum.healthy``: the quorum after the change: a leader, every voter caught up, the voters expected.

Starting the node and waiting for it as a caught-up voter are the roll's ``kraft.start_controller`` and
``kraft.wait_voter_caught_up``.
"""

from __future__ import annotations

from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.facts.features import parse_features
from kafkaops.facts.quorum import QuorumReplica
from kafkaops.health.nodes import CLUSTER_ID, kafka_running, storage_id
from kafkaops.model import CONTROLLER
from kafkaops.policy.quorum import QuorumView, judge
from kafkaops.policy.quorum_membership import (
    DEFAULT_MIN_VOTERS,
    TO_DYNAMIC,
    add_refusals,
    remove_refusals,
    static_quorum_refusal,
)
from kafkaops.queries.versions import features
from kafkaops.stepkit.common import environment, target_host, wait
from kafkaops.stepkit.projection import STARTED, STOPPED, controller_key, provenance


def voter_key(node: int) -> str:
    """The projection's key of a node's quorum membership, set by this run's add or remove."""
    return f"quorum/voter/{node}"


ADDED, REMOVED = "added", "removed"


def _replication(ctx: RunContext, step: StepBase) -> tuple[QuorumView, tuple[QuorumReplica, ...]]:
    replicas = environment(ctx).quorum().replication()
    return judge(replicas, max_lag=int(step.params["max_lag"]),
                 max_behind_ms=int(float(step.params["max_behind"]) * 1000)), replicas


def _feature_levels(env: Environment) -> dict[str, str]:
    return {name: f.finalized for name, f in parse_features(features(env, "describe")).items()}


#: The run's fact: the quorum was seen dynamic. ``kraft.version`` never goes back to 0, so a run asks once.
DYNAMIC_SEEN = "quorum/dynamic"


def _static(ctx: RunContext) -> SafetyRefusal | None:
    if ctx.facts.get(DYNAMIC_SEEN):
        return None
    refusal = static_quorum_refusal(_feature_levels(environment(ctx)))
    if refusal is None:
        ctx.facts.set(DYNAMIC_SEEN, True)
        return None
    return SafetyRefusal(refusal, hint=TO_DYNAMIC)


def _row(replicas: tuple[QuorumReplica, ...], node: int) -> QuorumReplica | None:
    return next((r for r in replicas if r.node_id == node), None)


def _refused(what: str, node: int, host: str, refusals: list[str]) -> SafetyRefusal:
    """One line naming every reason; the hint is the way out of the first (too few voters: add one first)."""
    if any(r.startswith(f"removing {node} would leave") for r in refusals):
        hint = "add a controller first (`kafkaops controllers add NODE`), then remove this one"
    else:
        hint = ("wait until every voter has caught up (`kafkaops status` shows the quorum), then run it again or "
                "`kafkaops resume RUN`")
    return SafetyRefusal(f"{what} controller {node} ({host}) now could cost the metadata quorum its majority: "
                         + "; ".join(refusals), hint=hint)


class MembershipGate(StepBase):
    """Refuse a membership change the quorum cannot take: a static quorum, no leader, a voter behind; a removal
    below ``min_voters`` or without a caught-up majority of the voters left."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        view, replicas = _replication(ctx, self)
        row = _row(replicas, host.broker_id)
        refusal = _static(ctx)
        static = refusal.message if refusal is not None else None
        data = {"host": host.name, "node": host.broker_id, "change": self.params["change"], "static": static,
                "voter": view.voter(host.broker_id) is not None, "voters": [v.node_id for v in view.voters],
                "summary": view.summary(), "asked": env.quorum().asked}
        if self.params["change"] == "remove":
            data["refusals"] = remove_refusals(view, host.broker_id, min_voters=int(self.params["min_voters"]),
                                               directory_id=row.directory_id if row else "")
        else:
            data["refusals"] = ([] if view.leader_id is not None else ["the metadata quorum has no leader"]) + (
                ["lagging or down: " + "; ".join(v.describe() for v in view.lagging)] if view.lagging else [])
        return Observation(data, summary=f"quorum: {view.summary()} (asked {data['asked']})")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["static"]:
            raise SafetyRefusal(f"controllers {d['change']} {d['host']}: {d['static']}", hint=TO_DYNAMIC)
        voters = ", ".join(map(str, d["voters"]))
        if d["change"] == "add" and d["voter"]:
            return Noop(f"controller {d['node']} is already a voter (voters {voters})")
        if d["change"] == "remove" and not d["voter"]:
            return Noop(f"controller {d['node']} is not a voter (voters {voters}): nothing to remove")
        if d["refusals"]:
            raise _refused("adding" if d["change"] == "add" else "removing", d["node"], d["host"], d["refusals"])
        return Noop(f"membership gate passes: the quorum is dynamic; {d['summary']} (voters {voters})")


class FormatController(StepBase):
    """Format the new controller's storage for this cluster (``kafka_format``: ``kafka-storage format
    --no-initial-controllers``): its log directory gets its directory id; the voters stay the quorum's."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        want = env.quorum().status().cluster_id
        if not CLUSTER_ID.match(want):
            raise CheckFailed(f"the quorum's ClusterId {want!r} is not a Kafka cluster id")
        has = storage_id(env, host)
        return Observation({"host": host.name, "has": has, "want": want,
                            "command": env.command(host, "kafka_format", cluster_id=want)},
                           summary=f"{host.name}: storage " + (f"formatted for {has}" if has else "not formatted"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["has"] == d["want"]:
            return Noop(f"{d['host']}'s storage is formatted for cluster {d['want']}")
        if d["has"]:
            raise SafetyRefusal(f"{d['host']}'s storage is formatted for cluster {d['has']}, not this cluster's "
                                f"{d['want']}", hint="a node of another cluster? check the inventory's controllers: "
                                                     "(kafkaops never reformats a node)")
        return Action(description=f"format {d['host']}'s Kafka storage for cluster {d['want']} as a controller that "
                                  "joins the quorum later (no initial voters)",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="the node's empty log directory; nothing else",
                      rollback="none needed: an unused formatted directory is removed with the node",
                      data={"cluster_id": d["want"]})

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Read again right before the format: the quorum still reports the cluster id planned (an inventory
        now pointing at another cluster's controllers is another cluster), and the node's storage was not
        formatted since for another cluster (kafkaops never reformats a node)."""
        env = environment(ctx)
        host = target_host(ctx)
        planned, now = str(action.data["cluster_id"]), env.quorum().status().cluster_id
        if now != planned:
            raise SafetyRefusal(f"the quorum's cluster id is now {now}, not the {planned} this step was planned to "
                                f"format {host.name}'s storage with", hint="check the inventory, then plan again")
        has = storage_id(env, host)
        if has and has != now:
            raise SafetyRefusal(f"{host.name}'s storage is formatted for cluster {has}, not {now}",
                                hint="a node of another cluster? (kafkaops never reformats a node)")
        state = "formatted for it" if has else "not formatted"
        return f"cluster id {now}, as planned; {host.name}'s storage {state}"

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        env.change(host, env.command(host, "kafka_format", cluster_id=str(action.data["cluster_id"])), timeout=120)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        if storage_id(env, host) != env.quorum().status().cluster_id:
            raise CheckFailed(f"{host.name}'s storage is not formatted for the cluster after kafka_format")


def _observer_ok(row: QuorumReplica | None, max_lag: int) -> bool:
    return row is not None and row.lag <= max_lag and row.last_caught_up_ms >= 0


class WaitObserver(StepBase):
    """Wait until the started controller replicates the metadata log as an observer, caught up."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        _, replicas = _replication(ctx, self)
        row = _row(replicas, host.broker_id)
        ok = _observer_ok(row, int(self.params["max_lag"]))
        shown = "not replicating" if row is None else f"{row.status.lower()}, {row.lag} record(s) behind"
        return Observation({"host": host.name, "node": host.broker_id, "ok": ok, "shown": shown},
                           summary=f"node {host.broker_id}: {shown}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["ok"]:
            return Noop(f"node {d['node']} replicates the metadata log, caught up ({d['shown']})")
        return Action(description=f"wait until node {d['node']} replicates the metadata log as an observer, at most "
                                  f"{self.params['max_lag']} records behind (timeout {self.params['timeout']:.0f}s)",
                      commands=("kafka-metadata-quorum describe --replication, polled",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        def caught_up() -> tuple[bool, str]:
            _, replicas = _replication(ctx, self)
            row = _row(replicas, host.broker_id)
            return _observer_ok(row, int(self.params["max_lag"])), "not replicating" if row is None else (
                f"{row.status.lower()}, {row.lag} behind")

        wait(ctx, caught_up, what=f"node {host.broker_id} an observer caught up", timeout=float(self.params["timeout"]),
             interval=0.5)


class AddVoter(StepBase):
    """Make the caught-up observer a voter: ``kafka_add_controller`` (``kafka-metadata-quorum add-controller``)
    on the node itself, then wait until the quorum lists it among the voters."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        if ctx.projected.get(voter_key(host.broker_id)) == ADDED:
            return Observation({"host": host.name, "node": host.broker_id, "voter": True},
                               summary=f"node {host.broker_id}" + provenance(ctx, [voter_key(host.broker_id)]))
        voters = env.quorum().status().voters
        return Observation({"host": host.name, "node": host.broker_id, "voter": host.broker_id in voters,
                            "voters": list(voters), "command": env.command(host, "kafka_add_controller")},
                           summary=f"voters {', '.join(map(str, voters))}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["voter"]:
            return Noop(f"controller {d['node']} is a voter")
        n = len(d["voters"])
        return Action(description=f"add controller {d['node']} to the voters ({n} -> {n + 1}; a majority is then "
                                  f"{(n + 1) // 2 + 1})",
                      commands=(f"on {d['host']}: {d['command']}",
                                "kafka-metadata-quorum describe --status, polled, until it lists the node as a voter"),
                      impact="the quorum's majority grows by one voter, which is caught up",
                      rollback=f"remove it again: `kafkaops controllers remove {d['host']}`")

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Asked now: the quorum dynamic, led, every voter caught up, and the node an observer caught up."""
        host = target_host(ctx)
        keys = [controller_key(host.broker_id)]
        if ctx.projected.get(keys[0]) == STARTED:  # planning: the node is started by an earlier step
            return ("node started by an earlier step" + provenance(ctx, keys) + ": the quorum and its catch-up "
                    "are asked again right before the add")
        static = _static(ctx)
        if static is not None:
            raise static
        view, replicas = _replication(ctx, self)
        refusals = add_refusals(view, host.broker_id, _row(replicas, host.broker_id),
                                max_lag=int(self.params["max_lag"]))
        if refusals:
            raise _refused("adding", host.broker_id, host.name, refusals)
        return f"quorum: {view.summary()}; node {host.broker_id} an observer caught up"

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {voter_key(obs.data["node"]): ADDED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_add_controller"), timeout=120)
        wait(ctx, lambda: (host.broker_id in env.quorum().status().voters, "not yet a voter"),
             what=f"controller {host.broker_id} a voter", timeout=timeout, interval=0.5)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if host.broker_id not in environment(ctx).quorum().status().voters:
            raise CheckFailed(f"controller {host.broker_id} is not a voter after add-controller")


class RemoveVoter(StepBase):
    """Take the controller out of the voters: ``kafka-metadata-quorum remove-controller`` with its id and the
    directory id the quorum reports, asked of the quorum; then wait until it is no longer a voter."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        if ctx.projected.get(voter_key(host.broker_id)) == REMOVED:
            return Observation({"host": host.name, "node": host.broker_id, "voter": False},
                               summary=f"node {host.broker_id}" + provenance(ctx, [voter_key(host.broker_id)]))
        view, replicas = _replication(ctx, self)
        row = _row(replicas, host.broker_id)
        return Observation({"host": host.name, "node": host.broker_id,
                            "voter": view.voter(host.broker_id) is not None,
                            "voters": [v.node_id for v in view.voters],
                            "directory_id": row.directory_id if row else ""},
                           summary=f"quorum: {view.summary()}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["voter"]:
            return Noop(f"controller {d['node']} is not a voter")
        n = len(d["voters"])
        return Action(description=f"remove controller {d['node']} from the voters ({n} -> {n - 1}; a majority is then "
                                  f"{(n - 1) // 2 + 1})",
                      commands=(f"kafka-metadata-quorum remove-controller --controller-id {d['node']} "
                                f"--controller-directory-id {d['directory_id']} (asked of the quorum)",
                                "kafka-metadata-quorum describe --status, polled, until it is no longer a voter"),
                      impact="the quorum's majority shrinks by one voter; the node keeps running as an observer",
                      rollback=f"add it again: `kafkaops controllers add {d['host']}`",
                      data={"directory_id": d["directory_id"]})

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Asked now: the quorum led, never below ``min_voters``, every other voter caught up, a caught-up
        majority of the voters left, and the same directory id as planned (else another disk answers)."""
        host = target_host(ctx)
        view, replicas = _replication(ctx, self)
        row = _row(replicas, host.broker_id)
        directory = row.directory_id if row else ""
        refusals = remove_refusals(view, host.broker_id, min_voters=int(self.params["min_voters"]),
                                   directory_id=directory)
        if directory != action.data.get("directory_id"):
            refusals.append(f"its directory id is now {directory or 'unknown'}, not the planned "
                            f"{action.data.get('directory_id')}: plan again")
        if refusals:
            raise _refused("removing", host.broker_id, host.name, refusals)
        return f"quorum: {view.summary()}; {len(view.voters) - 1} voters stay"

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {voter_key(obs.data["node"]): REMOVED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        env.quorum().remove_controller(host.broker_id, str(action.data["directory_id"]))

        def gone() -> tuple[bool, str]:
            status = env.quorum().status()
            return host.broker_id not in status.voters and status.leader_id >= 0, f"voters {status.voters}"

        wait(ctx, gone, what=f"controller {host.broker_id} no longer a voter", timeout=float(self.params["timeout"]),
             interval=0.5)

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if host.broker_id in environment(ctx).quorum().status().voters:
            raise CheckFailed(f"controller {host.broker_id} is still a voter after remove-controller")


class StopRemoved(StepBase):
    """Stop the removed controller's process, once the quorum no longer counts it as a voter."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        stopped = ctx.projected.get(controller_key(host.broker_id)) == STOPPED
        active = False if stopped else kafka_running(env, host)
        return Observation({"host": host.name, "node": host.broker_id, "active": active,
                            "command": env.command(host, "kafka_stop")},
                           summary=f"controller {host.broker_id}: process {'active' if active else 'inactive'}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["active"]:
            return Noop(f"controller {d['node']} is stopped")
        return Action(description=f"stop Kafka on {d['host']} (controller {d['node']}, no longer a voter)",
                      commands=(f"on {d['host']}: {d['command']}",), impact="an observer of the quorum stops; no vote",
                      rollback=f"start it again: on {d['host']}: kafka_start template")

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Asked now: the node is not a voter (stopping a voter costs the quorum a vote: that is a restart's
        or a removal's business, with their gates)."""
        host = target_host(ctx)
        keys = [voter_key(host.broker_id)]
        if ctx.projected.get(keys[0]) == REMOVED:  # planning: removed by an earlier step
            return f"controller {host.broker_id} removed from the voters by an earlier step" + provenance(ctx, keys)
        voters = environment(ctx).quorum().status().voters
        if host.broker_id in voters:
            raise SafetyRefusal(f"controller {host.broker_id} ({host.name}) is a voter again (voters "
                                f"{', '.join(map(str, voters))}): stopping it would cost the quorum a vote",
                                hint=f"`kafkaops controllers remove {host.name}` removes it first")
        return f"controller {host.broker_id} is not a voter (voters {', '.join(map(str, voters))})"

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {controller_key(obs.data["node"]): STOPPED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        timeout = float(self.params["timeout"])
        env.change(host, env.command(host, "kafka_stop"), timeout=timeout)
        wait(ctx, lambda: (not kafka_running(env, host), "still shutting down"),
             what=f"controller {host.broker_id} stopped", timeout=timeout)


class QuorumHealthy(StepBase):
    """Wait until the quorum has a leader and every voter is caught up (after a membership change)."""

    def _healthy(self, ctx: RunContext) -> tuple[bool, str]:
        view, _ = _replication(ctx, self)
        return view.leader_id is not None and not view.lagging, view.summary()

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        keys = [voter_key(host.broker_id), controller_key(host.broker_id)]
        if any(ctx.projected.get(k) for k in keys):
            return Observation({"ok": False, "summary": "changed by this run"},
                               summary="quorum" + provenance(ctx, keys))
        ok, summary = self._healthy(ctx)
        return Observation({"ok": ok, "summary": summary}, summary=f"quorum: {summary}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["ok"]:
            return Noop(f"quorum healthy: {d['summary']}")
        return Action(description=f"wait until the quorum has a leader and every voter is caught up (timeout "
                                  f"{self.params['timeout']:.0f}s)",
                      commands=("kafka-metadata-quorum describe --replication, polled",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        wait(ctx, lambda: self._healthy(ctx), what="the quorum led, every voter caught up",
             timeout=float(self.params["timeout"]), interval=0.5)


TIMEOUT = Param("timeout", "duration", default=300.0, min=1, max=3600, help="give up after this long")
CAUGHT_UP = [
    Param("max_lag", "int", default=1000, min=0, max=10_000_000,
          help="records a voter (or the new observer) may be behind the leader and still count as caught up"),
    Param("max_behind", "duration", default=5.0, min=0.5, max=600,
          help="how long ago (on the leader's clock) a voter may last have been caught up"),
]
MIN_VOTERS = Param("min_voters", "int", default=DEFAULT_MIN_VOTERS, min=1, max=9,
                   help="fewest voters a removal may leave")


def _check_change(params: Any) -> str | None:
    return None if params.get("change") in ("add", "remove") else "change is add or remove"


register_step("quorum.membership_gate", MembershipGate,
              [Param("change", "str", required=True, help="add or remove"), MIN_VOTERS, *CAUGHT_UP],
              check=_check_change, roles=CONTROLLER, effect="read-only")
register_step("quorum.format_controller", FormatController, [], roles=CONTROLLER, effect="disruptive")
register_step("quorum.wait_observer", WaitObserver, [TIMEOUT, *CAUGHT_UP], roles=CONTROLLER, effect="read-only")
register_step("quorum.add_voter", AddVoter, [TIMEOUT, *CAUGHT_UP], roles=CONTROLLER, effect="disruptive",
              compensate=Compensation("quorum.remove_voter", params={}, note="remove the added voter again"))
register_step("quorum.remove_voter", RemoveVoter, [TIMEOUT, MIN_VOTERS, *CAUGHT_UP], roles=CONTROLLER,
              effect="disruptive",
              irreversible="the controller stays out of the voters; `kafkaops controllers add NODE` adds it back "
                           "(format it afresh if its disk was wiped)")
register_step("quorum.stop_removed", StopRemoved, [TIMEOUT], roles=CONTROLLER, effect="disruptive",
              compensate=Compensation("kraft.start_controller", params={}, note="start the controller again"))
register_step("quorum.healthy", QuorumHealthy, [TIMEOUT, *CAUGHT_UP], roles=CONTROLLER, effect="read-only")
