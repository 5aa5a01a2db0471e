"""The kill sweep's short version (the whole sweep is bench/kill_sweep.py): SIGKILL a reboot at a few
journal boundaries — the depool's intent, inside the SYN gate, right after the stop, each on another
host — resume, and check the cluster is whole and nothing happened twice, counted from the lab host's
own event log.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops, output, spawn
from invariants import live_journal, only_run

from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture
def lab(pooled_lab: Cluster) -> Cluster:
    """The lab, pooled and healthy, restored after the test (see conftest.py)."""
    return pooled_lab

def _at(record_type: str, kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["type"] == record_type and r.get("kind") == kind


#: point -> (the record to kill after, seconds after it, the host rebooted): one host each, as the sweep
#: spreads its points (a reboot of kafka1001 is not a reboot of kafka1003: it leads other partitions).
POINTS = {
    "depool intent": (_at("step_applying", "conftool.depool"), 0.0, "kafka1001"),
    "inside the SYN gate": (_at("step_applying", "traffic.wait_zero_syns"), 1.0, "kafka1002"),
    "right after the stop": (_at("step_applied", "kafka.stop_broker"), 0.0, "kafka1003"),
}


@pytest.mark.parametrize("point", list(POINTS))
def test_killed_at_a_journal_boundary_the_resume_ends_whole_and_does_nothing_twice(
        lab: Cluster, home: Path, point: str) -> None:
    reached, delay, name = POINTS[point]
    host = LabHost.named(name)
    counts = {e: len(host.events(e)) for e in ("kafka-stop", "reboot-command", "boot")}
    proc = spawn(home, lab, "reboot", name, "--yes", "--reason", f"kill sweep: {point}", "--syn-window", "3s",
                 "--no-scan")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any(reached(r) for r in live_journal(home)):
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, output(proc)
    resumed = kafkaops(home, lab, "resume", only_run(home))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {e: len(host.events(e)) - n for e, n in counts.items()} == \
        {"kafka-stop": 1, "reboot-command": 1, "boot": 1}
    data = collect(lab)
    assert data["healthy"] and all(b["pooled"] == "yes" for b in data["brokers"]), data
    assert data["preferred_leader_ratio"] == 1.0, data


# The SYN window's kill point is a long scenario (bench/long_scenarios.py); bench/kill_sweep.py kills at
# every point, and the suite keeps the stability wait's.
@pytest.mark.parametrize("kind", [pytest.param("traffic.wait_zero_syns", marks=pytest.mark.long), "kafka.wait_stable"])
def test_killed_inside_the_overlap_of_a_roll_the_resume_stops_each_broker_once(
        lab: Cluster, home: Path, kind: str) -> None:
    """The second host's SYN window and stability wait overlap the window after the first host (issue 14):
    a kill there leaves no health watch behind; the resumed run must wait the whole window itself and
    still stop each broker exactly once."""
    hosts = [LabHost.named(h.name) for h in lab.hosts]
    stops = {h.host.name: len(h.events("kafka-stop")) for h in hosts}
    proc = spawn(home, lab, "rolling-restart", "lab", "--yes", "--reason", f"overlap kill: {kind}",
                 "--syn-window", "3s", "--stable-for", "4s", "--no-scan")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        started = [r for r in live_journal(home) if r["type"] == "target_started"]
        if len(started) >= 2 and any(r["type"] == "step_applying" and r.get("kind") == kind
                                     and r.get("target") == started[1]["target"] for r in live_journal(home)):
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, output(proc)
    resumed = kafkaops(home, lab, "resume", only_run(home))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {h.host.name: len(h.events("kafka-stop")) - stops[h.host.name] for h in hosts} == \
        {h.name: 1 for h in lab.hosts}
    records = live_journal(home)
    waited = [r for r in records if r["type"] == "step_verified" and r.get("kind") == "kafka.wait_stable"]
    assert len(waited) == len(lab.hosts), waited  # every host's window was proven (the first by its no-op)
    data = collect(lab)
    assert data["healthy"] and all(b["pooled"] == "yes" for b in data["brokers"]), data
