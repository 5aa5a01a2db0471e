"""Cross-DC impact of stopping a broker of a stretched cluster (issue 15: every maintenance plan says it)."""

from __future__ import annotations

from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.stop_impact import cross_dc_impact

A1, A2, B1, B2 = 1001, 1002, 2001, 2002
DC = {A1: "eqiad", A2: "eqiad", B1: "codfw", B2: "codfw"}


def _snap(assignments: list[tuple[int, ...]], min_isr: int = 2) -> ClusterSnapshot:
    parts = tuple(PartitionState("t", i, r[0], r, r) for i, r in enumerate(assignments))
    return ClusterSnapshot("lab-stretch", 0.0, (A1, A2, B1, B2), A1, parts,
                           {"t": TopicConfig("t", min_isr, len(assignments[0]))})


SEED = [(A1, A2, B1, B2), (B1, B2, A1, A2), (A2, A1, B2, B1), (B2, B1, A1, A2)]  # the seed's layout


def test_on_the_seeds_layout_a_leader_stays_in_its_dc_and_min_isr_leans_on_the_other_dc() -> None:
    impact = cross_dc_impact(_snap(SEED), A1, DC)
    assert impact is not None
    assert impact.leaders_to == {}  # p0's leadership goes to A2: the first two replicas share a DC
    # A1 down: every partition has A2 + B1 + B2 live; losing codfw leaves 1 < min ISR 2
    assert [p.partition for p in impact.min_isr_depends_on["codfw"]] == [0, 1, 2, 3]
    assert "eqiad" not in impact.min_isr_depends_on
    assert impact.describe().startswith("4 partition(s) keep min ISR only through codfw")


def test_kafkas_rack_alternating_layout_sends_leaders_across() -> None:
    alternating = [(A1, B1, A2, B2), (B1, A2, B2, A1)]  # rack-aware round robin: DCs alternate
    impact = cross_dc_impact(_snap(alternating), A1, DC)
    assert impact is not None and impact.leaders_to == {"codfw": 1}
    assert "1 leader(s) move to codfw" in impact.describe()


def test_a_cluster_in_one_dc_has_no_cross_dc_impact() -> None:
    assert cross_dc_impact(_snap(SEED), A1, dict.fromkeys(DC, "eqiad")) is None
