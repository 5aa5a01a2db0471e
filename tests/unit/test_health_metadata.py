"""Unit tests for kafkaops.health.metadata: the snapshot file format and the metadata findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.health.metadata import (
    Finding,
    OffsetsSnapshot,
    PartitionOffsets,
    healthy,
    metadata_findings,
    worst_severity,
)
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig

BROKERS = (1001, 1002, 1003)
DC = {1001: "eqiad", 1002: "eqiad", 1003: "codfw"}


def po(
    topic: str,
    partition: int,
    leader: int | None,
    replicas: tuple[int, ...],
    isr: tuple[int, ...] | None = None,
    start: int | None = 0,
    end: int | None = 100,
) -> PartitionOffsets:
    return PartitionOffsets(topic, partition, leader, replicas, replicas if isr is None else isr, start, end)


def osnap(
    parts: list[PartitionOffsets], brokers: tuple[int, ...] = BROKERS, min_isr: int = 2
) -> OffsetsSnapshot:
    topics = {p.topic: TopicConfig(p.topic, min_isr, len(p.replicas)) for p in parts}
    return OffsetsSnapshot("eqiad", 1.0, brokers, 1001, tuple(parts), topics, DC)


def balanced(**over: PartitionOffsets) -> list[PartitionOffsets]:
    """Three RF-3 partitions, each led by its preferred leader: a healthy cluster."""
    parts = {
        "t-0": po("t", 0, 1001, (1001, 1002, 1003)),
        "t-1": po("t", 1, 1002, (1002, 1003, 1001)),
        "t-2": po("t", 2, 1003, (1003, 1001, 1002)),
    }
    parts.update({k.replace("_", "-"): v for k, v in over.items()})
    return list(parts.values())


def checks(findings: list[Finding]) -> set[tuple[str, str, str | None, int | None]]:
    return {(f.severity, f.check, f.topic, f.partition) for f in findings}


def test_healthy_cluster_passes() -> None:
    before = osnap(balanced())
    now = osnap(balanced(t_0=po("t", 0, 1001, (1001, 1002, 1003), start=0, end=250)))
    findings = metadata_findings(before, now)
    assert findings == []
    assert healthy(findings) and worst_severity(findings) is None


def test_broker_stopped_flags_urp_and_missing_broker() -> None:
    before = osnap(balanced())
    now = osnap(
        [
            po("t", 0, 1001, (1001, 1002, 1003), (1001, 1002)),
            po("t", 1, 1002, (1002, 1003, 1001), (1002, 1001)),
            po("t", 2, 1001, (1003, 1001, 1002), (1001, 1002)),
        ],
        brokers=(1001, 1002),
    )
    found = checks(metadata_findings(before, now))
    assert ("critical", "broker_missing", None, None) in found
    assert ("warning", "under_replicated", "t", 0) in found
    assert ("warning", "at_min_isr", "t", 2) in found
    assert ("warning", "preferred_leader_ratio_broker", None, None) in found
    assert ("warning", "preferred_leader_ratio_dc", None, None) in found  # codfw leads nothing
    assert not healthy(metadata_findings(before, now))


def test_offline_and_under_min_isr_are_critical() -> None:
    now = osnap(
        balanced(
            t_0=po("t", 0, None, (1001, 1002, 1003), (1001,)),
            t_1=po("t", 1, 1002, (1002, 1003, 1001), (1002,)),
        )
    )
    findings = metadata_findings(None, now)
    found = checks(findings)
    assert ("critical", "offline", "t", 0) in found
    assert ("critical", "under_min_isr", "t", 1) in found
    # An under-min-ISR partition is not also reported as merely under-replicated.
    assert ("warning", "under_replicated", "t", 1) not in found
    assert findings[0].severity == "critical"
    assert worst_severity(findings) == "critical"


def test_rf_equal_min_isr_is_info_not_warning() -> None:
    now = osnap([po("strict", 0, 1001, (1001, 1002)), po("strict", 1, 1002, (1002, 1001))], min_isr=2)
    findings = metadata_findings(None, now, leader_skew_threshold=10)
    assert {(f.severity, f.check) for f in findings} == {("info", "at_min_isr")}
    assert healthy(findings)


def test_truncation_detected_as_lost_data() -> None:
    before = osnap(balanced(t_1=po("t", 1, 1002, (1002, 1003, 1001), start=0, end=500)))
    now = osnap(balanced(t_1=po("t", 1, 1002, (1002, 1003, 1001), start=0, end=420)))
    findings = metadata_findings(before, now)
    assert len(findings) == 1
    f = findings[0]
    assert (f.severity, f.check, f.topic, f.partition, f.value) == ("critical", "truncation", "t", 1, 80)
    assert "lost data" in f.message


def test_delete_records_past_baseline_end_is_unexpected_deletion() -> None:
    before = osnap(balanced(t_2=po("t", 2, 1003, (1003, 1001, 1002), start=10, end=100)))
    # delete_records up to the high watermark, nothing produced since: start == end == baseline end.
    now = osnap(balanced(t_2=po("t", 2, 1003, (1003, 1001, 1002), start=100, end=100)))
    (f,) = metadata_findings(before, now)
    assert (f.severity, f.check, f.partition, f.value) == ("critical", "log_start_jump", 2, 90)
    assert "unexpected deletion" in f.message


def test_log_start_advance_by_retention_is_quiet_but_large_advance_warns() -> None:
    before = osnap(balanced(t_0=po("t", 0, 1001, (1001, 1002, 1003), start=0, end=1000)))
    retention = osnap(balanced(t_0=po("t", 0, 1001, (1001, 1002, 1003), start=100, end=1200)))
    assert metadata_findings(before, retention) == []
    big = osnap(balanced(t_0=po("t", 0, 1001, (1001, 1002, 1003), start=800, end=1200)))
    (f,) = metadata_findings(before, big)
    assert (f.severity, f.check, f.value) == ("warning", "log_start_advanced", 800)


def test_missing_partition_and_unknown_offsets() -> None:
    before = osnap(balanced())
    now = osnap([*balanced()[:2], po("t", 2, 1003, (1003, 1001, 1002), start=None, end=None)])
    assert metadata_findings(before, now) == []  # unknown offsets are not compared
    now = osnap(balanced()[:2])
    found = checks(metadata_findings(before, now, leader_skew_threshold=10))
    assert ("warning", "partition_missing", "t", 2) in found


def test_leader_skew() -> None:
    # 1001 leads 3, 1002 leads 3, 1003 leads nothing: max 3 / mean 2 = 1.5.
    parts = [po("t", i, 1001, (1001, 1002, 1003)) for i in range(3)] + [
        po("u", i, 1002, (1002, 1003, 1001)) for i in range(3)
    ]
    findings = metadata_findings(None, osnap(parts), leader_skew_threshold=1.4)
    (skew,) = [f for f in findings if f.check == "leader_skew"]
    assert skew.value == pytest.approx(1.5)
    assert "leading nothing: [1003]" in skew.message
    # At the threshold (not above it) there is no finding.
    assert not [f for f in metadata_findings(None, osnap(parts)) if f.check == "leader_skew"]


def test_skew_threshold_boundary_and_preferred_threshold() -> None:
    parts = [po("t", i, 1001, (1001, 1002, 1003)) for i in range(4)] + [
        po("u", 0, 1002, (1002, 1001, 1003)),
        po("v", 0, 1003, (1003, 1001, 1002)),
    ]
    # max 4 / mean 2 = 2.0
    f = [
        x
        for x in metadata_findings(None, osnap(parts), leader_skew_threshold=1.9)
        if x.check == "leader_skew"
    ]
    assert f and f[0].value == pytest.approx(2.0)


def test_snapshot_json_round_trip(tmp_path: Path) -> None:
    snap = osnap(balanced(t_0=po("t", 0, None, (1001, 1002, 1003), (1001,), start=None, end=None)))
    path = tmp_path / "base.json"
    snap.write(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "kafkaops.offsets-snapshot" and doc["version"] == 1
    assert doc["partitions"][0]["leader"] is None
    back = OffsetsSnapshot.read(path)
    assert back == snap
    assert back.broker_dc == DC
    assert back.cluster_snapshot.partitions[1] == PartitionState(
        "t", 1, 1002, (1002, 1003, 1001), (1002, 1003, 1001)
    )


def test_from_cluster_snapshot() -> None:
    cs = ClusterSnapshot(
        "eqiad",
        5.0,
        (1001, 1002),
        1002,
        (
            PartitionState("t", 0, 1001, (1001, 1002), (1001, 1002)),
            PartitionState("t", 1, 1002, (1002, 1001), (1002,)),
        ),
        {"t": TopicConfig("t", 1, 2)},
    )
    snap = OffsetsSnapshot.from_cluster_snapshot(cs, {("t", 0): (3, 9)}, {1001: "eqiad"})
    assert snap.partitions[0].log_start_offset == 3 and snap.partitions[0].log_end_offset == 9
    assert snap.partitions[1].log_end_offset is None
    assert snap.controller == 1002 and snap.broker_dc == {1001: "eqiad"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a kafkaops offsets snapshot"),
        ('{"format": "kafkaops.offsets-snapshot", "version": 99}', "version 99"),
        (
            '{"format": "kafkaops.offsets-snapshot", "version": 1, "cluster": "x", "taken_at": 0,'
            ' "brokers": [], "partitions": [{"topic": "t"}]}',
            "partitions[0]: missing field 'partition'",
        ),
    ],
)
def test_from_json_errors_are_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as exc:
        OffsetsSnapshot.from_json(text, source="base.json")
    assert needle in str(exc.value)
    assert str(exc.value).startswith("base.json")
