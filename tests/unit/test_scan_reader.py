"""The scan reader's pure parts: task groups, and finding (or refusing) its jar."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.errors import ConfigError
from kafkaops.health import scan_jar
from kafkaops.health.data import ScanRange
from kafkaops.health.spark_job import task_groups


def r(partition: int, records: int, topic: str = "t") -> ScanRange:
    return ScanRange(topic, partition, 100, 100 + records, 100)


def test_groups_balance_records_not_partitions() -> None:
    ranges = [r(0, 900), r(1, 300), r(2, 300), r(3, 300)]
    groups = task_groups(ranges, 2)
    loads = sorted(sum(x.end - x.start for x in g) for g in groups)
    assert loads == [900, 900]
    assert [x.partition for g in groups for x in g if x.end - x.start == 900] == [0]


def test_never_more_groups_than_ranges_or_tasks() -> None:
    assert len(task_groups([r(0, 5)], 8)) == 1
    assert len(task_groups([r(p, 5) for p in range(10)], 3)) == 3
    assert len(task_groups([r(p, 5) for p in range(3)], 0)) == 1  # a cluster reporting no cores still scans


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=60), st.integers(1, 16))
def test_every_range_read_exactly_once_and_groups_near_equal(sizes: list[int], tasks: int) -> None:
    ranges = [r(p, n) for p, n in enumerate(sizes)]
    groups = task_groups(ranges, tasks)
    flat = [x for g in groups for x in g]
    assert sorted(flat, key=lambda x: x.partition) == ranges
    loads = [sum(x.end - x.start for x in g) for g in groups]
    # Greedy largest-first: no group exceeds the lightest by more than the largest range.
    assert max(loads) - min(loads) <= max(sizes)


def test_jar_name_follows_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "KafkaRangeSource.java"
    src.write_text("class A {}")
    monkeypatch.setattr(scan_jar, "SOURCE", src)
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    first = scan_jar.jar_path()
    src.write_text("class A { int x; }")
    assert scan_jar.jar_path() != first
    assert scan_jar.jar_path().parent == tmp_path / "cache" / "jars" / "scan"


def test_missing_jar_is_a_config_error_that_says_how_to_build(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path))
    with pytest.raises(ConfigError) as err:
        scan_jar.spark_jars()
    assert "not built" in str(err.value)
    assert "install.sh" in (err.value.hint or "")
