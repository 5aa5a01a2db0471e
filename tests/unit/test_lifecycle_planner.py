"""A broker's whole life (issue 46): the demotion, the refusals, the decommission and the add planners.

Pure logic on hand-made assignments and on hypothesis' random ones: the properties an operator relies on
(the broker is gone everywhere, one copy per partition it held, the DCs keep their replicas, nothing ends
heavier than the heaviest broker was) are checked on any cluster, not only the examples.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.errors import ConfigError, SafetyRefusal
from kafkaops.placement.layout import PER_DC, check_layout, dcs_of, moves
from kafkaops.placement.lifecycle import (
    add_plan,
    bytes_per_broker,
    decommission_plan,
    demote_order,
    leaders_per_broker,
    leadership_refusals,
    refuse_leadership,
    replace_in_place,
)

A1, A2, A3, B1, B2, B3 = 1001, 1002, 1003, 2001, 2002, 2003
#: The stretch lab: three brokers per DC, one rack each.
STRETCH = {A1: "eqiad", A2: "eqiad", A3: "eqiad", B1: "codfw", B2: "codfw", B3: "codfw"}
RACKS = {b: f"rack{b}" for b in STRETCH}
LAID_OUT = {("t", 0): (A1, A2, B1, B2), ("t", 1): (B1, B2, A1, A2), ("t", 2): (A2, A3, B2, B3),
            ("t", 3): (B3, B1, A3, A1), ("u", 0): (A3, A1, B2, B1)}
#: One DC, four brokers, RF 3.
ONE_DC = {1: "dc", 2: "dc", 3: "dc", 4: "dc"}
RF3 = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 4), ("t", 2): (3, 4, 1), ("t", 3): (4, 1, 2)}


# --- demotion and its refusals ---------------------------------------------------------------------------


def test_demote_moves_the_broker_last_and_returns_only_what_changes() -> None:
    assert demote_order(RF3, 4) == {("t", 2): (3, 1, 4), ("t", 3): (1, 2, 4)}  # t-1 has 4 last already
    assert demote_order(LAID_OUT, A1) == {("t", 0): (A2, B1, B2, A1), ("t", 1): (B1, B2, A2, A1),
                                          ("u", 0): (A3, B2, B1, A1)}  # t-3 has A1 last already
    assert demote_order(RF3, 9) == {}


def test_leadership_refusals_name_the_partition_and_why() -> None:
    isr = {("t", 0): [1, 2, 3], ("t", 1): [4], ("t", 2): [4, 1], ("t", 3): [1, 2]}
    leaders = {("t", 0): 1, ("t", 1): 4, ("t", 2): 4, ("t", 3): 1}
    found = leadership_refusals(RF3, isr, leaders, 4, {"t": 2})
    # t-0 is not the broker's; t-3: 4 is out of the ISR and the 2 left meet min ISR
    assert [(r.partition, r.reason) for r in found] == [
        (("t", 1), "broker 4 is the only in-sync replica"),
        (("t", 2), "ISR without broker 4 is 1, below min.insync.replicas 2: acks=all producers fail"),
    ]
    assert leadership_refusals(RF3, isr, leaders, 4, {}) == found[:1]  # min ISR 1: only the sole ISR refuses
    assert found[0].to_dict() == {"partition": "t-1", "reason": "broker 4 is the only in-sync replica"}


def test_offline_unknown_and_already_under_min_isr_partitions_refuse() -> None:
    isr = {("t", 2): [1], ("t", 3): [1, 2]}
    leaders = {("t", 1): None, ("t", 2): 1, ("t", 3): -1}
    reasons = {r.partition: r.reason for r in leadership_refusals(RF3, isr, leaders, 4, {"t": 2})}
    assert reasons == {("t", 1): "offline: no leader", ("t", 3): "offline: no leader",
                       ("t", 2): "ISR without broker 4 is already 1, below min.insync.replicas 2: acks=all "
                                 "producers fail"}
    assert leadership_refusals({("t", 1): (2, 3, 4)}, {}, {("t", 1): 2}, 2, {})[0].reason == "ISR unknown"


def test_refusals_raise_one_line_naming_the_first_three() -> None:
    refuse_leadership((), 4, "demote")  # nothing to refuse
    isr = {tp: [4] for tp in RF3}
    found = leadership_refusals(RF3, isr, dict.fromkeys(RF3, 4), 4, {})
    with pytest.raises(SafetyRefusal, match=re.escape("cannot demote broker 4: 3 partition(s)")) as err:
        refuse_leadership(found, 4, "demote")
    assert "\n" not in str(err.value) and err.value.hint


# --- decommission: literal cases ---------------------------------------------------------------------------


def test_one_dc_remove_one_of_four_each_partition_gets_the_broker_it_lacks() -> None:
    plan = decommission_plan(RF3, 4, dc_of=ONE_DC, rack_of={}, sizes=dict.fromkeys(RF3, 10), min_isr={"t": 2})
    # 4 was 2nd in t-1 and t-2 (the replacement takes its place) and first in t-3 (the replacement goes
    # second: the next replica, the leader after the demotion, keeps leading)
    assert plan.target == {("t", 1): (2, 3, 1), ("t", 2): (3, 2, 1), ("t", 3): (1, 3, 2)}
    assert plan.moves == 3 == moves(RF3, plan.target)
    assert plan.estimate.bytes_total == 30
    assert plan.bytes_before == {4: 30, 1: 30, 2: 30, 3: 30} and plan.bytes_after == {1: 40, 2: 40, 3: 40}
    as_json = plan.to_dict()
    assert as_json["moves"] == 3 and as_json["bytes"] == 30 and ["t", 3, [1, 3, 2]] in as_json["assignment"]


def test_stretch_remove_a_broker_keeps_each_dc_its_replicas_and_the_layout() -> None:
    sizes = {("t", 0): 100, ("t", 1): 200, ("t", 2): 300, ("t", 3): 400, ("u", 0): 50}
    plan = decommission_plan(LAID_OUT, A1, dc_of=STRETCH, rack_of=RACKS, sizes=sizes, min_isr={"t": 2, "u": 2})
    assert set(plan.target) == {tp for tp, r in LAID_OUT.items() if A1 in r}
    assert all(STRETCH[b] == "eqiad" for b in plan.replacements.values()) and not plan.cross_dc
    after = {**LAID_OUT, **plan.target}
    assert check_layout(after, {b: d for b, d in STRETCH.items() if b != A1}, {"t": 2, "u": 2}).violations == ()
    # largest first: t-3 (400) to A2 (the lighter of A2, A3), then t-1 to A3, t-0 to A3, u-0 to A2
    assert plan.target[("t", 3)] == (B3, B1, A3, A2)
    assert plan.target[("t", 0)] == (A2, A3, B1, B2)  # A1 led: A2 (the leader after demotion) leads
    assert plan.estimate.bytes_cross_dc == 600  # t-1 and t-3 are copied from their codfw leaders


def test_the_target_leads_alike_whether_planned_before_or_after_demotion() -> None:
    plan = decommission_plan(LAID_OUT, A1, dc_of=STRETCH, rack_of=RACKS, sizes={}, min_isr={})
    demoted = {**LAID_OUT, **demote_order(LAID_OUT, A1)}
    again = decommission_plan(demoted, A1, dc_of=STRETCH, rack_of=RACKS, sizes={}, min_isr={})
    for tp, replicas in plan.target.items():  # balanced already: every partition led by the demote's leader
        assert replicas[0] == demoted[tp][0] == again.target[tp][0]
        assert set(replicas) == set(again.target[tp])
    assert plan.releaded == () == again.releaded


def test_the_brokers_left_share_the_leaders_the_demote_piled_on_one() -> None:
    # broker 4 leads four partitions and broker 1 is second in each: after the demote broker 1 leads five
    # of seven, 2 and 3 one each
    current = {("t", 0): (4, 1, 2), ("t", 1): (4, 1, 3), ("t", 2): (4, 1, 2), ("t", 3): (4, 1, 3),
               ("u", 0): (1, 2, 3), ("u", 1): (2, 3, 1), ("u", 2): (3, 1, 2)}
    demoted = {**current, **demote_order(current, 4)}
    assert leaders_per_broker(demoted, [1, 2, 3]) == {1: 5, 2: 1, 3: 1}
    plan = decommission_plan(current, 4, dc_of=ONE_DC, rack_of={}, sizes={}, min_isr={})
    assert plan.leaders_before == {4: 4, 1: 1, 2: 1, 3: 1}
    assert sorted(plan.leaders_after.values()) == [2, 2, 3]  # 7 leaders over 3 brokers
    assert plan.moves == 4 and set(plan.target) == {("t", 0), ("t", 1), ("t", 2), ("t", 3)}  # u-* untouched
    assert len(plan.releaded) == 2  # the fewest: broker 1 gives away two of its five
    assert plan.to_dict()["leaders_after"] == {str(b): n for b, n in plan.leaders_after.items()}


def test_leadership_stays_in_its_dc_when_balanced() -> None:
    # A1 led both; after the demote A2 leads both (second in each) and A3 none: one goes to A3, none to codfw
    current = {("t", 0): (A1, A2, B1, B2), ("t", 1): (A1, A2, B2, B3)}
    dc_of = {A1: "eqiad", A2: "eqiad", A3: "eqiad", B1: "codfw", B2: "codfw", B3: "codfw"}
    plan = decommission_plan(current, A1, dc_of=dc_of, rack_of={}, sizes={}, min_isr={})
    assert plan.leaders_after == {A2: 1, A3: 1, B1: 0, B2: 0, B3: 0}
    assert {plan.target[tp][:2] for tp in current} == {(A2, A3), (A3, A2)}  # the first two stay in eqiad


def test_the_same_rack_is_preferred_within_the_dc() -> None:
    racks = {**RACKS, A3: RACKS[A1]}
    plan = decommission_plan({("t", 0): (A1, B1)}, A1, dc_of=STRETCH, rack_of=racks, sizes={}, min_isr={})
    assert plan.replacements == {("t", 0): A3}


def test_rf3_on_three_brokers_is_refused() -> None:
    with pytest.raises(SafetyRefusal, match=re.escape("cannot decommission broker 3: 2 broker(s) left, topic t "
                                                      "has replication factor 3")):
        decommission_plan({("t", 0): (1, 2, 3)}, 3, dc_of={1: "d", 2: "d", 3: "d"}, rack_of={}, sizes={},
                          min_isr={})


def test_a_dc_with_no_broker_left_for_its_share_is_refused_naming_the_dc() -> None:
    dc_of = {A1: "eqiad", A2: "eqiad", B1: "codfw", B2: "codfw", B3: "codfw"}
    with pytest.raises(SafetyRefusal, match=re.escape("no broker left in DC eqiad can take t-0")):
        decommission_plan({("t", 0): (A1, A2, B1, B2)}, A1, dc_of=dc_of, rack_of={}, sizes={}, min_isr={})
    # three replicas in eqiad: two stay without A1, so another DC may take the copy
    dc_of = {A1: "eqiad", A2: "eqiad", A3: "eqiad", B1: "codfw", B2: "codfw", B3: "codfw"}
    plan = decommission_plan({("t", 0): (A1, A2, A3, B1, B2)}, A1, dc_of=dc_of, rack_of={}, sizes={}, min_isr={})
    assert plan.replacements == {("t", 0): B3} and plan.cross_dc == (("t", 0),)


def test_a_broker_over_capacity_is_refused_naming_it() -> None:
    sizes = dict.fromkeys(RF3, 10)
    with pytest.raises(SafetyRefusal, match=re.escape("broker 3 would hold 40 bytes, over its capacity of 35 "
                                                      "(3 broker(s) over)")):
        decommission_plan(RF3, 4, dc_of=ONE_DC, rack_of={}, sizes=sizes, capacity=35, min_isr={})
    assert decommission_plan(RF3, 4, dc_of=ONE_DC, rack_of={}, sizes=sizes, capacity=40, min_isr={}).moves == 3


def test_replace_in_place() -> None:
    assert replace_in_place((1, 2, 3), 2, 9) == (1, 9, 3)
    assert replace_in_place((1, 2, 3), 1, 9) == (2, 9, 3)
    assert replace_in_place((1,), 1, 9) == (9,)


# --- add: literal cases ----------------------------------------------------------------------------------


def test_add_to_one_dc_takes_from_the_busiest_until_the_mean() -> None:
    dc_of = {**ONE_DC, 5: "dc"}
    sizes = {("t", 0): 10, ("t", 1): 10, ("t", 2): 10, ("t", 3): 10}
    plan = add_plan(RF3, 5, dc_of=dc_of, rack_of={}, sizes=sizes)
    # 120 bytes over 5 brokers: 24 each; the new broker takes two partitions (20): a third would leave it
    # at 30, as heavy as its giver and further from 24
    assert plan.moves == 2 == moves(RF3, plan.target) and plan.stopped == "no_copy_helps"
    # from 1 (the busiest, ties by replicas then id), then from 2; both were preferred leaders, and the new
    # broker took their places: it would lead two where its share is 4 // 5 to 1, so it hands t-0 back to
    # the replica of t-0 leading the least (2, which had lost t-1)
    assert plan.target == {("t", 0): (2, 5, 3), ("t", 1): (5, 3, 4)}
    assert plan.bytes_after == {1: 20, 2: 20, 3: 30, 4: 30, 5: 20}
    assert plan.leaders_after == {1: 0, 2: 1, 3: 1, 4: 1, 5: 1} and plan.reordered == 1
    assert plan.to_dict()["balance_by"] == "bytes"


def test_add_to_the_stretch_takes_only_from_its_dc_and_leads_its_share() -> None:
    dc_of = {**STRETCH, 1004: "eqiad"}
    sizes = dict.fromkeys(LAID_OUT, 100)
    plan = add_plan(LAID_OUT, 1004, dc_of=dc_of, rack_of={}, sizes=sizes)
    for tp, replicas in plan.target.items():
        assert Counter(dc_of[b] for b in replicas) == Counter(dc_of[b] for b in LAID_OUT[tp])
    assert plan.moves == 2  # eqiad holds 1000 bytes: 250 each with the new broker, two copies of 100
    assert plan.leaders_after[1004] == 1  # eqiad leads t-0, t-2, u-0: the new broker leads one (rounded down)
    assert check_layout({**LAID_OUT, **plan.target}, dc_of, {"t": 2, "u": 2}).violations == ()


def test_add_balances_replica_counts_when_no_size_is_known_and_respects_max_moves() -> None:
    dc_of = {**ONE_DC, 5: "dc"}
    plan = add_plan(RF3, 5, dc_of=dc_of, rack_of={}, sizes={})
    assert plan.to_dict()["balance_by"] == "replicas" and plan.moves == 2
    capped = add_plan(RF3, 5, dc_of=dc_of, rack_of={}, sizes={}, max_moves=1)
    assert capped.moves == 1 and capped.stopped == "max_moves"


def test_add_never_crowds_a_rack() -> None:
    dc_of = {**ONE_DC, 5: "dc"}
    racks = {1: "r1", 2: "r2", 3: "r3", 4: "r4", 5: "r1"}
    plan = add_plan(RF3, 5, dc_of=dc_of, rack_of=racks, sizes={})
    for tp, replicas in plan.target.items():
        assert Counter(racks[b] for b in replicas).most_common(1)[0][1] == 1, (tp, replicas)


def test_a_broker_outside_the_inventory_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="broker 9 is not in the inventory"):
        add_plan(RF3, 9, dc_of=ONE_DC, rack_of={}, sizes={})


# --- properties on random clusters ----------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict, dict, dict, dict]:
    """One or two DCs of 1-4 brokers, random replica lists (RF 1-4), random sizes, racks of 1-2 brokers."""
    dcs = draw(st.sampled_from([["eqiad"], ["eqiad", "codfw"]]))
    dc_of = {1000 * (i + 1) + j: dc for i, dc in enumerate(dcs) for j in range(draw(st.integers(1, 4)))}
    rack_of = {b: f"{dc_of[b]}-r{b % 2}" for b in dc_of}
    brokers = sorted(dc_of)
    current, sizes = {}, {}
    for t in range(draw(st.integers(1, 3))):
        for p in range(draw(st.integers(1, 6))):
            rf = draw(st.integers(1, min(4, len(brokers))))
            current[(f"t{t}", p)] = tuple(draw(st.permutations(brokers))[:rf])
            sizes[(f"t{t}", p)] = draw(st.integers(0, 1000))
    return current, dc_of, rack_of, sizes


@settings(max_examples=300, deadline=None)
@given(clusters(), st.data())
def test_decommission_removes_the_broker_with_one_copy_per_partition_it_held(case: tuple, data: st.DataObject
                                                                              ) -> None:
    current, dc_of, rack_of, sizes = case
    broker = data.draw(st.sampled_from(sorted(dc_of)))
    held = [tp for tp, r in current.items() if broker in r]
    left = [b for b in dc_of if b != broker]
    try:
        plan = decommission_plan(current, broker, dc_of=dc_of, rack_of=rack_of, sizes=sizes, min_isr={})
    except SafetyRefusal as refusal:  # only for a reason that holds
        text = str(refusal)
        if "broker(s) left" in text:
            assert max(len(current[tp]) for tp in held) > len(left)
        else:
            assert "no broker left in DC" in text, text
            assert len(dcs_of(dc_of)) > 1
        return
    assert set(plan.target) == set(held)
    assert plan.moves == len(held) == moves(current, plan.target)
    demoted = {**current, **demote_order(current, broker)}
    for tp, replicas in plan.target.items():
        assert broker not in replicas
        # the leader at the end is led from the DC the demote's leader is in; another replica than the
        # demote's leads only in the partitions the plan names (their second change, at the final election)
        assert len(replicas) == 1 or dc_of[replicas[0]] == dc_of[demoted[tp][0]]
        assert (replicas[0] != demoted[tp][0] and len(replicas) > 1) == (tp in plan.releaded)
        assert len(replicas) == len(set(replicas)) == len(current[tp])
        assert set(replicas) - set(current[tp]) == {plan.replacements[tp]}
        home = dc_of[broker]
        if any(dc_of[b] == home and b not in current[tp] for b in left):  # the DC had a candidate
            assert Counter(dc_of[b] for b in replicas) == Counter(dc_of[b] for b in current[tp])
        elif len(dcs_of(dc_of)) > 1:  # another DC took it only if the broker's DC keeps its share
            assert sum(1 for b in replicas if dc_of[b] == home) >= PER_DC
    after = {**current, **plan.target}
    assert plan.bytes_after == {b: n for b, n in bytes_per_broker(after, sizes, sorted(dc_of)).items() if b != broker}
    assert plan.estimate.bytes_total == sum(sizes[tp] for tp in held)
    assert plan.leaders_after == leaders_per_broker(after, sorted(left))


def _leader_counts(assignment: dict, dc_of: dict) -> dict[str, list[int]]:
    """Preferred leaders per broker of each DC, largest first (the balance judged per DC)."""
    per_dc: dict[str, list[int]] = {}
    for b, n in leaders_per_broker(assignment, sorted(dc_of)).items():
        per_dc.setdefault(dc_of[b], []).append(n)
    return {dc: sorted(ns, reverse=True) for dc, ns in per_dc.items()}


@settings(max_examples=300, deadline=None)
@given(clusters(), st.data())
def test_decommission_leaders_are_as_balanced_as_any_order_of_the_same_replicas_allows(
        case: tuple, data: st.DataObject) -> None:
    """Against brute force: every order of the moved partitions' replicas that keeps each one led from its
    DC (the demote's leader's), the plan's leader counts per DC are the least possible, largest first —
    and nothing outside the moved partitions is reordered."""
    current, dc_of, rack_of, sizes = case
    broker = data.draw(st.sampled_from(sorted(dc_of)))
    try:
        plan = decommission_plan(current, broker, dc_of=dc_of, rack_of=rack_of, sizes=sizes, min_isr={})
    except SafetyRefusal:
        return
    left = {b: d for b, d in dc_of.items() if b != broker}
    demoted = {**current, **demote_order(current, broker)}
    choices = {tp: [b for b in r if dc_of[b] == dc_of[demoted[tp][0]]] for tp, r in plan.target.items()}
    combos = 1
    for options in choices.values():
        combos *= len(options)
    if combos > 3000:
        return  # too many to enumerate; the smaller clusters cover the rule
    best = None
    tps = sorted(choices)
    for heads in itertools.product(*(choices[tp] for tp in tps)):
        trial = dict(current)
        for tp, head in zip(tps, heads, strict=True):
            trial[tp] = (head, *(b for b in plan.target[tp] if b != head))
        counts = _leader_counts({tp: r for tp, r in trial.items() if broker not in r}, left)
        key = sorted((dc, ns) for dc, ns in counts.items())
        best = key if best is None or key < best else best
    after = {**current, **plan.target}
    assert sorted(_leader_counts({tp: r for tp, r in after.items() if broker not in r}, left).items()) == best


@settings(max_examples=300, deadline=None)
@given(clusters(), st.data())
def test_add_never_doubles_a_replica_nor_raises_the_heaviest_broker(case: tuple, data: st.DataObject) -> None:
    current, dc_of, rack_of, sizes = case
    new = max(dc_of) + 1 if data.draw(st.booleans()) else 1000 * len(dcs_of(dc_of)) + 99
    dc_of = {**dc_of, new: dc_of[max(b for b in dc_of if b < new)]}
    rack_of = {**rack_of, new: data.draw(st.sampled_from([None, *sorted(set(rack_of.values()))]))}
    plan = add_plan(current, new, dc_of=dc_of, rack_of={b: r for b, r in rack_of.items() if r}, sizes=sizes)
    after = {**current, **plan.target}
    for tp, replicas in plan.target.items():
        assert len(replicas) == len(set(replicas)) == len(current[tp])
        assert Counter(dc_of[b] for b in replicas) == Counter(dc_of[b] for b in current[tp])
        assert set(replicas) - set(current[tp]) <= {new}
    assert plan.moves == moves(current, plan.target)
    before = bytes_per_broker(current, sizes, sorted(dc_of))
    assert max(plan.bytes_after.values()) <= max(before.values())
    assert plan.bytes_after == bytes_per_broker(after, sizes, sorted(dc_of))
    assert plan.leaders_after == leaders_per_broker(after, sorted(dc_of))


@settings(max_examples=200, deadline=None)
@given(clusters(), st.data())
def test_demote_keeps_the_replicas_and_puts_the_broker_last(case: tuple, data: st.DataObject) -> None:
    current, dc_of, _, _ = case
    broker = data.draw(st.sampled_from(sorted(dc_of)))
    demoted = demote_order(current, broker)
    for tp, replicas in current.items():
        now = demoted.get(tp, tuple(replicas))
        assert sorted(now) == sorted(replicas)
        if broker in replicas:
            assert now[-1] == broker
            assert [b for b in now if b != broker] == [b for b in replicas if b != broker]
        else:
            assert tp not in demoted
