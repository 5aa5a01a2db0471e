"""Pure logic of the post-check: segment merging, data/rate/parity findings, kernel, rendering, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkaops.errors import CheckFailed, ConfigError
from kafkaops.health.check import CheckResult, parse_since, plan_ranges
from kafkaops.health.data import (
    PartitionStats,
    RateWindow,
    ScanRange,
    ScanResult,
    data_findings,
    event_topic_regex,
    merge_segments,
    parity_findings,
    rate_findings,
)
from kafkaops.health.metadata import Finding, OffsetsSnapshot, PartitionOffsets
from kafkaops.health.report import exit_code_for, finding_rows, render_chart, render_markdown, render_table


def seg(topic: str, partition: int, first: int, last: int, first_ts: int, last_ts: int, **kw: int) -> dict:
    d = {"topic": topic, "partition": partition, "first_offset": first, "last_offset": last,
         "first_ts": first_ts, "last_ts": last_ts, "count": last - first + 1, "min_ts": min(first_ts, last_ts),
         "max_ts": max(first_ts, last_ts), "minutes": {}}
    d.update(kw)
    return d


# --- merge -------------------------------------------------------------------------------------------


def test_merge_counts_hole_between_segments_and_at_edges() -> None:
    r = ScanRange("t", 0, 0, 100, 10)  # expect offsets 10..99
    segs = [seg("t", 0, 10, 39, 1000, 2000), seg("t", 0, 50, 89, 3000, 4000)]
    stats, _ = merge_segments(segs, [r], back_tolerance_ms=60_000)
    st = stats[("t", 0)]
    assert st.expected == 90
    assert st.count == 70
    assert st.missing == 10 + 10  # 40..49 between segments, 90..99 at the end
    assert st.holes == 2


def test_merge_detects_backwards_step_at_the_seam() -> None:
    r = ScanRange("t", 0, 0, 20, 0)
    segs = [seg("t", 0, 10, 19, 500_000, 600_000), seg("t", 0, 0, 9, 0, 700_000)]  # unordered input
    stats, _ = merge_segments(segs, [r], back_tolerance_ms=60_000)
    st = stats[("t", 0)]
    assert st.back_steps == 1 and st.back_steps_over == 1
    assert st.worst_back_ms == 200_000 and st.worst_back_offset == 10
    assert st.missing == 0


def test_merge_partition_without_segment_is_all_missing_and_sums_minutes() -> None:
    ranges = [ScanRange("t", 0, 0, 5, 0), ScanRange("t", 1, 3, 3, 3)]
    segs = [{"topic": "t", "partition": 0, "first_offset": None, "minutes": {"7": 2}, "context_count": 2},
            {"topic": "t", "partition": 1, "first_offset": None, "minutes": {"7": 1, "8": 4}}]
    stats, minutes = merge_segments(segs, ranges, back_tolerance_ms=1)
    assert stats[("t", 0)].missing == 5 and stats[("t", 0)].context_count == 2
    assert stats[("t", 1)].missing == 0 and stats[("t", 1)].expected == 0
    assert minutes == {"t": {7: 3, 8: 4}}


# --- data findings -----------------------------------------------------------------------------------


def test_data_findings_name_partition_and_worst_step() -> None:
    st = PartitionStats("eqiad.x", 2, expected=100, count=100, back_steps=3, back_steps_over=1,
                        worst_back_ms=7_200_000, worst_back_offset=42, invalid_json=4, first_invalid_offset=7,
                        missing_dt=2)
    fs = {f.check: f for f in data_findings([st])}
    assert fs["timestamp_order"].severity == "warning"
    assert fs["timestamp_order"].value == 7200.0
    assert "offset 42" in fs["timestamp_order"].message and "2.0 h" in fs["timestamp_order"].message
    assert (fs["invalid_json"].topic, fs["invalid_json"].partition, fs["invalid_json"].value) == ("eqiad.x", 2, 4)
    assert fs["missing_meta_dt"].value == 2
    assert "offset_gap" not in fs


def test_small_backwards_steps_are_info_and_compacted_gaps_ignored() -> None:
    st = PartitionStats("c", 0, expected=10, count=8, missing=2, holes=1, back_steps=2, worst_back_ms=1500,
                        worst_back_offset=3)
    fs = data_findings([st], compacted=["c"])
    assert [(f.check, f.severity) for f in fs] == [("timestamp_order", "info")]
    fs2 = data_findings([st])
    assert ("offset_gap", "warning", 2) in [(f.check, f.severity, f.value) for f in fs2]


def test_drift_and_future_timestamps() -> None:
    st = PartitionStats("eqiad.x", 0, count=10, drift_over=3, drift_max_ms=900_000, drift_worst_offset=5,
                        log_append_time=10, future_ts=1)
    fs = {f.check: f for f in data_findings([st])}
    assert fs["timestamp_drift"].value == 900.0 and "LogAppendTime" in fs["timestamp_drift"].message
    assert fs["future_timestamp"].value == 1


def test_event_topic_regex_uses_inventory_dcs() -> None:
    rx = event_topic_regex(["lab1"])
    assert rx.match("eqiad.mediawiki.page-create") and rx.match("lab1.x")
    assert not rx.match("lab.load") and not rx.match("eqiad") and not rx.match("__consumer_offsets")


# --- produce-rate dip --------------------------------------------------------------------------------

T0 = 1_700_000_000 // 60 * 60  # a whole minute


def _minutes(counts: list[int]) -> dict[int, int]:
    return {T0 // 60 + i: c for i, c in enumerate(counts) if c}


def test_rate_dip_named_with_worst_minute() -> None:
    # 10 minutes before at ~600/min, run from minute 10 to 15 with a dip to 30/min at minute 12.
    counts = [600, 610, 590, 600, 605, 600, 598, 602, 600, 600, 580, 550, 30, 500, 590, 600, 600]
    w = RateWindow(scan_from=T0, start=T0 + 600, end=T0 + 900, scan_to=T0 + 17 * 60)
    fs = rate_findings({"t": _minutes(counts)}, w)
    assert len(fs) == 1
    f = fs[0]
    assert (f.check, f.topic, f.severity) == ("produce_rate_dip", "t", "warning")
    assert "30/min" in f.message and "during" in f.message and f.value == pytest.approx(30 / 600, abs=1e-3)


def test_rate_zero_minutes_count_as_a_dip_after_the_run() -> None:
    counts = [300] * 10 + [300] * 5 + [0, 0]  # producers stopped after the run
    w = RateWindow(scan_from=T0, start=T0 + 600, end=T0 + 900, scan_to=T0 + 17 * 60)
    fs = rate_findings({"t": _minutes(counts)}, w)
    assert len(fs) == 1 and "after" in fs[0].message and fs[0].value == 0


def test_rate_steady_or_quiet_topics_pass() -> None:
    w = RateWindow(scan_from=T0, start=T0 + 600, end=T0 + 900, scan_to=T0 + 17 * 60)
    steady = _minutes([600] * 17)
    quiet = _minutes([5, 0, 3, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert rate_findings({"steady": steady, "quiet": quiet}, w) == []


def test_rate_partial_edge_minutes_are_ignored() -> None:
    # The scan starts 30 s into minute 0, so minute 0 is partial and low: not a "before" minute.
    counts = [10] + [600] * 16
    w = RateWindow(scan_from=T0 + 30, start=T0 + 600, end=T0 + 900, scan_to=T0 + 17 * 60 + 30)
    assert rate_findings({"t": _minutes(counts)}, w) == []


def test_the_minute_the_run_started_in_is_not_the_runs() -> None:
    """CI, 2026-11-27: the load of the test before stopped at 23:37:15, this test's load and run started at
    23:37:57, and the post-check blamed the run for the 23:37 minute (-81%). That minute is mostly before
    the run: only the run's whole minutes are judged."""
    counts = [600] * 10 + [120] + [600] * 6  # minute 10: producers absent until 48 s into it
    w = RateWindow(scan_from=T0, start=T0 + 600 + 48, end=T0 + 900, scan_to=T0 + 17 * 60)
    assert rate_findings({"t": _minutes(counts)}, w) == []
    counts[11] = 100  # the first whole minute of the run dips: that one is the run's
    assert len(rate_findings({"t": _minutes(counts)}, w)) == 1


# --- parity ------------------------------------------------------------------------------------------


def test_parity_counts_and_newest_out_of_tolerance() -> None:
    stats = [PartitionStats("eqiad.s", 0, count=1000, max_ts=10_000_000),
             PartitionStats("eqiad.s", 1, count=1000, max_ts=10_000_000),
             PartitionStats("codfw.s", 0, count=1200, max_ts=9_000_000)]
    fs = {f.check: f for f in parity_findings(stats)}
    assert fs["parity_count"].topic == "eqiad.s" and fs["parity_count"].value == 0.4
    assert fs["parity_newest"].value == 1000.0 and "codfw.s is behind" in fs["parity_newest"].message


def test_parity_within_tolerance_and_small_pairs() -> None:
    ok = [PartitionStats("eqiad.s", 0, count=1000, max_ts=100_000),
          PartitionStats("codfw.s", 0, count=950, max_ts=90_000)]
    assert parity_findings(ok) == []
    small = [PartitionStats("eqiad.q", 0, count=5), PartitionStats("codfw.q", 0, count=0)]
    fs = parity_findings(small)
    assert [(f.check, f.severity) for f in fs] == [("parity_count", "info")]
    # Unpaired topics are not compared.
    assert parity_findings([PartitionStats("eqiad.alone", 0, count=10_000)]) == []


# --- planning ----------------------------------------------------------------------------------------


def _snap(parts: list[tuple[str, int, int | None, int | None]], taken_at: float = 1000.0) -> OffsetsSnapshot:
    return OffsetsSnapshot(cluster="c", taken_at=taken_at, brokers=(1, 2, 3), controller=1, partitions=tuple(
        PartitionOffsets(t, p, 1, (1, 2, 3), (1, 2, 3), s, e) for t, p, s, e in parts))


def test_plan_ranges_clamps_to_log_start_and_truncation() -> None:
    now = _snap([("a", 0, 0, 100), ("a", 1, 80, 100), ("a", 2, 0, 40), ("new", 0, 0, 7), ("x", 0, None, None),
                 ("__consumer_offsets", 0, 0, 5)])
    base = {("a", 0): 50, ("a", 1): 60, ("a", 2): 50}
    ctx = {("a", 0): 30, ("a", 1): 10, ("new", 0): None}
    rs = {(r.topic, r.partition): r for r in plan_ranges(now, base, ctx)}
    assert rs[("a", 0)] == ScanRange("a", 0, 30, 100, 50)
    assert rs[("a", 1)] == ScanRange("a", 1, 80, 100, 80)  # records deleted: start at the log start
    assert rs[("a", 2)] == ScanRange("a", 2, 40, 40, 40)  # truncated below the baseline: nothing to check
    assert rs[("new", 0)] == ScanRange("new", 0, 0, 7, 0)  # created since the baseline
    assert ("x", 0) not in rs and ("__consumer_offsets", 0) not in rs


def test_since_is_parsed_like_every_duration_and_must_be_positive() -> None:
    assert parse_since("90s") == 90
    assert parse_since("1h30m") == 5400
    assert parse_since("2d") == 172800
    assert parse_since("45") == 45
    assert parse_since("250ms") == 0.25
    for bad in ("", "abc", "5x", "1h abc", "-3s"):
        with pytest.raises(ConfigError, match=f"invalid --since {bad!r}: .* is not a duration"):
            parse_since(bad)
    for zero in ("0s", "0"):
        with pytest.raises(ConfigError, match="must be more than 0"):
            parse_since(zero)


# --- results, exit codes, rendering ------------------------------------------------------------------


def _result(findings: list[Finding]) -> CheckResult:
    now = _snap([("eqiad.s", 0, 0, 10)], taken_at=T0 + 900)
    scan = ScanResult(minutes={"eqiad.s": _minutes([60] * 15)}, records=900, seconds=1.5, master="local[2]")
    return CheckResult(cluster="c", findings=tuple(findings), now=now, baseline=now, window=(T0 + 600, T0 + 840),
                       scan=scan, ranges=(ScanRange("eqiad.s", 0, 0, 10, 5),),
                       urp_series=((T0 + 600, 0), (T0 + 700, 3), (T0 + 900, 0)),
                       rate_window=RateWindow(T0, T0 + 600, T0 + 840, T0 + 900))


def test_exit_codes() -> None:
    info = Finding("info", "at_min_isr", "t", 0, "layout", 2)
    warn = Finding("warning", "timestamp_order", "t", 1, "back", 3.5)
    assert exit_code_for([]) == 0
    assert exit_code_for([info]) == 0
    assert exit_code_for([info, warn]) == CheckFailed.exit_code == 9
    assert _result([info]).exit_code == 0
    r = _result([warn, info])
    assert r.exit_code == 9 and not r.healthy
    with pytest.raises(CheckFailed, match="t-1 timestamp_order"):
        r.raise_if_unhealthy()
    _result([info]).raise_if_unhealthy()


def test_json_and_markdown_name_every_finding() -> None:
    fs = [Finding("critical", "log_start_jump", "eqiad.s", 0, "all | deleted", 100),
          Finding("warning", "leader_skew", None, None, "skew", 2.25)]
    r = _result(fs)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["healthy"] is False and doc["exit_code"] == 9
    assert [(f["check"], f["topic"], f["partition"], f["value"]) for f in doc["findings"]] == [
        ("log_start_jump", "eqiad.s", 0, 100), ("leader_skew", None, None, 2.25)]
    md = render_markdown(r)
    assert "UNHEALTHY" in md and "| critical | `log_start_jump` | eqiad.s | 0 | 100 | all \\| deleted |" in md
    assert "| warning | `leader_skew` | - | - | 2.250 | skew |" in md
    assert "No findings." in render_markdown(_result([]))
    assert finding_rows(fs, include_info=False)[1][:4] == ["warning", "leader_skew", "-", "-"]


def test_table_renders_verdict_and_rows() -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    render_table(_result([Finding("warning", "invalid_json", "eqiad.s", 3, "4 of 10 records", 4)]), console)
    text = console.export_text()
    assert "UNHEALTHY" in text and "invalid_json" in text and "eqiad.s" in text and "4 of 10 records" in text


def test_chart_is_a_png(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    out = render_chart(_result([]), tmp_path / "c.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


# --- the executor kernel on in-memory Arrow batches -----------------------------------------------------


def test_kernel_one_pass_over_batches() -> None:
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from kafkaops.health import scan_kernel as k

    def batch(offsets: list[int], ts: list[int], js: list[int], dt: list[int | None]) -> object:
        n = len(offsets)
        return pa.RecordBatch.from_pydict({
            "key": pa.array([k.make_key(0, 4)] * n, pa.int64()),
            "offset": pa.array(offsets, pa.int64()), "ts": pa.array(ts, pa.int64()),
            "ts_type": pa.array([0] * n, pa.int32()), "json_state": pa.array(js, pa.int8()),
            "dt_ms": pa.array(dt, pa.int64()),
        })

    kernel = k.make_kernel({k.make_key(0, 4): 12}, back_tolerance_ms=60_000, drift_tolerance_ms=300_000,
                           future_limit_ms=10**13)
    b1 = batch([10, 11, 12, 13], [60_000, 61_000, 62_000, 63_000], [1, 1, 1, 3], [60_000, 61_000, 62_000, None])
    # Batch 2: a hole (14..15 missing), a 2 h step back at offset 17, a meta.dt 10 min off.
    b2 = batch([16, 17, 18], [64_000, 64_000 - 7_200_000, 65_000], [2, 1, 1],
               [None, 64_000 - 7_200_000, 65_000 - 600_000])
    (out,) = list(kernel(iter([b1, b2])))
    (row,) = out.column(0).to_pylist()
    s = json.loads(row)
    assert s["context_count"] == 2 and s["count"] == 5  # offsets 10, 11 are context
    assert s["first_offset"] == 12 and s["last_offset"] == 18
    assert (s["holes"], s["missing"]) == (1, 2)
    assert s["back_steps"] == 1 and s["back_steps_over"] == 1
    assert (s["worst_back_ms"], s["worst_back_offset"]) == (7_200_000, 17)
    assert (s["invalid_json"], s["first_invalid_offset"], s["missing_dt"]) == (1, 13, 1)
    assert s["drift_over"] == 1 and s["drift_max_ms"] == 600_000 and s["drift_worst_offset"] == 18
    assert sum(s["minutes"].values()) == 7  # context included in the rate histogram
    assert (s["tid"], s["partition"]) == (0, 4)


def test_kernel_non_event_columns_and_mixed_keys() -> None:
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from kafkaops.health import scan_kernel as k

    keys = [k.make_key(1, 0), k.make_key(2, 7), k.make_key(1, 0), k.make_key(2, 7)]
    b = pa.RecordBatch.from_pydict({"key": pa.array(keys, pa.int64()), "offset": pa.array([5, 0, 7, 1], pa.int64()),
                                    "ts": pa.array([1000, 5000, 900, 6000], pa.int64())})
    kernel = k.make_kernel({}, back_tolerance_ms=50, drift_tolerance_ms=1, future_limit_ms=5500)
    (out,) = list(kernel(iter([b])))
    segs = {(s["tid"], s["partition"]): s for s in map(json.loads, out.column(0).to_pylist())}
    assert segs[(1, 0)]["missing"] == 1 and segs[(1, 0)]["back_steps_over"] == 1
    assert segs[(1, 0)]["worst_back_offset"] == 7
    assert segs[(2, 7)]["missing"] == 0 and segs[(2, 7)]["future_ts"] == 1
    assert segs[(2, 7)]["invalid_json"] == 0 and segs[(2, 7)]["log_append_time"] == 0


def test_urp_samples_beside_a_baseline_skip_torn_lines(tmp_path: Path) -> None:
    from kafkaops.health.check import read_urp_samples

    assert read_urp_samples(tmp_path) == []
    (tmp_path / "samples.jsonl").write_text('{"t": 100.5, "urp": 0}\n{"t": 101.0, "urp": 33}\n'
                                            '{"t": 101.2, "error": "timed out"}\n{"t": 101.5, "urp": 3')
    assert read_urp_samples(tmp_path) == [(100.5, 0), (101.0, 33)]
