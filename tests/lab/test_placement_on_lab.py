"""Issue 15 on the stretch lab (four brokers, eqiad and codfw, broker.rack = DC, follower fetching).

A topic created with Kafka's default (rack-aware) placement, RF 3 and min ISR 2, is flagged by
``placement check`` (one DC holds a single replica: losing the other leaves it under min ISR); ``placement
plan`` lays it out with one replica move per partition; ``placement apply`` runs under continuous
``acks=all`` load, is SIGKILLed right after its first batch was submitted, and ``resume`` finishes it
without submitting any partition twice. Afterwards: nothing lost or duplicated, no throttle config left,
``check`` passes with leaders balanced over the DCs, and stopping a preferred leader hands leadership to
the other replica of its own DC.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import live_journal

from kafkaops.model import Cluster
from kafkaops.systems.kafka_auth import librdkafka_config

pytestmark = [pytest.mark.lab, pytest.mark.slow]

THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _assignment(cluster: Cluster, topic: str, server: str | None = None) -> dict[int, tuple[int, ...]]:
    """The topic's replicas, as the cluster (or the one broker ``server``) answers."""
    from kafkaops.systems.kafka import KafkaAdmin

    endpoint = replace(cluster.kafka, bootstrap_servers=server) if server else cluster.kafka
    snap = KafkaAdmin(endpoint).snapshot(with_configs=False)
    return {p.partition: p.replicas for p in snap.partitions if p.topic == topic}


def _known_everywhere(cluster: Cluster, topic: str, partitions: int) -> bool:
    """Every broker's metadata has the topic: a command in another process may ask any of them (a CI run
    once asked one that did not know the new topic yet, and checked nothing)."""
    return all(len(_assignment(cluster, topic, server)) == partitions
               for server in cluster.bootstrap_servers.split(","))


def _wait(what: str, predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


# A long scenario (bench/long_scenarios.py); the suite's short version: the killed placement rolled back below.
@pytest.mark.long
def test_placement_check_plan_apply_killed_and_resumed_under_load(stretch: Cluster, tmp_path: Path) -> None:
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    home = tmp_path / "home"
    topic = f"stretch.t{uuid.uuid4().hex[:6]}"
    admin = KafkaAdmin(stretch.kafka)
    admin.create_topics([TopicSpec(topic, 8, 3, (("min.insync.replicas", "2"),))])
    _wait("the topic on every broker", lambda: _known_everywhere(stretch, topic, 8))
    dc = {h.broker_id: h.dc for h in stretch.hosts}
    regex = topic.replace(".", r"\.")

    # Checking nothing is never a pass: a --topics that matches no topic is refused, naming it.
    nothing = kafkaops(home, stretch, "placement", "check", stretch.name, "--topics", regex + "-typo")
    assert nothing.returncode == 9 and f"no topic of {stretch.name} matches --topics" in nothing.stderr, \
        nothing.stdout + nothing.stderr

    checked = kafkaops(home, stretch, "placement", "check", stretch.name, "--topics", regex, "-o", "json")
    assert checked.returncode == 9, checked.stderr
    report = json.loads(checked.stdout)
    assert report["critical"] == 8 and report["counts"]["dc_short"] == 8

    with Load(stretch, rate=150, http_rate=0) as load_thread:
        # The load writes to its own topic; this topic gets data so the moves copy bytes.
        from confluent_kafka import Producer

        producer = Producer({**librdkafka_config(stretch.kafka), "acks": "all"})
        # ~500 KB a partition. Kafka lets a throttled replica burst a window's worth (~10 s of the rate) before
        # it throttles, so the first batch goes fast; from the second on, a batch moves for ~20 s at 5 KB/s: long
        # enough that the resume (a new process: imports, lock, observe) still finds it in flight after the kill
        # (with ~125 KB at 10 KB/s a clean-clone run's resume twice arrived after the batch had finished).
        for i in range(8000):
            producer.produce(topic, key=str(i).encode(), value=b"x" * 500)
            if i % 500 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        plan_file = tmp_path / "placement.plan.json"
        planned = kafkaops(home, stretch, "placement", "plan", stretch.name, "--topics", regex, "--batch-size", "3",
                           "--throttle", "5KB/s", "--sample", "1", "--save-plan", str(plan_file), "-o", "json",
                           "--reason", "issue 15 lab test")
        assert planned.returncode == 0, planned.stderr
        summary = json.loads(planned.stdout)
        assert summary["moves"] == 8 and summary["after"] == {}
        assert summary["data"]["bytes"] > 0
        assert "error" not in (summary["kafka_generate"] or {}), summary["kafka_generate"]

        proc = spawn(home, stretch, "placement", "apply", str(plan_file), "--reason", "issue 15 lab test")
        _wait("the second batch submitted", lambda: any(
            r.get("event") == "batch_submitted" and r.get("batch") == 2 for r in live_journal(home))
            or proc.poll() is not None, timeout=120)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        journal = live_journal(home)
        run_id = journal[0]["run_id"]
        resumed = kafkaops(home, stretch, "resume", run_id)
        assert resumed.returncode == 0, resumed.stderr + output(proc)
    report_load = load_thread.report
    assert report_load is not None
    assert report_load.lost == 0 and report_load.duplicated == 0, report_load

    records = live_journal(home)
    # Whether the resume found the killed batch still in flight depends on how long Kafka's throttle holds
    # it: on a quiet machine a throttled batch has finished within 4 s, before the resume looked (not
    # explained yet: see the session note). Either way the invariants below hold; when it was in flight,
    # the resume must have waited for exactly that batch rather than submitting it again.
    awaited = [r for r in records if r.get("event") == "reassign_awaiting"]
    second = next(r["partitions"] for r in records if r.get("event") == "batch_submitting" and r.get("batch") == 2)
    for record in awaited:
        assert set(record["partitions"]) <= set(second), (record, second)
    assert proc.returncode == -signal.SIGKILL
    submitted = [p for r in records if r.get("event") == "batch_submitting" for p in r["partitions"]]
    assert len(submitted) == len(set(submitted)) == 8, submitted  # no partition submitted twice
    for p, replicas in _assignment(stretch, topic).items():
        assert len(replicas) == 4 and [dc[b] for b in replicas[:2]].count(dc[replicas[0]]) == 2, (p, replicas)
    left = admin.dynamic_configs(brokers=sorted(dc), topics=[topic], names=THROTTLES)
    assert not any(left.values()), left

    again = kafkaops(home, stretch, "placement", "check", stretch.name, "--topics", regex, "-o", "json")
    assert again.returncode == 0, again.stdout + again.stderr
    after = json.loads(again.stdout)
    assert after["ok"] and after["leaders"]["per_dc"] == {"codfw": 4, "eqiad": 4}

    # Stopping a preferred leader moves leadership to the other replica of the same DC.
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.spec import LabSpec

    replicas = _assignment(stretch, topic)[0]
    leader = replicas[0]
    host = next(h for h in stretch.hosts if h.broker_id == leader)
    lab_host = LabHost.named(host.name, LabSpec.load(lab_dir(stretch.name)))
    lab_host.stop("kafka")
    try:
        def moved() -> bool:
            snap = admin.snapshot(with_configs=False)
            now = next(p for p in snap.partitions if p.topic == topic and p.partition == 0)
            return now.leader not in (None, leader)

        _wait("a new leader for partition 0", moved)
        snap = admin.snapshot(with_configs=False)
        new = next(p for p in snap.partitions if p.topic == topic and p.partition == 0).leader
        assert new == replicas[1] and dc[new] == dc[leader], (replicas, new)
    finally:
        lab_host.start("kafka")
        _wait("the broker back in every ISR", lambda: all(
            len(p.isr) == len(p.replicas) for p in admin.snapshot(with_configs=False).partitions), timeout=120)
        admin.elect_preferred_leaders()


def test_a_killed_placement_rolled_back_leaves_nothing_moving_and_no_throttle(stretch: Cluster, tmp_path: Path) -> None:
    """``runs abort --rollback`` of a reassignment killed mid-batch: the batch in flight is cancelled (back on
    its old replicas), every throttle is deleted; the saved plan is then stale and refused (exit 8)."""
    from confluent_kafka import Producer

    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec

    home = tmp_path / "home"
    topic = f"stretch.r{uuid.uuid4().hex[:6]}"
    admin = KafkaAdmin(stretch.kafka)
    admin.create_topics([TopicSpec(topic, 6, 3, (("min.insync.replicas", "2"),))])
    _wait("the topic on every broker", lambda: _known_everywhere(stretch, topic, 6))
    producer = Producer({**librdkafka_config(stretch.kafka), "acks": "all"})
    for i in range(3000):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 500)
    assert producer.flush(30) == 0
    before = _assignment(stretch, topic)
    plan_file = tmp_path / "placement.plan.json"
    regex = topic.replace(".", r"\.")
    planned = kafkaops(home, stretch, "placement", "plan", stretch.name, "--topics", regex, "--batch-size", "3",
                       "--throttle", "5KB/s", "--sample", "0", "--no-compare", "--save-plan", str(plan_file),
                       "--reason", "issue 15 rollback test")
    assert planned.returncode == 0, planned.stderr
    proc = spawn(home, stretch, "placement", "apply", str(plan_file))
    _wait("the second batch submitted", lambda: any(
        r.get("event") == "batch_submitted" and r.get("batch") == 2 for r in live_journal(home))
        or proc.poll() is not None, timeout=120)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    run_id = live_journal(home)[0]["run_id"]
    aborted = kafkaops(home, stretch, "runs", "abort", run_id, "--rollback", "--reason", "test")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr + output(proc)
    dc = {h.broker_id: h.dc for h in stretch.hosts}
    left = admin.dynamic_configs(brokers=sorted(dc), topics=[topic], names=THROTTLES)
    assert not any(left.values()), left
    after = _assignment(stretch, topic)
    second = [int(p.rsplit("-", 1)[1]) for r in live_journal(home)
              if r.get("event") == "batch_submitting" and r.get("batch") == 2 for p in r["partitions"]]
    # The rollback cancelled what was still moving: those partitions are back on their old replicas (a partition
    # of the batch may have finished before the kill, within Kafka's throttle burst, and stays moved).
    back = [p for p in second if after[p] == before[p]]
    assert back, (before, after)
    assert all(after[p] == before[p] or len(after[p]) == 4 for p in second), (before, after)
    from kafkaops.environment import Environment

    env = Environment(stretch)
    try:
        assert not [tp for tp in env.reassigner().list() if tp[0] == topic]
    finally:
        env.close()
    again = kafkaops(home, stretch, "placement", "apply", str(plan_file))
    assert again.returncode == 8, again.stdout + again.stderr
