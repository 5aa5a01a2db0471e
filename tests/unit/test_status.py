"""``kafkaops status`` answers with what it has when part of Kafka does not answer."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kafkaops.errors import UnreachableError
from kafkaops.health.status import _snapshot
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

    def with_configs(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        import dataclasses

        if not self.configs_answer:
            raise UnreachableError("Kafka did not answer describe_configs(t): Failed while waiting for controller")
        return dataclasses.replace(snap, topics={"t": TopicConfig(name="t", min_insync_replicas=2,
                                                                   replication_factor=3)})


def test_configs_that_time_out_leave_the_rest_of_status_standing() -> None:
    snap, error = _snapshot(_Admin(configs_answer=False))
    assert "waiting for controller" in error
    assert len(snap.partitions) == 3 and snap.topics == {}


def test_configs_that_answer_are_in_the_snapshot() -> None:
    snap, error = _snapshot(_Admin(configs_answer=True))
    assert error == ""
    assert snap.topics["t"].min_insync_replicas == 2 and snap.topics["t"].replication_factor == 3


def _data(**changes: Any) -> dict[str, Any]:
    brokers = [{"host": f"kafka100{i}", "broker_id": 1000 + i, "dc": "eqiad", "rack": "ABC"[i - 1],
                "registered": True, "controller": i == 2, "leaders": 2, "preferred_ratio": 1.0, "pooled": "yes"}
               for i in (1, 2, 3)]
    data: dict[str, Any] = {
        "cluster": "lab", "healthy": True, "controller": 1002, "taken_at": "2026-11-22 22:00:00 UTC",
        "partitions": 6, "offline": [], "under_replicated": [], "under_min_isr": [], "at_min_isr": [],
        "preferred_leader_ratio": 1.0, "leaders_by_dc": {"eqiad": 6}, "brokers": brokers,
        "unregistered_replica_brokers": [], "pool_error": "", "min_isr_error": ""}
    return {**data, **changes}


def test_markdown_status_is_a_pasteable_table() -> None:
    from kafkaops.cli.status import to_markdown

    text = to_markdown(_data())
    assert text.startswith("**lab: healthy** — 6 partitions, offline 0, under-replicated 0")
    assert "(2026-11-22 22:00:00 UTC)" in text
    assert "| kafka1002 | 1002 ctrl | eqiad/B | yes | 2 | 100% | yes |" in text
    assert "- **" not in text  # nothing needs attention


def test_markdown_status_names_what_needs_attention() -> None:
    from kafkaops.cli.status import to_markdown

    urp = [f"t-{i}" for i in range(12)]
    text = to_markdown(_data(healthy=False, under_replicated=urp, preferred_leader_ratio=0.5))
    assert text.startswith("**lab: NOT healthy**")
    assert "- **under-replicated:** t-0, t-1," in text and "t-9 and 2 more" in text
    assert "leaders not preferred" not in text  # expected while replicas are out: not the point then
    unknown = to_markdown(_data(healthy=False, min_isr_error="Kafka did not answer describe_configs"))
    assert unknown.startswith("**lab: health unknown**") and "- **min ISR unknown (counted as 1):**" in unknown
    skewed = to_markdown(_data(preferred_leader_ratio=0.5))
    assert "- **leaders not preferred:** 50% of partitions" in skewed


def test_the_status_table_keeps_host_names_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a log or a narrow pane, the boxed table cut every host to "kafka-…": the name an operator reads."""
    from rich.console import Console

    from kafkaops.cli import status

    data = _data()
    for b in data["brokers"]:
        b["host"] = b["host"].replace("kafka", "kafka-jumbo")
    out = Console(width=80, record=True, file=io.StringIO())
    monkeypatch.setattr(status, "console", out)
    status._render(data)
    text = out.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "…" not in text and "1002 ctrl" in text, text
    for b in data["brokers"]:
        assert b["host"] in text, text
