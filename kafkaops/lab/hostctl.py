"""``hostctl``: the lab host's service manager, reached over that host's SSH like systemctl.

    hostctl start|stop|restart|status UNIT     (UNIT: kafka, eventbus)
    hostctl pid UNIT                           (main pid, 0 when inactive: ``systemctl show -p MainPID --value``)
    hostctl boot-id
    hostctl reboot                             (returns at once; the host goes down and comes back)
    hostctl system-state                       (``systemctl is-system-running``: running, or stopping)
    hostctl log UNIT [--since EPOCH]

The host is ``$KAFKAOPS_LAB_HOST`` (set by the host's sshd) or ``--host``. Exit codes follow
systemctl: ``status`` exits 0 when active and 3 when inactive; errors exit 1 with one line on stderr.
Kept free of heavy imports: it runs on every remote command of a runbook.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from kafkaops.errors import KafkaOpsError
from kafkaops.lab.host import ENABLED_UNITS, LabHost
from kafkaops.lab.procs import LAB_HOST_ENV


def _log(host: LabHost, unit: str, since: float | None) -> int:
    path = host.dirs.logfile(unit)
    if not path.exists():
        return 0
    with open(path, errors="replace") as f:
        for line in f:
            if since is not None:
                # Lines start with an ISO-8601 local timestamp: 2026-11-22T18:01:02.123
                try:
                    ts = time.mktime(time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S"))
                except ValueError:
                    continue
                if ts + 1 < since:
                    continue
            sys.stdout.write(line)
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
            active = host.is_active(args.unit)
            print("active" if active else "inactive")
            return 0 if active else 3
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
