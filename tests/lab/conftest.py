"""Fixtures the lab tests share: a fresh KAFKAOPS_HOME per test, and a lab restored after each test."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.model import Cluster


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def pooled_lab(lab_cluster: Cluster, home: Path) -> Iterator[Cluster]:
    """Every host pooled before the test; afterwards the test's unfinished runs are rolled back (as an
    operator would), every host is up with its broker running and pooled, and the cluster healthy."""
    from kafkaops.health.status import collect
    from kafkaops.lab.host import LabHost
    from kafkaops.lab.pools import LabConftool

    assert lab_cluster.conftool_config
    conftool = LabConftool(lab_cluster.conftool_config)
    for h in lab_cluster.hosts:
        conftool.set_pooled(h.fqdn, h.conftool_tags, "yes")
    yield lab_cluster
    if (home / "runs").exists():
        for run in sorted(p.name for p in (home / "runs").iterdir() if p.is_dir()):
            kafkaops(home, lab_cluster, "runs", "abort", run, "--rollback", "--reason", "test clean-up",
                     "--accept-inventory-change")
    for h in lab_cluster.hosts:
        host = LabHost.named(h.name)
        host.set_knob("slow_shutdown", None)
        if not host.is_up():
            host.power_on()
        host.start("kafka")
        conftool.ensure(h.fqdn, h.conftool_tags, pooled="yes", weight=lab_cluster.pool_weight)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not collect(lab_cluster)["healthy"]:
        time.sleep(1)
    from kafkaops.systems.kafka import KafkaAdmin

    KafkaAdmin(lab_cluster.bootstrap_servers).elect_preferred_leaders()
