"""Starting, finding and stopping the lab's processes, by pid.

Every lab process is started detached (its own session, output to a log file), has a pidfile, and
carries two environment markers: ``KAFKAOPS_LAB_MEMBER`` (the lab dir; set only by the lab, unlike
``KAFKAOPS_LAB_DIR`` which operators export) and, for processes of a lab host, ``KAFKAOPS_LAB_HOST``.
Children inherit them (a command run over SSH, a service it starts), so "every process of kafka1002"
and "every process of this lab" are exact sets found through /proc — plus the pidfiles and their
descendants, for daemons such as sshd that overwrite their environment with their process title. That
is how a lab reboot takes down everything on a "machine", and how ``lab down`` leaves nothing behind.

PID 1 on these machines does not reap orphans, so a dead process may linger as a zombie: liveness
checks read the process state and treat ``Z`` as dead.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

LAB_DIR_ENV = "KAFKAOPS_LAB_DIR"  # configuration: which lab a command talks to (users set it too)
LAB_MEMBER_ENV = "KAFKAOPS_LAB_MEMBER"  # marker: set only on processes the lab starts, never by users
LAB_HOST_ENV = "KAFKAOPS_LAB_HOST"


def is_alive(pid: int) -> bool:
    """True when ``pid`` runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The state follows the ")" that closes the command name (which may itself contain spaces).
    state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
    return state not in (b"Z", b"X")


def read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def live_pid(pidfile: Path) -> int | None:
    """The pid in ``pidfile`` if that process is alive, else None."""
    pid = read_pid(pidfile)
    return pid if pid is not None and is_alive(pid) else None


def spawn(argv: Sequence[str], *, log: Path, pidfile: Path, env: Mapping[str, str],
          cwd: Path | None = None) -> int:
    """Start ``argv`` detached (new session, stdin closed, output appended to ``log``); write its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **env}, cwd=cwd, start_new_session=True, close_fds=True,
        )
    pidfile.write_text(f"{proc.pid}\n")
    return proc.pid


def _environ(pid: int) -> dict[bytes, bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out: dict[bytes, bytes] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key] = value
    return out


def descendants(roots: Iterable[int]) -> list[int]:
    """Live descendants of ``roots`` (children, grandchildren...), e.g. sshd's per-session processes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.append(child)
                todo.append(child)
    return [p for p in out if is_alive(p)]


def marked_pids(lab_dir: Path, host: str | None = None) -> list[int]:
    """Live pids carrying this lab's marker (and, if given, this host's)."""
    want_dir = str(lab_dir).encode()
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        env = _environ(int(entry))
        if env.get(LAB_MEMBER_ENV.encode()) != want_dir:
            continue
        if host is not None and env.get(LAB_HOST_ENV.encode()) != host.encode():
            continue
        if is_alive(int(entry)):
            pids.append(int(entry))
    return pids


def terminate(pids: Iterable[int], *, timeout: float = 30.0, sig: int = signal.SIGTERM) -> list[int]:
    """Send ``sig`` to each pid, wait up to ``timeout`` for them to exit, SIGKILL the rest.

    Returns the pids that needed SIGKILL. Blocks until every one is gone: a stop that returns before
    the process is dead is how tools end up starting a second broker on the same log dirs.
    """
    pids = [p for p in pids if is_alive(p)]
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(is_alive(p) for p in pids):
        time.sleep(0.1)
    killed = [p for p in pids if is_alive(p)]
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while any(is_alive(p) for p in killed):
        time.sleep(0.05)
    return killed


def port_open(address: str, port: int, timeout: float = 0.5) -> bool:
    """Probe address:port from that same address, like a health check run on the host itself.

    Probing from the host's own address keeps lab plumbing distinguishable from client traffic,
    which is what SYN counting and the tests' independent capture look at.
    """
    try:
        with socket.create_connection((address, port), timeout=timeout, source_address=(address, 0)):
            return True
    except OSError:
        return False


def port_free(address: str, port: int) -> bool:
    """True when nothing listens on address:port (we could bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def wait_port(address: str, port: int, timeout: float, *, pid: int | None = None, what: str = "") -> None:
    """Wait until address:port accepts connections; fail early if ``pid`` died meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(address, port):
            return
        if pid is not None and not is_alive(pid):
            raise RuntimeError(f"{what or pid} exited before listening on {address}:{port}")
        time.sleep(0.2)
    raise TimeoutError(f"{what or 'process'} did not listen on {address}:{port} within {timeout:.0f}s")
