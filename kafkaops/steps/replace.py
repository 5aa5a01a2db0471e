"""A broker replaced under the same id (``kafkaops broker replace``): throttled before it stops, its new disk
awaited, its catch-up under an autothrottle.

Wikimedia's T373189: a broker's disk was replaced, the broker came back empty, copied every partition from
the leaders as fast as the network allowed — producers on those leaders waited — and, once in sync, led
again before anyone looked. The kinds here are what ``runbooks/broker-replace.yaml`` adds around the
steps every procedure shares (demote's reorder, depool, stop, start, election):

* ``replace.throttle`` sets the replication throttle for every partition the broker holds **while it is still
  up**: the rate on each broker holding those partitions, the broker's replicas follower-throttled, the
  others leader-throttled. Why before the stop: a broker's own dynamic config is sent to that broker (a
  stopped one cannot take it), and ZooKeeper (or the KRaft metadata log) keeps it across the disk change,
  so the broker's very first fetch after the start is throttled. While its replicas are in sync Kafka
  throttles nothing (a throttle applies only to replicas out of the ISR), so setting it early costs nothing.
* ``replace.wait_storage_replaced`` waits, read-only, until the broker's storage is empty (the inventory's
  ``kafka_storage_id`` prints nothing: no ``meta.properties``) — the operator swaps the disk or the machine
  while the run waits; once seen, the run's facts remember it (the started broker writes a new one).
* ``replace.catch_up`` waits until the broker is back in every ISR, and meanwhile runs the autothrottle
  (:mod:`kafkaops.policy.autothrottle`): every ``interval`` it reads the gates and raises or lowers the rate,
  journaling each change (``throttle_changed``) and printing the bytes caught up. The rate in force is a
  run fact, so a resume after a SIGKILL continues from it. In sync, it deletes every throttle. A failure
  or a pause keeps the throttle (the broker would otherwise copy the rest unthrottled); ``kafkaops runs
  abort RUN --rollback`` clears it once the broker is back in sync, and puts the recorded replica order back
  (``replace.restore``, the compensation of ``replace.throttle``): a rollback leaves the broker leading its
  preferred partitions, as before the run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, KafkaOpsError
from kafkaops.model import BROKER, ClusterSnapshot
from kafkaops.placement.estimate import human_bytes
from kafkaops.placement.layout import TopicPartition
from kafkaops.policy.autothrottle import Bounds, Gates, cluster_gates, next_rate, seconds_at
from kafkaops.queries.brokers import cluster_snapshot, registered_brokers
from kafkaops.stepkit.common import StableObservation, environment, names, target_host, wait
from kafkaops.stepkit.projection import IN_SYNC, broker_key, fact_key, projected_fact, provenance
from kafkaops.stepkit.throttle import (
    RATE_CONFIGS,
    REPLICA_CONFIGS,
    clear_throttles,
    throttle_configs,
    wait_throttled,
)

#: The run fact: {host: epoch seconds} once the host's storage was seen empty (its disk replaced).
REPLACED_FACT = "replace.storage_replaced"
#: The run fact: the catch-up rate in force (bytes/s per broker), what a resume continues from.
RATE_FACT = "replace.catch_up_rate"


def _hosted(snap: ClusterSnapshot, broker: int) -> dict[TopicPartition, tuple[int, ...]]:
    """Every partition ``broker`` holds a replica of, with its replica list."""
    return {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions if broker in p.replicas}


def _configs(hosted: Mapping[TopicPartition, tuple[int, ...]], broker: int, rate: float
             ) -> tuple[dict[int, dict[str, str | None]], dict[str, dict[str, str | None]]]:
    """The throttle of ``broker``'s catch-up: as if each of its partitions were moving onto it from the others
    (:func:`~kafkaops.stepkit.throttle.throttle_configs`): it follower-throttled, they leader-throttled."""
    without = {tp: tuple(b for b in r if b != broker) for tp, r in hosted.items()}
    return throttle_configs(without, hosted, rate)


def _found(ctx: RunContext, brokers: list[int], topics: list[str]) -> dict[str, dict[str, str]]:
    """The throttle configs set now on ``brokers`` that are registered (a broker answers for its own configs:
    a stopped one cannot be asked) and on ``topics``."""
    env = environment(ctx)
    up = set(env.registered_brokers())
    found = env.kafka.dynamic_configs(brokers=[b for b in brokers if b in up], topics=topics,
                                      names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
    return {k: v for k, v in found.items() if v}


def _missing(wanted_brokers: Mapping[int, Mapping[str, str | None]],
             wanted_topics: Mapping[str, Mapping[str, str | None]], found: Mapping[str, Mapping[str, str]],
             *, rates: bool = True) -> list[str]:
    """What of the wanted throttle is not set (``rates=False``: the replica lists only; the autothrottle may
    have changed the rates since)."""
    out = [t for t, cfg in wanted_topics.items() if any(found.get(t, {}).get(n) != v for n, v in cfg.items())]
    if rates:
        out += [f"broker {b}" for b, cfg in wanted_brokers.items()
                if any(found.get(f"broker:{b}", {}).get(n) != v for n, v in cfg.items())]
    return out


class Throttle(StepBase):
    """Throttle the catch-up of the target's broker before it stops: the rate on every broker holding its
    partitions, its replicas follower-throttled, the other replicas leader-throttled."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        hosted = _hosted(cluster_snapshot(ctx), host.broker_id)
        brokers_cfg, topics_cfg = _configs(hosted, host.broker_id, float(self.params["throttle"]))
        found = _found(ctx, sorted(brokers_cfg), sorted(topics_cfg))
        missing = _missing(brokers_cfg, topics_cfg, found)
        data = {"host": host.name, "broker": host.broker_id, "partitions": len(hosted),
                "brokers": sorted(brokers_cfg), "topics": sorted(topics_cfg), "missing": missing}
        return Observation(data, summary=f"broker {host.broker_id}: {len(hosted)} partition(s); throttle "
                                         + ("set" if not missing else f"not set on {names(missing)}"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["missing"]:
            return Noop(f"the catch-up throttle of broker {d['broker']} is set on its {d['partitions']} partition(s)")
        rate = float(self.params["throttle"])
        return Action(
            description=f"throttle the catch-up of broker {d['broker']} at {human_bytes(rate)}/s before it stops: "
                        f"its {d['partitions']} partition(s) follower-throttled on it, leader-throttled on "
                        f"broker(s) {', '.join(str(b) for b in d['brokers'] if b != d['broker'])}",
            commands=(f"AdminClient.incremental_alter_configs({'/'.join(RATE_CONFIGS)}={int(rate)} on broker(s) "
                      f"{', '.join(map(str, d['brokers']))})",
                      f"AdminClient.incremental_alter_configs({'/'.join(REPLICA_CONFIGS)} on topic(s) "
                      f"{names(d['topics'])})"),
            impact="none while its replicas are in sync (Kafka throttles only replicas out of the ISR); from its "
                   "start on an empty disk, its copy runs at the throttle",
            rollback="`kafkaops runs abort RUN --rollback` deletes the throttle and puts the recorded order back "
                     "(replace.restore)")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        rate = float(self.params["throttle"])
        brokers_cfg, topics_cfg = _configs(_hosted(cluster_snapshot(ctx), host.broker_id), host.broker_id, rate)
        env.kafka.alter_configs(brokers=brokers_cfg, topics=topics_cfg)
        wait_throttled(ctx, brokers_cfg, topics_cfg)
        ctx.facts.set(RATE_FACT, rate)
        ctx.record("throttle_set", brokers=sorted(brokers_cfg), topics=sorted(topics_cfg), rate=rate)

    def verify(self, ctx: RunContext) -> None:
        d = self.observe(ctx).data
        if d["missing"]:
            raise CheckFailed(f"the catch-up throttle is not set on {names(d['missing'])}")


def _storage_id(ctx: RunContext) -> str:
    """What the host's ``kafka_storage_id`` prints: the cluster id of its ``meta.properties``, "" for none."""
    env = environment(ctx)
    host = target_host(ctx)
    out = env.run(host, env.command(host, "kafka_storage_id"), timeout=30, check=False)
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[0] if out.exit_code == 0 and lines else ""


class WaitStorageReplaced(StepBase):
    """Wait until the stopped broker's storage is empty — the disk or the machine replaced (no
    ``meta.properties``: the inventory's ``kafka_storage_id`` prints nothing)."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        seen = (projected_fact(ctx, REPLACED_FACT) or {}).get(host.name)
        registered = host.broker_id in registered_brokers(ctx)
        storage = "" if seen else _storage_id(ctx)
        data = {"host": host.name, "broker": host.broker_id, "replaced_at": seen, "registered": registered,
                "storage": storage, "command": environment(ctx).command(host, "kafka_storage_id")}
        return Observation(data, summary=f"{host.name}: " + (
            f"storage replaced (seen empty at {seen})" if seen else
            f"storage formatted for cluster {storage}" if storage else "storage empty")
            + provenance(ctx, [fact_key(REPLACED_FACT), broker_key(host.broker_id)]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["replaced_at"]:
            return Noop(f"the storage of {d['host']} was seen empty at {d['replaced_at']}: replaced")
        return Action(
            description=f"wait until the disk (or the machine) of {d['host']} is replaced: its storage empty, "
                        f"broker {d['broker']} stopped (timeout {self.params['timeout']:.0f}s)",
            commands=(f"on {d['host']}: {d['command']}, polled until it prints nothing (no meta.properties)",),
            impact="read-only: the operator replaces the disk or the machine now; the run waits and goes on by "
                   "itself (`kafkaops resume RUN` after a timeout)")

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {fact_key(REPLACED_FACT): {obs.data["host"]: "projected"}}

    def apply(self, ctx: RunContext, action: Action) -> None:
        host = target_host(ctx)

        def replaced() -> tuple[bool, str]:
            if host.broker_id in registered_brokers(ctx):
                return False, f"broker {host.broker_id} is registered: stop it before replacing its disk"
            storage = _storage_id(ctx)
            return not storage, (f"storage still formatted for cluster {storage}: replace the disk now"
                                 if storage else "storage empty")

        wait(ctx, replaced, what=f"the storage of {host.name} replaced", timeout=float(self.params["timeout"]),
             interval=2.0)
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ctx.facts.set(REPLACED_FACT, {**(ctx.facts.get(REPLACED_FACT) or {}), host.name: at})
        ctx.record("storage_replaced", host=host.name, at=at)

    def verify(self, ctx: RunContext) -> None:
        if not (ctx.facts.get(REPLACED_FACT) or {}).get(target_host(ctx).name):
            raise CheckFailed(f"the storage of {ctx.target} was not seen empty")


def _metric_failures(ctx: RunContext) -> list[str]:
    """The inventory's metric gates that do not hold now (produce p99, under-min-ISR as monitoring sees them),
    each as a line; none when the cluster has no monitoring gates. Monitoring out of reach counts as a failing
    gate: the copy must not speed up blind."""
    from kafkaops.policy.metric_gates import judge, worst

    env = environment(ctx)
    mon = env.cluster.monitoring
    if mon is None or not mon.prometheus or not mon.gates:
        return []
    baseline = (ctx.facts.get("metrics_baseline") or {}).get("values") or {}
    out: list[str] = []
    try:
        for gate in mon.gates:
            samples = env.prometheus.query(gate.promql(env.cluster.name), what=f"gate {gate.name}")
            value, series = worst([(s.labels, s.value) for s in samples])
            reading = judge(gate.name, value, baseline.get(gate.name), high=gate.max, ratio=gate.max_ratio,
                            series=series, query=gate.promql(env.cluster.name))
            if not reading.ok:
                out.append(reading.line())
    except KafkaOpsError as exc:
        out.append(f"monitoring out of reach ({exc})")
    return out


class CatchUp(StepBase):
    """Wait until the restarted broker is back in every ISR, raising its replication throttle while the
    cluster's gates hold and lowering it when they do not (autothrottle); then delete the throttle."""

    def _bounds(self) -> Bounds:
        return Bounds(minimum=float(self.params["min_throttle"]), maximum=float(self.params["max_throttle"]),
                      hold=int(self.params["hold"]))

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        snap = cluster_snapshot(ctx)
        hosted = _hosted(snap, host.broker_id)
        out = sorted(f"{p.topic}-{p.partition}" for p in snap.partitions
                     if host.broker_id in p.replicas and host.broker_id not in p.isr)
        registered = host.broker_id in snap.brokers
        _, topics_cfg = _configs(hosted, host.broker_id, 1)
        found = _found(ctx, sorted({b for r in hosted.values() for b in r}), sorted(topics_cfg))
        sizes = _sizes(ctx, list(hosted))
        replaced = (projected_fact(ctx, REPLACED_FACT) or {}).get(host.name) == "projected"
        have = 0 if replaced or not registered else sum(
            min(v, sizes.get(tp, 0)) for tp, v in env.kafka.replica_sizes(host.broker_id, list(hosted)).items())
        total = sum(sizes.values())
        data = {"host": host.name, "broker": host.broker_id, "registered": registered, "partitions": len(hosted),
                "out_of_isr": out, "throttles": sorted(found), "bytes_total": total, "bytes_left": max(0, total - have),
                "leads": sum(1 for p in snap.partitions if p.leader == host.broker_id),
                "rate": ctx.facts.get(RATE_FACT)}
        stable = {k: data[k] for k in ("host", "broker", "registered", "partitions", "out_of_isr", "throttles")}
        return StableObservation(data, summary=f"broker {host.broker_id}: in sync in "
                                 f"{len(hosted) - len(out)}/{len(hosted)} partition(s), "
                                 f"{human_bytes(data['bytes_left'])} to catch up, throttle on "
                                 f"{len(found)} resource(s)" + provenance(ctx, [broker_key(host.broker_id)]),
                                 stable=stable)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["registered"] and not d["out_of_isr"] and not d["throttles"]:
            return Noop(f"broker {d['broker']} is in the ISR of all {d['partitions']} partition(s); no throttle left")
        b = self._bounds()
        start = b.clamp(float(d["rate"] or self.params["throttle"]))
        left = float(d["bytes_left"])
        return Action(
            description=f"catch broker {d['broker']} up: {human_bytes(left)} to copy into {d['partitions']} "
                        f"partition(s), about {seconds_at(left, start):.0f} s at {human_bytes(start)}/s, "
                        f"{seconds_at(left, b.maximum):.0f} s at the maximum {human_bytes(b.maximum)}/s; "
                        f"the rate raised while the gates hold, lowered when not (between {human_bytes(b.minimum)}/s "
                        f"and {human_bytes(b.maximum)}/s); then the throttle deleted",
            commands=("AdminClient metadata: ISR of its partitions, offline, under min ISR, other brokers' URP; "
                      f"the inventory's metric gates; every {self.params['interval']:.0f}s",
                      f"AdminClient.incremental_alter_configs({'/'.join(RATE_CONFIGS)}) on each change of rate",
                      "AdminClient.incremental_alter_configs(DELETE every *.replication.throttled.* config) once in "
                      "sync"),
            impact=f"replication into broker {d['broker']} and out of its partitions' leaders, at most the rate in "
                   "force; it leads nothing (last in every replica list) until the election after",
            data={"bytes_total": d["bytes_total"], "bytes_left": d["bytes_left"], "start_rate": start})

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {broker_key(obs.data["broker"]): IN_SYNC}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        broker = host.broker_id
        bounds = self._bounds()
        interval = float(self.params["interval"])
        use_metrics = bool(self.params["metric_gates"])
        state: dict[str, Any] = {"rate": bounds.clamp(float(ctx.facts.get(RATE_FACT) or self.params["throttle"])),
                                 "good": 0, "next": 0.0, "line": ""}
        snap0 = cluster_snapshot(ctx)
        hosted = _hosted(snap0, broker)
        senders = sorted({b for r in hosted.values() for b in r})
        total = sum(_sizes(ctx, list(hosted)).values())

        def set_rate(rate: float) -> None:
            up = set(env.registered_brokers())
            value = str(int(rate))
            env.kafka.alter_configs(brokers={b: dict.fromkeys(RATE_CONFIGS, value) for b in senders if b in up})
            ctx.facts.set(RATE_FACT, rate)

        # The rate a resume continues from (or the start), on every broker: a SIGKILL between a change and its
        # fact, or a rate left from before, is put right first.
        set_rate(state["rate"])
        ctx.record("throttle_changed", rate=state["rate"], previous=None, change="set",
                   reason="catch-up started" if not ctx.facts.get("replace.catch_up_started") else "resumed")
        ctx.facts.set("replace.catch_up_started", True)

        def in_sync() -> tuple[bool, str]:
            snap = cluster_snapshot(ctx, configs=True)
            if broker not in snap.brokers:
                return False, f"broker {broker} not registered yet"
            out = [p for p in snap.partitions if broker in p.replicas and broker not in p.isr]
            now = time.monotonic()
            if out and now >= state["next"]:
                state["next"] = now + interval
                gates = cluster_gates(snap, broker)
                if use_metrics:
                    gates = Gates(gates.offline, gates.under_min_isr, gates.other_urp, tuple(_metric_failures(ctx)))
                decision = next_rate(state["rate"], gates, bounds, state["good"])
                state["good"] = decision.good_polls
                if decision.rate != state["rate"]:
                    set_rate(decision.rate)
                    ctx.record("throttle_changed", rate=decision.rate, previous=state["rate"],
                               change=decision.change, reason=decision.reason)
                    state["rate"] = decision.rate
                have = sum(env.kafka.replica_sizes(broker, list(hosted)).values())
                leads = sum(1 for p in snap.partitions if p.leader == broker)
                ctx.record("catch_up_progress", bytes=have, total=total, rate=state["rate"], out_of_isr=len(out),
                           leads=leads)
                state["line"] = (f"{human_bytes(min(have, total))} of {human_bytes(total)} caught up at "
                                 f"{human_bytes(state['rate'])}/s ({decision.reason})")
            return not out, (f"in sync in {len(hosted) - len(out)}/{len(hosted)} partition(s); {state['line']}"
                             if out else f"in sync in all {len(hosted)} partition(s)")

        wait(ctx, in_sync, what=f"broker {broker} caught up (autothrottle)", timeout=float(self.params["timeout"]),
             interval=1.0)
        cleared = clear_throttles(ctx, sorted({t for t, _ in hosted}))
        ctx.record("throttle_cleared", configs=cleared)
        ctx.progress(f"  {ctx.target}: broker {broker} in sync; throttle deleted from {len(cleared)} resource(s)")

    def verify(self, ctx: RunContext) -> None:
        d = self.observe(ctx).data
        if not d["registered"] or d["out_of_isr"]:
            raise CheckFailed(f"broker {d['broker']} is out of the ISR of {names(d['out_of_isr'])}")
        if d["throttles"]:
            raise CheckFailed(f"replication throttles still set on {names(d['throttles'])}")


def _recorded(params: Mapping[str, Any]) -> dict[TopicPartition, tuple[int, ...]]:
    """The replica order recorded before the demote (``original``; empty when the broker was already last)."""
    from kafkaops.placement.assignment import target_assignment

    return target_assignment(params["original"]) if params.get("original") else {}


class Restore(StepBase):
    """Rollback of a replace's preparation: the catch-up throttle deleted, then the replica order recorded
    before the demote put back where the replicas are still the same brokers, and one election — the broker
    leads its preferred partitions again, as before the run."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        snap = cluster_snapshot(ctx)
        hosted = _hosted(snap, host.broker_id)
        topics = sorted({t for t, _ in hosted})
        found = _found(ctx, sorted({b for r in hosted.values() for b in r} | {host.broker_id}), topics)
        current = {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}
        restore = {tp: r for tp, r in _recorded(self.params).items()
                   if tp in current and set(current[tp]) == set(r) and current[tp] != r}
        out = sorted(f"{t}-{p}" for (t, p) in hosted if (t, p) in restore and not any(
            x.topic == t and x.partition == p and host.broker_id in x.isr for x in snap.partitions))
        data = {"broker": host.broker_id, "topics": topics, "throttles": sorted(found),
                "restore": [[t, p, list(r)] for (t, p), r in sorted(restore.items())], "out_of_isr": out}
        return Observation(data, summary=f"throttles on {len(found)} resource(s); {len(restore)} partition(s) off "
                                         "their recorded order")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if not d["throttles"] and not d["restore"]:
            return Noop("no throttle left; every partition in its recorded order")
        commands = ["AdminClient.incremental_alter_configs(DELETE *.replication.throttled.*)"] if d["throttles"] else []
        if d["restore"]:
            commands += [f"kafka-reassign-partitions --execute: the recorded order of {len(d['restore'])} partition(s) "
                         "(a reorder: no data moves), polled with --verify until completed",
                         "AdminClient.elect_leaders(PREFERRED, those partitions)"]
        return Action(description=f"delete the catch-up throttle; put the order recorded before the demote back on "
                                  f"{len(d['restore'])} partition(s) and elect their preferred leaders",
                      commands=tuple(commands), data={"topics": d["topics"], "restore": d["restore"]},
                      impact=f"broker {d['broker']} leads its preferred partitions again")

    def apply(self, ctx: RunContext, action: Action) -> None:
        cleared = clear_throttles(ctx, list(action.data["topics"]))
        ctx.record("throttle_cleared", configs=cleared)
        restore = {(str(t), int(p)): tuple(r) for t, p, r in action.data["restore"]}
        if not restore:
            return
        env = environment(ctx)
        tool = env.reassigner()
        tool.execute(restore)

        def reordered() -> tuple[bool, str]:
            states = tool.verify(restore)
            done = sum(1 for v in states.values() if v == "completed")
            return done == len(restore), f"{done}/{len(restore)} partition(s) in their recorded order"

        # A reorder completes once every replica is in the ISR: the broker's stop was undone before (its restore
        # waits until it is back in sync), so this is seconds.
        wait(ctx, reordered, what="the recorded replica order put back", timeout=600, interval=1.0)
        failed = env.kafka.elect_preferred_leaders(sorted(restore))
        ctx.record("order_restored", partitions=len(restore), election_failed=sorted(failed))

    def verify(self, ctx: RunContext) -> None:
        d = self.observe(ctx).data
        if d["throttles"]:
            raise CheckFailed(f"replication throttles still set on {names(d['throttles'])}")
        if d["restore"]:
            raise CheckFailed(f"{len(d['restore'])} partition(s) still off the order recorded before the demote")


def _sizes(ctx: RunContext, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Bytes of each partition on its leader (best effort: unknown counts 0; the sizes are for the plan and the
    progress lines, never for a decision)."""
    try:
        return environment(ctx).kafka.partition_sizes(tps)
    except KafkaOpsError:
        return {}


def _check_rates(params: Mapping[str, Any]) -> str | None:
    low, start, high = (float(params[k]) for k in ("min_throttle", "throttle", "max_throttle"))
    if not low <= start <= high:
        return (f"the throttles must satisfy min_throttle ({low:g}) <= throttle ({start:g}) <= max_throttle "
                f"({high:g})")
    return None


THROTTLE = Param("throttle", "float", default=1_000_000.0, min=1,
                 help="the catch-up's starting replication rate, bytes/s per broker")
ORIGINAL = Param("original", "list", default=[],
                 help="the replica order before the demote, [[topic, partition, [broker ids]], ...]: what a rollback "
                      "puts back")
register_step("replace.throttle", Throttle, [THROTTLE, ORIGINAL], roles=BROKER, compensate=Compensation(
    "replace.restore", params=None, note="delete the catch-up throttle, then put the order recorded before the demote "
                                         "back and elect (the broker's stop is undone before: it is back in sync)"))
register_step("replace.restore", Restore, [THROTTLE, ORIGINAL], roles=BROKER)
register_step("replace.wait_storage_replaced", WaitStorageReplaced, [
    Param("timeout", "duration", default=4 * 3600.0, min=1, max=7 * 86400,
          help="how long the run waits for the disk (or the machine) to be replaced"),
], roles=BROKER, effect="read-only")
register_step("replace.catch_up", CatchUp, [
    THROTTLE,
    Param("min_throttle", "float", default=100_000.0, min=1, help="the autothrottle's lowest rate, bytes/s"),
    Param("max_throttle", "float", default=50_000_000.0, min=1, help="the autothrottle's highest rate, bytes/s"),
    Param("interval", "duration", default=10.0, min=1, max=3600, help="how often the gates are read and the rate "
                                                                      "adjusted"),
    Param("hold", "int", default=2, min=1, max=100, help="polls the gates must hold in a row before a raise"),
    Param("metric_gates", "bool", default=True, help="also gate on the inventory's monitoring gates"),
    Param("timeout", "duration", default=12 * 3600.0, min=1, max=7 * 86400, help="give up after this long"),
], check=_check_rates, roles=BROKER,
    irreversible="nothing to undo but the throttle, which replace.throttle's rollback (replace.restore) deletes")
