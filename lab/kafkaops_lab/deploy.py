"""``labdeploy``: the lab's stand-in for ``scap deploy`` on the deploy host (``deploy_host`` in the inventory).

    labdeploy -l HOST [--rev REV] "MESSAGE"    deploy to one target, like ``scap deploy -l HOST "MESSAGE"``
    labdeploy --current                        the revision checked out on the deploy host
    labdeploy --checkout REV                   check REV out (what a deploy without --rev ships)
    labdeploy --new-release REV [--broken]     add a release (``--broken``: it fails its health check)

It runs on the deploy host (over that host's SSH), holds the releases under
``$KAFKAOPS_LAB_DIR/deploy/releases/<rev>/`` (a ``REVISION`` file, and a ``BROKEN`` file for a release
whose health check fails), and does what scap does for one target: copy the release to the target
over SSH (the lab key, host keys checked against the lab's known_hosts), swap it in, restart the
service there and wait for its port. Like scap it takes a deploy lock, so a second deploy started while
one is still running (a resumed run whose killed predecessor left its deploy running) fails at once
instead of interleaving with it. Every deploy is appended to ``deploy/deploy.log`` (JSON lines), which
is how the tests prove no target was deployed twice.

kafkaops never imports this: it only runs the inventory's ``deploy`` template on the deploy host.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kafkaops.errors import KafkaOpsError
from kafkaops_lab.dirs import host_dirs, lab_dir
from kafkaops_lab.spec import LabHostSpec, LabSpec

#: Releases every lab starts with; the hosts run r1 (the eventbus default) and the deploy host has it checked out.
SEED_RELEASES = ("r1", "r2", "r3")
SERVICE = "eventbus"


def deploy_dir(base: Path | None = None) -> Path:
    return (base or lab_dir()) / "deploy"


def releases_dir(base: Path | None = None) -> Path:
    return deploy_dir(base) / "releases"


def add_release(rev: str, *, broken: str | None = None, base: Path | None = None) -> Path:
    """Create release ``rev`` (idempotent). ``broken``: why its health check fails (a flag file)."""
    if not rev or "/" in rev or rev.startswith("."):
        raise ValueError(f"bad revision name {rev!r}")
    path = releases_dir(base) / rev
    path.mkdir(parents=True, exist_ok=True)
    (path / "REVISION").write_text(f"{rev}\n")
    if broken:
        (path / "BROKEN").write_text(f"{broken}\n")
    else:
        (path / "BROKEN").unlink(missing_ok=True)
    return path


def seed_releases(base: Path) -> None:
    """The deploy host's initial state: a few releases, r1 checked out (what the hosts run)."""
    for rev in SEED_RELEASES:
        add_release(rev, base=base)
    checkout("r1", base)


def current(base: Path | None = None) -> str:
    try:
        return (deploy_dir(base) / "CURRENT").read_text().strip()
    except FileNotFoundError:
        return "r1"


def checkout(rev: str, base: Path | None = None) -> None:
    if not (releases_dir(base) / rev / "REVISION").exists():
        raise KafkaOpsError(f"unknown revision {rev!r}", hint=f"releases: {', '.join(known_releases(base))}")
    (deploy_dir(base) / "CURRENT").write_text(f"{rev}\n")


def known_releases(base: Path | None = None) -> list[str]:
    return sorted(p.name for p in releases_dir(base).glob("*") if (p / "REVISION").exists())


def deploy_log(base: Path | None = None) -> list[dict[str, Any]]:
    """Every record of ``deploy/deploy.log`` (started / deployed / failed), oldest first."""
    path = deploy_dir(base) / "deploy.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _record(base: Path, **fields: Any) -> None:
    with open(deploy_dir(base) / "deploy.log", "a") as f:
        f.write(json.dumps({"ts": time.time(), "pid": os.getpid(), **fields}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _say(line: str) -> None:
    """Print, but survive the caller having gone away (a killed kafkaops leaves this deploy running)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass


def _ssh(spec: LabSpec, target: LabHostSpec, command: str) -> list[str]:
    ssh = Path(spec.lab_dir) / "ssh"
    return ["ssh", "-F", "/dev/null", "-i", str(ssh / "id_ed25519"), "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={ssh / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", str(target.ssh_port), target.address, command]


def deploy(target_name: str, rev: str, message: str, *, base: Path | None = None) -> None:
    """Copy release ``rev`` to ``target_name`` over SSH, swap it in, restart the service there.

    Raises:
        KafkaOpsError: Unknown target or revision, another deploy in progress, or a failed stage.
    """
    base = base or lab_dir()
    spec = LabSpec.load(base)
    target = spec.host(target_name)
    release = releases_dir(base) / rev
    if not (release / "REVISION").exists():
        raise KafkaOpsError(f"unknown revision {rev!r}", hint=f"releases: {', '.join(known_releases(base))}")
    lock = open(deploy_dir(base) / "deploy.lock", "a+")  # noqa: SIM115 - held for the whole deploy
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        raise KafkaOpsError(f"another deploy is in progress ({holder})",
                            hint="wait for it to finish, then deploy again") from exc
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()} deploying {rev} to {target.name}\n")
    lock.flush()
    started = time.monotonic()
    _record(base, event="started", target=target.name, rev=rev, message=message)
    _say(f"{target.name}: deploying {rev} ({message})")
    srv = str(host_dirs(target.name, Path(spec.lab_dir)).release)
    q = shlex.quote
    install = (f"set -e; d={q(srv)}; rm -rf \"$d.new\"; mkdir -p \"$d.new\"; tar -C \"$d.new\" -xf -; "
               f"rm -rf \"$d.old\"; if [ -d \"$d\" ]; then mv \"$d\" \"$d.old\"; fi; mv \"$d.new\" \"$d\"")
    try:
        tar = subprocess.Popen(["tar", "-C", str(release), "-cf", "-", "."], stdout=subprocess.PIPE)
        copy = subprocess.run(_ssh(spec, target, install), stdin=tar.stdout, capture_output=True, text=True,
                              timeout=120)
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait(30) != 0 or copy.returncode != 0:
            raise KafkaOpsError(f"copying {rev} to {target.name} failed: {copy.stderr.strip()[-300:]}")
        _say(f"{target.name}: {rev} copied; restarting {SERVICE}")
        restart = subprocess.run(_ssh(spec, target, f"hostctl restart {SERVICE}"), capture_output=True,
                                 text=True, timeout=180, stdin=subprocess.DEVNULL)
        if restart.returncode != 0:
            raise KafkaOpsError(f"restarting {SERVICE} on {target.name} failed: {restart.stderr.strip()[-300:]}")
    except (KafkaOpsError, subprocess.TimeoutExpired) as exc:
        _record(base, event="failed", target=target.name, rev=rev, message=message, error=str(exc))
        raise KafkaOpsError(str(exc)) from exc
    _record(base, event="deployed", target=target.name, rev=rev, message=message,
            seconds=round(time.monotonic() - started, 3))
    _say(f"{target.name}: {rev} deployed and {SERVICE} restarted in {time.monotonic() - started:.1f}s")
    lock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labdeploy", description="The lab's scap deploy (deploy host only)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("-l", "--limit", metavar="HOST", help="deploy to this one target (FQDN or short name)")
    mode.add_argument("--current", action="store_true", help="print the checked-out revision")
    mode.add_argument("--checkout", metavar="REV", help="check out REV")
    mode.add_argument("--new-release", metavar="REV", help="add release REV")
    parser.add_argument("--rev", help="revision to deploy (default: the checked-out one)")
    parser.add_argument("--broken", metavar="WHY", help="with --new-release: the release fails its health check")
    parser.add_argument("message", nargs="?", default="", help="deploy message (logged, like scap's)")
    args = parser.parse_args(argv)
    # A deploy must finish even if the SSH session that started it dies (scap's would, too).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        if args.current:
            _say(current())
        elif args.checkout:
            checkout(args.checkout)
            _say(f"checked out {args.checkout}")
        elif args.new_release:
            add_release(args.new_release, broken=args.broken)
            _say(f"release {args.new_release} added" + (" (broken)" if args.broken else ""))
        else:
            if not args.message:
                parser.error("a deploy needs a MESSAGE (like scap deploy)")
            deploy(args.limit, args.rev or current(), args.message)
    except KafkaOpsError as exc:
        print(f"labdeploy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
