"""``kafkaops service bench`` on the lab (issue 13 point 7): the seed's ``ab`` throughput test, small.

Witness outside kafkaops: Kafka itself. Every 2xx the eventbus answered is one record acknowledged in
``<dc>.test.event`` (it answers only after the brokers acked), so the topic's log end offsets must have
grown by at least the bench's 2xx count (other load may add more, never fewer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab]

TOPIC = "eqiad.test.event"


def end_offsets(cluster: Cluster) -> int:
    from kafkaops.systems.kafka import KafkaAdmin

    admin = KafkaAdmin(cluster.kafka, timeout=15)
    partitions = [(TOPIC, p) for p in admin.metadata().topics[TOPIC].partitions]
    return sum(end or 0 for _start, end in admin.list_offsets(partitions).values())


def bench(home: Path, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKAOPS_HOME": str(home), "KAFKAOPS_INVENTORY": cluster.source}
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "service", "bench", *args], capture_output=True,
                          text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)


def sane(result: dict[str, Any], requests: int) -> None:
    assert result["complete"] == requests and result["errors"] == 0 and result["non_2xx"] == 0
    assert result["ok_2xx"] == requests
    assert 1 < result["requests_per_second"] < 100_000
    pct = {int(k): v for k, v in result["percentiles_ms"].items()}
    assert sorted(pct) == [50, 66, 75, 80, 90, 95, 98, 99, 100]
    ordered = [pct[k] for k in sorted(pct)]
    assert ordered == sorted(ordered) and ordered[-1] < 30_000  # monotonic, below ab's -s timeout
    assert result["mean_ms"] and result["mean_ms"] <= pct[100]


def test_a_small_bench_through_the_vip_lands_every_2xx_in_kafka(pooled_lab: Cluster, home: Path) -> None:
    before = end_offsets(pooled_lab)
    done = bench(home, pooled_lab, "eventbus", "lab", "--requests", "300", "--concurrency", "4", "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["environment"] == "lab" and report["event"]["meta"]["stream"] == "test.event"
    [result] = report["results"]
    assert result["via"] == "vip" and result["url"] == "http://127.0.10.100:8085/v1/events"
    sane(result, 300)
    assert end_offsets(pooled_lab) - before >= result["ok_2xx"]


def test_a_host_target_benches_that_host_alone_with_a_chart(pooled_lab: Cluster, home: Path) -> None:
    host = pooled_lab.hosts[1]
    done = bench(home, pooled_lab, "eventbus", host.name, "-n", "100", "-c", "2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"http://{host.address}:8085/v1/events" in out and "100 2xx" in out
    assert "latency" in out and "requests per second" in out and "█" in out
