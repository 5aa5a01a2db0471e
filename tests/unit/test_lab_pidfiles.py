"""A lab pidfile counts only while its pid is the lab's own process (the kernel reuses pids)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafkaops.lab import procs


def test_a_pidfile_naming_a_process_without_the_labs_marker_is_stale(tmp_path: Path) -> None:
    pidfile = tmp_path / "lab" / "run" / "zookeeper.pid"
    pidfile.parent.mkdir(parents=True)
    # This very process is alive but no lab's: a recycled pid looks exactly like this.
    pidfile.write_text(f"{os.getpid()}\n")
    assert procs.live_pid(pidfile) is None


def test_a_pidfile_naming_the_labs_own_process_is_live(tmp_path: Path) -> None:
    lab, other = tmp_path / "lab", tmp_path / "other-lab"
    pidfile = lab / "hosts" / "kafka1001" / "run" / "kafka.pid"
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    pid = procs.spawn(sleeper, log=lab / "log" / "s.log", pidfile=pidfile, env={procs.LAB_MEMBER_ENV: str(lab)})
    stranger = subprocess.Popen(sleeper, env={**os.environ, procs.LAB_MEMBER_ENV: str(other)})
    try:
        assert procs.live_pid(pidfile) == pid
        # another lab's process under this lab's pidfile is not this lab's
        pidfile.write_text(f"{stranger.pid}\n")
        assert procs.live_pid(pidfile) is None
    finally:
        procs.terminate([pid, stranger.pid], timeout=5)
        stranger.wait(5)
    pidfile.write_text(f"{pid}\n")
    assert procs.live_pid(pidfile) is None  # gone
