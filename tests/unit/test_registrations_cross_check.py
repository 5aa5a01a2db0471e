"""A broker cut off from ZooKeeper answers with stale metadata: the gates judge the metadata as
ZooKeeper's registrations say it is (issue 32)."""

from __future__ import annotations

from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.policy.availability import as_alive, cluster_health


def _stale() -> ClusterSnapshot:
    """What broker 3 says after its ZooKeeper session expired: everyone alive, every ISR full."""
    parts = (PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3)), PartitionState("t", 1, 3, (3, 1, 2), (3, 1, 2)),
             PartitionState("u", 0, 1, (1, 2), (1, 2)))
    return ClusterSnapshot("lab", 0.0, (1, 2, 3), 3, parts)


def test_a_broker_zookeeper_no_longer_has_leaves_every_isr_it_was_in() -> None:
    snap = as_alive(_stale(), [1, 2])
    assert snap.brokers == (1, 2)
    assert [p.isr for p in snap.partitions] == [(1, 2), (1, 2), (1, 2)]
    health = cluster_health(snap)
    assert [f"{p.topic}-{p.partition}" for p in health.under_replicated] == ["t-0", "t-1"]
    assert not cluster_health(_stale()).under_replicated  # what the stale metadata alone says


def test_metadata_that_agrees_with_zookeeper_is_left_as_it_is() -> None:
    snap = _stale()
    assert as_alive(snap, [1, 2, 3]) is snap
    assert as_alive(snap, [1, 2, 3, 4]) is snap  # a broker registered a moment ago: nothing stale
