"""Retention or loss: the pure decision over baseline/now facts (kafkaops.health.retention), and how the
metadata checks report it (log_start_advanced / log_start_jump) and keep it in the snapshot file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkaops.health.metadata import Finding, OffsetsSnapshot, PartitionOffsets, metadata_findings
from kafkaops.health.retention import LogProbe, RetentionConfig, Verdict, edge_target, judge_log_start
from kafkaops.model import KafkaEndpoint, TopicConfig

S = 1000
MIN = 60 * S
H = 60 * MIN
D = 24 * H
WEEK = 7 * D
T0 = 1_800_000_000_000  # baseline time (ms)
RUN = 30 * MIN
T1 = T0 + RUN  # check time


def probe(first: tuple[int, int] | None, edge: tuple[int, int] | None, newest: tuple[int, int] | None, *,
          r_ms: int = WEEK, at: int = T0) -> LogProbe:
    return LogProbe(first=first, edge_ms=edge_target(at, r_ms), edge=edge, newest=newest)


def now_probe(edge: tuple[int, int] | None, *, r_ms: int = WEEK, size: int | None = None) -> LogProbe:
    return LogProbe(edge_ms=edge_target(T1, r_ms), edge=edge, size_bytes=size)


def judge(b: tuple[int, int], bp: LogProbe, n: tuple[int, int], np_: LogProbe | None, *, policy: str = "delete",
          r_ms: int = WEEK, r_bytes: int = -1, now_cfg: RetentionConfig | None = None, t1: int = T1) -> Verdict:
    return judge_log_start(before_start=b[0], before_end=b[1], before_ms=T0, before_probe=bp, now_start=n[0],
                           now_end=n[1], now_ms=t1, now_probe=np_, cleanup_policy=policy,
                           config=RetentionConfig(r_ms, r_bytes), config_now=now_cfg)


# A fresh partition (the lab's): 100 records produced seconds before the baseline, a week's retention.
FRESH = probe((0, T0 - 10 * S), (0, T0 - 10 * S), (99, T0 - S))
# A full week of data: the oldest records just past the retention, the edge a little younger.
WEEK_LOG = probe((0, T0 - WEEK - 2 * H), (200, T0 - WEEK + S), (999_999, T0 - S))


def test_delete_records_to_the_middle_of_fresh_data_is_loss_naming_the_record() -> None:
    v = judge((0, 100), FRESH, (50, 100), now_probe((50, T0 - 5 * S)))
    assert v.kind == "loss"
    assert "offset 0" in v.reason and "retention.ms=604800000" in v.reason and "7.0 d" in v.reason


def test_any_size_counts_even_one_record() -> None:
    assert judge((0, 100), FRESH, (1, 100), now_probe((1, T0 - 9 * S))).kind == "loss"


def test_retention_of_segments_below_the_baseline_edge_is_quiet() -> None:
    assert judge((0, 1_000_000), WEEK_LOG, (150, 1_000_400), now_probe((300, T1 - WEEK + S))).kind == "retention"


def test_records_that_aged_out_during_the_run_are_retention() -> None:
    # Past the baseline's edge, but the edge record aged out during the run (older than the check's cutoff)
    # and the first record left is itself older than the cutoff (a segment spans it).
    assert judge((0, 1_000_000), WEEK_LOG, (250_000 // 1000, 1_000_400),
                 now_probe((300, T1 - WEEK + S))).kind == "retention"
    # ... or younger than the cutoff by a normal gap between two records.
    assert judge((0, 1_000_000), WEEK_LOG, (250, 1_000_400), now_probe((250, T1 - WEEK + 2 * MIN))).kind == "retention"


def test_deleting_half_of_a_full_week_is_flagged_even_without_proof() -> None:
    # The removed records' timestamps are gone; the first record left is 3.5 days younger than the cutoff.
    v = judge((0, 1_000_000), WEEK_LOG, (500_000, 1_000_400), now_probe((500_000, T1 - WEEK // 2)))
    assert v.kind == "unexplained"
    assert "offset 500000" in v.reason and "3.5 d younger" in v.reason


def test_quiet_partition_gap_is_judged_against_its_own_pace() -> None:
    # 10 records in a week: a gap of two days at the cutoff is normal there.
    quiet = probe((0, T0 - WEEK - D), (3, T0 - WEEK + 10 * MIN), (9, T0 - D))
    assert judge((0, 10), quiet, (5, 10), now_probe((5, T1 - WEEK + 2 * D))).kind == "retention"


def test_clock_tolerance_at_the_cutoff() -> None:
    cutoff = T1 - WEEK + 60 * S
    old = probe((0, T0 - WEEK - H), (0, cutoff - 1), (99, T0 - S))
    young = probe((0, T0 - WEEK - H), (0, cutoff), (99, T0 - S))
    np_ = now_probe((10, T1 - WEEK + MIN))
    assert judge((0, 100), old, (10, 100), np_).kind == "retention"
    assert judge((0, 100), young, (10, 100), np_).kind == "loss"


def test_compacted_topic_never_loses_its_start_to_retention() -> None:
    v = judge((0, 1_000_000), WEEK_LOG, (150, 1_000_400), now_probe((300, T1 - WEEK + S)), policy="compact")
    assert v.kind == "loss" and "compact-only" in v.reason
    # compact,delete: time retention applies as on any delete topic.
    assert judge((0, 1_000_000), WEEK_LOG, (150, 1_000_400), now_probe((300, T1 - WEEK + S)),
                 policy="compact,delete").kind == "retention"


def test_infinite_retention_makes_every_removal_loss() -> None:
    unlimited = probe((0, T0 - 400 * D), None, (99, T0 - S), r_ms=-1)
    assert unlimited.edge_ms is None
    v = judge((0, 100), unlimited, (1, 100), LogProbe(), r_ms=-1, r_bytes=-1)
    assert v.kind == "loss" and "unlimited" in v.reason


def test_retention_bytes_needs_the_partition_size() -> None:
    size_only = probe((0, T0 - 10 * S), None, (99, T0 - S), r_ms=-1)
    unknown = judge((0, 100), size_only, (50, 100), LogProbe(), r_ms=-1, r_bytes=1000)
    assert unknown.kind == "unjudged" and "size is not known" in unknown.reason
    assert judge((0, 100), size_only, (50, 100), LogProbe(size_bytes=5000), r_ms=-1, r_bytes=1000).kind == "retention"
    small = judge((0, 100), size_only, (50, 100), LogProbe(size_bytes=200), r_ms=-1, r_bytes=1000)
    assert small.kind == "loss" and "200 bytes" in small.reason


def test_time_and_size_limits_together() -> None:
    # Young records removed: time retention cannot have done it, size retention can if the partition is large.
    np_big, np_small = now_probe((50, T0 - 5 * S), size=10_000), now_probe((50, T0 - 5 * S), size=10)
    assert judge((0, 100), FRESH, (50, 100), np_big, r_bytes=1000).kind == "retention"
    assert judge((0, 100), FRESH, (50, 100), np_small, r_bytes=1000).kind == "loss"
    # Old records: time explains it, whatever the size.
    assert judge((0, 1_000_000), WEEK_LOG, (150, 1_000_400), now_probe((300, T1 - WEEK + S), size=1),
                 r_bytes=1000).kind == "retention"


def test_retention_bytes_weighs_what_is_left_when_the_size_still_counts_removed_segments() -> None:
    # Right after a DeleteRecords the broker still reports the old size (segments below the log start
    # wait for a retention pass): 100 records of 100 bytes at the baseline, 10 left, retention.bytes 5000.
    weighed = LogProbe(first=(0, T0 - 10 * S), edge_ms=None, edge=None, newest=(99, T0 - S), size_bytes=10_000)
    v = judge((0, 100), weighed, (90, 100), LogProbe(size_bytes=10_000), r_ms=-1, r_bytes=5000)
    assert v.kind == "unexplained" and "10 records left weigh about 1000 bytes" in v.reason
    # Size retention proper: the partition keeps about retention.bytes.
    assert judge((0, 100), weighed, (40, 100), LogProbe(size_bytes=6000), r_ms=-1, r_bytes=5000).kind == "retention"
    # Without the size now, the same estimate still speaks; otherwise it cannot be told.
    assert judge((0, 100), weighed, (90, 100), LogProbe(), r_ms=-1, r_bytes=5000).kind == "unexplained"
    assert judge((0, 100), weighed, (40, 100), LogProbe(), r_ms=-1, r_bytes=5000).kind == "unjudged"


def test_records_without_timestamps_cannot_be_judged() -> None:
    none_stamped = probe(None, None, None)
    v = judge((0, 100), none_stamped, (50, 100), now_probe(None))
    assert v.kind == "unjudged" and "records 0..49 have no timestamp" in v.reason
    # Records 0..39 without a timestamp, then stamped (young) ones: removing only unstamped ones is unjudged...
    mixed = probe((40, T0 - 10 * S), (40, T0 - 10 * S), (99, T0 - S))
    assert judge((0, 100), mixed, (30, 100), now_probe(None)).kind == "unjudged"
    # ... removing a young stamped one too is loss.
    assert judge((0, 100), mixed, (60, 100), now_probe((60, T0 - 5 * S))).kind == "loss"


def test_tiny_retention_removing_everything_during_a_longer_run_is_retention() -> None:
    # The lab's case: retention.ms 5 s, segments rolled and removed by the broker during a 40 s "run",
    # including the records produced after the baseline; nothing is left.
    r = 5 * S
    bp = probe((0, T0 - 3 * S), (0, T0 - 3 * S), (29, T0 - S), r_ms=r)
    t1 = T0 + 40 * S
    v = judge_log_start(before_start=0, before_end=30, before_ms=T0, before_probe=bp, now_start=35, now_end=35,
                        now_ms=t1, now_probe=LogProbe(edge_ms=edge_target(t1, r)), cleanup_policy="delete",
                        config=RetentionConfig(r), clock_tolerance_ms=0)
    assert v.kind == "retention"


def test_records_appended_during_a_short_run_cannot_age_out() -> None:
    stale = probe((0, T0 - WEEK - H), None, (99, T0 - WEEK - MIN))  # every record held was past the retention
    v = judge((0, 100), stale, (120, 130), now_probe((120, T0 + MIN)))
    assert v.kind == "loss" and "records 100..119 were appended during the run" in v.reason
    assert judge((0, 100), stale, (100, 130), now_probe((100, T0 + MIN))).kind == "retention"
    # An empty partition at the baseline: the records are all from the run.
    empty = probe(None, None, None)
    assert judge((0, 0), empty, (20, 25), now_probe((20, T0 + MIN))).kind == "loss"
    # Unless this partition receives records stamped older than the retention (a replay, a mirror).
    assert judge((0, 0), empty, (20, 25), now_probe(None)).kind == "retention"


def test_no_record_left_and_no_proof_is_unexplained() -> None:
    # Past the edge, the edge record aged out during the run, the newest not known, nothing left to look at.
    bp = probe((0, T0 - WEEK - H), (10, T0 - WEEK + S), None)
    assert judge((0, 100), bp, (100, 100), now_probe(None)).kind == "unexplained"
    assert judge((0, 100), bp, (50, 100), None).kind == "unexplained"  # the check could not read now's edge


def test_retention_lowered_during_the_run_is_named() -> None:
    v = judge((0, 100), FRESH, (100, 100), now_probe(None), now_cfg=RetentionConfig(1000))
    assert v.kind == "loss"
    assert "at the baseline; 1000, -1 now" in v.reason


def test_edge_target_is_never_a_special_negative_timestamp() -> None:
    assert edge_target(5_000, 10_000) == 0
    assert edge_target(T0, WEEK) == T0 - WEEK
    assert edge_target(T0, -1) is None


# --------------------------------------------------------------------------------------------------
# Reported by the metadata checks, kept by the snapshot file
# --------------------------------------------------------------------------------------------------


def part(p: int, start: int, end: int, pr: LogProbe | None = None) -> PartitionOffsets:
    return PartitionOffsets("t", p, 1001, (1001,), (1001,), start, end, pr)


def snap(t: int, parts: list[PartitionOffsets], cfg: RetentionConfig | None = RetentionConfig(WEEK),
         policy: str = "delete") -> OffsetsSnapshot:
    return OffsetsSnapshot("eqiad", t / 1000, (1001,), 1001, tuple(parts), {"t": TopicConfig("t", 1, 1, policy)},
                           {}, {"t": cfg} if cfg else {})


def offset_findings(before: OffsetsSnapshot, now: OffsetsSnapshot) -> list[Finding]:
    return [f for f in metadata_findings(before, now) if f.check.startswith("log_start")]


def test_findings_name_partition_offsets_and_severity() -> None:
    before = snap(T0, [part(0, 0, 100, FRESH), part(1, 0, 100, FRESH), part(2, 0, 1_000_000, WEEK_LOG),
                       part(3, 0, 100, FRESH)])
    now = snap(T1, [part(0, 0, 100), part(1, 50, 100, now_probe((50, T0 - 5 * S))),
                    part(2, 500_000, 1_000_400, now_probe((500_000, T1 - WEEK // 2))),
                    part(3, 100, 100, now_probe(None))])
    f0, f1, f2 = sorted(offset_findings(before, now), key=lambda f: f.partition or 0)
    assert (f0.severity, f0.check, f0.partition, f0.value) == ("critical", "log_start_advanced", 1, 50)
    assert f0.message.startswith("lost data: log start offset moved 0 -> 50: records 0..49 (50 records, 50% of")
    assert (f1.severity, f1.check, f1.partition, f1.value) == ("warning", "log_start_advanced", 2, 500_000)
    assert (f2.severity, f2.check, f2.partition, f2.value) == ("critical", "log_start_jump", 3, 100)
    assert "all 100 records held at the baseline" in f2.message


def test_retention_is_quiet_and_unjudged_is_info() -> None:
    before = snap(T0, [part(0, 0, 1_000_000, WEEK_LOG), part(1, 0, 100, probe(None, None, None))])
    now = snap(T1, [part(0, 150, 1_000_400, now_probe((300, T1 - WEEK + S))), part(1, 50, 100, now_probe(None))])
    (f,) = offset_findings(before, now)
    assert (f.severity, f.check, f.partition) == ("info", "log_start_advanced", 1)


def test_baselines_without_the_facts_keep_the_former_rule() -> None:
    before = snap(T0, [part(0, 0, 1000), part(1, 0, 1000)], cfg=None)
    now = snap(T1, [part(0, 100, 1200), part(1, 800, 1200)])
    (f,) = offset_findings(before, now)
    assert (f.severity, f.check, f.partition, f.value) == ("warning", "log_start_advanced", 1, 800)


def test_snapshot_file_keeps_retention_and_probes(tmp_path: Path) -> None:
    s = snap(T0, [part(0, 0, 100, FRESH), part(1, 0, 0, probe(None, None, None)), part(2, 0, 5)],
             cfg=RetentionConfig(WEEK, 1 << 30, "LogAppendTime"))
    path = tmp_path / "base.json"
    s.write(path)
    doc = json.loads(path.read_text())
    assert doc["topics"]["t"]["retention_ms"] == WEEK and doc["topics"]["t"]["timestamp_type"] == "LogAppendTime"
    assert doc["partitions"][0]["probe"]["edge"] == [0, T0 - 10 * S]
    assert "probe" not in doc["partitions"][2]
    back = OffsetsSnapshot.read(path)
    assert back.retention == s.retention
    assert [p.probe for p in back.partitions] == [p.probe for p in s.partitions]
    # A file of an older kafkaops (no retention, no probes) still reads.
    for p in doc["partitions"]:
        p.pop("probe", None)
    for t in doc["topics"].values():
        for k in ("retention_ms", "retention_bytes", "timestamp_type"):
            t.pop(k)
    old = OffsetsSnapshot.from_json(json.dumps(doc))
    assert old.retention == {} and all(p.probe is None for p in old.partitions)


@pytest.mark.parametrize("bad", [{"first": [1]}, {"edge": "x"}])
def test_malformed_probe_is_a_config_error(bad: dict[str, object]) -> None:
    from kafkaops.errors import ConfigError

    doc = snap(T0, [part(0, 0, 100, FRESH)]).to_dict()
    doc["partitions"][0]["probe"] = bad
    with pytest.raises(ConfigError, match=r"partitions\[0\]: malformed"):
        OffsetsSnapshot.from_json(json.dumps(doc))


def test_describe_log_dirs_speaks_v1_to_a_broker() -> None:
    """The adapter's DescribeLogDirs against a fake broker on 127.0.0.1: request layout, answer parsing
    (two log dirs, a future replica left out, an errored dir ignored)."""
    import socket
    import struct
    import threading

    from kafkaops.systems.kafka import describe_log_dirs

    def s16(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    def part(p: int, size: int, future: bool = False) -> bytes:
        return struct.pack(">iqq?", p, size, 0, future)

    seen: dict[str, object] = {}
    server = socket.create_server(("127.0.0.1", 0))

    def broker() -> None:
        conn, _ = server.accept()
        with conn:
            (n,) = struct.unpack(">i", conn.recv(4))
            req = b""
            while len(req) < n:
                req += conn.recv(n - len(req))
            api, version, corr = struct.unpack_from(">hhi", req)
            seen.update(api=api, version=version, body=req[8 + 2 + len("kafkaops"):])
            dirs = [(0, "/d1", [("t", [part(0, 100), part(1, 7, future=True)])]),
                    (0, "/d2", [("t", [part(1, 50)]), ("u", [part(3, 9)])]),
                    (57, "/bad", [("t", [part(2, 999)])])]
            body = struct.pack(">ii", corr, 0) + struct.pack(">i", len(dirs))
            for err, d, topics in dirs:
                body += struct.pack(">h", err) + s16(d) + struct.pack(">i", len(topics))
                for name, parts in topics:
                    body += s16(name) + struct.pack(">i", len(parts)) + b"".join(parts)
            conn.sendall(struct.pack(">i", len(body)) + body)

    thread = threading.Thread(target=broker, daemon=True)
    thread.start()
    try:
        sizes = describe_log_dirs(KafkaEndpoint("127.0.0.1"), "127.0.0.1", server.getsockname()[1],
                                   [("t", 0), ("t", 1), ("u", 3)], timeout=5)
    finally:
        thread.join(5)
        server.close()
    assert sizes == {("t", 0): 100, ("t", 1): 50, ("u", 3): 9}
    assert (seen["api"], seen["version"]) == (35, 1)
    assert seen["body"] == (struct.pack(">i", 2) + s16("t") + struct.pack(">iii", 2, 0, 1)
                            + s16("u") + struct.pack(">ii", 1, 3))
