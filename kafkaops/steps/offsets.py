"""Translate a consumer group's position from one site to the other, by timestamp (:mod:`kafkaops.policy.translation`).

The plan lists, per partition, the group's position on the source, the timestamp it stands for, the
offset on the target it becomes and the records it will read twice, with the guarantee in words. The
apply commits exactly those offsets on the target (journaled with the action), then checks them.
A group with members on the target is refused, in the plan and again right before the commit (the
step's precondition): its consumers would overwrite the commit, and Kafka refuses it anyway.
Resumable: a target group already at the translated offsets is a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, ConfigError, KafkaOpsError, SafetyRefusal
from kafkaops.policy.record_identity import SCAN_LIMIT, TAIL, Located, locate, scan_gap, scan_start_ts
from kafkaops.policy.translation import SourcePosition, TopicPartitionKey, guarantee, refine, seek_times, translate
from kafkaops.queries.sites import projected_states, switched
from kafkaops.stepkit.common import StableObservation, environment, names
from kafkaops.systems.groups import IDLE_STATES

if TYPE_CHECKING:
    from kafkaops.systems.groups import ConsumerGroups


def _groups(step: StepBase, ctx: RunContext) -> list[str]:
    """The ``group`` parameter, else the consumer groups the inventory lists for ``service``."""
    if step.params.get("group"):
        return [str(step.params["group"])]

    return list(switched(environment(ctx), str(step.params["service"])).consumer_groups)


def _active(group: str, site: str, state: str, members: Sequence[str]) -> SafetyRefusal:
    """The refusal to translate a group that has consumers on the target site."""
    return SafetyRefusal(f"refusing to translate {group}: it is active on {site} ({state}, {len(members)} member(s): "
                         f"{names(list(members), 3) or '-'})",
                         hint=f"stop its consumers on {site} first: their commits would overwrite the translation")


def _already(g: dict[str, Any]) -> bool:
    """The group's committed offsets on the target are the translated ones (a resumed run's apply is done)."""
    return all(g["target_current"].get(f"{m['topic']}-{m['partition']}") == m["target_offset"] for m in g["moves"])


def _why(g: dict[str, Any], m: dict[str, Any]) -> str:
    if m["anchor_ts"] is None:
        return f"{g['from']} position {m['source_committed']} (empty) -> {g['to']} log end {m['target_offset']}"
    mm2 = "" if m.get("checkpoint") is None else f"; MirrorMaker's checkpoint: {m['checkpoint']}"
    if m.get("method") == "exact":
        return (f"{g['from']} position {m['source_committed']} -> {g['to']} offset {m['target_offset']}, exact "
                f"({m['why']}), 0 duplicates{mm2}")
    fallback = f" (not exact: {m['why']})" if m.get("why") else ""
    return (f"{g['from']} position {m['source_committed']}, CreateTime {m['anchor_ts']} - {g['margin_ms']}ms -> "
            f"{g['to']} offset {m['target_offset']}, {m['duplicates']} duplicate(s), by the margin{fallback}{mm2}")


def _locate(source: ConsumerGroups, target: ConsumerGroups, positions: list[SourcePosition], margin_ms: int,
            offsets_at: Callable[[Mapping[TopicPartitionKey, int]], Mapping[TopicPartitionKey, int | None]],
            compacted: Collection[str]) -> dict[TopicPartitionKey, Located]:
    """Where each position's last records are on the target (:mod:`kafkaops.policy.record_identity`): the
    tail read on the source, then the target scanned from where its copy can first be, bounded, to its last
    stable offset; a match trusted only where the scan provably covers the group's own copy
    (:func:`~kafkaops.policy.record_identity.scan_gap`)."""
    tails = source.tails([(p.topic, p.partition, p.committed) for p in positions if p.committed > p.start], TAIL)
    tails = {k: t for k, t in tails.items() if t}
    begin = {k: int(b) for k, b in offsets_at({k: scan_start_ts(t, margin_ms) for k, t in tails.items()}).items()
             if b is not None}
    held = target.first_held(begin)
    scans = target.record_ids(begin, limit=SCAN_LIMIT)
    located = {k: locate(tails[k], records, limit=SCAN_LIMIT, complete=complete,
                         gap=scan_gap(begin=begin[k], log_start=held[k][0], first_held=held[k][1],
                                      compacted=k[0] in compacted))
               for k, (records, complete) in scans.items()}
    for p in positions:  # the records the group read are gone from the source: nothing to look for
        if p.committed > 0 and (p.topic, p.partition) not in tails:
            located[(p.topic, p.partition)] = Located(None, f"the records before position {p.committed} are gone "
                                                            f"from the source (log start {p.start})", 0)
    return located


def _checkpoints(target: ConsumerGroups, src: str, group: str) -> tuple[dict[TopicPartitionKey, int], str]:
    """MirrorMaker's own answer, shown beside ours: a read that fails is said, never a failed translation
    (the translation does not use it)."""
    try:
        return target.checkpoints(src, group), ""
    except KafkaOpsError as exc:
        return {}, f"MirrorMaker's checkpoints not read: {exc.message}"


class Translate(StepBase):
    """Move consumer groups' committed offsets from one site to the other by record timestamp, minus a margin."""

    def _translate(self, ctx: RunContext, group: str) -> dict[str, Any]:
        env = environment(ctx)
        src, dst = str(self.params["from_site"]), str(self.params["to_site"])
        margin_ms = int(float(self.params["margin"]) * 1000)
        pattern = re.compile(str(self.params.get("topics") or ".*"))
        source, target = env.groups(src), env.groups(dst)
        state = target.state(group)
        committed = {k: v for k, v in source.committed(group).items() if pattern.fullmatch(k[0])}
        source_admin, target_admin = env.site(src).kafka, env.site(dst).kafka
        bounds = source_admin.list_offsets(list(committed))
        positions = []
        for (topic, partition), offset in sorted(committed.items()):
            start, end = bounds.get((topic, partition), (None, None))
            if start is None or end is None:
                raise CheckFailed(f"{env.site(src).cluster.name} did not give the offsets of {topic}-{partition}")
            positions.append(SourcePosition(topic, partition, offset, start, end))
        anchor_ts = source.anchors([(p.topic, p.partition, p.committed) for p in positions if p.anchor is not None])
        seeks = seek_times(positions, anchor_ts, margin_ms)
        target_topics = {t: set(m.partitions) for t, m in target_admin.metadata().topics.items()}
        missing = sorted({p.topic for p in positions} - set(target_topics))
        if missing:
            raise SafetyRefusal(f"refusing to translate {group}: {names(missing)} do not exist on "
                                f"{env.site(dst).cluster.name}", hint="check MirrorMaker mirrors them (topics: in "
                                "its config), or narrow --topics")
        # A timestamp is looked up in the same partition on the target: MirrorMaker 2 mirrors partition N to
        # partition N. A target topic with fewer partitions would have no partition to look in.
        unmatched = sorted(f"{p.topic}-{p.partition}" for p in positions if p.partition not in target_topics[p.topic])
        if unmatched:
            raise SafetyRefusal(f"refusing to translate {group}: {env.site(dst).cluster.name} has no partition "
                                f"{names(unmatched)} to translate its position in",
                                hint="mirrored topics must have the same partition count on both sites (MirrorMaker "
                                     "2 mirrors partition N to partition N): add partitions to the target topic")
        moves = translate(positions, anchor_ts, margin_ms, target_at=target_admin.offsets_at(seeks),
                          source_at=source_admin.offsets_at(seeks),
                          target_end={k: v[1] for k, v in target_admin.list_offsets(
                              [(p.topic, p.partition) for p in positions]).items()})
        method = str(self.params.get("method") or "exact")
        if method not in ("exact", "margin"):
            raise ConfigError(f"offsets.translate: method {method!r} is not exact or margin")
        if method == "exact":
            configs = target_admin.topic_configs({p.topic for p in positions})
            compacted = {t for t, c in configs.items() if "compact" in c.cleanup_policy}
            moves = refine(moves, _locate(source, target, positions, margin_ms, target_admin.offsets_at, compacted))
        checkpoints, unread = _checkpoints(target, src, group)
        moves = [replace(m, checkpoint=checkpoints.get((m.topic, m.partition))) for m in moves]
        current = target.committed(group)
        return {"group": group, "from": src, "to": dst, "margin_ms": margin_ms,
                "target_state": state.state, "target_members": list(state.members),
                "moves": [m.to_dict() for m in moves],
                "target_current": {f"{t}-{p}": o for (t, p), o in sorted(current.items())},
                "guarantee": guarantee(group, src, dst, margin_ms, moves) + (f" ({unread})" if unread else "")}

    def observe(self, ctx: RunContext) -> Observation:
        if self.params.get("service"):

            record = switched(environment(ctx), str(self.params["service"])).discovery
            if projected_states(ctx, record).get(str(self.params["to_site"])):
                return Observation({"groups": [], "active": self.params["to_site"]},
                                   summary=f"{self.params['service']} is already active in {self.params['to_site']}")
        groups = [self._translate(ctx, g) for g in _groups(self, ctx)]
        # Positions move while consumers read: the plan goes stale on which groups and partitions move and
        # whether a group is active on the target, not on the offsets (the apply re-observes them).
        stable = [{"group": g["group"], "active": bool(g["target_members"]) or g["target_state"] not in
                   ("EMPTY", "DEAD", "UNKNOWN"), "partitions": [f"{m['topic']}-{m['partition']}" for m in g["moves"]]}
                  for g in groups]
        return StableObservation({"groups": groups}, stable=stable, summary="; ".join(
            f"{g['group']}: {len(g['moves'])} partition(s), {sum(m['duplicates'] for m in g['moves'])} duplicate(s) "
            f"at most" for g in groups) or "no consumer group listed")

    def plan(self, obs: Observation) -> Action | Noop:
        groups = obs.data["groups"]
        if obs.data.get("active"):
            return Noop(f"the service is already active in {obs.data['active']}: its consumers may be reading there "
                        "(translating now would move them back)")
        if not groups:
            return Noop("no consumer group to translate (switchover.<service>.consumer_groups is empty)")
        for g in groups:
            if g["target_members"] or g["target_state"] not in IDLE_STATES:
                raise _active(g["group"], g["to"], g["target_state"], g["target_members"])
        empty = [g["group"] for g in groups if not g["moves"]]
        todo = [g for g in groups if g["moves"] and not _already(g)]
        if empty and not todo:
            return Noop(f"{names(empty)} committed no offset on {groups[0]['from']}: nothing to translate (on "
                        f"{groups[0]['to']} the consumers start where their auto.offset.reset says)")
        if not todo:
            return Noop("every group is already at its translated offsets on the target")
        commands = []
        for g in todo:
            offsets = ", ".join(f"{m['topic']}-{m['partition']}={m['target_offset']}" for m in g["moves"])
            commands.append(f"on {g['to']}: alter_consumer_group_offsets({g['group']}, {offsets})")
            commands += [f"  {m['topic']}-{m['partition']}: {_why(g, m)}" for m in g["moves"]]
        first = todo[0]
        return Action(description="translate " + ", ".join(g["group"] for g in todo) + f" from {first['from']} to "
                                  f"{first['to']} by timestamp (margin {first['margin_ms'] / 1000:g}s)",
                      commands=tuple(commands), impact=" | ".join(g["guarantee"] for g in todo),
                      data={"groups": [{"group": g["group"], "to": g["to"],
                                        "offsets": [[m["topic"], m["partition"], m["target_offset"]]
                                                    for m in g["moves"]],
                                        # per partition, for the plan's JSON and the run's report
                                        "methods": [{k: m[k] for k in ("topic", "partition", "source_committed",
                                                                       "target_offset", "method", "why",
                                                                       "duplicates", "checkpoint")}
                                                    for m in g["moves"]],
                                        "duplicates": sum(m["duplicates"] for m in g["moves"])} for g in todo]})

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Right before the commit, every group it writes is asked of the target cluster again: a consumer
        started there since the plan (the target's consumers brought up early, a run resumed days later)
        would overwrite the translation with its own commits, and Kafka refuses to alter the offsets of a
        group with members anyway — half-way through the groups. Refusing here names the group before any
        is written. No step of a run starts consumers, so there is nothing projected to read."""
        env = environment(ctx)
        clients: dict[str, ConsumerGroups] = {}
        found = []
        for g in action.data["groups"]:
            if g["to"] not in clients:
                clients[g["to"]] = env.groups(g["to"])
            state = clients[g["to"]].state(g["group"])
            if state.active:
                raise _active(g["group"], g["to"], state.state, state.members)
            found.append(f"{g['group']} on {g['to']} ({state.state})")
        return f"no member in the groups it writes: {names(found)}"

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        for g in action.data["groups"]:
            target = env.groups(g["to"])
            state = target.state(g["group"])
            if state.active:  # a consumer started between the plan and now
                raise SafetyRefusal(f"refusing to translate {g['group']}: it became active on {g['to']} "
                                    f"({state.state}, {len(state.members)} member(s))",
                                    hint=f"stop its consumers on {g['to']}, then `kafkaops resume`")
            target.set_offsets(g["group"], {(t, p): int(o) for t, p, o in g["offsets"]})
            ctx.progress(f"  {g['group']}: {len(g['offsets'])} partition(s) committed on {g['to']}")
        ctx.facts.set("translated", action.data["groups"])

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        for g in ctx.facts.get("translated") or []:
            current = env.groups(g["to"]).committed(g["group"])
            wrong = [f"{t}-{p} at {current.get((t, p))}, not {o}" for t, p, o in g["offsets"]
                     if current.get((t, p)) != o]
            if wrong:
                raise CheckFailed(f"{g['group']} on {g['to']}: {names(wrong)}")


register_step("offsets.translate", Translate, [
    Param("from_site", "str", required=True, help="the site (DC) the group read from"),
    Param("to_site", "str", required=True, help="the site (DC) it will read from"),
    Param("service", "str", default="", help="the switchover service whose consumer_groups to translate"),
    Param("group", "str", default="", help="one consumer group (instead of the service's)"),
    Param("topics", "str", default="", help="only topics matching this regular expression (default: all)"),
    Param("margin", "duration", default=60.0, min=0, max=86400,
          help="how far out of timestamp order a record may be and still not be lost"),
    Param("method", "str", default="exact",
          help="exact: where the group's last records are found once on the target, resume right after them "
               "(the margin rule where not); margin: the margin rule everywhere"),
], effect="disruptive")
