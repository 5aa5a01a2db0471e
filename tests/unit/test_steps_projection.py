"""How a dry-run sees the cluster through the states earlier steps leave a broker in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.engine.context import Projection, RunContext
from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.stepkit.projection import (
    CLUSTER_ELECTED,
    ELECTED,
    IN_SYNC,
    STARTED,
    STOPPED,
    broker_key,
    project_registered,
    project_snapshot,
    provenance,
)


def _snap() -> ClusterSnapshot:
    parts = (
        PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3)),
        PartitionState("t", 1, 2, (2, 3, 1), (2, 3, 1)),
        PartitionState("t", 2, 3, (3, 1, 2), (3, 1, 2)),
        PartitionState("u", 0, 1, (1, 2), (1, 2)),
    )
    return ClusterSnapshot("c", 0.0, (1, 2, 3), 1, parts)


def _ctx(**states: object) -> RunContext:
    projected = Projection()
    for key, value in states.items():
        projected.set(key.replace("_", "/"), value, f"h step 1 ({key})")
    return RunContext(run_id="", operator="o", reason="r", task=None, target="h", params={}, env=None,
                      projected=projected)


def _view(snap: ClusterSnapshot) -> dict[str, tuple[int | None, tuple[int, ...]]]:
    return {f"{p.topic}-{p.partition}": (p.leader, p.isr) for p in snap.partitions}


def test_no_projection_is_the_live_snapshot() -> None:
    snap = _snap()
    assert project_snapshot(snap, _ctx()) is snap


def test_a_stopped_broker_leaves_every_isr_and_its_leadership_moves_to_the_next_replica() -> None:
    snap = project_snapshot(_snap(), _ctx(broker_1=STOPPED))
    assert snap.brokers == (2, 3)
    assert snap.controller == 2
    assert _view(snap) == {"t-0": (2, (2, 3)), "t-1": (2, (2, 3)), "t-2": (3, (3, 2)), "u-0": (2, (2,))}


def test_back_but_not_elected_it_leads_nothing_even_in_sync() -> None:
    started = project_snapshot(_snap(), _ctx(broker_1=STARTED))
    assert started.brokers == (1, 2, 3)
    assert _view(started)["t-0"] == (2, (2, 3))
    in_sync = project_snapshot(_snap(), _ctx(broker_1=IN_SYNC))
    assert _view(in_sync)["t-0"] == (2, (1, 2, 3))  # back in the ISR, leadership not back yet
    assert _view(in_sync)["u-0"] == (2, (1, 2))


def test_an_election_gives_the_broker_its_preferred_partitions_back() -> None:
    elected = project_snapshot(_snap(), _ctx(broker_1=ELECTED))
    assert _view(elected) == _view(_snap())
    whole = project_snapshot(_snap(), _ctx(broker_1=IN_SYNC, cluster_elected=True))
    assert _view(whole) == _view(_snap())


def test_registered_brokers_and_provenance() -> None:
    ctx = _ctx(broker_3=STOPPED)
    assert project_registered([1, 2, 3], ctx) == [1, 2]
    assert provenance(ctx, [broker_key(3)]) == " (projected: after h step 1 (broker_3))"
    assert provenance(ctx, [broker_key(2)]) == ""
    assert CLUSTER_ELECTED == "cluster/elected"


def test_no_step_module_asks_whether_it_is_a_dry_run() -> None:
    """Steps plan against projected state; only adapters know about dry-runs (and refuse writes)."""
    from pathlib import Path

    import kafkaops.steps

    offenders = [p.name for p in Path(kafkaops.steps.__file__).parent.glob("*.py") if "dry_run" in p.read_text()]
    assert offenders == []


def test_a_planned_reassignment_gives_the_steps_after_it_the_new_order_and_brokers() -> None:
    """A demote's reorder makes the next election move the leader; a move off broker 1 takes it out of the
    list and the ISR, the new replica in sync (Kafka completes a reassignment only then), and its leadership
    to the first replica left."""
    projected = Projection()
    projected.set("replicas/t/0", [2, 3, 1], "h step 3 (placement.reassign)")
    projected.set("replicas/u/0", [2, 4], "h step 3 (placement.reassign)")
    ctx = RunContext(run_id="", operator="o", reason="r", task=None, target="h", params={}, env=None,
                     projected=projected)
    snap = project_snapshot(_snap(), ctx)
    by = {f"{p.topic}-{p.partition}": p for p in snap.partitions}
    assert by["t-0"].replicas == (2, 3, 1) and by["t-0"].preferred_leader == 2 and by["t-0"].leader == 1
    assert by["u-0"].replicas == (2, 4) and by["u-0"].isr == (2, 4) and by["u-0"].leader == 2
    assert by["t-1"] == _snap().partitions[1]  # not reassigned: as it is
    projected.set(CLUSTER_ELECTED, True, "h step 4 (kafka.preferred_election)")
    assert {p.topic + str(p.partition): p.leader for p in project_snapshot(_snap(), ctx).partitions}["t0"] == 2


def test_a_reorder_planned_after_an_election_leaves_the_elected_leader_until_the_next_election() -> None:
    """A decommission: the demote's reorder, its election, then the moves' balanced order. The steps
    between the moves and the final election see the election's leader, off the new preferred one (so the
    dry-run plan shows that final election as work to do); a fact set twice counts at both places."""
    projected = Projection()
    projected.set("replicas/t/0", [2, 3, 1], "h step 5 (placement.reassign)")  # broker 1 demoted
    projected.set(broker_key(2), ELECTED, "h step 6 (kafka.preferred_election)")
    projected.set(broker_key(3), ELECTED, "h step 6 (kafka.preferred_election)")
    ctx = RunContext(run_id="", operator="o", reason="r", task=None, target="h", params={}, env=None,
                     projected=projected)
    assert {p.topic + str(p.partition): p.leader for p in project_snapshot(_snap(), ctx).partitions}["t0"] == 2
    projected.set("replicas/t/0", [3, 2, 4], "h step 8 (placement.reassign)")  # 1 out, 4 in, 3 first
    t0 = next(p for p in project_snapshot(_snap(), ctx).partitions if (p.topic, p.partition) == ("t", 0))
    assert t0.replicas == (3, 2, 4) and t0.leader == 2 and t0.preferred_leader == 3
    assert [k for k, _ in projected.history()].count("replicas/t/0") == 2
    projected.set(CLUSTER_ELECTED, True, "h step 9 (kafka.cluster_whole)")
    t0 = next(p for p in project_snapshot(_snap(), ctx).partitions if (p.topic, p.partition) == ("t", 0))
    assert t0.leader == 3


def _projected(snap: ClusterSnapshot, history: list[tuple[str, object]]) -> RunContext:
    projected = Projection()
    for i, (key, value) in enumerate(history):
        projected.set(key, value, f"h step {i}")
    return RunContext(run_id="", operator="o", reason="r", task=None, target="h", params={}, env=None,
                      projected=projected)


_FACTS = st.one_of(
    st.tuples(st.sampled_from([broker_key(b) for b in (1, 2, 3)]), st.sampled_from([STOPPED, STARTED, IN_SYNC,
                                                                                    ELECTED])),
    st.tuples(st.just(CLUSTER_ELECTED), st.just(True)),
    st.tuples(st.sampled_from(["replicas/t/0", "replicas/t/1", "replicas/u/0"]),
              st.permutations([1, 2, 3]).map(lambda r: r[:2])),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_FACTS, max_size=12))
def test_a_plan_projected_step_by_step_sees_what_each_whole_history_does(history: list[tuple[str, object]]) -> None:
    """Planning projects one pinned snapshot through a history that grows step by step, and each projection
    resumes from the one before (issue 47: a dry-run at 10,000 partitions). Whatever the history — broker
    states, elections, runs of reassignments split anywhere — each step sees exactly what projecting its
    whole history from the live snapshot gives. (A key set twice keeps its first place in the history.)"""
    from kafkaops.stepkit import projection

    snap = _snap()
    for n in range(len(history) + 1):
        resumed = project_snapshot(snap, _projected(snap, history[:n]))
        projection._LAST.clear()
        fresh = project_snapshot(snap, _projected(snap, history[:n]))
        assert resumed == fresh, (n, history[:n])
        # the next step resumes from this one, as planning does
        project_snapshot(snap, _projected(snap, history[:n]))
    # a history that does not extend the last one (another plan of the same snapshot) starts afresh
    other = history[::-1]
    after = project_snapshot(snap, _projected(snap, other))
    projection._LAST.clear()
    assert after == project_snapshot(snap, _projected(snap, other)), other
