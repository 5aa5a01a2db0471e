"""A broker's whole life (issue 46): the pure planners for taking a broker out and bringing one in.

Retiring a broker is three steps, cheapest first, each its own planner here:

1. **Refuse what cannot be done safely** (:func:`leadership_refusals`): a partition whose only in-sync
   replica is the broker, or whose ISR without the broker falls under ``min.insync.replicas``, cannot lose
   that broker without going offline or failing ``acks=all`` producers. Asked up front, before anything
   moves.
2. **Demote** (:func:`demote_order`): the broker goes to the end of every replica list it is in. No data
   moves; after a preferred-replica election the broker leads nothing whose other replicas are in sync,
   so clients see their one leadership change now, not at the end of hours of copying.
3. **Decommission** (:func:`decommission_plan`): the broker leaves every replica list and each partition it
   held gets exactly one replacement, in its DC and rack when there is one, on the least loaded broker.
   Nothing else is copied, so the number of copies is the least possible (one per partition it held). The
   order of those partitions' lists is then chosen (:func:`balance_leaders`, free: no data moves) so the
   brokers left share the preferred leaders evenly, per DC, for the one election at the end.

Adding a broker (:func:`add_plan`) is the inverse: the fewest copies that bring the new broker to its DC's
mean load, each one replacing a replica of a busy broker of the same DC in place, then a share of
preferred leaders by reordering the partitions it now holds (no data moves).

Pure logic: inputs are plain mappings (what the admin client or a snapshot reported), no client library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkaops.errors import ConfigError, SafetyRefusal
from kafkaops.placement.assignment import assignment_param
from kafkaops.placement.estimate import MoveEstimate, estimate_moves
from kafkaops.placement.layout import PER_DC, Assignment, TopicPartition, check_layout, dcs_of

Target = dict[TopicPartition, tuple[int, ...]]


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# --- 1. leadership: what refuses, and the demoted order ---------------------------------------------------


@dataclass(frozen=True)
class LeadershipRefusal:
    """One partition whose leadership cannot safely leave the broker, and why."""

    partition: TopicPartition
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"partition": _name(self.partition), "reason": self.reason}


def leadership_refusals(assignment: Assignment, isr: Mapping[TopicPartition, Sequence[int]],
                        leaders: Mapping[TopicPartition, int | None], broker: int,
                        min_isr: Mapping[str, int]) -> tuple[LeadershipRefusal, ...]:
    """The partitions of ``broker`` where moving leadership off it (or it off them) is unsafe or impossible.

    Per partition the broker is a replica of, the first reason that holds:

    * *offline*: no leader (``None`` or negative) — there is nothing to move, and a reassignment of it
      cannot copy anything;
    * *ISR unknown*: the snapshot has no ISR for it — a safety gate does not guess;
    * *the only in-sync replica*: no other replica can take leadership; stopping the broker takes the
      partition offline;
    * *under min ISR*: the ISR without the broker is below the topic's ``min.insync.replicas`` (1 when
      absent): ``acks=all`` producers fail the moment the broker goes (or already fail, when the broker is
      not in the ISR).

    Args:
        assignment: ``{(topic, partition): replicas}``.
        isr: The in-sync replicas of each partition.
        leaders: The current leader of each partition.
        broker: The broker to be demoted or decommissioned.
        min_isr: ``min.insync.replicas`` per topic.
    """
    out: list[LeadershipRefusal] = []
    for tp, replicas in sorted(assignment.items()):
        if broker not in replicas:
            continue
        leader = leaders.get(tp)
        in_sync = isr.get(tp)
        need = min_isr.get(tp[0], 1)
        if leader is None or leader < 0:
            reason = "offline: no leader"
        elif in_sync is None:
            reason = "ISR unknown"
        elif set(in_sync) <= {broker}:
            reason = f"broker {broker} is the only in-sync replica"
        elif len(left := set(in_sync) - {broker}) < need:
            already = "" if broker in in_sync else " already"
            reason = (f"ISR without broker {broker} is{already} {len(left)}, below min.insync.replicas {need}: "
                      "acks=all producers fail")
        else:
            continue
        out.append(LeadershipRefusal(tp, reason))
    return tuple(out)


def refuse_leadership(refusals: Sequence[LeadershipRefusal], broker: int, action: str) -> None:
    """Raise the one-line refusal for ``refusals`` (none: return): the first three named, the count of all.

    Raises:
        SafetyRefusal: Some partition cannot safely lose ``broker``.
    """
    if not refusals:
        return
    shown = "; ".join(f"{_name(r.partition)}: {r.reason}" for r in refusals[:3])
    more = f" (and {len(refusals) - 3} more)" if len(refusals) > 3 else ""
    raise SafetyRefusal(f"cannot {action} broker {broker}: {len(refusals)} partition(s) cannot safely lose it — "
                        f"{shown}{more}",
                        hint="bring the other replicas back in sync first (kafkaops status shows the ISR)")


def demote_order(assignment: Assignment, broker: int) -> Target:
    """For every partition where ``broker`` is a replica but not the last, the same replicas with ``broker``
    moved to the end (the others keep their order); only those partitions.

    Moves no data: after a preferred-replica election the broker leads nothing whose other replicas are in
    sync (Kafka elects the first in-sync replica of the list), so its leadership leaves before the broker
    stops or its data moves.
    """
    out: Target = {}
    for tp, replicas in assignment.items():
        if broker in replicas and replicas[-1] != broker:
            out[tp] = (*(b for b in replicas if b != broker), broker)
    return out


# --- load ----------------------------------------------------------------------------------------------


def bytes_per_broker(assignment: Assignment, sizes: Mapping[TopicPartition, int],
                     brokers: Sequence[int]) -> dict[int, int]:
    """Bytes each broker holds: the size of every partition it is a replica of (unknown sizes count 0)."""
    held = dict.fromkeys(brokers, 0)
    for tp, replicas in assignment.items():
        size = sizes.get(tp, 0)
        for b in replicas:
            if b in held:
                held[b] += size
    return held


def replicas_per_broker(assignment: Assignment, brokers: Sequence[int]) -> dict[int, int]:
    count = dict.fromkeys(brokers, 0)
    for replicas in assignment.values():
        for b in replicas:
            if b in count:
                count[b] += 1
    return count


def leaders_per_broker(assignment: Assignment, brokers: Sequence[int]) -> dict[int, int]:
    """Preferred leaders (first replicas) per broker."""
    count = dict.fromkeys(brokers, 0)
    for replicas in assignment.values():
        if replicas and replicas[0] in count:
            count[replicas[0]] += 1
    return count


def _merged(assignment: Assignment, target: Target) -> dict[TopicPartition, Sequence[int]]:
    return {**assignment, **target}


# --- 2. decommission -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecommissionPlan:
    """The reassignment that takes ``broker`` out: one replacement per partition it held, nothing else."""

    broker: int
    target: Target  # only the partitions that change (every one the broker held)
    replacements: Mapping[TopicPartition, int]
    moves: int  # replicas copied: one per partition the broker held
    estimate: MoveEstimate
    bytes_before: Mapping[int, int]  # per broker, the removed one included
    bytes_after: Mapping[int, int]  # per remaining broker
    cross_dc: tuple[TopicPartition, ...]  # replacements in another DC (the broker's DC had no candidate)
    leaders_before: Mapping[int, int]  # preferred leaders per broker, the removed one included
    leaders_after: Mapping[int, int]  # per remaining broker, once the target is in place
    #: Partitions whose preferred leader at the end is not the demote's (the leader during the moves):
    #: each moves leadership a second time, at the final election.
    releaded: tuple[TopicPartition, ...]

    def to_dict(self) -> dict[str, object]:
        return {"broker": self.broker, "moves": self.moves, "bytes": self.estimate.bytes_total,
                "estimate": self.estimate.to_dict(),
                "bytes_before": {str(b): n for b, n in sorted(self.bytes_before.items())},
                "bytes_after": {str(b): n for b, n in sorted(self.bytes_after.items())},
                "leaders_before": {str(b): n for b, n in sorted(self.leaders_before.items())},
                "leaders_after": {str(b): n for b, n in sorted(self.leaders_after.items())},
                "releaded": [_name(tp) for tp in self.releaded],
                "replacements": [[t, p, b] for (t, p), b in sorted(self.replacements.items())],
                "cross_dc": [_name(tp) for tp in self.cross_dc],
                "assignment": assignment_param(self.target)}


def replace_in_place(replicas: Sequence[int], old: int, new: int) -> tuple[int, ...]:
    """``replicas`` with ``new`` in ``old``'s place; when that place is first, ``new`` goes second and the
    next replica leads.

    Why: the decommission demotes first, so the leader during the copy is the next replica, already in
    sync; this order is where :func:`balance_leaders` starts from (it changes a leader only to even out the
    brokers left). Second, a same-DC replacement
    keeps the stretch layout: ``[A1, A2, B1, B2]`` without A1 becomes ``[A2, A3, B1, B2]`` — grouped, the
    first two in one DC. The same target results from the demoted order (``[A2, B1, B2, A1]`` replaced in
    place also leads with A2), so it can be planned before or after the demotion.
    """
    out = [new if b == old else b for b in replicas]
    if len(out) > 1 and replicas[0] == old:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def decommission_plan(assignment: Assignment, broker: int, *, dc_of: Mapping[int, str],
                      rack_of: Mapping[int, str], sizes: Mapping[TopicPartition, int],
                      capacity: int | None = None, min_isr: Mapping[str, int]) -> DecommissionPlan:
    """Take ``broker`` out of every replica list, one replacement each, keeping the placement rules.

    The replacement of a partition is, among the brokers of ``dc_of`` (but ``broker``) that do not hold it:
    one in the broker's DC, then in its rack, then the least loaded by bytes (held now plus planned so far),
    then with the fewest replicas, then the lowest id. Partitions are placed largest first, so the big ones
    spread before the small ones fill the gaps. A replacement from another DC is taken only when the
    broker's DC keeps at least :data:`PER_DC` replicas of the partition without it (a one-DC cluster has no
    other DC); it stands where :func:`replace_in_place` puts it. Then :func:`balance_leaders` reorders
    those partitions (and only those) so the brokers left lead evenly, per DC.

    Args:
        assignment: ``{(topic, partition): replicas}`` of the whole cluster (loads are counted over it).
        broker: The broker to retire.
        dc_of: Every broker of the cluster (``broker`` included) and its DC.
        rack_of: Broker -> rack (the inventory's ``rack``); absent brokers have no rack preference.
        sizes: Bytes of each partition; unknown ones count 0.
        capacity: Bytes a broker may hold; None: not checked.
        min_isr: ``min.insync.replicas`` per topic, for the DC-loss check of the target.

    Raises:
        SafetyRefusal: Fewer brokers left than a partition's replication factor; a partition with no
            candidate; a DC of the stretch layout with no broker left to take a partition; a partition the
            target would leave critical on a DC loss; a broker above ``capacity``.
    """
    left = sorted(b for b in dc_of if b != broker)
    held = sorted((tp for tp, r in assignment.items() if broker in r), key=lambda tp: (-sizes.get(tp, 0), tp))
    if held:
        rf, tp_max = max((len(assignment[tp]), tp) for tp in held)
        if len(left) < rf:
            raise SafetyRefusal(f"cannot decommission broker {broker}: {len(left)} broker(s) left, topic {tp_max[0]} "
                                f"has replication factor {rf}",
                                hint="add a broker first, or lower that topic's replication factor")
    multi_dc = len(dcs_of(dc_of)) > 1
    home_dc, home_rack = dc_of.get(broker), rack_of.get(broker)
    before = bytes_per_broker(assignment, sizes, [broker, *left])
    load = {b: before[b] for b in left}
    count = replicas_per_broker(assignment, left)
    target: Target = {}
    chosen: dict[TopicPartition, int] = {}
    cross: list[TopicPartition] = []
    for tp in held:
        replicas = assignment[tp]
        free = [b for b in left if b not in replicas]
        if not free:
            raise SafetyRefusal(f"cannot decommission broker {broker}: no broker left can take {_name(tp)} "
                                "(every other broker holds it)", hint="add a broker first")
        home = [b for b in free if dc_of[b] == home_dc]
        if not home and multi_dc and home_dc is not None:
            stay = sum(1 for b in replicas if b != broker and dc_of.get(b) == home_dc)
            if stay < PER_DC:
                raise SafetyRefusal(f"cannot decommission broker {broker}: no broker left in DC {home_dc} can take "
                                    f"{_name(tp)}, which would keep {stay} replica(s) there (the stretch layout "
                                    f"needs {PER_DC})", hint=f"add a broker to {home_dc} first")
        pick = min(home or free, key=lambda b: (rack_of.get(b) != home_rack, load[b], count[b], b))
        if not home:
            cross.append(tp)
        size = sizes.get(tp, 0)
        load[pick] += size
        count[pick] += 1
        chosen[tp] = pick
        target[tp] = replace_in_place(replicas, broker, pick)
    _refuse_new_criticals(assignment, target, dc_of, min_isr, broker)
    if capacity is not None:
        over = [(load[b], b) for b in left if load[b] > capacity and load[b] > before[b]]
        if over:
            projected, worst = max(over)
            raise SafetyRefusal(f"cannot decommission broker {broker}: broker {worst} would hold {projected} bytes, "
                                f"over its capacity of {capacity} ({len(over)} broker(s) over)",
                                hint="add a broker or free space first")
    demoted = dict(target)
    target = balance_leaders(assignment, target, dc_of)
    releaded = tuple(sorted(tp for tp in target if target[tp][0] != demoted[tp][0]))
    estimate = estimate_moves(assignment, target, sizes, dc_of)
    leaders_before = leaders_per_broker(assignment, [broker, *left])
    leaders_after = leaders_per_broker(_merged(assignment, target), left)
    return DecommissionPlan(broker, target, chosen, estimate.replicas, estimate, before, load, tuple(cross),
                            leaders_before, leaders_after, releaded)


def balance_leaders(assignment: Assignment, target: Target, dc_of: Mapping[int, str]) -> Target:
    """``target`` with each partition's preferred leader chosen so the brokers share leadership evenly.

    Why: after a decommission the leaders left are the demote's — the next replica of each partition the
    broker led — so one broker may end up leading far more than the others (every partition where it
    stood second). The final preferred election (after every new replica is in sync) puts leadership on
    each list's first replica; choosing that replica here costs no copy, only a reorder in partitions the
    reassignment changes anyway. The partitions outside ``target`` keep their order and their leaders: a
    decommission moves nobody else's leadership.

    Each partition of ``target`` may be led by any of its replicas **in the DC of the leader it has now**
    (its first replica): a partition led from eqiad stays led from eqiad, so leadership per DC does not
    change, and the chosen replica swaps places with the first one — a swap within one DC keeps every rule
    of the stretch layout. The counts balanced are every preferred leader per broker (the partitions
    outside ``target`` counted as they are), per DC.

    The method is the load-balancing one of semi-matchings (Harvey et al., 2003): while some broker leads
    at least two more than another it can reach through a chain of partitions (each led by one broker of
    the chain and held by the next), leadership shifts one step along the shortest such chain. When no
    chain is left the counts are optimal — the largest is the least possible, and so on down — and each
    shift changes as few leaders as the chain is long, so few partitions lead from another replica than
    the demote's.
    """
    order = {tp: list(r) for tp, r in target.items()}
    leads: dict[int, int] = {}
    for tp, replicas in assignment.items():
        head = (order[tp] if tp in order else list(replicas))[:1]
        if head and head[0] in dc_of:
            leads[head[0]] = leads.get(head[0], 0) + 1
    for b in {b for r in order.values() for b in r if b in dc_of}:
        leads.setdefault(b, 0)
    # who may lead each partition of the target: its replicas in the DC of its leader now
    options = {tp: [b for b in r if b in dc_of and dc_of[b] == dc_of.get(r[0])] for tp, r in order.items() if r}
    by_leader: dict[int, set[TopicPartition]] = {}
    for tp in options:
        by_leader.setdefault(order[tp][0], set()).add(tp)
    while (chain := _shift_chain(leads, options, by_leader)) is not None:
        source, sink, shifts = chain
        for tp, new in shifts:
            old = order[tp][0]
            j = order[tp].index(new)
            order[tp][0], order[tp][j] = new, old
            by_leader[old].discard(tp)
            by_leader.setdefault(new, set()).add(tp)
        leads[source] -= 1
        leads[sink] += 1
    return {tp: tuple(r) for tp, r in order.items()}


def _shift_chain(leads: Mapping[int, int], options: Mapping[TopicPartition, Sequence[int]],
                 by_leader: Mapping[int, set[TopicPartition]]
                 ) -> tuple[int, int, list[tuple[TopicPartition, int]]] | None:
    """The shortest chain from a broker leading the most to one leading at least two fewer, as
    ``(source, sink, [(partition, its new leader), ...])``; None when no broker has one (the counts are
    balanced as far as the replicas allow). Brokers are tried busiest first, ties by id; the search is
    breadth-first, partitions and brokers in sorted order, so the plan is the same for the same input."""
    for source in sorted(leads, key=lambda b: (-leads[b], b)):
        came: dict[int, tuple[int, TopicPartition]] = {}
        seen = {source}
        frontier = [source]
        while frontier:
            nxt: list[int] = []
            for u in frontier:
                for tp in sorted(by_leader.get(u, ())):
                    for v in options[tp]:
                        if v in seen:
                            continue
                        seen.add(v)
                        came[v] = (u, tp)
                        if leads[v] <= leads[source] - 2:
                            shifts: list[tuple[TopicPartition, int]] = []
                            w = v
                            while w != source:
                                u_prev, tp_prev = came[w]
                                shifts.append((tp_prev, w))
                                w = u_prev
                            return source, v, shifts[::-1]
                        nxt.append(v)
            frontier = nxt
    return None


def _refuse_new_criticals(current: Assignment, target: Target, dc_of: Mapping[int, str],
                          min_isr: Mapping[str, int], broker: int) -> None:
    """Refuse a target that leaves a partition offline or under min ISR on a DC loss when it was not."""
    now = check_layout({tp: current[tp] for tp in target}, dc_of, min_isr)
    after = check_layout(target, dc_of, min_isr)
    was = {(v.topic, v.partition) for v in now.critical} if now.hits else set()
    worse = [v for v in after.critical if (v.topic, v.partition) not in was] if after.hits else []
    if worse:
        v = worse[0]
        raise SafetyRefusal(f"cannot decommission broker {broker}: {v.name} would be {v.detail}",
                            hint="add a broker to the DC that lacks one first")


# --- 3. add ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddPlan:
    """The copies and reorders that give ``new_broker`` its share of data and of preferred leaders."""

    new_broker: int
    target: Target  # only the partitions that change
    moves: int
    reordered: int  # partitions given to the new broker to lead by reordering (no data moves)
    estimate: MoveEstimate
    goal: float  # the load aimed for: the mean of the new broker's DC (bytes, or replicas if no bytes)
    by_bytes: bool
    stopped: str  # goal | max_moves | no_copy_helps
    bytes_before: Mapping[int, int]
    bytes_after: Mapping[int, int]
    leaders_before: Mapping[int, int]
    leaders_after: Mapping[int, int]

    def to_dict(self) -> dict[str, object]:
        def keyed(m: Mapping[int, int]) -> dict[str, int]:
            return {str(b): n for b, n in sorted(m.items())}

        return {"new_broker": self.new_broker, "moves": self.moves, "reordered": self.reordered,
                "bytes": self.estimate.bytes_total, "estimate": self.estimate.to_dict(),
                "goal": round(self.goal, 1), "balance_by": "bytes" if self.by_bytes else "replicas",
                "stopped": self.stopped, "bytes_before": keyed(self.bytes_before),
                "bytes_after": keyed(self.bytes_after), "leaders_before": keyed(self.leaders_before),
                "leaders_after": keyed(self.leaders_after), "assignment": assignment_param(self.target)}


def add_plan(assignment: Assignment, new_broker: int, *, dc_of: Mapping[int, str], rack_of: Mapping[int, str],
             sizes: Mapping[TopicPartition, int], max_moves: int | None = None) -> AddPlan:
    """The fewest replica copies that bring ``new_broker`` to the mean load of its DC, then its share of
    preferred leaders.

    **Data.** Only brokers of the new broker's DC give replicas: a copy from another DC would change the
    partition's replicas per DC, which the stretch layout fixes (in a one-DC cluster every broker gives).
    Hence the goal is the mean of that DC, the new broker counted (in a one-DC cluster, the cluster's
    mean). Repeatedly, the most loaded giver (bytes, then replicas, then id) hands over the partition that
    brings the new broker closest to the goal, if it brings it closer and the giver stays above what the
    new broker then holds (so no broker ends above the most loaded one before); the new broker takes the
    giver's place in the list. Never a partition the new broker holds, nor one with a replica other than
    the giver's in the new broker's rack (a rack holding one replica more is a rack failure costing one
    more). Load is bytes; with no bytes known in the DC, replicas. It stops at the goal, at
    ``max_moves``, or when no copy helps (``stopped`` says which).

    **Leaders.** In the partitions it now holds, the new broker swaps places with a preferred leader of
    its DC that leads more than one partition more than it, the busiest first, until it leads its DC's
    share (its DC's preferred leaders over its brokers, rounded down). A swap within a DC keeps every
    layout rule and moves no data.

    Raises:
        ConfigError: ``new_broker`` is not in ``dc_of`` (not in the inventory).
    """
    if new_broker not in dc_of:
        raise ConfigError(f"broker {new_broker} is not in the inventory", hint="add it (with its dc and rack) first")
    dc = dc_of[new_broker]
    brokers = sorted(dc_of)
    peers = [b for b in brokers if dc_of[b] == dc]
    before = bytes_per_broker(assignment, sizes, brokers)
    count = replicas_per_broker(assignment, brokers)
    by_bytes = sum(before[b] for b in peers) > 0
    load = dict(before) if by_bytes else dict(count)
    goal = sum(load[b] for b in peers) / len(peers)
    holding: dict[int, list[TopicPartition]] = {b: [] for b in peers if b != new_broker}
    rack = rack_of.get(new_broker)
    for tp, replicas in assignment.items():
        if new_broker not in replicas:
            for b in replicas:
                if b in holding and not (rack is not None and rack_of.get(b) != rack
                                         and any(rack_of.get(o) == rack for o in replicas if o != b)):
                    holding[b].append(tp)
    target: Target = {}
    moves = 0
    stopped = "goal"
    while load[new_broker] < goal:
        if max_moves is not None and moves >= max_moves:
            stopped = "max_moves"
            break
        step = _best_copy(holding, load, count, goal, new_broker, sizes, by_bytes)
        if step is None:
            stopped = "no_copy_helps"
            break
        giver, tp = step
        weight = sizes.get(tp, 0) if by_bytes else 1
        now = target.get(tp, tuple(assignment[tp]))
        target[tp] = tuple(new_broker if b == giver else b for b in now)
        for b in now:
            if b in holding and tp in holding[b]:
                holding[b].remove(tp)  # the new broker holds it now: no other giver may hand it over
        load[giver] -= weight
        load[new_broker] += weight
        count[giver] -= 1
        count[new_broker] += 1
        moves += 1
    merged = _merged(assignment, target)
    reordered = _take_leaders(merged, target, new_broker, peers)
    estimate = estimate_moves(assignment, target, sizes, dc_of)
    return AddPlan(new_broker, target, moves, reordered, estimate, goal, by_bytes, stopped,
                   before, bytes_per_broker(merged, sizes, brokers),
                   leaders_per_broker(assignment, brokers), leaders_per_broker(merged, brokers))


def _best_copy(holding: Mapping[int, list[TopicPartition]], load: Mapping[int, int], count: Mapping[int, int],
               goal: float, new: int, sizes: Mapping[TopicPartition, int],
               by_bytes: bool) -> tuple[int, TopicPartition] | None:
    """The (giver, partition) of the next copy: the most loaded giver offering one that brings the new
    broker closer to ``goal`` while the giver keeps more than the new broker will hold."""
    gap = goal - load[new]
    for giver in sorted(holding, key=lambda b: (-load[b], -count[b], b)):
        best: tuple[float, TopicPartition] | None = None
        for tp in holding[giver]:
            w = sizes.get(tp, 0) if by_bytes else 1
            if w <= 0 or w >= load[giver] - load[new]:
                continue  # moves nothing, or the new broker would end at or above the giver's load
            miss = abs(gap - w)
            if miss < gap and (best is None or (miss, tp) < best):
                best = (miss, tp)
        if best is not None:
            return giver, best[1]
    return None


def _take_leaders(merged: dict[TopicPartition, Sequence[int]], target: Target, new: int,
                  peers: Sequence[int]) -> int:
    """Reorder partitions the new broker holds so that it leads its DC's share (the DC's preferred leaders
    over its brokers, rounded down at least and up at most); returns how many were reordered. A copy that
    replaced a preferred leader made the new broker lead it: more than its share is handed back to the
    partition's least leading other replica of the DC."""
    leads = leaders_per_broker(merged, peers)
    low, high = sum(leads.values()) // len(peers), -(-sum(leads.values()) // len(peers))
    mine = sorted(tp for tp in target if new in target[tp])
    done = 0
    while leads[new] != min(max(leads[new], low), high):
        if leads[new] < low:  # take one from the busiest leader of the DC among its partitions
            options = [(-leads[head], tp, head) for tp in mine if (head := target[tp][0]) != new and head in leads
                       and leads[head] > leads[new] + 1]
        else:  # give one to the least leading replica of the DC
            options = [(leads[b], tp, b) for tp in mine if target[tp][0] == new for b in target[tp][1:]
                       if b in leads and leads[b] < leads[new] - 1]
        if not options:
            break
        _, tp, other = min(options)
        order = list(target[tp])
        i, j = order.index(new), order.index(other)
        order[i], order[j] = other, new
        target[tp] = merged[tp] = tuple(order)
        leads[order[0]] += 1
        leads[other if order[0] == new else new] -= 1
        done += 1
    return done
