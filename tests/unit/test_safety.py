"""Unit tests for the safety gates (kafkaops.policy: cluster health, stop impact, pre-flight, leaders) on
small hand-built snapshots."""

from __future__ import annotations

import gc
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.errors import SafetyRefusal
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy import snapshot_scan
from kafkaops.policy.availability import cluster_health
from kafkaops.policy.leaders import leaders_not_preferred
from kafkaops.policy.preflight import preflight
from kafkaops.policy.snapshot_scan import partition_name, summarize_names
from kafkaops.policy.stop_impact import partitions_not_in_isr, stop_impact


def P(topic: str, partition: int, leader: int | None, replicas: tuple[int, ...], isr: tuple[int, ...]):
    return PartitionState(topic=topic, partition=partition, leader=leader, replicas=replicas, isr=isr)


def snap(
    partitions: list[PartitionState],
    brokers: tuple[int, ...] = (1001, 1002, 1003),
    controller: int | None = 1001,
    min_isr: dict[str, int] | None = None,
) -> ClusterSnapshot:
    topics = {}
    for p in partitions:
        if p.topic not in topics:
            m = (min_isr or {}).get(p.topic, 1)
            topics[p.topic] = TopicConfig(p.topic, min_insync_replicas=m, replication_factor=len(p.replicas))
    return ClusterSnapshot("eqiad", 0.0, brokers, controller, tuple(partitions), topics)


def runbook_rf2() -> ClusterSnapshot:
    """The `kafka topic --describe` output from the EventBus runbook: RF 2, brokers 1001/1002."""
    a, b = (1001, 1002), (1002, 1001)
    parts = [
        P("mediawiki.page_delete", 0, 1001, a, a),
        P("mediawiki.page_edit", 0, 1001, a, a),
        P("mediawiki.page_move", 0, 1001, a, a),
        P("mediawiki.page_restore", 0, 1002, b, a),
        P("mediawiki.repage_move", 0, 1002, b, a),
        P("mediawiki.revision_visibility_set", 0, 1002, b, a),
        P("test", 0, 1001, a, a),
        P("test", 1, 1002, b, a),
        P("test.event", 0, 1002, b, a),
    ]
    return snap(parts, brokers=(1001, 1002))


# ------------------------------------------------------------------------------------------ health


def test_runbook_layout_is_healthy_and_balanced() -> None:
    h = cluster_health(runbook_rf2(), {1001: "eqiad", 1002: "eqiad"})
    assert h.healthy
    assert h.offline == h.under_replicated == h.under_min_isr == ()
    assert h.leaders_by_broker == {1001: 4, 1002: 5}
    assert h.leaders_by_dc == {"eqiad": 9}
    assert h.preferred_leader_ratio == 1.0
    assert h.preferred_ratio_by_broker == {1001: 1.0, 1002: 1.0}
    assert h.controller == 1001
    assert h.brokers == (1001, 1002)
    # min.isr 1 and ISR 2 everywhere: nobody at min ISR
    assert h.at_min_isr == ()


def test_health_counts_offline_urp_min_isr_and_preferred_ratio() -> None:
    s = snap(
        [
            P("t", 0, None, (1001, 1002, 1003), (1001,)),  # offline
            P("t", 1, 1002, (1001, 1002, 1003), (1002, 1003)),  # URP, at min ISR, not preferred
            P("t", 2, 1003, (1003, 1001, 1002), (1003,)),  # URP, under min ISR
            P("t", 3, 1002, (1002, 1003, 1001), (1002, 1003, 1001)),  # fine
        ],
        min_isr={"t": 2},
    )
    h = cluster_health(s, {1001: "eqiad", 1002: "eqiad", 1003: "codfw"})
    assert not h.healthy
    assert [p.partition for p in h.offline] == [0]
    assert [p.partition for p in h.under_replicated] == [1, 2]
    assert [p.partition for p in h.under_min_isr] == [2]
    assert [p.partition for p in h.at_min_isr] == [1]
    assert h.preferred_leader_ratio == 0.5
    assert h.preferred_ratio_by_broker == {1001: 0.0, 1002: 1.0, 1003: 1.0}
    assert h.preferred_ratio_by_dc == {"codfw": 1.0, "eqiad": pytest.approx(1 / 3)}
    assert h.leaders_by_broker == {1001: 0, 1002: 2, 1003: 1}
    assert h.leaders_by_dc == {"codfw": 1, "eqiad": 2}
    assert h.leader_skew == pytest.approx(2 / 1)
    d = h.to_dict()
    json.dumps(d)
    assert d["offline"] == ["t-0"] and d["under_min_isr"] == ["t-2"]


def test_health_reports_unregistered_replica_brokers() -> None:
    s = snap([P("t", 0, 1001, (1001, 1004), (1001,))], brokers=(1001, 1002))
    h = cluster_health(s)
    assert h.unregistered_replica_brokers == (1004,)
    assert not h.healthy


# ------------------------------------------------------------------------------------------ stop impact


def test_stop_impact_runbook_leaders_move_to_next_isr_replica() -> None:
    imp = stop_impact(runbook_rf2(), 1001)
    assert {partition_name(p): new for p, new in imp.leadership_moves} == {
        "mediawiki.page_delete-0": 1002,
        "mediawiki.page_edit-0": 1002,
        "mediawiki.page_move-0": 1002,
        "test-0": 1002,
    }
    assert imp.hosted == 9
    assert len(imp.loses_isr_replica) == 9
    assert imp.below_min_isr == () and imp.goes_offline == ()
    assert imp.rf_not_above_min_isr == ()
    assert imp.is_controller and imp.safe
    assert imp.new_leader_counts == {1002: 4}


def test_new_leader_is_first_live_isr_member_in_replica_order() -> None:
    # 1002 is next in replica order but out of ISR; 1003 is in ISR -> 1003 takes over.
    s = snap([P("t", 0, 1001, (1001, 1002, 1003), (1001, 1003))], brokers=(1001, 1002, 1003))
    imp = stop_impact(s, 1001)
    assert imp.leadership_moves[0][1] == 1003
    # A stale ISR member that is not registered does not count as a candidate.
    s = snap([P("t", 0, 1001, (1001, 1002, 1003), (1001, 1002, 1003))], brokers=(1001, 1003))
    assert stop_impact(s, 1001).leadership_moves[0][1] == 1003


def test_stop_of_sole_isr_member_goes_offline() -> None:
    s = snap([P("t", 0, 1001, (1001, 1002), (1001,))])
    imp = stop_impact(s, 1001)
    assert imp.leadership_moves[0][1] is None
    assert [partition_name(p) for p in imp.goes_offline] == ["t-0"]
    assert not imp.safe


def test_stop_of_out_of_sync_replica_changes_nothing() -> None:
    s = snap([P("t", 0, 1001, (1001, 1002, 1003), (1001, 1003))], min_isr={"t": 2})
    imp = stop_impact(s, 1002)
    assert imp.loses_isr_replica == () and imp.below_min_isr == () and imp.leadership_moves == ()


def test_isr_headroom_raises_the_bar() -> None:
    s = snap(
        [P("t", 0, 1001, (1001, 1002, 1003, 1004), (1001, 1002, 1003, 1004))],
        min_isr={"t": 2},
        brokers=(1001, 1002, 1003, 1004),
    )
    assert stop_impact(s, 1002).safe
    assert stop_impact(s, 1002, isr_headroom=1).safe  # 3 left >= 2 + 1
    imp = stop_impact(s, 1002, isr_headroom=2)  # 3 left < 2 + 2, and RF 4 <= 4
    assert [p.partition for p in imp.below_min_isr] == [0]
    assert imp.rf_not_above_min_isr == ("t",)


# ------------------------------------------------------------------------------------------ preflight


def test_preflight_passes_on_healthy_runbook_layout() -> None:
    r = preflight(runbook_rf2(), 1002)
    assert r.ok and r.violations == ()
    r.raise_if_refused()  # does not raise
    json.dumps(r.to_dict())


def test_issue_case_rf2_min_isr2_refuses_reboot_of_one_of_its_brokers() -> None:
    """Issue 4 acceptance: a topic with RF 2 and min.isr 2 makes reboot of one of its brokers refuse."""
    s = snap(
        [
            P("eqiad.strict", 0, 1001, (1001, 1002), (1001, 1002)),
            P("eqiad.strict", 1, 1002, (1002, 1001), (1002, 1001)),
            P("eqiad.relaxed", 0, 1001, (1001, 1002, 1003), (1001, 1002, 1003)),
        ],
        min_isr={"eqiad.strict": 2, "eqiad.relaxed": 2},
    )
    r = preflight(s, 1001)
    assert not r.ok
    assert r.codes == ("rf_not_above_min_isr",)
    v = r.violations[0]
    assert v.permanent and r.permanent
    assert v.topics == ("eqiad.strict",)
    assert v.partitions == ("eqiad.strict-0", "eqiad.strict-1")
    with pytest.raises(SafetyRefusal) as exc:
        r.raise_if_refused()
    msg = str(exc.value)
    assert "\n" not in msg
    assert "eqiad.strict" in msg and "raise the replication factor" in msg
    assert "--force" not in msg  # --force only passes the URP gate: never suggest it here
    assert exc.value.exit_code == 6
    # The broker not hosting the strict topic may be stopped.
    assert preflight(s, 1003).ok


def test_rf3_min_isr2_one_replica_lagging_refuses_stop_of_another_replica() -> None:
    s = snap(
        [
            P("eqiad.x", 0, 1001, (1001, 1002, 1003), (1001, 1002)),  # 1003 lagging
            P("eqiad.x", 1, 1002, (1002, 1003, 1001), (1002, 1003, 1001)),
        ],
        min_isr={"eqiad.x": 2},
    )
    # Allow the cluster-wide URP so only the per-broker (canRoll) gate is at work.
    r = preflight(s, 1002, allow_urp=True)
    assert r.codes == ("stop_below_min_isr",)
    assert r.violations[0].partitions == ("eqiad.x-0",)
    assert not r.permanent
    assert any("allowed by --force" in w for w in r.warnings)
    assert "--force" not in r.hint()  # nothing overrides the min-ISR gate; the hint must not suggest it
    with pytest.raises(
        SafetyRefusal,
        match=r"refusing to stop broker 1002: 1 partition would drop below "
        r"min.insync.replicas: eqiad.x-0",
    ):
        r.raise_if_refused()
    # Stopping the lagging broker itself is fine for min ISR.
    assert preflight(s, 1003, allow_urp=True).ok
    # Without --force the cluster-wide URP gate refuses too, and says how to proceed.
    r = preflight(s, 1003)
    assert r.codes == ("under_replicated",)
    assert "--force" in r.hint()
    with pytest.raises(SafetyRefusal, match="fix URP first"):
        r.raise_if_refused()


def test_urp_led_elsewhere_is_caught_by_cluster_wide_gate() -> None:
    """Yelp's --broker-ids trap: the URP is on a partition broker 1003 neither leads nor hosts."""
    s = snap(
        [
            P("a", 0, 1001, (1001, 1002), (1001,)),
            P("b", 0, 1003, (1003, 1002), (1003, 1002)),
        ]
    )
    r = preflight(s, 1003)
    assert "under_replicated" in r.codes


def test_preflight_refuses_offline_under_min_isr_and_unregistered() -> None:
    s = snap(
        [
            P("t", 0, None, (1001, 1002, 1003), ()),
            P("t", 1, 1002, (1002, 1001, 1003), (1002,)),
        ],
        min_isr={"t": 2},
        brokers=(1001, 1002),
    )
    r = preflight(s, 1003)
    assert r.codes[:4] == ("broker_not_registered", "offline_partitions", "under_min_isr", "under_replicated")
    assert r.violations[1].partitions == ("t-0",)
    assert r.violations[2].partitions == ("t-1",)


def test_preflight_refuses_stop_that_takes_partition_offline() -> None:
    s = snap([P("solo", 0, 1002, (1002,), (1002,))])
    r = preflight(s, 1002)
    assert "stop_takes_offline" in r.codes
    assert "rf_not_above_min_isr" in r.codes  # RF 1 <= min.isr 1


def test_refusal_message_truncates_long_lists() -> None:
    parts = [P("eqiad.x", i, 1001, (1001, 1002, 1003), (1001, 1002)) for i in range(44)]
    r = preflight(snap(parts, min_isr={"eqiad.x": 2}), 1002, allow_urp=True)
    msg = r.message()
    assert "eqiad.x-0, eqiad.x-1, eqiad.x-2 and 41 more" in msg
    assert len(r.violations[0].partitions) == 44


def test_controller_warning() -> None:
    r = preflight(runbook_rf2(), 1001)
    assert r.ok and any("controller" in w for w in r.warnings)


# ------------------------------------------------------------------------------------------ helpers


def test_summarize_names() -> None:
    assert summarize_names([]) == "none"
    assert summarize_names(["a", "b"]) == "a, b"
    assert summarize_names(["a", "b", "c", "d", "e"], limit=2) == "a, b and 3 more"


def test_leaders_not_preferred_and_not_in_isr() -> None:
    # After 1001 came back: it is a replica everywhere, in ISR of t-0 only, leads nothing yet.
    s = snap(
        [
            P("t", 0, 1002, (1001, 1002), (1002, 1001)),
            P("t", 1, 1002, (1002, 1001), (1002,)),
            P("u", 0, 1002, (1001, 1002), (1002,)),
        ]
    )
    assert [partition_name(p) for p in leaders_not_preferred(s, 1001)] == ["t-0", "u-0"]
    assert leaders_not_preferred(s, 1002) == []
    assert len(leaders_not_preferred(s)) == 2
    assert [partition_name(p) for p in partitions_not_in_isr(s, 1001)] == ["t-1", "u-0"]
    assert partitions_not_in_isr(s, 1002) == []
    # Once the election ran and 1001 caught up, both verify helpers are empty.
    s2 = snap(
        [
            P("t", 0, 1001, (1001, 1002), (1002, 1001)),
            P("t", 1, 1002, (1002, 1001), (1002, 1001)),
            P("u", 0, 1001, (1001, 1002), (1001, 1002)),
        ]
    )
    assert leaders_not_preferred(s2, 1001) == []
    assert partitions_not_in_isr(s2, 1001) == []


def test_scan_cache_is_per_snapshot_object() -> None:
    a = snap([P("t", 0, 1001, (1001, 1002), (1001, 1002))])
    b = snap([P("t", 0, 1001, (1001, 1002), (1001,))])
    assert cluster_health(a).healthy
    assert not cluster_health(b).healthy
    key = id(a)
    del a
    gc.collect()
    assert key not in snapshot_scan._SCANS


# ------------------------------------------------------------------------------------------ properties


@st.composite
def random_snapshot(draw: st.DrawFn) -> ClusterSnapshot:
    brokers = list(range(1, draw(st.integers(2, 6)) + 1))
    registered = tuple(b for b in brokers if draw(st.booleans()) or b == 1)
    parts = []
    for i in range(draw(st.integers(1, 12))):
        rf = draw(st.integers(1, len(brokers)))
        replicas = tuple(draw(st.permutations(brokers))[:rf])
        isr = tuple(r for r in replicas if draw(st.booleans()))
        leader = draw(st.sampled_from([None, *isr])) if isr else None
        parts.append(P(f"t{i % 3}", i, leader, replicas, isr))
    min_isr = {f"t{k}": draw(st.integers(1, 3)) for k in range(3)}
    return snap(parts, brokers=registered, controller=registered[0], min_isr=min_isr)


@settings(max_examples=200, deadline=None)
@given(random_snapshot(), st.integers(1, 6), st.integers(0, 1))
def test_stop_impact_invariants(s: ClusterSnapshot, broker: int, headroom: int) -> None:
    imp = stop_impact(s, broker, headroom)
    for p, new in imp.leadership_moves:
        assert p.leader == broker
        if new is not None:
            assert new != broker and new in p.isr and new in s.brokers
    assert {id(p) for p in imp.goes_offline} <= {id(p) for p in imp.below_min_isr}
    assert all(broker in p.isr for p in imp.loses_isr_replica)
    r = preflight(s, broker, isr_headroom=headroom)
    # Allowed only if the stop is safe and the cluster healthy.
    if r.ok:
        assert imp.safe and cluster_health(s).under_replicated == ()
    # The one-line refusal always names a partition or a broker.
    assert "\n" not in r.message()
