"""Post-reboot checks before the repool (issue 13.1): a host whose eventbus did not come back after the
reboot is not repooled, and neither is one whose Kafka logged an ERROR since the maintenance started.

The lab host is given the ``eventbus_fails_on_boot`` knob: its reboot brings back sshd and Kafka, but
eventbus exits at once. The run must stop at the health check, host depooled, naming the check; once
eventbus is started by hand, ``kafkaops resume`` goes on. Before that resume an ERROR line is appended to
the host's Kafka server log (as a broker writes one): the resumed run stops again at the Kafka log scan,
showing the line, host still depooled; resumed once more after the operator has read it, it repools.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import kafkaops
from invariants import journal, only_run

from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops.systems.conftool import Conftool
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "kafka1002"
FAST = ["--syn-window", "2s", "--no-scan", "--health-timeout", "5s"]


@pytest.fixture
def failing_host(pooled_lab: Cluster) -> Iterator[LabHost]:
    """HOST's eventbus will not come back at its next boot; afterwards the knob is cleared and eventbus
    runs (before ``pooled_lab`` rolls back what is left and repools)."""
    host = LabHost.named(HOST)
    host.set_knob("eventbus_fails_on_boot", 1)
    yield host
    host.set_knob("eventbus_fails_on_boot", None)
    if host.is_up():
        host.start("eventbus")


def _pooled(cluster: Cluster) -> str:
    assert cluster.conftool_config
    h = next(h for h in cluster.hosts if h.name == HOST)
    return Conftool(cluster.conftool_config).get(h.fqdn, h.conftool_tags).pooled


def _steps(home: Path, run_id: str, record: str) -> list[str]:
    return [r["kind"] for r in journal(home, run_id) if r["type"] == record and r.get("target") == HOST]


def test_a_host_whose_eventbus_did_not_come_back_is_not_repooled_until_it_does_and_its_logs_are_read(
        lab_cluster: Cluster, failing_host: LabHost, home: Path) -> None:
    boots = len(failing_host.events("boot"))
    run = kafkaops(home, lab_cluster, "reboot", HOST, "--yes", "--reason", "reboot checks", *FAST)
    out = run.stdout + run.stderr
    assert run.returncode == 11, out  # stopped at a safe point, resumable
    run_id = only_run(home)
    assert len(failing_host.events("boot")) == boots + 1, "the host was not rebooted"
    assert failing_host.events("unit-failed")[-1]["unit"] == "eventbus" and not failing_host.is_active("eventbus")
    assert "(service.verify_health)" in out and "health check failed" in out, out
    assert "eventbus on kafka1002 healthy" in out and "kafka1002 stays depooled" in out, out
    assert _steps(home, run_id, "step_failed") == ["service.verify_health"]
    assert "conftool.repool" not in _steps(home, run_id, "step_applying")
    assert _pooled(lab_cluster) == "no"
    assert collect(lab_cluster)["healthy"]  # Kafka itself came back: only the service is missing

    # The operator fixes eventbus (the lab's `hostctl start eventbus`), and Kafka has logged an ERROR since.
    failing_host.set_knob("eventbus_fails_on_boot", None)
    failing_host.start("eventbus")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    line = f"[{stamp},000] ERROR [ReplicaManager broker=1002] lab test: disk error on x-0 (kafka.server.ReplicaManager)"
    with open(failing_host.dirs.log / "kafka-server.log", "a") as f:
        f.write(line + "\n")
    resumed = kafkaops(home, lab_cluster, "resume", run_id)
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 11, out
    assert "(logs.scan_kafka)" in out and "Kafka log scan failed: 1 ERROR/FATAL line(s)" in out, out
    assert "lab test: disk error on x-0" in out and "kafka1002 stays depooled" in out, out
    assert "service.verify_health" in _steps(home, run_id, "step_verified")
    assert "service.scan_log" in _steps(home, run_id, "step_verified")  # eventbus' own log is clean
    assert _pooled(lab_cluster) == "no"

    # Read and understood: resuming scans again, stops only on lines not shown before, and repools.
    again = kafkaops(home, lab_cluster, "resume", run_id)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Kafka log clean" in again.stdout + again.stderr
    assert _pooled(lab_cluster) == "yes"
    verified = _steps(home, run_id, "step_verified")
    assert verified.index("logs.scan_kafka") < verified.index("conftool.repool")
