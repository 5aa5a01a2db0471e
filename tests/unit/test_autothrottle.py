"""The autothrottle's policy (kafkaops/policy/autothrottle.py): the next catch-up rate from the gates alone.

What an operator relies on: the rate never leaves its bounds, a failing gate lowers it at once, it is raised
only after the gates held for ``hold`` polls in a row (and again only after another ``hold`` at the new rate),
and every decision says why in words the journal can keep.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.policy.autothrottle import Bounds, Gates, next_rate, seconds_at

B = Bounds(minimum=100_000, maximum=1_600_000, raise_factor=2.0, lower_factor=0.5, hold=2)
OK = Gates()


def test_the_rate_is_raised_only_after_the_gates_held_for_hold_polls() -> None:
    first = next_rate(200_000, OK, B, 0)
    assert (first.rate, first.change, first.good_polls) == (200_000, "hold", 1)
    second = next_rate(first.rate, OK, B, first.good_polls)
    assert (second.rate, second.change, second.good_polls) == (400_000, "raise", 0)
    assert "raised" in second.reason
    # the count starts again at the new rate: no raise on the very next poll
    assert next_rate(second.rate, OK, B, second.good_polls).change == "hold"


def test_a_failing_gate_lowers_at_once_and_resets_the_count() -> None:
    d = next_rate(800_000, Gates(under_min_isr=2), B, good_polls=1)
    assert (d.rate, d.change, d.good_polls) == (400_000, "lower", 0)
    assert "2 partition(s) under min ISR" in d.reason


@pytest.mark.parametrize("gates, words", [
    (Gates(offline=1), "offline"),
    (Gates(other_urp=3), "under-replicated on another broker"),
    (Gates(failing_metrics=("produce_p99_ms 1500 > 1000",)), "produce_p99_ms"),
])
def test_each_gate_lowers_and_is_named(gates: Gates, words: str) -> None:
    d = next_rate(400_000, gates, B)
    assert d.change == "lower" and d.rate == 200_000 and words in d.reason


def test_the_bounds_hold_at_both_ends() -> None:
    low = next_rate(100_000, Gates(offline=1), B)
    assert (low.rate, low.change) == (100_000, "hold") and "minimum" in low.reason
    high = next_rate(1_600_000, OK, B, good_polls=5)
    assert (high.rate, high.change) == (1_600_000, "hold") and "maximum" in high.reason
    # a raise that would overshoot stops at the maximum
    assert next_rate(1_000_000, OK, B, good_polls=1).rate == 1_600_000
    # a rate from outside the bounds (a resumed run with narrower bounds) is brought inside
    assert next_rate(5_000_000, Gates(offline=1), B).rate == 1_600_000 * 0.5


def test_bad_bounds_are_refused() -> None:
    for kwargs in ({"minimum": 0, "maximum": 1}, {"minimum": 2, "maximum": 1},
                   {"minimum": 1, "maximum": 2, "raise_factor": 1.0}, {"minimum": 1, "maximum": 2, "lower_factor": 1},
                   {"minimum": 1, "maximum": 2, "hold": 0}):
        with pytest.raises(ValueError):
            Bounds(**kwargs)  # type: ignore[arg-type]


def test_seconds_at() -> None:
    assert seconds_at(10_000_000, 1_000_000) == 10
    assert seconds_at(0, 1_000_000) == 0 and seconds_at(5, 0) == 0


@settings(max_examples=300, deadline=None)
@given(rate=st.floats(1, 1e9), polls=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                                              max_size=40))
def test_any_sequence_of_polls_stays_within_bounds_and_moves_the_right_way(
        rate: float, polls: list[tuple[int, int, int]]) -> None:
    good = 0
    for offline, under, other in polls:
        gates = Gates(offline=offline, under_min_isr=under, other_urp=other)
        d = next_rate(rate, gates, B, good)
        assert B.minimum <= d.rate <= B.maximum
        if gates.failures():
            assert d.rate <= B.clamp(rate) and d.good_polls == 0
        else:
            assert d.rate >= B.clamp(rate)
        rate, good = d.rate, d.good_polls


def test_cluster_gates_count_every_partition_but_not_the_catch_up_itself() -> None:
    from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
    from kafkaops.policy.autothrottle import cluster_gates

    parts = (
        PartitionState("t", 0, 1001, (1001, 1003, 1002), (1001, 1003)),   # only 1002 behind: the catch-up
        PartitionState("t", 1, 1003, (1003, 1001, 1002), (1003,)),         # 1001 behind too, and under min ISR
        PartitionState("t", 2, None, (1001, 1003, 1002), ()),              # offline
        PartitionState("u", 0, 1001, (1001, 1003), (1001, 1003)),          # whole; its topic has no config
    )
    snap = ClusterSnapshot("lab", 0.0, (1001, 1002, 1003), 1001, parts, {"t": TopicConfig("t", 2, 3)})
    g = cluster_gates(snap, 1002)
    assert (g.offline, g.under_min_isr, g.other_urp) == (1, 2, 2)
    assert cluster_gates(snap, 1001).other_urp == 3   # judged for another broker, 1002's lag counts
