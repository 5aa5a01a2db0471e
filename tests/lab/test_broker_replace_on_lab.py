"""``kafkaops broker replace kafka1002`` on the lab, its disk wiped, under acks=all load and HTTP through the VIP.

What T373189 went wrong on, checked from outside the run: the broker catches up **under the throttle** (the
journal's throttle records, and the follower throttle seen on the broker itself while it is out of an ISR),
it **leads nothing** until every replica of it is in sync (the cluster sampled every half second while it
catches up), and at the end it leads its preferred partitions again, with the replica order it had and no
throttle left. The run is SIGKILLed in the catch-up and finished with ``kafkaops resume``; nothing produced
is lost or duplicated.

Kept lean for CI: 3 MB more in one partition, a low starting rate (observable) that the autothrottle doubles
every two seconds on an idle lab, so the catch-up stays short whatever the suite wrote before. Kafka's first
fetch of each partition is not throttled (the quota is measured after it: up to ``replica.fetch.max.bytes``,
1 MB, arrives at once), so a lab-sized catch-up is throttled only after its first round.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import live_journal

from kafkaops.environment import Environment
from kafkaops.model import Cluster
from kafkaops.stepkit.throttle import RATE_CONFIGS, REPLICA_CONFIGS

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST, BROKER = "kafka1002", 1002
TOPIC = "eqiad.test.event"   # the eventbus user may write it (the lab's ACLs)
STORAGE_STEP, CATCH_UP_STEP = 14, 16   # runbooks/broker-replace.yaml


def _fill(cluster: Cluster, megabytes: int) -> None:
    """``megabytes`` of 10 KB records into partition 0 of TOPIC, acknowledged by the whole ISR."""
    from confluent_kafka import Producer

    from kafkaops_lab.load import producer_config
    from kafkaops_lab.security import user_endpoint

    producer = Producer(producer_config(user_endpoint(cluster, "eventbus")))
    errors: list[Any] = []
    value = b"r" * 10_000
    for i in range(megabytes * 100):
        while True:
            try:
                producer.produce(TOPIC, key=str(i).encode(), value=value, partition=0,
                                 on_delivery=lambda err, _m: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors[:3]


class Sampler(threading.Thread):
    """The broker as the cluster shows it, every half second: (out of ISR in N partitions, leads M, its follower
    throttle rate or None); registered samples only."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster, self.stop = cluster, threading.Event()
        self.samples: list[tuple[int, int, str | None]] = []

    def run(self) -> None:
        env = Environment.of(self.cluster, dry_run=True)
        try:
            while not self.stop.is_set():
                try:
                    snap = env.kafka.snapshot(with_configs=False)
                    if BROKER in snap.brokers:
                        out = sum(1 for p in snap.partitions if BROKER in p.replicas and BROKER not in p.isr)
                        leads = sum(1 for p in snap.partitions if p.leader == BROKER)
                        rate: str | None = None
                        if out:
                            found = env.kafka.dynamic_configs(brokers=[BROKER], names=RATE_CONFIGS)
                            rate = found.get(f"broker:{BROKER}", {}).get(RATE_CONFIGS[1])
                        self.samples.append((out, leads, rate))
                except Exception:  # the broker stopping or starting: the next sample tells
                    pass
                self.stop.wait(0.5)
        finally:
            env.close()


def _cluster_state(cluster: Cluster) -> tuple[dict[tuple[str, int], tuple[int, ...]], dict[tuple[str, int], int | None],
                                              dict[str, dict[str, str]]]:
    """Every partition's replicas and leader, and every throttle config left on brokers and topics."""
    env = Environment.of(cluster, dry_run=True)
    try:
        snap = env.kafka.snapshot(with_configs=False)
        found = env.kafka.dynamic_configs(brokers=[h.broker_id for h in cluster.hosts],
                                          topics=sorted({p.topic for p in snap.partitions}),
                                          names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
    finally:
        env.close()
    return ({(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions},
            {(p.topic, p.partition): p.leader for p in snap.partitions}, {k: v for k, v in found.items() if v})


def _wait_journal(home: Path, proc: Any, what: str, match: Any, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not any(match(r) for r in live_journal(home)):
        time.sleep(0.2)
    assert proc.poll() is None, f"the replace ended before {what}:\n" + output(proc)[-4000:]
    assert any(match(r) for r in live_journal(home)), f"no {what} within {timeout}s:\n" + output(proc)[-4000:]


def test_replace_a_broker_on_an_empty_disk(pooled_lab: Cluster, home: Path) -> None:
    from kafkaops_lab.host import LabHost

    cluster = pooled_lab
    _fill(cluster, 3)
    before, _, _ = _cluster_state(cluster)
    sampler = Sampler(cluster)
    with Load(cluster) as load:
        sampler.start()
        proc = spawn(home, cluster, "broker", "replace", HOST, "--yes", "--reason", "disk replaced", "--no-scan",
                     "--syn-window", "2s", "--throttle", "200KB/s", "--min-throttle", "100KB/s",
                     "--max-throttle", "20MB/s", "--interval", "1s")
        # The run waits for the new disk: the broker is stopped; the "operator" replaces the disk now.
        _wait_journal(home, proc, "the wait for the new disk",
                      lambda r: r.get("step") == STORAGE_STEP and r.get("type") == "step_applying")
        assert LabHost.named(HOST).replace_disk()
        # SIGKILL while it catches up: Kafka goes on copying at the rate in force; the resume continues.
        _wait_journal(home, proc, "a catch-up poll with the broker out of an ISR",
                      lambda r: r.get("event") == "catch_up_progress" and r.get("out_of_isr", 0) > 0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        run_id = str(live_journal(home)[0]["run_id"])
        resumed = kafkaops(home, cluster, "resume", run_id)
        sampler.stop.set()
        sampler.join(10)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    # Seen from outside: while it was out of an ISR it led nothing and its follower throttle was set.
    catching = [s for s in sampler.samples if s[0] > 0]
    assert catching, f"the catch-up was never sampled: {sampler.samples[-20:]}"
    assert all(leads == 0 for _, leads, _ in catching), catching
    # throttled throughout, not only before the catch-up step: every sample out of an ISR saw the broker's follower
    # rate within the bounds (the last two may race the deletion at the end: metadata lags the configs)
    assert all(rate is not None and 100_000 <= int(rate) <= 20_000_000 for _, _, rate in catching[:-2]), catching
    journal = live_journal(home)
    # Throttled from its first fetch: set before the stop, at the starting rate, changed only by the autothrottle
    # within its bounds, cleared at the end of the catch-up.
    throttle_set = [r for r in journal if r.get("event") == "throttle_set" and r.get("step") == 8]
    assert throttle_set and throttle_set[0]["rate"] == 200_000, throttle_set
    changes = [r for r in journal if r.get("event") == "throttle_changed"]
    assert changes and all(100_000 <= r["rate"] <= 20_000_000 for r in changes), changes
    # it acted on the gates: raised while they held, or lowered (a loaded machine's produce p99 over the lab's 1 s)
    assert any(r["change"] in ("raise", "lower") for r in changes), changes
    assert any(r.get("event") == "throttle_cleared" and r.get("step") == CATCH_UP_STEP for r in journal)
    progress = [r for r in journal if r.get("event") == "catch_up_progress"]
    assert progress and all(r["leads"] == 0 for r in progress), progress
    after, leaders, throttles = _cluster_state(cluster)
    assert after == before   # the order recorded before the demote put back
    preferred = [tp for tp, r in after.items() if r[0] == BROKER]
    assert preferred and all(leaders[tp] == BROKER for tp in preferred), {tp: leaders[tp] for tp in preferred}
    assert throttles == {}
    assert load.report is not None and load.report.lost == 0 and load.report.duplicated == 0, load.report
