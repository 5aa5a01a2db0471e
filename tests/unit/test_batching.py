"""Safe batches of a roll (issue 19): brute-force checked on random placements, never more batches than
the greedy baseline, aligned to DCs when that is as good, explained at every boundary."""

from __future__ import annotations

import itertools
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.batches import _first_fit, _model, batch_is_safe, plan_batches


def snapshot(placement: dict[tuple[str, int], tuple[int, ...]], min_isr: int, controller: int | None,
             brokers: list[int]) -> ClusterSnapshot:
    parts = tuple(PartitionState(t, p, r[0], r, r) for (t, p), r in sorted(placement.items()))
    topics = {t: TopicConfig(t, min_isr, len(r)) for (t, _), r in placement.items()}
    return ClusterSnapshot("c", 0.0, tuple(brokers), controller, parts, topics)


# The stretch issue's layout: A1 A2 in eqiad, B1 B2 in codfw, RF 4, min ISR 2.
A1, A2, B1, B2 = 1001, 1002, 2001, 2002
DC = {A1: "eqiad", A2: "eqiad", B1: "codfw", B2: "codfw"}
STRETCH = {("t", 0): (A1, A2, B1, B2), ("t", 1): (B1, B2, A1, A2), ("t", 2): (A2, A1, B2, B1),
           ("t", 3): (B2, B1, A1, A2)}


def test_the_stretch_layout_rolls_in_two_batches_one_per_dc_controller_last() -> None:
    snap = snapshot(STRETCH, 2, B2, [A1, A2, B1, B2])
    plan = plan_batches(snap, [A1, A2, B1, B2], group_of=DC)
    assert plan.batches == ((A1, A2), (B1, B2))
    assert plan.strategy == "rack-aligned"
    assert any("controller 2002" in r for r in plan.reasons)
    controller_first = plan_batches(snapshot(STRETCH, 2, A1, [A1, A2, B1, B2]), [A2, B1, B2, A1], group_of=DC)
    assert controller_first.batches[-1] == (A2, A1)


def test_three_brokers_rf3_min_isr2_go_one_at_a_time_and_say_why() -> None:
    placement = {("lab.load", p): tuple((p + i) % 3 + 1001 for i in range(3)) for p in range(6)}
    plan = plan_batches(snapshot(placement, 2, 1003, [1001, 1002, 1003]), [1001, 1002, 1003])
    assert plan.batches == ((1001,), (1002,), (1003,))
    assert any(r.startswith("1002 cannot go with 1001: partition lab.load-") for r in plan.reasons), plan.reasons


def test_a_pooled_service_keeps_one_host_out_at_a_time() -> None:
    snap = snapshot(STRETCH, 1, None, [A1, A2, B1, B2])
    services = dict.fromkeys(DC, ("eventbus",))
    plan = plan_batches(snap, [A1, A2, B1, B2], group_of=DC, services=services)
    assert all(len(b) == 1 for b in plan.batches)
    assert any("both serve eventbus" in r for r in plan.reasons)
    assert plan_batches(snap, [A1, A2, B1, B2], max_size=1).strategy == "one at a time"
    assert max(len(b) for b in plan_batches(snap, [A1, A2, B1, B2], max_size=2).batches) <= 2


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterSnapshot, list[int], dict[int, str]]:
    n = draw(st.integers(2, 7))
    brokers = list(range(1, n + 1))
    group_of = {b: draw(st.sampled_from(["a", "b", "c"])) for b in brokers}
    placement = {}
    for p in range(draw(st.integers(1, 12))):
        rf = draw(st.integers(1, min(4, n)))
        placement[("t", p)] = tuple(draw(st.permutations(brokers))[:rf])
    min_isr = draw(st.integers(1, 3))
    controller = draw(st.sampled_from([None, *brokers]))
    order = [b for b in brokers if b != controller] + ([controller] if controller else [])
    return snapshot(placement, min_isr, controller, brokers), order, group_of


@settings(max_examples=300, deadline=None)
@given(clusters(), st.integers(0, 1))
def test_random_placements_never_get_an_unsafe_batch_nor_more_than_greedy(
        case: tuple[ClusterSnapshot, list[int], dict[int, str]], headroom: int) -> None:
    snap, order, group_of = case
    plan = plan_batches(snap, order, group_of=group_of, headroom=headroom)
    assert sorted(itertools.chain.from_iterable(plan.batches)) == sorted(order)  # every broker, once
    for batch in plan.batches:
        assert batch_is_safe(snap, batch, headroom), (batch, plan)
    greedy, _ = _first_fit(_model(snap, order, headroom, {}, 1), order, None)
    assert len(plan.batches) <= len(greedy)
    if snap.controller is not None:
        assert snap.controller in plan.batches[-1]


def test_without_numpy_a_batch_is_refused_with_the_extra_to_install_and_one_at_a_time_needs_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy is an extra (issue 45: 73 MB an admin host rolling one at a time never uses)."""
    from kafkaops.errors import ConfigError
    from kafkaops.model import Host, SshEndpoint
    from kafkaops.policy.batches import roll_batches

    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    snap = snapshot(STRETCH, 2, B2, [A1, A2, B1, B2])
    with pytest.raises(ConfigError, match=r"needs numpy, which is not installed") as exc:
        plan_batches(snap, [A1, A2, B1, B2], group_of=DC)
    assert exc.value.hint is not None and "kafkaops[batches]" in exc.value.hint and "--batch 1" in exc.value.hint
    hosts = [Host(name=f"kafka{b}", fqdn=f"kafka{b}.x", address="127.0.0.1", broker_id=b, dc=DC[b], rack=DC[b],
                  ssh=SshEndpoint(address="127.0.0.1")) for b in (A1, A2, B1, B2)]
    assert roll_batches(hosts, "1", None) == ([[h] for h in hosts], [])
    dependencies = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("numpy") for d in dependencies["dependencies"])
    assert any(d.startswith("numpy") for d in dependencies["optional-dependencies"]["batches"])
