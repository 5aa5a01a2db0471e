"""Starting, finding and stopping the lab's processes, by pid.

Every lab process is started detached (its own session, output to a log file), has a pidfile, and
carries two environment markers: ``KAFKAOPS_LAB_MEMBER`` (the lab dir; set only by the lab, unlike
``KAFKAOPS_LAB_DIR`` which operators export) and, for processes of a lab host, ``KAFKAOPS_LAB_HOST``.
Children inherit them (a command run over SSH, a service it starts), so "every process of kafka1002"
and "every process of this lab" are exact sets found through /proc — plus the pidfiles and their
descendants, for daemons such as sshd that overwrite their environment with their process title. That
is how a lab reboot takes down everything on a "machine", and how ``lab down`` leaves nothing behind.

A pidfile holds the pid *and the process's start time* (``PID start=TICKS``; field 22 of
``/proc/PID/stat``, clock ticks since boot; the ``start=`` keeps ``kill $(cat FILE)`` from taking the
number for a second pid). Pidfiles outlive their processes and the kernel reuses pids,
so a pid alone may name a stranger by the time anyone reads it — and ``lab down`` SIGTERMs, then
SIGKILLs, what a pidfile names and all its descendants. The start time is what proves the process is the
one the lab started: it never changes over a process's life (not at exec, not when sshd rewrites its
title and environment), and a recycled pid gets a new one — as does the process a pidfile's number
names in another pid namespace (a container sharing the lab directory). :func:`live_pid` only answers
for a proven pid. A pidfile without a start time (written before this format, or by a daemon itself, as sshd's own
``sshd.real.pid``) proves nothing and is treated as not the lab's: never signalled, not "up".

PID 1 on these machines does not reap orphans, so a dead process may linger as a zombie: liveness
checks read the process state and treat ``Z`` as dead.
"""

from __future__ import annotations

import ipaddress
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


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` from field 3 (state) on; None when there is no such process.

    Field 2, the command name, is in parentheses and may itself hold spaces and parentheses (a process
    can name itself ``a) 1 2 (b``): the fields that follow it are read after the *last* ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()


def is_alive(pid: int) -> bool:
    """True when ``pid`` runs and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/PID/stat``); None if gone."""
    fields = _stat(pid)
    return int(fields[22 - 3]) if fields is not None else None


def write_pidfile(pidfile: Path, pid: int) -> None:
    """Record ``pid`` and its start time, read now: call it while ``pid`` is certainly that process
    (a child not yet waited for, as right after ``Popen``: its pid cannot be reused before the wait).

    Written whole (a temporary file renamed over it): a reader never sees a pid without its start time.
    """
    started = start_time(pid)
    tmp = pidfile.with_name(f".{pidfile.name}.{os.getpid()}")
    tmp.write_text(f"{pid} start={started}\n" if started is not None else f"{pid}\n")
    os.replace(tmp, pidfile)


def read_pidfile(pidfile: Path) -> tuple[int, int | None] | None:
    """The pid and start time a pidfile records (start time None: an old-format or foreign pidfile)."""
    try:
        pid, _, rest = pidfile.read_text().strip().partition(" ")
        if not rest:
            return int(pid), None
        key, sep, started = rest.partition("=")
        return (int(pid), int(started)) if key == "start" and sep else None
    except (OSError, ValueError):
        return None


def live_pid(pidfile: Path) -> int | None:
    """The pid in ``pidfile`` if that process is alive *and provably the one the pidfile was written
    for* (its start time is the recorded one), else None. This is what may be signalled."""
    recorded = read_pidfile(pidfile)
    if recorded is None or recorded[1] is None:
        return None
    pid, started = recorded
    return pid if is_alive(pid) and start_time(pid) == started else None


def stranger_pid(pidfile: Path) -> int | None:
    """A live process ``pidfile`` names without proving it is the lab's (no start time recorded, or
    another one): reported to the operator, never signalled."""
    recorded = read_pidfile(pidfile)
    if recorded is None or not is_alive(recorded[0]) or live_pid(pidfile) is not None:
        return None
    return recorded[0]


#: Where the lab's per-component group ids start (see :func:`identity_gid`).
IDENTITY_GID_BASE = 200000


def identity_gid(address: str) -> int | None:
    """The group id a lab component listening on ``address`` runs with: ``IDENTITY_GID_BASE`` plus the
    address's last three bytes (``127.0.10.2`` → 200000 + 0x000a02), unique per lab address.

    Every lab process connects from ``127.0.0.1`` (the kernel's source on ``lo``), so a packet's address
    cannot say which lab host sent it; its socket's group can (``iptables -m owner --gid-owner``). That
    is what lets ``lab net partition kafka1002 zookeeper`` cut one broker's ZooKeeper session and leave
    the others'. None when not root: only root may change its group, and such a lab has no partitions."""
    if os.geteuid() != 0:
        return None
    return IDENTITY_GID_BASE + (int(ipaddress.IPv4Address(address)) & 0xFFFFFF)


def spawn(argv: Sequence[str], *, log: Path, pidfile: Path, env: Mapping[str, str],
          cwd: Path | None = None, group: int | None = None) -> int:
    """Start ``argv`` detached (new session, stdin closed, output appended to ``log``); write its pidfile
    (pid and start time, while the child is still ours and its pid cannot have been reused). ``group``:
    the child's group id, supplementary groups cleared (a lab component's identity, :func:`identity_gid`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **env}, cwd=cwd, start_new_session=True, close_fds=True,
            group=group, extra_groups=[] if group is not None else None,
        )
    write_pidfile(pidfile, proc.pid)
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
        fields = _stat(int(entry))
        if fields is None:
            continue
        ppid = int(fields[1])
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
