"""The facts steps leave behind, and how a dry-run sees the world through them.

A dry-run plans every step before any has run, so a step late in a rolling reboot would otherwise
observe a cluster in which nothing has happened yet ("broker 1003 is registered" while the plan has
already stopped it). Each step that changes something declares its ``effects`` as the keys below; the
engine collects them in ``ctx.projected`` and the observe helpers here overlay them on what the live
systems say. In a real run the projection is empty and every helper returns the live value unchanged.

Broker states follow a broker through a maintenance: ``stopped`` (unregistered, in no ISR, leads
nothing) → ``started`` (registered, catching up: still in no ISR) → ``in_sync`` (back in every ISR it
belongs to, leading nothing) → ``elected`` (leads the partitions it is preferred leader of).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.model import ClusterSnapshot, PartitionState

STOPPED, STARTED, IN_SYNC, ELECTED = "stopped", "started", "in_sync", "elected"
CLUSTER_ELECTED = "cluster/elected"


def broker_key(broker: int) -> str:
    return f"broker/{broker}"


def controller_key(node: int) -> str:
    """What a KRaft controller's stop and start project for the steps after them (apart from brokers')."""
    return f"controller/{node}"


def replicas_key(topic: str, partition: int) -> str:
    """A partition's replica list once a planned reassignment (``placement.reassign``) has completed."""
    return f"replicas/{topic}/{partition}"


def pool_key(fqdn: str, service: str) -> str:
    return f"pool/{fqdn}/{service}"


def fact_key(name: str) -> str:
    """A run fact (``env.facts``) an apply would write, e.g. the pool state before a depool."""
    return f"fact/{name}"


def service_key(host: str, service: str) -> str:
    """``restarted``: the service was restarted (or deployed), its health is to be seen again."""
    return f"service/{host}/{service}"


def served_key(host: str, service: str) -> str:
    """The revision a deploy leaves the service serving."""
    return f"served/{host}/{service}"


def projected_fact(ctx: RunContext, name: str) -> Any:
    """A run fact: what an earlier planned step will have recorded, else what this run recorded."""
    key = fact_key(name)
    if key in ctx.projected:
        return ctx.projected[key]
    return ctx.facts.get(name)


def provenance(ctx: RunContext, keys: Iterable[str]) -> str:
    """`` (projected: after kafka1001 step 5 (kafka.stop_broker))`` for the keys that came from the
    projection, else ``""``: plans say which observations are predictions."""
    sources = sorted({s for k in keys if (s := ctx.projected.source(k)) is not None})
    return f" (projected: after {', '.join(sources)})" if sources else ""


def broker_keys(ctx: RunContext) -> list[str]:
    return [k for k in ctx.projected if k.startswith(("broker/", "replicas/")) or k == CLUSTER_ELECTED]


def project_replicas(p: PartitionState, replicas: tuple[int, ...]) -> PartitionState:
    """One partition once a reassignment to ``replicas`` has completed: Kafka finishes one only when every
    new replica is in sync, so they are in the ISR and the removed ones are gone; the leader stays unless it
    was removed (then the first replica in sync leads). Its preferred leader is the new first replica: the
    election after sees it."""
    isr = tuple(b for b in replicas if b in p.isr or b not in p.replicas)
    leader = p.leader if p.leader in replicas else next(iter(isr), None)
    return dataclasses.replace(p, replicas=replicas, isr=isr, leader=leader)


def _leader_from(p: PartitionState, isr: tuple[int, ...]) -> int | None:
    """Who Kafka makes leader when the current one leaves: the first replica (assignment order) in ISR."""
    return next((r for r in p.replicas if r in isr), None)


def project_partition(p: PartitionState, broker: int, state: str) -> PartitionState:
    """One partition once ``broker`` is in ``state``. Each state says everything about the broker (not
    only what changed since the previous one): until an election, a broker that was stopped leads
    nothing, whether it is still down, catching up or back in sync."""
    if broker not in p.replicas:
        return p
    if state in (STOPPED, STARTED):
        isr = tuple(r for r in p.isr if r != broker)
    else:
        isr = tuple(r for r in p.replicas if r in p.isr or r == broker)
    leader = p.leader
    if state == ELECTED and p.preferred_leader == broker:
        leader = broker
    elif leader == broker and state != ELECTED:
        others = tuple(r for r in isr if r != broker)
        leader = _leader_from(p, others) if others else (broker if broker in isr else None)
    if leader is None or leader < 0:
        leader = _leader_from(p, isr)
    if isr == p.isr and leader == p.leader:
        return p  # most partitions of most layers: no copy (a dry-run at 10,000 partitions made 1.26 million)
    return PartitionState(p.topic, p.partition, leader, p.replicas, isr)


def project_snapshot(snap: ClusterSnapshot, ctx: RunContext) -> ClusterSnapshot:
    """``snap`` as it will be once the steps planned before this one have run.

    The facts are applied in the order the planned steps set them (:meth:`Projection.history`), each run
    of consecutive reassignments together, each broker state or cluster-wide election at its place:
    a decommission's demote (a reorder), its election, then its moves (another order) leave each
    partition led by the election's leader, not by the moves' new first replica — that takes the
    election planned after the moves.
    """
    # a plain mapping (a test's hand-made projection) has no history: its items, in their order
    history = getattr(ctx.projected, "history", None)
    facts = [(k, v) for k, v in (history() if history is not None else ctx.projected.items())
             if k.startswith(("broker/", "replicas/")) or (k == CLUSTER_ELECTED and v)]
    if not facts:
        return snap
    done, partitions, brokers = _resumed(snap, facts)
    moved: dict[tuple[str, str], tuple[int, ...]] = {}

    def flush() -> None:
        if moved:
            partitions[:] = [project_replicas(p, moved[key]) if (key := (p.topic, str(p.partition))) in moved
                             else p for p in partitions]
            moved.clear()

    for key, value in facts[done:]:
        if key.startswith("replicas/"):
            topic, part = key.split("/", 1)[1].rsplit("/", 1)
            moved[(topic, part)] = tuple(value)
            continue
        flush()
        if key == CLUSTER_ELECTED:
            partitions[:] = [dataclasses.replace(p, leader=p.preferred_leader)
                             if p.preferred_leader in p.isr and p.leader != p.preferred_leader else p
                             for p in partitions]
            continue
        broker = int(key.split("/", 1)[1])
        partitions[:] = [project_partition(p, broker, value) for p in partitions]
        if value == STOPPED:
            brokers.discard(broker)
        else:
            brokers.add(broker)
    flush()
    _LAST[:] = [(snap, facts, tuple(partitions), frozenset(brokers))]
    controller = snap.controller
    if controller is not None and controller not in brokers:
        controller = min(brokers) if brokers else None  # an election follows; which broker wins is not known
    return dataclasses.replace(snap, brokers=tuple(sorted(brokers)), partitions=tuple(partitions),
                               controller=controller)


#: The last projection made (of which snapshot, through which facts, to which partitions and brokers). A
#: dry-run observes one snapshot (``Environment.one_instant``) through a history that only grows step after
#: step: the next step's projection starts from this one and applies only the facts added since. At 10,000
#: partitions, re-applying the whole history for each of a roll's 23 observations was most of its dry-run.
_LAST: list[tuple[ClusterSnapshot, list[tuple[str, Any]], tuple[PartitionState, ...], frozenset[int]]] = []


def _resumed(snap: ClusterSnapshot, facts: list[tuple[str, Any]]) -> tuple[int, list[PartitionState], set[int]]:
    """Where to start projecting ``snap`` through ``facts``: (how many facts are already applied, the
    partitions, the brokers) — from the last projection when it was of this very snapshot through a prefix of
    these facts, else from the snapshot itself. A prefix that ends inside a run of reassignments is not
    resumed from: consecutive reassignments are applied together, not one after the other."""
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is snap and len(last[1]) <= len(facts) and facts[:len(last[1])] == last[1]:
        done = len(last[1])
        splits_a_run = (0 < done < len(facts) and facts[done - 1][0].startswith("replicas/")
                        and facts[done][0].startswith("replicas/"))
        if not splits_a_run:
            return done, list(last[2]), set(last[3])
    return 0, list(snap.partitions), set(snap.brokers)


def project_registered(registered: list[int], ctx: RunContext) -> list[int]:
    """Registered broker ids once the planned steps have run."""
    out = set(registered)
    for key, state in ctx.projected.items():
        if key.startswith("broker/"):
            broker = int(key.split("/", 1)[1])
            if state == STOPPED:
                out.discard(broker)
            else:
                out.add(broker)
    return sorted(out)
