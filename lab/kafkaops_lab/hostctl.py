"""``hostctl``: the lab host's service manager, reached over that host's SSH like systemctl.

    hostctl start|stop|restart|status UNIT     (UNIT: kafka, eventbus; status prints active, activating,
                                                failed or inactive, as ``systemctl is-active``)
    hostctl pid UNIT                           (main pid, 0 when inactive: ``systemctl show -p MainPID --value``)
    hostctl boot-id
    hostctl reboot                             (returns at once; the host goes down and comes back)
    hostctl system-state                       (``systemctl is-system-running``: running, or stopping)
    hostctl log UNIT [--since [@]EPOCH]           (eventbus: its log; kafka: Kafka's server log, log4j)

The host is ``$KAFKAOPS_LAB_HOST`` (set by the host's sshd) or ``--host``. Exit codes follow
systemctl: ``status`` exits 0 when active and 3 otherwise; errors exit 1 with one line on stderr.
Kept free of heavy imports: it runs on every remote command of a runbook.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from kafkaops.errors import KafkaOpsError
from kafkaops_lab.host import ENABLED_UNITS, LabHost
from kafkaops_lab.procs import LAB_HOST_ENV

#: Where a line's timestamp is: ISO-8601 at the start (eventbus, ``2026-11-22T18:01:02.123``) or log4j's
#: bracketed one (Kafka's server log, ``[2026-11-22 18:01:02,123]``); both the host's local time.
_STAMP = re.compile(r"^\[?(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})")


def line_time(line: str) -> float | None:
    """The epoch seconds a log line is stamped with, or None for a line without a timestamp (a stack
    trace's continuation, a JVM message on stdout)."""
    m = _STAMP.match(line)
    return None if m is None else _stamp_time(m.group(1), m.group(2))


@functools.lru_cache(maxsize=4096)
def _stamp_time(day: str, second: str) -> float | None:
    """One stamp's epoch seconds, parsed once: a broker logs hundreds of lines a second during a restart, and
    ``strptime`` on each was most of a log scan's time (58 of 109 ms for 4,500 lines)."""
    try:
        return time.mktime(time.strptime(f"{day}T{second}", "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def log_files(host: LabHost, unit: str) -> list[Path]:
    """The files of ``unit``'s log, oldest first. Kafka's is the log4j server log and its rotated backups
    (``kafka-server.log.2``, ``.1``, then the current one), like ``/var/log/kafka/kafka.log``; the
    broker's stdout file holds only what the JVM prints before log4j is up."""
    if unit != "kafka":
        return [host.dirs.logfile(unit)]
    current = host.dirs.log / "kafka-server.log"
    backups = sorted(host.dirs.log.glob("kafka-server.log.[0-9]*"),
                     key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0, reverse=True)
    return [*backups, current]


def select_lines(lines: Iterable[str], since: float | None) -> Iterator[str]:
    """The lines logged at or after ``since`` (with one second of slack: stamps have no sub-second part
    here). A line without a timestamp belongs to the entry above it (a stack trace goes with its ERROR)."""
    keep = since is None
    for line in lines:
        if since is not None:
            ts = line_time(line)
            if ts is not None:
                keep = ts + 1 >= since
        if keep:
            yield line


#: Below this many bytes left to search, :func:`start_offset` reads on instead of halving again.
_SEEK_STOP = 64 << 10


def _stamp_after(f: BinaryIO, offset: int) -> float | None:
    """The time of the first stamped line that starts after ``offset`` (None: none before the end)."""
    f.seek(offset)
    if offset:
        f.readline()  # the rest of a line cut in two
    for raw in f:
        ts = line_time(raw.decode(errors="replace"))
        if ts is not None:
            return ts
    return None


def start_offset(f: BinaryIO, since: float) -> int:
    """A byte offset of ``f`` (a log, appended in time order) at or before the first line :func:`select_lines`
    keeps for ``since``: what ``journalctl --since`` finds through its index. Why: a log scan read every
    line the broker ever logged (a roll scans twice per broker), and took longer the longer the lab ran."""
    lo, hi = 0, f.seek(0, 2)
    while hi - lo > _SEEK_STOP:
        mid = (lo + hi) // 2
        ts = _stamp_after(f, mid)
        if ts is not None and ts + 1 < since:
            lo = mid  # everything up to the line after mid is older: the kept lines start later
        else:
            hi = mid
    return lo


def read_since(path: Path, since: float | None) -> Iterator[str]:
    """The lines of the log at ``path`` that :func:`select_lines` keeps for ``since``, without reading what
    comes before them (a file last written before ``since`` is not opened)."""
    if since is not None and path.stat().st_mtime + 1 < since:
        return
    with open(path, "rb") as f:
        offset = start_offset(f, since) if since is not None else 0
        f.seek(offset)
        if offset:
            f.readline()  # a line cut in two, older than since
        yield from select_lines((raw.decode(errors="replace") for raw in f), since)


def _log(host: LabHost, unit: str, since: float | None) -> int:
    for path in log_files(host, unit):
        try:
            for line in read_since(path, since):
                sys.stdout.write(line)
        except FileNotFoundError:
            continue
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hostctl", description="Lab host service manager")
    parser.add_argument("--host", default=os.environ.get(LAB_HOST_ENV))
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd in ("start", "stop", "restart", "status"):
        p = sub.add_parser(cmd)
        p.add_argument("unit", choices=ENABLED_UNITS)
    p = sub.add_parser("pid")
    p.add_argument("unit", choices=ENABLED_UNITS)
    sub.add_parser("boot-id")
    sub.add_parser("reboot")
    sub.add_parser("system-state")
    p = sub.add_parser("kafka-config", help="write this node's Kafka configuration for a migration phase "
                       "(the migration lab; takes effect at the next start)")
    p.add_argument("phase", choices=("zk", "migration", "kraft", "show"))
    p = sub.add_parser("kafka-format", help="format this node's Kafka storage with the cluster's id "
                       "(idempotent; refuses another id)")
    p.add_argument("cluster_id")
    p.add_argument("--no-initial-controllers", action="store_true",
                   help="a controller joining a dynamic quorum: an observer until added as a voter")
    sub.add_parser("kafka-storage-id", help="the cluster id this node's Kafka storage is formatted with "
                   "(nothing when it is not formatted)")
    sub.add_parser("kafka-deprovision", help="remove this controller's Kafka storage (Kafka's revert of a "
                   "migration; refused while Kafka runs)")
    p = sub.add_parser("kafka-install", help="install this Kafka release on the node (the migration lab's jar sets; "
                       "it runs it from its next start)")
    p.add_argument("version")
    sub.add_parser("kafka-version", help="the version of the Kafka this node runs (its installed jars)")
    p = sub.add_parser("log")
    p.add_argument("unit", choices=ENABLED_UNITS)
    p.add_argument("--since", type=lambda s: float(s.lstrip("@")), default=None)
    for hidden in ("_reboot", "_boot"):
        sub.add_parser(hidden)
    args = parser.parse_args(argv)
    if not args.host:
        parser.error(f"no host: set ${LAB_HOST_ENV} or pass --host")
    try:
        host = LabHost.named(args.host)
        if args.cmd == "start":
            host.start(args.unit)
        elif args.cmd == "stop":
            host.stop(args.unit)
        elif args.cmd == "restart":
            host.stop(args.unit)
            host.start(args.unit)
        elif args.cmd == "status":
            state = host.unit_state(args.unit)
            print(state)
            return 0 if state == "active" else 3
        elif args.cmd == "pid":
            print(host.pid(args.unit) or 0)
        elif args.cmd == "system-state":
            print(host.system_state())
        elif args.cmd == "boot-id":
            print(host.boot_id())
        elif args.cmd == "reboot":
            host.record("reboot-command", boot_id=host.boot_id())
            if host.system_state() == "stopping":
                print(f"{host.host.name}: already shutting down")  # systemd ignores a second reboot too
                return 0
            (host.dirs.run / "stopping").touch()  # like systemd: "stopping" from the moment it is asked
            host.spawn_detached("reboot")
            print(f"{host.host.name}: rebooting")
        elif args.cmd == "kafka-config":
            if args.phase == "show":
                print(host.phase())
            else:
                changed = host.configure(args.phase)
                print(f"{host.host.name}: kafka configured for {args.phase}" + ("" if changed else " (unchanged)"))
        elif args.cmd == "kafka-format":
            formatted = host.format_storage(args.cluster_id, no_initial_controllers=args.no_initial_controllers)
            print(f"{host.host.name}: storage " + ("formatted" if formatted else "already formatted"))
        elif args.cmd == "kafka-install":
            changed = host.install(args.version)
            print(f"{host.host.name}: kafka {args.version} installed" + ("" if changed else " (unchanged)"))
        elif args.cmd == "kafka-deprovision":
            removed = host.deprovision()
            print(f"{host.host.name}: storage " + ("removed" if removed else "already absent"))
        elif args.cmd == "kafka-storage-id":
            print(host.storage_cluster_id() or "")
        elif args.cmd == "kafka-version":
            print(host.kafka_version())
        elif args.cmd == "log":
            return _log(host, args.unit, args.since)
        elif args.cmd == "_reboot":
            time.sleep(0.5)  # let the SSH command that asked for it return first
            host.reboot()
        elif args.cmd == "_boot":
            host.power_on()
    except KafkaOpsError as exc:
        print(f"hostctl: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError) as exc:
        print(f"hostctl: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
