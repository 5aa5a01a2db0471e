"""How the chaos soak (bench/chaos_soak.py) tells a resume that needs a human from one that met a cluster
still recovering. The messages are the pre-flight's own (:func:`kafkaops.policy.preflight.preflight`), so a
change of its wording or of its violations' order fails here, not in a 40-minute CI run.

CI of 2026-11-28: a resume started while a crashed broker was still catching up refused on URP *and* skew;
the soak counted it as "a human would have to elect the leaders the chaos moved" and failed the roll,
although the next resume (after the ISR recovered) elected them itself and finished.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.preflight import preflight

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from chaos_soak import skew_alone  # bench/ is not a package

RINGS = ((1001, 1002, 1003), (1002, 1003, 1001), (1003, 1001, 1002))


def _said(*, lagging: bool) -> str:
    """The refusal the pre-flight of broker 1003 prints when 1002 leads nothing (cut from ZooKeeper and
    back), with or without one partition whose ISR lacks 1001 (a crashed broker catching up)."""
    parts = [PartitionState("events", i, RINGS[i % 3][0], RINGS[i % 3], RINGS[i % 3]) for i in range(33)]
    parts = [dataclasses.replace(p, leader=p.replicas[1]) if p.leader == 1002 else p for p in parts]
    if lagging:
        parts[2] = dataclasses.replace(parts[2], isr=(1003, 1002))
    snap = ClusterSnapshot("main", 0.0, (1001, 1002, 1003), 1001, tuple(parts),
                           {"events": TopicConfig("events", min_insync_replicas=2, replication_factor=3)})
    result = preflight(snap, 1003, max_leader_imbalance=10)
    assert not result.ok
    # as a terminal prints it: wrapped, indented
    return "error: " + result.message()[:60] + "\n   " + result.message()[60:] + "\n"


def test_a_refusal_on_the_skew_alone_needs_a_human() -> None:
    assert skew_alone(_said(lagging=False))


def test_a_refusal_on_urp_and_skew_is_a_cluster_still_recovering() -> None:
    said = _said(lagging=True)
    assert "leadership is skewed" in said  # what the soak used to count
    assert not skew_alone(said)
