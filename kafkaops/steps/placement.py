"""Placement steps: the gate before a reassignment, the throttled reassignment itself, and its undo.

A reassignment copies whole partitions between brokers — across DCs on a stretched cluster — for minutes
to hours. What makes it safe to leave running and to resume:

* **Observed, not remembered.** ``placement.reassign`` observes each partition: already at its target
  (done), being reassigned now (Kafka's ``--list``: awaited, never submitted again), or to do. A run
  killed mid-batch and resumed therefore waits for what Kafka is still moving and submits only what was
  never submitted; a finished batch is never re-submitted.
* **Throttled, and the throttle always cleared.** Before a batch, the run sets the replication throttle
  on every broker the batch involves (``leader/follower.replication.throttled.rate``) and the throttled
  replica lists on its topics (``leader/follower.replication.throttled.replicas``: the current replicas
  send, the new ones receive), through the AdminClient, where they can be verified. After the last batch
  they are deleted. When the step fails (a timeout, Ctrl-C, a broker lost), the batch in flight is
  cancelled (Kafka puts those partitions back on their old replicas) and the throttles are deleted, so a
  failed run leaves neither a half-copied partition nor a throttle that would slow the cluster's next
  recovery for ever. A SIGKILL leaves both; ``resume`` finishes the batch and clears them, ``runs abort
  --rollback`` cancels and clears (``placement.cancel``).
* **Gated.** ``placement.preflight`` refuses an unhealthy cluster (offline, under-replicated, under min
  ISR), a broker of the target that is not registered, another reassignment in progress, or a
  replication throttle someone else left. ``placement.reassign`` asks the two that can change while a run
  waits or is paused again right before it submits (its precondition): no reassignment but its own in
  progress, every target broker registered.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.model import ClusterSnapshot
from kafkaops.placement.assignment import target_assignment
from kafkaops.placement.estimate import human_bytes
from kafkaops.placement.layout import TopicPartition
from kafkaops.placement.planner import batches
from kafkaops.policy.availability import cluster_health
from kafkaops.stepkit.common import environment, names, wait
from kafkaops.stepkit.projection import broker_key, project_registered, provenance, replicas_key
from kafkaops.stepkit.throttle import (  # noqa: F401 - RATE_CONFIGS, REPLICA_CONFIGS, throttle_configs: re-exported
    RATE_CONFIGS,
    REPLICA_CONFIGS,
    clear_throttles,
    throttle_configs,
    throttles_left,
)
from kafkaops.stepkit.throttle import wait_throttled as _wait_throttled

#: The run fact holding the replica lists of the batch in flight before it moved, for a cancel.
ORIGINALS = "placement.in_flight_originals"
#: Seconds between two asks of Kafka's tool while the metadata says a batch is still moving: each ask starts a
#: JVM on a broker host (1-3 s of CPU there); the metadata poll in between costs one request.
TOOL_VERIFY_EVERY = 30.0  # the plan says "every 30 s"


def arrived_at_target(snap: ClusterSnapshot, batch: Mapping[TopicPartition, Sequence[int]]) -> list[TopicPartition]:
    """The partitions of ``batch`` whose metadata shows them done: exactly the target replicas, in order, every
    one in sync. While Kafka moves a partition its replica list is the union of the old and the new (longer
    than the target), so this holds only once the controller has finished it — the tool's ``--verify`` then
    confirms it (a reorder or an added replica can match an instant before the controller records the end)."""
    done: list[TopicPartition] = []
    for p in snap.partitions:
        key = (p.topic, p.partition)
        want = batch.get(key)
        if want is not None and tuple(p.replicas) == tuple(want) and set(want) <= set(p.isr):
            done.append(key)
    return sorted(done)


def _current(ctx: RunContext, tps: Sequence[TopicPartition]) -> dict[TopicPartition, tuple[int, ...]]:
    """The replica lists of ``tps`` now — while planning, as the reassignments planned before leave them (a
    runbook that reorders and later puts the order back, ``broker replace``, plans the second from the first)."""
    snap = environment(ctx).kafka.snapshot(with_configs=False)
    wanted = set(tps)
    out = {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions if (p.topic, p.partition) in wanted}
    for (t, p) in out:
        planned = ctx.projected.get(replicas_key(t, p))
        if planned is not None:
            out[(t, p)] = tuple(planned)
    return out


class Preflight(StepBase):
    """Refuse a reassignment on a cluster that is unhealthy, missing a target broker, already reassigning or
    throttled by someone else."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        target = target_assignment(self.params["assignment"])
        snap = env.kafka.snapshot(with_configs=True)
        health = cluster_health(snap)
        needed = sorted({b for r in target.values() for b in r})
        topics = sorted({t for t, _ in target})
        data: dict[str, list[Any]] = {"offline": [f"{p.topic}-{p.partition}" for p in health.offline],
                "urp": [f"{p.topic}-{p.partition}" for p in health.under_replicated],
                "under_min_isr": [f"{p.topic}-{p.partition}" for p in health.under_min_isr],
                "missing": [b for b in needed if b not in snap.brokers],
                "unknown": sorted(f"{t}-{p}" for t, p in target
                                  if not any(x.topic == t and x.partition == p for x in snap.partitions)),
                "reassigning": sorted(f"{t}-{p}" for t, p in env.reassigner().list()),
                "throttles": sorted(throttles_left(ctx, topics))}
        bad = sum(len(v) for v in data.values())
        return Observation(data, summary=f"{len(target)} partition(s) to place; "
                                         + ("cluster ready" if not bad else f"{bad} problem(s)"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        problems = [(d["offline"], "offline"), (d["urp"], "under-replicated"), (d["under_min_isr"], "under min ISR")]
        for items, what in problems:
            if items:
                raise SafetyRefusal(f"refusing to reassign: {len(items)} partition(s) {what} ({names(items)})",
                                    hint="let the cluster recover first (`kafkaops status`), then re-plan")
        if d["missing"]:
            raise SafetyRefusal(f"refusing to reassign: broker(s) {', '.join(map(str, d['missing']))} of the target "
                                "are not registered", hint="start them, or plan without them")
        if d["unknown"]:
            raise SafetyRefusal(f"refusing to reassign: {names(d['unknown'])} do not exist in the cluster",
                                hint="re-plan with `kafkaops placement plan`")
        if d["reassigning"]:
            raise SafetyRefusal("refusing to reassign: a reassignment is already in progress "
                                f"({names(d['reassigning'])})",
                                hint="wait for it (`kafka-reassign-partitions --list`), or resume the run that "
                                     "started it (`kafkaops runs list`)")
        if d["throttles"]:
            raise SafetyRefusal(f"refusing to reassign: replication throttles are set on {names(d['throttles'])}",
                                hint="another reassignment may be running; if not, `kafkaops runs abort --rollback` "
                                     "the run that left them, or delete them with kafka-configs")
        return Noop("gates pass: no offline, under-replicated or under-min-ISR partition; every target broker "
                    "registered; no reassignment in progress; no throttle set")


class Reassign(StepBase):
    """Move the partitions to their target replicas in throttled batches, Kafka's own tool doing the moves."""

    def observe(self, ctx: RunContext) -> Observation:
        target = target_assignment(self.params["assignment"])
        current = _current(ctx, list(target))
        tool = environment(ctx).reassigner()
        in_progress = sorted(tp for tp in tool.list() if tp in target)
        done = sorted(tp for tp, r in target.items() if current.get(tp) == r and tp not in in_progress)
        todo = sorted(tp for tp in target if tp not in done and tp not in in_progress)
        topics = sorted({t for t, _ in target})
        left = throttles_left(ctx, topics)
        data = {"done": len(done), "in_progress": [list(tp) for tp in in_progress],
                "todo": [[t, p, list(current.get((t, p), ()))] for t, p in todo],
                "throttles": sorted(left), "topics": topics, "tool": tool.command()}
        return Observation(data, summary=f"{len(done)} of {len(target)} partition(s) at their target, "
                                         f"{len(in_progress)} being moved, {len(todo)} to submit")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["todo"] and not d["in_progress"] and not d["throttles"]:
            return Noop(f"all {d['done']} partition(s) at their target replicas; no throttle left")
        target = target_assignment(self.params["assignment"])
        current = {(t, p): tuple(r) for t, p, r in d["todo"]}
        added = sum(len(set(target[tp]) - set(current[tp])) for tp in current)
        size = int(self.params["batch_size"])
        todo = [tuple(x[:2]) for x in d["todo"]]
        parts = batches([(str(t), int(p)) for t, p in todo], size) if todo else []
        rate = float(self.params["throttle"])
        tool = d["tool"]  # the inventory's kafka_reassign, as it will run
        commands = [f"{tool} --list"]
        if d["in_progress"]:
            commands.append(f"wait for the {len(d['in_progress'])} partition(s) Kafka is still moving "
                            "(--verify --preserve-throttles, polled)")
        shown = 3  # a plan of 25,000 batches lists the first three and counts the rest
        for i, batch in enumerate(parts[:shown], 1):
            listed = names([f"{t}-{p}" for t, p in batch])
            commands += [f"batch {i}/{len(parts)}: AdminClient.incremental_alter_configs(throttle "
                         f"{human_bytes(rate)}/s on the brokers and replicas of {listed})",
                         f"batch {i}/{len(parts)}: {tool} --reassignment-json-file /dev/stdin --execute",
                         f"batch {i}/{len(parts)}: metadata polled until the replicas are the target's, all in "
                         f"sync; then {tool} --reassignment-json-file /dev/stdin --verify --preserve-throttles "
                         "confirms (asked every 30 s meanwhile)"]
        if len(parts) > shown:
            commands.append(f"batches {shown + 1}..{len(parts)}: the same, {sum(len(b) for b in parts[shown:])} "
                            "partition(s)")
        commands.append("AdminClient.incremental_alter_configs(DELETE every "
                        + "/".join(("leader", "follower")) + ".replication.throttled.* config)")
        return Action(
            description=f"reassign {len(todo)} partition(s) in {len(parts)} batch(es) of at most {size}, throttled "
                        f"to {human_bytes(rate)}/s per broker" + (f"; {len(d['in_progress'])} in flight awaited"
                                                                    if d["in_progress"] else ""),
            commands=tuple(commands),
            impact=f"{added} replica(s) copied between brokers (replication traffic up to {human_bytes(rate)}/s "
                   "out of and into each broker involved); leaders change only at the preferred election after",
            rollback="`kafkaops runs abort RUN --rollback` cancels the batch in flight and clears the throttles; "
                     "finished batches stay (moving them back is another placement plan)",
            data={"batches": [[list(tp) for tp in b] for b in parts]})

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        """Every partition on its target replicas: the steps planned after (an election, a leadership check, an
        emptiness check) see the order and the brokers the reassignment leaves."""
        return {replicas_key(t, p): list(r) for (t, p), r in target_assignment(self.params["assignment"]).items()}

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Right before submitting, what ``placement.preflight`` checked is asked again, because a resume
        never re-runs it and a batch may start hours after it: no reassignment is in progress but the batch
        this run submitted itself (the run's facts name it) — Kafka would run both at once, under throttles
        set for one — and every broker the batches (and the batch in flight) move replicas to is registered,
        as the steps planned before leave it in a dry-run: a replica sent to a broker that is down never
        catches up, and the batch waits out its timeout holding the throttle."""
        env = environment(ctx)
        target = target_assignment(self.params["assignment"])
        ours = _originals(ctx)
        moving = set(env.reassigner().list())
        others = sorted(f"{t}-{p}" for t, p in moving if (t, p) not in ours)
        if others:
            raise SafetyRefusal(f"refusing to reassign: a reassignment this run did not start is in progress "
                                f"({names(others)})", hint="wait for it (`kafka-reassign-partitions --list`), or "
                                "resume the run that started it (`kafkaops runs list`)")
        tps = {(str(t), int(p)) for b in action.data["batches"] for t, p in b} | (moving & set(target))
        needed = sorted({b for tp in tps for b in target.get(tp, ())})
        registered = project_registered(env.registered_brokers(), ctx)
        missing = [b for b in needed if b not in registered]
        if missing:
            raise SafetyRefusal(f"refusing to reassign: broker(s) {', '.join(map(str, missing))} of the target are "
                                "not registered" + provenance(ctx, [broker_key(b) for b in missing]),
                                hint="start them and resume, or re-plan without them")
        return (f"no other reassignment in progress; target broker(s) {', '.join(map(str, needed)) or 'none'} "
                "registered")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        target = target_assignment(self.params["assignment"])
        topics = sorted({t for t, _ in target})
        tool = env.reassigner()
        rate = float(self.params["throttle"])
        timeout = float(self.params["batch_timeout"])
        in_flight: dict[TopicPartition, tuple[int, ...]] = {}
        sizes = _sizes(ctx, list(target))
        moved = [0, 0]  # partitions, bytes

        def wait_batch(batch: dict[TopicPartition, tuple[int, ...]], label: str) -> None:
            total_bytes = sum(sizes.get(tp, 0) for tp in batch)
            asked = [time.monotonic()]  # when Kafka's tool was last asked (the submit counts)

            def completed() -> tuple[bool, str]:
                """Polled from the cluster's metadata, in-process; Kafka's tool (a JVM start over SSH, seconds)
                is asked only to confirm — its ``completed`` is what ends the wait — and every
                :data:`TOOL_VERIFY_EVERY` seconds, to notice a reassignment someone else cancelled."""
                arrived = arrived_at_target(env.kafka.snapshot(with_configs=False), batch)
                done = False
                if len(arrived) == len(batch) or time.monotonic() - asked[0] >= TOOL_VERIFY_EVERY:
                    asked[0] = time.monotonic()
                    states = tool.verify(batch)
                    stuck = [f"{t}-{p}" for (t, p), s in states.items() if s == "not active"]
                    if stuck:
                        raise CheckFailed(f"reassignment of {names(stuck)} is no longer active and not at its "
                                          "target (cancelled by someone else?)",
                                          hint="re-plan with `kafkaops placement plan`")
                    arrived = [tp for tp, s in states.items() if s == "completed"]
                    done = len(arrived) == len(batch)
                done_bytes = sum(sizes.get(tp, 0) for tp in arrived)
                return done, (f"{label}: {len(arrived)}/{len(batch)} partition(s), {human_bytes(done_bytes)} of "
                              f"{human_bytes(total_bytes)}")

            wait(ctx, completed, what=f"{label} reassigned", timeout=timeout, interval=1.0, fast=0.25)
            moved[0] += len(batch)
            moved[1] += total_bytes
            ctx.progress(f"  {ctx.target}: {label} done; {moved[0]}/{len(target)} partition(s), "
                         f"{human_bytes(moved[1])} moved so far")

        try:
            pending = {tp: target[tp] for tp in sorted(tool.list()) if tp in target}
            if pending:
                in_flight = dict(pending)
                ctx.record("reassign_awaiting", partitions=[f"{t}-{p}" for t, p in in_flight])
                wait_batch(in_flight, "partitions already in flight")
                in_flight = {}
            parts: list[list[TopicPartition]] = [[(str(t), int(p)) for t, p in b] for b in action.data["batches"]]
            for i, part in enumerate(parts, 1):
                now = _current(ctx, part)
                batch = {tp: target[tp] for tp in part if now.get(tp) != target[tp]}
                if not batch:
                    continue
                brokers_cfg, topics_cfg = throttle_configs(now, batch, rate)
                env.kafka.alter_configs(brokers=brokers_cfg, topics=topics_cfg)
                _wait_throttled(ctx, brokers_cfg, topics_cfg)
                ctx.record("throttle_set", batch=i, brokers=sorted(brokers_cfg), topics=sorted(topics_cfg), rate=rate)
                in_flight = batch
                # what a rollback puts them back on, in their order (the run's facts survive a SIGKILL)
                ctx.facts.set(ORIGINALS, [[t, p, list(now[(t, p)])] for t, p in batch])
                ctx.record("batch_submitting", batch=i, partitions=[f"{t}-{p}" for t, p in batch])
                tool.execute(batch)
                ctx.record("batch_submitted", batch=i)
                wait_batch(batch, f"batch {i}/{len(parts)}")
                in_flight = {}
                ctx.record("batch_done", batch=i)
        except BaseException:
            self._undo(ctx, tool, in_flight, topics)
            raise
        cleared = clear_throttles(ctx, topics)
        ctx.record("throttle_cleared", configs=cleared)

    @staticmethod
    def _undo(ctx: RunContext, tool: Any, in_flight: Mapping[TopicPartition, tuple[int, ...]],
              topics: Sequence[str]) -> None:
        """On failure: the batch in flight cancelled, every throttle deleted; each best effort (the failure
        itself is what the operator must see)."""
        try:
            if in_flight:
                back = tool.cancel(in_flight, _originals(ctx))
                ctx.record("batch_cancelled", partitions=[f"{t}-{p}" for t, p in back])
        except Exception as exc:  # reported; the original failure goes on
            ctx.progress(f"  {ctx.target}: could not cancel the batch in flight: {exc}")
        try:
            cleared = clear_throttles(ctx, topics)
            ctx.record("throttle_cleared", configs=cleared)
        except Exception as exc:
            ctx.progress(f"  {ctx.target}: could not clear the throttles: {exc} (`kafkaops runs abort --rollback`)")

    def verify(self, ctx: RunContext) -> None:
        target = target_assignment(self.params["assignment"])
        current = _current(ctx, list(target))
        off = [f"{t}-{p}" for (t, p), r in sorted(target.items()) if current.get((t, p)) != r]
        if off:
            raise CheckFailed(f"{len(off)} partition(s) not at their target replicas: {names(off)}")
        left = throttles_left(ctx, sorted({t for t, _ in target}))
        if left:
            raise CheckFailed(f"replication throttles still set on {names(sorted(left))}")


class Cancel(StepBase):
    """Rollback of a reassignment: cancel what is still moving (back to the old replicas) and clear throttles."""

    def observe(self, ctx: RunContext) -> Observation:
        target = target_assignment(self.params["assignment"])
        moving = sorted(tp for tp in environment(ctx).reassigner().list() if tp in target)
        left = throttles_left(ctx, sorted({t for t, _ in target}))
        return Observation({"moving": [list(tp) for tp in moving], "throttles": sorted(left)},
                           summary=f"{len(moving)} partition(s) moving, throttles on {len(left)} resource(s)")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["moving"] and not d["throttles"]:
            return Noop("nothing moving, no throttle left")
        return Action(description=f"cancel the reassignment of {len(d['moving'])} partition(s) still moving and "
                                  "delete the replication throttles",
                      commands=("kafka-reassign-partitions --reassignment-json-file /dev/stdin --execute "
                                "--additional (each partition still moving back to the replicas it had)",
                                "AdminClient.incremental_alter_configs(DELETE *.replication.throttled.*)"),
                      impact="partitions still moving go back to their previous replicas")

    def apply(self, ctx: RunContext, action: Action) -> None:
        target = target_assignment(self.params["assignment"])
        environment(ctx).reassigner().cancel(target, _originals(ctx))
        clear_throttles(ctx, sorted({t for t, _ in target}))

    def verify(self, ctx: RunContext) -> None:
        d = self.observe(ctx).data
        if d["moving"] or d["throttles"]:
            raise CheckFailed(f"{len(d['moving'])} partition(s) still moving, throttles on {names(d['throttles'])}")


def _originals(ctx: RunContext) -> dict[TopicPartition, tuple[int, ...]]:
    """The replica lists of the batch last submitted, before it moved (recorded by ``placement.reassign``)."""
    return {(str(t), int(p)): tuple(r) for t, p, r in ctx.facts.get(ORIGINALS) or ()}


def _sizes(ctx: RunContext, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """Bytes per partition for progress lines (best effort: a partition whose size is unknown counts 0)."""
    try:
        return environment(ctx).kafka.partition_sizes(tps)
    except Exception:  # progress only
        return {}


ASSIGNMENT = Param("assignment", "list", required=True,
                   help="the target: [[topic, partition, [broker ids]], ...] (made by `kafkaops placement plan`)")
REASSIGN = [
    ASSIGNMENT,
    Param("throttle", "float", default=10_000_000.0, min=1, help="replication throttle per broker, bytes/s"),
    Param("batch_size", "int", default=20, min=1, max=10_000, help="partitions submitted together"),
    Param("batch_timeout", "duration", default=3600.0, min=1, max=7 * 86400,
          help="how long one batch may take before the run stops (its moves cancelled, throttles cleared)"),
]
register_step("placement.preflight", Preflight, [ASSIGNMENT], effect="read-only")
register_step("placement.cancel", Cancel, REASSIGN)  # a compensation gets the reassignment's own parameters
register_step("placement.reassign", Reassign, REASSIGN, compensate=Compensation("placement.cancel", params=None,
                           note="cancel the batch still moving (back to its old replicas) and clear the throttles; "
                                "finished batches stay where they are"), effect="disruptive")
