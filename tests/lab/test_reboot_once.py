"""A resumed reboot never reboots twice (issue 20).

The lab host is made slow to shut down (sshd answers with the old boot id for 20 s after the reboot
command, as a real host does while it stops its services). kafkaops is SIGKILLed right after it sent the
command and resumed at once: the host's own event log must show exactly one reboot command and one new
boot id. Killed after the boot id changed, the resume sends no reboot command at all.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import kafkaops, output, spawn
from invariants import journal, live_journal, only_run

from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "kafka1002"
FAST = ["--syn-window", "2s", "--no-scan"]


@pytest.fixture
def slow_host(pooled_lab: Cluster) -> Iterator[LabHost]:
    """HOST takes 20 s to shut down (the knob is cleared by ``pooled_lab`` afterwards)."""
    host = LabHost.named(HOST)
    host.set_knob("slow_shutdown", 20)
    yield host


def _kill_when(home: Path, cluster: Cluster, condition: Callable[[], bool]) -> str:
    proc = spawn(home, cluster, "reboot", HOST, "--yes", "--reason", "reboot once", *FAST)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if condition():
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(30)
    out = output(proc)
    assert proc.returncode == -signal.SIGKILL, f"not killed (exit {proc.returncode}): {out}"
    return only_run(home)


def test_killed_right_after_the_reboot_command_the_resume_does_not_send_it_again(
        lab_cluster: Cluster, slow_host: LabHost, home: Path) -> None:
    commands, boots = len(slow_host.events("reboot-command")), len(slow_host.events("boot"))
    run_id = _kill_when(home, lab_cluster, lambda: any(
        r["type"] == "event" and r["event"] == "reboot_sent" for r in live_journal(home)))
    assert slow_host.is_up() and slow_host.system_state() == "stopping"  # old boot id, SSH up
    resumed = kafkaops(home, lab_cluster, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(slow_host.events("reboot-command")) - commands == 1, slow_host.events("reboot-command")
    assert len(slow_host.events("boot")) - boots == 1
    events = [r["event"] for r in journal(home, run_id) if r["type"] == "event"]
    assert events.count("reboot_intent") == 1 and "reboot_resend" not in events
    assert "reboot_pending_took_effect" in events
    assert collect(lab_cluster)["healthy"]


# A long scenario (bench/long_scenarios.py): the suite's kill right after the reboot command is the
# harder case (the boot id has not changed yet).
@pytest.mark.long
def test_killed_after_the_boot_id_changed_the_resume_sends_no_reboot(
        lab_cluster: Cluster, slow_host: LabHost, home: Path) -> None:
    commands, boots = len(slow_host.events("reboot-command")), len(slow_host.events("boot"))
    run_id = _kill_when(home, lab_cluster, lambda: len(slow_host.events("boot")) > boots)
    resumed = kafkaops(home, lab_cluster, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(slow_host.events("reboot-command")) - commands == 1
    assert len(slow_host.events("boot")) - boots == 1
    assert not [r for r in journal(home, run_id) if r["type"] == "event" and r["event"] == "reboot_resend"]
    assert collect(lab_cluster)["healthy"]
