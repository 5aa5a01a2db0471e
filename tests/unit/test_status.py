"""``kafkaops status`` answers with what it has when part of Kafka does not answer."""

from __future__ import annotations

from typing import Any

from kafkaops.cli.status import _snapshot
from kafkaops.errors import UnreachableError
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig


class _Admin:
    """Metadata answers; DescribeConfigs waits for a controller that is being elected (or answers)."""

    def __init__(self, configs_answer: bool) -> None:
        self.configs_answer = configs_answer

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        assert not with_configs
        parts = tuple(PartitionState("t", i, 1001, (1001, 1002, 1003), (1001, 1002, 1003)) for i in range(3))
        return ClusterSnapshot(cluster="lab", taken_at=0.0, brokers=(1001, 1002, 1003), controller=None,
                               partitions=parts, topics={})

    def topic_configs(self, topics: Any, replication: dict[str, int]) -> dict[str, TopicConfig]:
        if not self.configs_answer:
            raise UnreachableError("Kafka did not answer describe_configs(t): Failed while waiting for controller")
        return {t: TopicConfig(name=t, min_insync_replicas=2, replication_factor=replication[t]) for t in topics}


def test_configs_that_time_out_leave_the_rest_of_status_standing() -> None:
    snap, error = _snapshot(_Admin(configs_answer=False))
    assert "waiting for controller" in error
    assert len(snap.partitions) == 3 and snap.topics == {}


def test_configs_that_answer_are_in_the_snapshot() -> None:
    snap, error = _snapshot(_Admin(configs_answer=True))
    assert error == ""
    assert snap.topics["t"].min_insync_replicas == 2 and snap.topics["t"].replication_factor == 3
