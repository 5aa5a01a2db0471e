"""The topic-health post-check against the real lab: real faults are caught, a healthy cluster passes.

Every test creates its own topics (unique names) and restricts the check to them with ``--topics``,
so tests do not depend on each other or on what else runs in the lab. One test stops a broker; it
restarts it and restores preferred leadership before it returns. Both scan readers (``fast``, ours,
and ``builtin``, Spark's ``kafka`` source) give the same report, locally and on a standalone Spark
master; records deleted with DeleteRecords are loss, records the broker's retention removed are not.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.health.check import CheckResult, run_post_check
from kafkaops.health.metadata import Finding, OffsetsSnapshot
from kafkaops.model import Cluster
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops_lab.kafka import ProduceRecord
from kafkaops_lab.security import admin_endpoint  # the tests' own data is the lab's super user's to write

pytestmark = pytest.mark.lab

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

REPO = Path(__file__).resolve().parents[2]


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _create(cluster: Cluster, *names: str, partitions: int = 3) -> None:
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    admin = KafkaAdmin(admin_endpoint(cluster), timeout=15)
    admin.create_topics([TopicSpec(n, partitions, 3) for n in names])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = [p for p in admin.snapshot(with_configs=False).partitions if p.topic in names]
        if len(parts) == partitions * len(names) and all(
                p.leader is not None and len(p.isr) == len(p.replicas) for p in parts):
            return
        time.sleep(0.5)
    raise AssertionError(f"topics {names} did not get leaders and full ISRs")


def _event(i: int, ts_ms: int | None = None) -> str:
    t = (ts_ms or int(time.time() * 1000)) / 1000
    dt = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
    return json.dumps({"$schema": "/test/event/1.0.0", "meta": {"dt": dt, "stream": "test"}, "i": i})


def _produce(cluster: Cluster, topic: str, records: list[ProduceRecord]) -> int:
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin

    return KafkaAdmin(admin_endpoint(cluster), timeout=15).produce(topic, records)


def _snapshot(cluster: Cluster) -> OffsetsSnapshot:
    from kafkaops.health.check import take_snapshot

    return take_snapshot(cluster)


def _by_check(result: CheckResult, check: str) -> list[Finding]:
    return [f for f in result.findings if f.check == check]


def _failing(result: CheckResult) -> list[tuple[str, str, str | None, int | None]]:
    return [(f.severity, f.check, f.topic, f.partition) for f in result.failing]


def _topic_rx(uid: str) -> str:
    return rf"^(eqiad\.|codfw\.)?kotest-{uid}\."


# --------------------------------------------------------------------------------------------------


def test_healthy_topics_pass_via_the_cli(lab_cluster: Cluster, tmp_path: Path) -> None:
    """Baseline, healthy traffic on an eqiad/codfw pair, check: exit 0, records counted, no failing finding."""


    uid = _uid()
    eq, cf = f"eqiad.kotest-{uid}.ok", f"codfw.kotest-{uid}.ok"
    _create(lab_cluster, eq, cf)
    base = tmp_path / "base.json"
    env = {**os.environ, "KAFKAOPS_DEBUG": "1"}
    inv = lab_cluster.source
    snap = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "snapshot", lab_cluster.name, "--out", str(base),
                           "-i", inv, "-o", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert snap.returncode == 0, snap.stderr
    said = json.loads(snap.stdout)  # -o is the format here too; the file is --out
    assert said["file"] == str(base) and said["partitions"] > 0 and said["cluster"] == lab_cluster.name, said
    # As a run leaves it: URP samples beside its baseline go into the standalone check's chart too.
    sampled_at = round(time.time(), 3)
    (tmp_path / "samples.jsonl").write_text(json.dumps({"t": sampled_at, "urp": 7, "offline": 0}) + "\n")
    for topic in (eq, cf):
        assert _produce(lab_cluster, topic, [ProduceRecord(_event(i), partition=i % 3) for i in range(150)]) == 150
    chart = tmp_path / "chart.png"
    proc = subprocess.run(
        [sys.executable, "-m", "kafkaops.cli.main", "check", lab_cluster.name, "-i", inv, "--baseline", str(base),
         "--topics", _topic_rx(uid), "--output", "json", "--chart", str(chart)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["healthy"] is True
    assert [f for f in doc["findings"] if f["severity"] != "info"] == []
    counted: dict[str, int] = {}
    for p in doc["scan"]["partitions"]:
        counted[p["topic"]] = counted.get(p["topic"], 0) + p["count"]
        assert p["missing"] == 0 and p["invalid_json"] == 0
    assert counted == {eq: 150, cf: 150}
    assert {"t": sampled_at, "urp": 7} in doc["urp_series"]
    assert chart.read_bytes()[:4] == b"\x89PNG"


def test_deleted_records_are_flagged(lab_cluster: Cluster) -> None:
    """delete_records on one partition after the baseline -> critical log_start_jump on that partition only."""
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin

    uid = _uid()
    topic = f"kotest-{uid}.deleted"
    _create(lab_cluster, topic)
    _produce(lab_cluster, topic, [ProduceRecord(f"r{i}", partition=i % 3) for i in range(300)])
    baseline = _snapshot(lab_cluster)
    end = {p.partition: p.log_end_offset for p in baseline.partitions if p.topic == topic}
    assert end == {0: 100, 1: 100, 2: 100}
    low = KafkaAdmin(admin_endpoint(lab_cluster), timeout=15).delete_records({(topic, 1): 100})
    assert low[(topic, 1)] == 100

    result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
    assert result.exit_code == 9
    jumps = _by_check(result, "log_start_jump")
    assert [(f.severity, f.topic, f.partition, f.value) for f in jumps] == [("critical", topic, 1, 100)]
    assert "100 records" in jumps[0].message
    assert _failing(result) == [("critical", "log_start_jump", topic, 1)]


def test_offsets_for_the_check_are_log_starts_ends_and_times(lab_cluster: Cluster) -> None:
    """Log starts (one moved by DeleteRecords), log ends, the offset for a time, and the log end for a time with
    no record (from the caller's log ends when it has them), as the check reads them. That reading them
    creates nothing is the stretch lab's layout test's to catch (tests/lab/test_batched_roll_on_lab.py): a
    consumer's ``offsets_for_times``, tried, made Kafka create ``__consumer_offsets`` there."""
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops_lab.kafka import LabKafka

    uid = _uid()
    topic = f"kotest-{uid}.offsets"
    _create(lab_cluster, topic)
    first = int(time.time() * 1000)
    _produce(lab_cluster, topic, [ProduceRecord(f"r{i}", partition=i % 3, timestamp_ms=first + i)
                                  for i in range(300)])
    LabKafka(admin_endpoint(lab_cluster), timeout=15).delete_records({(topic, 2): 40})
    keys = [(topic, 0), (topic, 1), (topic, 2)]
    admin = KafkaAdmin.for_cluster(lab_cluster)
    assert admin.list_offsets(keys) == {(topic, 0): (0, 100), (topic, 1): (0, 100), (topic, 2): (40, 100)}
    assert admin.offsets_at({k: first + 150 for k in keys}) == {(topic, 0): 50, (topic, 1): 50, (topic, 2): 50}
    assert admin.offsets_for_times(keys, first + 10_000_000) == {(topic, 0): 100, (topic, 1): 100, (topic, 2): 100}
    assert admin.offsets_for_times(keys, first + 10_000_000, log_ends={(topic, 0): 7}) == {
        (topic, 0): 7, (topic, 1): 100, (topic, 2): 100}  # a log end the caller read is not asked again


def test_delete_records_to_the_middle_is_loss_naming_partition_and_offsets(lab_cluster: Cluster) -> None:
    """Half of one partition deleted between the baseline and the check: critical, whatever its size.

    The former rule ("more than half of what the baseline held") let exactly this pass."""
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin

    uid = _uid()
    topic = f"kotest-{uid}.middle"
    _create(lab_cluster, topic)
    _produce(lab_cluster, topic, [ProduceRecord(f"r{i}", partition=i % 3) for i in range(300)])
    baseline = _snapshot(lab_cluster)
    probes = {p.partition: p.probe for p in baseline.partitions if p.topic == topic}
    assert all(pr is not None and pr.edge is not None and pr.edge[0] == 0 for pr in probes.values()), probes
    assert baseline.retention[topic].retention_ms == 7 * 24 * 3600 * 1000  # the lab broker's 168 h
    low = KafkaAdmin(admin_endpoint(lab_cluster), timeout=15).delete_records({(topic, 2): 50})
    assert low[(topic, 2)] == 50
    _produce(lab_cluster, topic, [ProduceRecord(f"after{i}", partition=i % 3) for i in range(30)])

    result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
    assert result.exit_code == 9
    assert _failing(result) == [("critical", "log_start_advanced", topic, 2)]
    (f,) = _by_check(result, "log_start_advanced")
    assert f.value == 50
    assert f.message.startswith("lost data: log start offset moved 0 -> 50: records 0..49 (50 records")
    assert "the record at offset 0" in f.message
    # The data half does not report the same records again: the scan starts at the new log start.
    assert result.scan is not None and sum(s.count for s in result.scan.partitions.values()) == 30
    assert all(s.missing == 0 for s in result.scan.partitions.values())


def _broker_setting(cluster: Cluster, name: str) -> str | None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    broker = str(cluster.hosts[0].broker_id)
    admin = AdminClient({**librdkafka_config(admin_endpoint(cluster)), "log_level": 2})
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, broker)], request_timeout=15).values()
    entry = fut.result(timeout=20).get(name)
    return None if entry is None else entry.value


# compact,delete is a long scenario (bench/long_scenarios.py); the suite keeps delete, the same judgement.
@pytest.mark.parametrize("policy", [pytest.param("compact,delete", marks=pytest.mark.long), "delete"])
def test_retention_by_the_broker_is_not_loss(lab_cluster: Cluster, policy: str) -> None:
    """Tiny retention.ms and segment.ms: the broker removes every segment between the baseline and the
    check (records produced after the baseline too), the log start moves past the baseline's end, and
    the check stays quiet.

    Who removes them: for ``compact,delete`` the log cleaner, every ``log.cleaner.backoff.ms`` (15 s);
    for ``delete`` only the retention task, every ``log.retention.check.interval.ms`` (5 min by default,
    too slow for a test: that variant runs when the lab's brokers check more often).
    """
    if policy == "delete":
        interval = _broker_setting(lab_cluster, "log.retention.check.interval.ms")
        if interval is None or int(interval) > 10_000:
            pytest.skip(f"the lab's brokers apply retention every {interval} ms (needs "
                        "log.retention.check.interval.ms=5000 in lab/kafkaops_lab/configs.py's server.properties)")
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    uid = _uid()
    topic = f"kotest-{uid}.retained"
    admin = KafkaAdmin(admin_endpoint(lab_cluster), timeout=15)
    # retention.ms 12 s: longer than the topic's creation and three bursts take on a loaded 2-core machine (at
    # 5 s the broker once removed the first segment before the baseline was taken: CI, 2026-11-26).
    admin.create_topics([TopicSpec(topic, 1, 3, (("cleanup.policy", policy), ("retention.ms", "12000"),
                                                 ("segment.ms", "1000")))])
    _create(lab_cluster, topic, partitions=1)  # waits for the leader and a full ISR
    n = 0
    for _ in range(3):  # three segments: each burst comes more than segment.ms after the one before
        _produce(lab_cluster, topic, [ProduceRecord(f"v{n + i}", partition=0, key=f"k{n + i}") for i in range(10)])
        n += 10
        time.sleep(1.2)
    baseline = _snapshot(lab_cluster)
    (b,) = [p for p in baseline.partitions if p.topic == topic]
    assert (b.log_start_offset, b.log_end_offset) == (0, 30) and b.probe is not None
    _produce(lab_cluster, topic, [ProduceRecord(f"v{n + i}", partition=0, key=f"k{n + i}") for i in range(10)])
    # Then nothing more: a compacting cleaner would merge fresh records into the old segments' timestamps.
    deadline = time.monotonic() + 75
    start = 0
    while time.monotonic() < deadline:
        start = admin.list_offsets([(topic, 0)])[(topic, 0)][0] or 0
        if start >= 40:
            break
        time.sleep(1)
    assert start >= 40, f"the broker removed nothing in 75 s (log start {start})"

    result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
    assert _failing(result) == [], result.findings
    assert [f for f in result.findings if f.check.startswith("log_start")] == []
    assert result.exit_code == 0


def test_size_retention_is_not_loss_and_delete_records_under_it_is(lab_cluster: Cluster) -> None:
    """retention.bytes: the broker cutting the oldest segments is quiet (the partition keeps about
    retention.bytes); DeleteRecords on the same topic is flagged, though the records were young."""
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    uid = _uid()
    topic = f"kotest-{uid}.sized"
    admin = KafkaAdmin(admin_endpoint(lab_cluster), timeout=15)
    admin.create_topics([TopicSpec(topic, 1, 3, (("cleanup.policy", "compact,delete"), ("retention.bytes", "3000"),
                                                 ("segment.bytes", "1000")))])
    _create(lab_cluster, topic, partitions=1)
    n = 0

    def burst() -> None:  # about one segment (segment.bytes 1000)
        nonlocal n
        _produce(lab_cluster, topic, [ProduceRecord("x" * 60 + f"{n + i:08d}", partition=0, key=f"k{n + i:06d}")
                                      for i in range(8)])
        n += 8

    for _ in range(2):
        burst()
    baseline = _snapshot(lab_cluster)
    (b,) = [p for p in baseline.partitions if p.topic == topic]
    assert b.probe is not None and b.probe.size_bytes and baseline.retention[topic].retention_bytes == 3000
    for _ in range(6):
        burst()
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and (admin.list_offsets([(topic, 0)])[(topic, 0)][0] or 0) < 16:
        time.sleep(1)  # the log cleaner applies retention.bytes every 15 s on a compact,delete topic
    start = admin.list_offsets([(topic, 0)])[(topic, 0)][0] or 0
    assert start >= 16, f"the broker removed nothing by size in 45 s (log start {start})"
    result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid), scan=False)
    assert [f for f in result.findings if f.check.startswith("log_start")] == [], result.findings

    again = _snapshot(lab_cluster)
    (b2,) = [p for p in again.partitions if p.topic == topic]
    assert b2.log_end_offset is not None
    cut = b2.log_end_offset - 4
    admin.delete_records({(topic, 0): cut})
    result = run_post_check(lab_cluster, again, topics_regex=_topic_rx(uid), scan=False)
    (f,) = [f for f in result.failing if f.check == "log_start_advanced"]
    print(f"DeleteRecords under retention.bytes: {f.severity}: {f.message}")
    assert f.severity in ("critical", "warning") and (f.topic, f.partition) == (topic, 0)
    assert f"log start offset moved {b2.log_start_offset} -> {cut}" in f.message and "retention.bytes=3000" in f.message


def test_stopped_broker_is_flagged_as_urp(lab_cluster: Cluster) -> None:
    """kafka1003 stopped -> under_replicated on every partition (and the broker missing); back -> passes."""
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin


    uid = _uid()
    topic = f"kotest-{uid}.urp"
    _create(lab_cluster, topic)
    _produce(lab_cluster, topic, [ProduceRecord(f"r{i}", partition=i % 3) for i in range(60)])
    baseline = _snapshot(lab_cluster)
    admin = KafkaAdmin(admin_endpoint(lab_cluster), timeout=15)
    host = LabHost.named("kafka1003")
    assert host.stop("kafka")
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            parts = [p for p in admin.snapshot(with_configs=False).partitions if p.topic == topic]
            if all(1003 not in p.isr for p in parts):
                break
            time.sleep(1)
        result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
        assert result.exit_code == 9
        urp = _by_check(result, "under_replicated")
        assert sorted((f.topic, f.partition) for f in urp) == [(topic, 0), (topic, 1), (topic, 2)]
        assert all(f.severity == "warning" and "1003" in f.message and f.value == 2 for f in urp)
        assert [f.value for f in _by_check(result, "broker_missing")] == [1003]
        assert result.urp_series[0][1] == 0 and result.urp_series[-1][1] == 3
        # The scan still reads every record through the remaining leaders.
        assert result.scan is not None
        assert sum(s.count for s in result.scan.partitions.values()) == 0  # nothing produced since the baseline
    finally:
        host.start("kafka")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            snap = admin.snapshot(with_configs=False)
            if 1003 in snap.brokers and all(len(p.isr) == len(p.replicas) for p in snap.partitions):
                break
            time.sleep(1)
        admin.elect_preferred_leaders()
    # Broker back, ISR full, preferred leaders restored, new records readable: the check passes again.
    _produce(lab_cluster, topic, [ProduceRecord(f"after{i}", partition=i % 3) for i in range(30)])
    after = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
    assert _failing(after) == [], after.findings
    assert after.exit_code == 0
    assert after.scan is not None and sum(s.count for s in after.scan.partitions.values()) == 30


def _stage_order_and_json_faults(cluster: Cluster, uid: str) -> tuple[str, str, int, int]:
    """Produce, after a baseline taken by the caller, out-of-order and malformed records.

    Returns:
        (order topic, event topic, expected worst step back in ms, its offset)
    """


    order, events = f"kotest-{uid}.order", f"eqiad.kotest-{uid}.json"
    now = int(time.time() * 1000)
    # Partition 0: one record 2 h in the past between records one second apart.
    recs = [ProduceRecord(f"a{i}", partition=0, timestamp_ms=now - 60_000 + i * 1000) for i in range(20)]
    recs.append(ProduceRecord("late", partition=0, timestamp_ms=now - 7_200_000))
    recs += [ProduceRecord(f"b{i}", partition=0, timestamp_ms=now - 30_000 + i * 1000) for i in range(5)]
    # Partition 1: small jitter (2 s back), normal for batched producers.
    recs += [ProduceRecord(f"c{i}", partition=1, timestamp_ms=now - 10_000 + (i % 2) * 2000 + i * 10)
             for i in range(10)]
    assert _produce(cluster, order, recs) == len(recs)
    worst_ms = (now - 60_000 + 19 * 1000) - (now - 7_200_000)
    ev = [ProduceRecord(_event(i), partition=0) for i in range(20)]
    ev += [ProduceRecord(v, partition=0) for v in ("not json", '{"meta": {"dt": "2024-01-01T00:00:00Z"', "[1, 2]")]
    ev += [ProduceRecord(json.dumps({"meta": {"stream": "x"}}), partition=0),
           ProduceRecord(json.dumps({"meta": {"dt": "yesterday"}}), partition=0)]
    assert _produce(cluster, events, ev) == 25
    return order, events, worst_ms, 20


def test_out_of_order_timestamps_and_invalid_json(lab_cluster: Cluster) -> None:
    uid = _uid()
    order, events = f"kotest-{uid}.order", f"eqiad.kotest-{uid}.json"
    _create(lab_cluster, order, events)
    baseline = _snapshot(lab_cluster)
    _, _, worst_ms, worst_offset = _stage_order_and_json_faults(lab_cluster, uid)

    result = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid))
    assert result.exit_code == 9
    ts = {(f.topic, f.partition): f for f in _by_check(result, "timestamp_order")}
    assert ts[(order, 0)].severity == "warning"
    assert ts[(order, 0)].value == worst_ms / 1000
    assert f"at offset {worst_offset}" in ts[(order, 0)].message
    assert ts[(order, 1)].severity == "info"  # 2 s jitter is within tolerance
    bad = {f.check: f for f in result.findings if f.topic == events}
    assert (bad["invalid_json"].partition, bad["invalid_json"].value) == (0, 3)
    assert "first at offset 20" in bad["invalid_json"].message
    assert bad["missing_meta_dt"].value == 2
    assert set(_failing(result)) == {("warning", "timestamp_order", order, 0), ("warning", "invalid_json", events, 0),
                                     ("warning", "missing_meta_dt", events, 0)}
    # Only event topics are parsed as JSON: the order topic's plain-text values are not "invalid".
    assert result.scan is not None
    assert all(s.invalid_json == 0 for (t, _), s in result.scan.partitions.items() if t == order)


# --------------------------------------------------------------------------------------------------
# Both readers: the same report on the same data
# --------------------------------------------------------------------------------------------------


def _stage_for_readers(cluster: Cluster, uid: str) -> tuple[OffsetsSnapshot, OffsetsSnapshot]:
    """Faults for every data check on a baseline, a partition with deleted records and a compacted topic:
    returns (baseline, now), "now" taken once so both readers read exactly the same ranges."""
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    order, events, plain = f"kotest-{uid}.order", f"eqiad.kotest-{uid}.json", f"kotest-{uid}.plain"
    compacted = f"kotest-{uid}.compacted"
    _create(cluster, order, events, plain)
    admin = KafkaAdmin(admin_endpoint(cluster), timeout=15)
    admin.create_topics([TopicSpec(compacted, 3, 3, (("cleanup.policy", "compact"),))])
    _create(cluster, compacted)
    _produce(cluster, plain, [ProduceRecord(f"p{i}", partition=i % 3) for i in range(120)])
    baseline = _snapshot(cluster)
    _stage_order_and_json_faults(cluster, uid)
    _produce(cluster, plain, [ProduceRecord(f"q{i}", partition=i % 3) for i in range(90)])
    _produce(cluster, compacted, [ProduceRecord(f"c{i}", partition=i % 3, key=f"k{i % 7}") for i in range(60)])
    admin.delete_records({(plain, 1): 60})  # into the run's records: the scan starts past the deletion
    return baseline, _snapshot(cluster)


def _counts(result: CheckResult) -> dict[tuple[str, int], int]:
    assert result.scan is not None
    return {k: s.count for k, s in sorted(result.scan.partitions.items())}


def test_both_readers_give_the_same_report(lab_cluster: Cluster) -> None:
    uid = _uid()
    baseline, now = _stage_for_readers(lab_cluster, uid)
    runs = {reader: run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid), snapshot_now=lambda: now,
                                   reader=reader) for reader in ("fast", "builtin")}
    fast, builtin = runs["fast"], runs["builtin"]
    assert fast.scan is not None and builtin.scan is not None
    assert (fast.scan.reader, builtin.scan.reader) == ("fast", "builtin")
    assert fast.scan.reader_notice is None and builtin.scan.reader_notice is None
    counts = _counts(fast)
    assert counts[(f"kotest-{uid}.plain", 0)] == 30 and counts[(f"kotest-{uid}.plain", 1)] == 10
    assert counts[(f"kotest-{uid}.compacted", 0)] > 0
    assert _counts(builtin) == counts
    assert builtin.scan.to_dict()["partitions"] == fast.scan.to_dict()["partitions"]
    assert builtin.scan.minutes == fast.scan.minutes
    assert _comparable(builtin) == _comparable(fast)
    assert {c for _, c, *_ in _comparable(fast)} >= {"timestamp_order", "invalid_json", "missing_meta_dt",
                                                     "log_start_jump"}
    print(f"scan seconds: fast {fast.scan.seconds:.2f}, builtin {builtin.scan.seconds:.2f}")


def test_fallback_to_builtin_when_the_fast_reader_is_not_built(lab_cluster: Cluster, tmp_path: Path) -> None:
    """A machine with Spark's Kafka connector but no compiled reader (no JDK): ``kafkaops check`` says so
    in one line, scans with the built-in source in a JVM that has no trace of ours, and reports as usual."""
    from kafkaops_lab.dirs import cache_dir

    cache = tmp_path / "cache"
    (cache / "jars").mkdir(parents=True)
    (cache / "jars" / "spark").symlink_to(cache_dir() / "jars" / "spark")
    uid = _uid()
    topic = f"kotest-{uid}.fallback"
    _create(lab_cluster, topic)
    base = tmp_path / "base.json"
    _snapshot(lab_cluster).write(base)
    _produce(lab_cluster, topic, [ProduceRecord(f"r{i}", partition=i % 3) for i in range(90)])
    env = {**os.environ, "KAFKAOPS_CACHE": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-m", "kafkaops.cli.main", "check", lab_cluster.name, "-i", lab_cluster.source,
         "--baseline", str(base), "--topics", _topic_rx(uid), "--output", "json"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notices = [line for line in proc.stderr.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1, proc.stderr
    assert "fast scan reader is not built" in notices[0] and "python -m kafkaops.health.scan_jar" in notices[0]
    doc = json.loads(proc.stdout)
    assert doc["scan"]["reader"] == "builtin" and doc["scan"]["reader_notice"] == notices[0]
    assert {(p["topic"], p["partition"]): p["count"] for p in doc["scan"]["partitions"]} == {
        (topic, 0): 30, (topic, 1): 30, (topic, 2): 30}


# --------------------------------------------------------------------------------------------------
# A real Spark standalone cluster (master + worker from the installed pyspark) on 127.0.0.1
# --------------------------------------------------------------------------------------------------


def _free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise AssertionError("no free port")


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"process exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"port {port} did not open")


@pytest.fixture()
def spark_standalone(tmp_path: Path) -> Iterator[str]:
    """A Spark standalone master and one worker bound to 127.0.0.1; stopped by pid afterwards."""
    import pyspark

    from kafkaops_lab import procs

    home = Path(pyspark.__file__).parent
    spark_class = home / "bin" / "spark-class"
    assert spark_class.exists() and shutil.which("java"), "spark-class and java are needed"
    port, ui, worker_ui = _free_port(7077), _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp_path), "SPARK_WORKER_DIR": str(tmp_path / "work"),
           "PYSPARK_PYTHON": sys.executable}
    started: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        log = open(tmp_path / "master.log", "wb")  # noqa: SIM115
        logs.append(log)
        master = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(ui)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(master)
        _wait_port(port, master)
        url = f"spark://127.0.0.1:{port}"
        log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115
        logs.append(log)
        worker = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host",
                                   "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(worker)
        deadline = time.monotonic() + 90
        while True:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as resp:
                    if json.loads(resp.read()).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the worker did not register with the master"
            time.sleep(1)
        yield url
    finally:
        pids = [p.pid for p in started]
        # Executors and Python workers the worker launched are its descendants: stop them too, by pid.
        procs.terminate(sorted(set(procs.descendants(pids))) + pids[::-1], timeout=30)
        for log in logs:
            log.close()


def _comparable(result: CheckResult) -> list[tuple[object, ...]]:
    return [(f.severity, f.check, f.topic, f.partition, f.value, f.message) for f in result.findings]


# A long scenario (bench/long_scenarios.py): the suite scans with Spark in local mode; a standalone
# master's reachability gate is unit-tested (tests/unit/test_reachability.py).
@pytest.mark.long
def test_standalone_cluster_gives_the_same_findings_as_local(lab_cluster: Cluster, spark_standalone: str) -> None:
    """Local and standalone, fast and built-in reader: one report."""
    uid = _uid()
    baseline, now = _stage_for_readers(lab_cluster, uid)  # the same "now" for every run: identical ranges

    local = run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid), snapshot_now=lambda: now)
    remote = {reader: run_post_check(lab_cluster, baseline, topics_regex=_topic_rx(uid), spark_master=spark_standalone,
                                     snapshot_now=lambda: now, reader=reader) for reader in ("fast", "builtin")}
    assert local.scan is not None and local.scan.master.startswith("local")
    assert {c for _, c, *_ in _comparable(local)} >= {"timestamp_order", "invalid_json", "missing_meta_dt"}
    for reader, result in remote.items():
        assert result.scan is not None
        assert (result.scan.master, result.scan.reader) == (spark_standalone, reader)
        assert _counts(result) == _counts(local), reader
        assert _comparable(result) == _comparable(local), reader
        assert result.scan.to_dict()["partitions"] == local.scan.to_dict()["partitions"], reader
        assert result.exit_code == local.exit_code == 9
