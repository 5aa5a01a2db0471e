"""Fixtures the lab tests share: a fresh KAFKAOPS_HOME per test, a lab restored after each test, and no
cluster lock left behind by a test's run."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.model import Cluster


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(autouse=True)
def no_lock_left_behind(request: pytest.FixtureRequest, home: Path) -> Iterator[None]:
    """After each test, a cluster lock still held by a run of the test's own is released: the run is
    aborted with its rollback (as an operator would), and if its lock outlives that (the rollback failed),
    removed by force. Without this one failed test held the lab's lock and failed every test after it
    (CI, 2026-11-26: 13 tests behind one SSH-hang run); with it each failure stays its own."""
    yield
    # The test's runs, in its home or in a home of its own below it (a test that keeps one home per phase):
    # run id -> the KAFKAOPS_HOME it ran in, which its abort must use.
    runs = {run.name: d.parent for d in home.rglob("runs") if d.is_dir() for run in d.iterdir()}
    if not runs:
        return
    from kafkaops.engine.lock import force_unlock
    from kafkaops.environment import Environment

    clusters = {c.name: c for c in request.node.funcargs.values() if isinstance(c, Cluster)}
    for cluster in clusters.values():
        env = Environment.of(cluster)
        try:
            holder = env.lock.holder(cluster.name)
            if holder is None or holder.run_id not in runs:
                continue
            kafkaops(runs[holder.run_id], cluster, "runs", "abort", holder.run_id, "--rollback", "--reason",
                     "test clean-up", "--accept-inventory-change")
            if (left := env.lock.holder(cluster.name)) is not None and left.run_id in runs:
                force_unlock(cluster.name, "test clean-up: the abort left the lock", operator="pytest",
                             backend=env.lock)
            warnings.warn(f"{request.node.name} left {cluster.name} locked by its run {holder.run_id}: "
                          "aborted, lock released", stacklevel=1)
        finally:
            env.close()


@pytest.fixture
def pooled_lab(lab_cluster: Cluster, home: Path) -> Iterator[Cluster]:
    """Every host pooled before the test; afterwards the test's unfinished runs are rolled back (as an
    operator would), every host is up with its broker running and pooled, and the cluster healthy."""
    from kafkaops.health.status import collect
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.pools import LabConftool

    assert lab_cluster.conftool_config
    conftool = LabConftool(lab_cluster.conftool_config)
    for h in lab_cluster.hosts:
        conftool.set_pooled(h.fqdn, h.conftool_tags, "yes")
    # A test starts on a whole cluster: the one before may have left a broker still catching up (its
    # clean-up below waits two minutes at most), and its pre-flights would refuse on that URP.
    deadline = time.monotonic() + 300
    while not collect(lab_cluster)["healthy"]:
        assert time.monotonic() < deadline, f"the lab is not healthy before the test: {collect(lab_cluster)}"
        time.sleep(1)
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

    KafkaAdmin(lab_cluster.kafka).elect_preferred_leaders()
