"""A lab pidfile counts only for the process it was written for, proven by its start time (issue 28).

Pidfiles outlive their processes and the kernel reuses pids, so a stale pidfile can name a stranger;
``lab down`` SIGTERMs, then SIGKILLs, what a pidfile names and its descendants. The strangers here are
real ``sleep`` processes this test starts, named by pidfiles with no start time or a wrong one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.inventory import load_inventory
from kafkaops_lab import lab, procs
from kafkaops_lab.spec import from_inventory

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is no lab's: no lab marker in its environment, not started by the lab."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_LAB")}
    proc = subprocess.Popen(["sleep", "300"], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _ticks(pid: int) -> int:
    """Field 22 of /proc/PID/stat, read here independently of kafkaops."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


@pytest.fixture
def lab_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab directory with the lab's layout (lab.json), on addresses no real lab uses; nothing runs."""
    base = tmp_path / "lab"
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", str(base))
    inventory = tmp_path / "lab.yaml"
    inventory.write_text((REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", "127.0.30."))
    from_inventory(load_inventory(inventory)).save()
    return base


def _pidfiles(base: Path) -> list[Path]:
    """The pidfiles ``lab down`` reads: the lab's own run dir and a host's units."""
    out = [base / "run" / "zookeeper.pid", *(base / "hosts" / "kafka1001" / "run" / f"{u}.pid"
                                               for u in ("sshd", "kafka", "eventbus"))]
    for f in out:
        f.parent.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.parametrize("recorded", ["{pid}\n", "{pid} start={wrong}\n"], ids=["no-start-time", "wrong-start-time"])
def test_lab_down_never_signals_a_process_its_pidfiles_do_not_prove(
        lab_base: Path, stranger: subprocess.Popen[bytes], recorded: str) -> None:
    text = recorded.format(pid=stranger.pid, wrong=_ticks(stranger.pid) - 1)
    for f in _pidfiles(lab_base):
        f.write_text(text)
    assert not lab.is_up(lab_base), "a stranger named by a stale pidfile is not a lab that is up"
    assert lab.down(lab_base) == 0
    assert stranger.poll() is None and procs.is_alive(stranger.pid), "lab down signalled a stranger"
    for f in _pidfiles(lab_base):  # down powered the hosts off, removing their units' pidfiles
        f.write_text(text)
        assert procs.live_pid(f) is None
        assert procs.stranger_pid(f) == stranger.pid
    # what `lab down` names to the operator instead of signalling it
    assert sorted(lab.strangers(lab_base)) == sorted((f, stranger.pid) for f in _pidfiles(lab_base))


def test_the_right_start_time_proves_the_process_and_lab_down_stops_it(
        lab_base: Path, stranger: subprocess.Popen[bytes]) -> None:
    pidfile = _pidfiles(lab_base)[2]  # kafka1001's kafka.pid
    pidfile.write_text(f"{stranger.pid} start={_ticks(stranger.pid)}\n")
    assert procs.live_pid(pidfile) == stranger.pid and procs.stranger_pid(pidfile) is None
    assert lab.is_up(lab_base)
    assert lab.down(lab_base) >= 1
    assert stranger.wait(10) == -signal.SIGTERM
    assert lab.strangers(lab_base) == []


def test_spawn_records_the_start_time_that_proves_its_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "run" / "unit.pid"
    pid = procs.spawn(["sleep", "300"], log=tmp_path / "unit.log", pidfile=pidfile, env={})
    try:
        assert pidfile.read_text() == f"{pid} start={_ticks(pid)}\n"
        assert procs.live_pid(pidfile) == pid
    finally:
        procs.terminate([pid], timeout=5)
        os.waitpid(pid, 0)
    assert procs.live_pid(pidfile) is None and procs.stranger_pid(pidfile) is None  # gone


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path: Path) -> None:
    """Field 2 (comm) is whatever the process calls itself; the start time is read after the last ')'."""
    pidfile = tmp_path / "run" / "odd.pid"
    rename = ("import sys, time\nopen('/proc/self/comm', 'w').write('x) R 1 2 (y')\n"
              "print('renamed', flush=True)\ntime.sleep(300)\n")
    pid = procs.spawn([sys.executable, "-c", rename], log=tmp_path / "odd.log", pidfile=pidfile, env={})
    try:
        while "renamed" not in (tmp_path / "odd.log").read_text():
            assert procs.is_alive(pid), (tmp_path / "odd.log").read_text()
            time.sleep(0.05)
        assert b"(x) R 1 2 (y)" in Path(f"/proc/{pid}/stat").read_bytes()
        assert procs.start_time(pid) == _ticks(pid)
        assert procs.live_pid(pidfile) == pid, "the pidfile written before the rename still proves the process"
        assert pid in procs.descendants([os.getpid()])
    finally:
        procs.terminate([pid], timeout=5)
        os.waitpid(pid, 0)


def test_a_malformed_pidfile_names_nothing(tmp_path: Path) -> None:
    pidfile = tmp_path / "x.pid"
    for text in ("", "abc\n", f"{os.getpid()} {_ticks(os.getpid())}\n", f"{os.getpid()} begin=1\n"):
        pidfile.write_text(text)
        assert procs.live_pid(pidfile) is None, text
