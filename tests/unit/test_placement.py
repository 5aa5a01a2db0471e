"""The stretch layout (seed 004): its check, the DC-loss analysis, the fewest-moves planner, the estimates.

Pure logic on hand-made assignments; the same code runs on the stretch lab in
``tests/lab/test_placement_on_lab.py``.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.errors import ConfigError
from kafkaops.placement.estimate import cross_dc_factor, cross_dc_traffic, estimate_moves, parse_rate
from kafkaops.placement.layout import PER_DC, check_layout, dcs_of, moves
from kafkaops.placement.planner import batches, plan_layout, shares

# The seed's four brokers: A1 A2 in eqiad, B1 B2 in codfw.
A1, A2, B1, B2 = 1001, 1002, 2001, 2002
DC = {A1: "eqiad", A2: "eqiad", B1: "codfw", B2: "codfw"}
#: The seed's example layout, as written there.
SEED = {("t", 0): (A1, A2, B1, B2), ("t", 1): (B1, B2, A1, A2), ("t", 2): (A2, A1, B2, B1),
        ("t", 3): (B2, B1, A1, A2)}
#: What Kafka's rack-aware assignment gives RF 4 on two racks: DCs alternate.
KAFKA_DEFAULT = {("t", 0): (A1, B1, A2, B2), ("t", 1): (B1, A2, B2, A1), ("t", 2): (A2, B2, A1, B1),
                 ("t", 3): (B2, A1, B1, A2)}


def test_the_seed_layout_passes_and_kafkas_default_is_flagged() -> None:
    assert check_layout(SEED, DC, {"t": 2}).ok
    report = check_layout(KAFKA_DEFAULT, DC, {"t": 2})
    assert report.counts() == {"dc_not_grouped": 4, "leaders_split": 4}
    assert not report.critical  # two replicas per DC: a DC loss leaves min ISR


def test_rf3_fails_a_dc_loss_and_that_is_critical() -> None:
    rf3 = {("u", 0): (A1, B1, A2)}
    report = check_layout(rf3, DC, {"u": 2})
    assert {v.rule for v in report.critical} == {"dc_loss_min_isr"}
    loss = {d.dc: d for d in report.dc_loss}
    assert loss["eqiad"].under_min_isr == (("u", 0),)
    assert loss["codfw"].under_min_isr == ()
    assert loss["eqiad"].leaders_moved == 1
    offline = check_layout({("v", 0): (A1, A2)}, DC, {"v": 1})
    assert [v.rule for v in offline.critical] == ["dc_loss_offline"]


def test_leaders_of_a_topic_all_in_one_dc_are_unbalanced() -> None:
    one_dc = {("t", 0): (A1, A2, B1, B2), ("t", 1): (A2, A1, B2, B1)}
    assert check_layout(one_dc, DC, {}).leaders.unbalanced_topics == ("t",)


def test_plan_reorders_kafkas_default_without_moving_data() -> None:
    plan = plan_layout(KAFKA_DEFAULT, DC)
    assert plan.moves == 0
    assert set(plan.changed) == set(KAFKA_DEFAULT)
    assert check_layout(plan.target, DC, {"t": 2}).ok
    for tp, replicas in plan.target.items():
        assert set(replicas) == set(KAFKA_DEFAULT[tp])


def test_plan_keeps_a_good_layout_as_it_is() -> None:
    plan = plan_layout(SEED, DC)
    assert plan.moves == 0
    assert check_layout(plan.target, DC, {"t": 2}).ok
    assert plan.changed == tuple(tp for tp in sorted(SEED) if plan.target[tp] != SEED[tp])


def test_plan_rf3_to_rf4_adds_exactly_one_replica_per_partition() -> None:
    rf3 = {("u", 0): (A1, B1, A2), ("u", 1): (B1, A2, B2), ("u", 2): (A2, B2, A1), ("u", 3): (B2, A1, B1)}
    plan = plan_layout(rf3, DC, rf=4)
    assert plan.moves == 4
    assert check_layout(plan.target, DC, {"u": 2}).ok
    added = Counter(b for tp, r in plan.target.items() for b in r if b not in rf3[tp])
    assert max(added.values()) == 1  # the new replicas spread over the brokers


def test_rf_that_cannot_hold_two_per_dc_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot give each of 2 DCs 2 replicas"):
        plan_layout(SEED, DC, rf=3)
    with pytest.raises(ConfigError, match="DC eqiad has 2 broker"):
        plan_layout(SEED, DC, rf=6)
    assert shares(5, ("eqiad", "codfw")) == {"eqiad": 3, "codfw": 2}


def _lower_bound(current: dict, dc_of: dict, rf: int) -> int:
    share = shares(rf, dcs_of(dc_of))
    return sum(max(0, n - sum(1 for b in r if dc_of.get(b) == dc)) for r in current.values()
               for dc, n in share.items())


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict, dict]:
    per_dc = draw(st.integers(2, 4))
    dc_of = {1000 + i: "eqiad" for i in range(per_dc)} | {2000 + i: "codfw" for i in range(draw(st.integers(2, 4)))}
    brokers = sorted(dc_of)
    topics = draw(st.integers(1, 3))
    current = {}
    for t in range(topics):
        for p in range(draw(st.integers(1, 8))):
            rf = draw(st.integers(1, min(4, len(brokers))))
            current[(f"t{t}", p)] = tuple(draw(st.permutations(brokers))[:rf])
    return current, dc_of


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_any_placement_is_planned_to_the_layout_with_the_fewest_moves(case: tuple[dict, dict]) -> None:
    current, dc_of = case
    plan = plan_layout(current, dc_of, rf=2 * PER_DC)
    report = check_layout(plan.target, dc_of, dict.fromkeys({t for t, _ in current}, 2))
    assert not report.violations, report.violations[:3]
    assert plan.moves == moves(current, plan.target) == _lower_bound(current, dc_of, 4)
    for topic in {t for t, _ in current}:
        leaders = [r[0] for (t, _), r in plan.target.items() if t == topic]
        per_dc = Counter(dc_of[b] for b in leaders)
        assert abs(per_dc["eqiad"] - per_dc["codfw"]) <= 1


def test_batches_are_stable_and_cover_everything() -> None:
    tps = [("b", 2), ("a", 1), ("a", 0)]
    assert batches(tps, 2) == [[("a", 0), ("a", 1)], [("b", 2)]]
    with pytest.raises(ValueError):
        batches(tps, 0)


def test_moves_are_counted_from_the_leader_per_pair_and_across_dcs() -> None:
    current = {("u", 0): (A1, B1, A2)}
    target = {("u", 0): (A1, A2, B1, B2)}
    est = estimate_moves(current, target, {("u", 0): 1000}, DC, leaders={("u", 0): A1})
    assert (est.replicas, est.bytes_total, est.bytes_cross_dc) == (1, 1000, 1000)
    assert est.by_pair == {(A1, B2): 1000}
    assert est.seconds_at(100.0) == 10.0
    unknown = estimate_moves(current, target, {}, DC)
    assert unknown.unknown_size == 1 and unknown.bytes_total == 0


def test_cross_dc_traffic_is_the_seeds_2_5_n_for_rf4() -> None:
    assert cross_dc_factor(SEED[("t", 0)], DC, 2) == 2.5
    assert cross_dc_factor((A1, B1, A2), DC, 2) == 1.5
    traffic = cross_dc_traffic(SEED, dict.fromkeys(SEED, 1_000_000.0), DC)
    assert traffic.factor == 2.5 and traffic.cross_dc_bytes_per_s == 10_000_000.0


@pytest.mark.parametrize(("text", "value"), [("10MB/s", 10e6), ("512KiB", 524288.0), ("1048576", 1048576.0)])
def test_throttle_rates(text: str, value: float) -> None:
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["", "fast", "10 furlongs", "0", "-5MB/s"])
def test_bad_throttle_rates(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_a_host_without_a_pooled_service_has_nothing_to_depool() -> None:
    """A stretched cluster's broker has no conftool object: depool and repool are no-ops saying so."""
    from kafkaops.engine.step import Noop, Observation
    from kafkaops.model import Host, SshEndpoint
    from kafkaops.steps.conftool import Depool, Repool, _services

    bare = Host("kafka-stretch1001", "kafka-stretch1001.eqiad.lab.local", "127.0.20.1", 1001, "eqiad", "eqiad",
                SshEndpoint("127.0.20.1"))
    pooled = Host("kafka1001", "kafka1001.eqiad.wmnet", "127.0.10.1", 1001, "eqiad", "a",
                  SshEndpoint("127.0.10.1"), conftool_tags={"dc": "eqiad", "cluster": "c", "service": "eventbus"})
    assert _services(Depool({}), bare) == []
    assert _services(Depool({}), pooled) == ["eventbus"]
    for step in (Depool({}), Repool({})):
        decision = step.plan(Observation({"host": bare.fqdn, "name": bare.name, "services": {}}))
        assert isinstance(decision, Noop) and "no load-balanced service" in decision.reason


def test_throttle_configs_throttle_what_moves_and_nothing_else() -> None:
    """Current replicas send (leader list), added ones receive (follower list); a reorder throttles nothing."""
    from kafkaops.steps.placement import throttle_configs

    current = {("u", 0): (A1, B1, A2), ("u", 1): (B1, A1, B2, A2)}
    target = {("u", 0): (A1, A2, B1, B2), ("u", 1): (B1, B2, A1, A2)}
    brokers, topics = throttle_configs(current, target, 10_000_000)
    assert sorted(brokers) == [A1, A2, B1, B2]
    assert brokers[A1] == {"leader.replication.throttled.rate": "10000000",
                           "follower.replication.throttled.rate": "10000000"}
    assert topics == {"u": {"leader.replication.throttled.replicas": f"0:{A1},0:{B1},0:{A2}",
                            "follower.replication.throttled.replicas": f"0:{B2}"}}


@pytest.mark.parametrize(("problem", "value", "message"), [
    ("urp", ["t-0"], "1 partition(s) under-replicated"),
    ("offline", ["t-0"], "offline"),
    ("missing", [2002], "broker(s) 2002 of the target are not registered"),
    ("reassigning", ["t-1"], "a reassignment is already in progress"),
    ("throttles", ["broker:1001"], "replication throttles are set on broker:1001"),
])
def test_placement_preflight_refuses_naming_the_problem(problem: str, value: list, message: str) -> None:
    from kafkaops.engine.step import Noop, Observation
    from kafkaops.errors import SafetyRefusal
    from kafkaops.steps.placement import Preflight

    clean = {"offline": [], "urp": [], "under_min_isr": [], "missing": [], "unknown": [], "reassigning": [],
             "throttles": []}
    step = Preflight({"assignment": [["t", 0, [A1, A2, B1, B2]]]})
    assert isinstance(step.plan(Observation(clean)), Noop)
    with pytest.raises(SafetyRefusal, match=re.escape(message)):
        step.plan(Observation({**clean, problem: value}))


@pytest.mark.parametrize("value", [[], [["t", "0", [1]]], [["t", 0, []]], [["t", 0, [True]]], [["t", 0]]])
def test_a_malformed_assignment_parameter_is_refused(value: list) -> None:
    from kafkaops.placement.assignment import target_assignment

    with pytest.raises(ConfigError):
        target_assignment(value)


def test_a_batch_has_arrived_only_when_its_replicas_are_exactly_the_target_and_all_in_sync() -> None:
    """The metadata poll that spares a JVM start per poll must not call a move done early: while Kafka moves a
    partition its replica list is old + new (longer than the target), and a replica just added is not yet
    in sync; a reorder is done only once the order is the target's."""
    from kafkaops.model import ClusterSnapshot, PartitionState
    from kafkaops.steps.placement import arrived_at_target

    def state(p: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionState:
        return PartitionState(topic="t", partition=p, leader=replicas[0], replicas=replicas, isr=isr)

    snap = ClusterSnapshot(cluster="c", taken_at=0.0, brokers=(1, 2, 3, 4), controller=1, partitions=(
        state(0, (1, 2, 3), (1, 2, 3)),       # done
        state(1, (4, 2, 3, 1), (1, 2, 3)),    # moving 1 -> 4: the union
        state(2, (4, 2, 3), (2, 3)),          # at the target's brokers, 4 not in sync yet
        state(3, (2, 1, 3), (1, 2, 3)),       # a reorder not applied yet
        state(4, (1, 2, 3), (1, 2, 3)),       # not in the batch
    ))
    batch = {("t", 0): (1, 2, 3), ("t", 1): (4, 2, 3), ("t", 2): (4, 2, 3), ("t", 3): (1, 2, 3)}
    assert arrived_at_target(snap, batch) == [("t", 0)]
