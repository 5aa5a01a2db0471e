"""Network faults on the lab: partitions made of ``iptables`` DROP rules on loopback.

A broker cut off from ZooKeeper, an admin host that loses ZooKeeper mid-roll, SSH that *hangs* instead
of refusing: the faults behind real Kafka incidents are network faults, and a DROP (not a REJECT) is
what makes them hang the way they do in production. Every lab address is a loopback address, so the
lab can cut them with ``iptables`` on this machine.

**Who is who.** Every process on this machine connects to a lab address from ``127.0.0.1`` (the
kernel's source for ``127.0.0.0/8`` on ``lo``): kafkaops, and the brokers themselves (a broker's
ZooKeeper session and its replica fetchers come from ``127.0.0.1`` too; the JVM has no setting to bind
another source). An address says where a packet goes, never who sent it. So each side of a partition is
also a *group id*: the lab starts every component with one of its own (:func:`~kafkaops_lab.procs.identity_gid`
of its address: a host's broker, eventbus and sshd, ZooKeeper, etcd), and the *admin* is whoever runs
with :data:`ADMIN_GID` (``setpriv --regid 64600 --clear-groups kafkaops ...``, or ``subprocess``'s
``group=``). A side's outgoing packets to the other side's addresses are matched by ``-m owner
--gid-owner`` in ``OUTPUT`` and dropped; the connection is marked (``CONNMARK``) and its replies are
dropped too: both directions, as in a real partition. The connections an operator's shell or the
monitoring make (group 0) are never matched.

**Safety.** Rules live only in the lab's own chain (:func:`chain`, ``KAFKAOPS-LAB-<lab>``), reached from
``OUTPUT`` by one jump restricted to ``-o lo``; every rule names a source *and* a destination, both
loopback addresses of the lab (``127.0.0.1`` for the admin, the lab's own addresses for the rest), and
carries a comment naming the partition. ``lab net heal``, ``lab down`` and ``lab up`` (stale rules of a
killed run) delete the chain and its jump. :func:`rules` is pure, and ``tests/unit/lab/test_net.py`` checks
every rule it can produce against these properties.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkaops.errors import LabError
from kafkaops_lab import procs
from kafkaops_lab.spec import LabSpec

#: The group id of the lab's "admin" processes (kafkaops run as the operator's admin host would).
ADMIN_GID = 64600
#: The kernel's source address of every loopback connection made without binding one.
SOURCE_ADDRESS = "127.0.0.1"
#: The connection mark bit of an admin connection (a mask of its own: other marks are left alone).
MARK = "0x4b000000/0x4b000000"
#: Roles a partition may name besides a lab host.
ROLES = ("admin", "zookeeper", "etcd", "brokers")

_COMMENT = re.compile(r"--comment \"?kafkaops-lab:([A-Za-z0-9_.-]+)~([A-Za-z0-9_.-]+)")


def chain(lab: str) -> str:
    """The lab's own chain: ``KAFKAOPS-LAB-<lab>`` (iptables allows 28 characters)."""
    name = f"KAFKAOPS-LAB-{lab}"
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,28}", name):
        raise LabError(f"lab name {lab!r} does not make an iptables chain name ({name!r})",
                       hint="lab names are letters, digits and dashes, at most 15 characters")
    return name


@dataclass(frozen=True)
class Side:
    """One side of a partition: its name as given, the lab addresses it listens on, and the group ids
    its processes send with."""

    name: str
    addresses: tuple[str, ...]
    gids: tuple[int, ...] = ()
    admin: bool = False


def _gid(address: str) -> tuple[int, ...]:
    gid = procs.identity_gid(address)
    return () if gid is None else (gid,)


def resolve(spec: LabSpec, name: str) -> Side:
    """``admin``, ``zookeeper``, ``etcd``, ``brokers`` or a lab host (short name or FQDN)."""
    if name == "admin":
        return Side("admin", (), (ADMIN_GID,), admin=True)
    if name == "zookeeper":
        if not spec.zk_address:
            raise LabError(f"lab {spec.cluster} has no ZooKeeper (KRaft)", hint=f"sides: {_sides(spec)}")
        return Side(name, (spec.zk_address,), _gid(spec.zk_address))
    if name == "etcd":
        return Side(name, (spec.etcd_address,), _gid(spec.etcd_address))
    if name == "brokers":
        addresses = tuple(h.address for h in spec.brokers)
        return Side(name, addresses, tuple(g for a in addresses for g in _gid(a)))
    hosts = [*spec.hosts, *([spec.deploy] if spec.deploy else [])]
    for h in hosts:
        if name in (h.name, h.fqdn):
            return Side(h.name, (h.address,), _gid(h.address))
    raise LabError(f"no lab host or role {name!r} in lab {spec.cluster}", hint=f"sides: {_sides(spec)}")


def _sides(spec: LabSpec) -> str:
    return ", ".join([*(r for r in ROLES if r != "zookeeper" or spec.zk_address), *(h.name for h in spec.hosts)])


def _loopback(address: str) -> str:
    """``address`` as a /32, refusing anything outside 127.0.0.0/8 and the kernel's own source."""
    ip = ipaddress.ip_address(address)
    if not ip.is_loopback or ip.version != 4 or address == SOURCE_ADDRESS:
        raise LabError(f"refusing a network rule on {address!r}: not a lab loopback address")
    return f"{address}/32"


def rules(lab: str, a: Side, b: Side) -> list[list[str]]:
    """The ``iptables`` arguments (after ``-A CHAIN``) that cut ``a`` from ``b`` both ways. Pure.

    For each group id of one side and each address of the other (both ways round): mark that group's
    connections to the address, drop its packets, drop the replies of a marked connection.
    """
    if set(a.addresses) & set(b.addresses) or set(a.gids) & set(b.gids):
        raise LabError(f"cannot partition {a.name} from {b.name}: they overlap",
                       hint="name two sides with nothing in common, e.g. `kafka1002 zookeeper`")
    if not (a.gids and b.addresses) and not (b.gids and a.addresses):
        raise LabError(
            f"cannot partition {a.name} from {b.name}: every lab process connects from {SOURCE_ADDRESS}, so "
            "only a component's group id tells its packets apart, and this lab's components have none "
            "(a lab started without root)",
            hint="start the lab as root, or partition `admin` (group "
                 f"{ADMIN_GID}) from a lab side, e.g. `kafkaops lab net partition admin zookeeper`")
    comment = ["-m", "comment", "--comment", f"kafkaops-lab:{a.name}~{b.name}"]
    src = f"{SOURCE_ADDRESS}/32"
    out: list[list[str]] = []
    for sender, receiver in ((a, b), (b, a)):
        for address in receiver.addresses:
            dst = _loopback(address)
            for gid in sender.gids:
                owner = ["-m", "owner", "--gid-owner", str(gid)]
                out += [
                    ["-s", src, "-d", dst, *owner, *comment, "-j", "CONNMARK", "--set-xmark", MARK],
                    ["-s", src, "-d", dst, *owner, *comment, "-j", "DROP"],
                ]
            if sender.gids:
                out.append(["-s", dst, "-d", src, "-m", "connmark", "--mark", MARK, *comment, "-j", "DROP"])
    return out


def jump(lab: str) -> list[str]:
    """The one rule in ``OUTPUT`` (loopback only) that sends packets through the lab's chain."""
    return ["OUTPUT", "-o", "lo", "-j", chain(lab)]


# --- iptables ---------------------------------------------------------------------------------------

def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("iptables")
    if exe is None:
        raise LabError("iptables is not installed", hint="apt-get install iptables (scripts/install.sh)")
    done = subprocess.run([exe, "-w", "5", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise LabError(f"iptables {' '.join(args)} failed: {done.stderr.strip()}",
                       hint="the lab's network faults need root and iptables")
    return done


def listed(lab: str) -> list[str]:
    """The lab chain's rules as ``iptables -S`` prints them ([] when it does not exist)."""
    if shutil.which("iptables") is None:
        return []
    done = _iptables("-S", chain(lab), check=False)
    return [line for line in done.stdout.splitlines() if line.startswith("-A ")] if done.returncode == 0 else []


def partitions(lab: str) -> list[tuple[str, str]]:
    """The partitions in force, as (side, side), from the rules' comments."""
    found: dict[tuple[str, str], None] = {}
    for line in listed(lab):
        m = _COMMENT.search(line)
        if m:
            found[(m.group(1), m.group(2))] = None
    return list(found)


def partition(spec: LabSpec, a: str, b: str, *, seconds: float | None = None) -> list[list[str]]:
    """Cut ``a`` from ``b`` (both directions, DROP); with ``seconds``, heal by itself after that long.
    Returns the rules added."""
    sa, sb = resolve(spec, a), resolve(spec, b)
    new = rules(spec.cluster, sa, sb)
    name = chain(spec.cluster)
    if _iptables("-S", name, check=False).returncode != 0:
        _iptables("-N", name)
    if _iptables("-C", *jump(spec.cluster), check=False).returncode != 0:
        _iptables("-I", *jump(spec.cluster)[:1], "1", *jump(spec.cluster)[1:])
    if (sa.name, sb.name) in partitions(spec.cluster) or (sb.name, sa.name) in partitions(spec.cluster):
        raise LabError(f"{sa.name} and {sb.name} are already partitioned",
                       hint=f"`kafkaops lab net heal {sa.name} {sb.name}` first")
    for rule in new:
        _iptables("-A", name, *rule)
    if seconds is not None:
        _start_timer(spec, sa.name, sb.name, seconds)
    return new


def heal(spec: LabSpec, a: str | None = None, b: str | None = None) -> int:
    """Remove the partition between ``a`` and ``b`` (both None: every partition, the chain and its jump,
    and every heal timer). Returns how many rules were removed."""
    if a is None or b is None:
        _stop_timers(Path(spec.lab_dir))
        return clear(spec.cluster)
    names = {resolve(spec, a).name, resolve(spec, b).name}
    removed = 0
    for line in listed(spec.cluster):
        m = _COMMENT.search(line)
        if m and {m.group(1), m.group(2)} == names:
            _iptables("-D", *shlex.split(line)[1:])
            removed += 1
    _stop_timers(Path(spec.lab_dir), _slug(*sorted(names)))
    if not listed(spec.cluster):
        clear(spec.cluster)
    return removed


def clear(lab: str) -> int:
    """Delete the lab's chain and its jump, whatever they hold (stale rules of a killed run included).
    Idempotent; a machine without iptables (or without the chain) has nothing to clear."""
    if shutil.which("iptables") is None:
        return 0
    try:
        chain(lab)
    except LabError:  # a directory name that cannot be a chain: we never made one for it
        return 0
    n = len(listed(lab))
    while _iptables("-D", *jump(lab), check=False).returncode == 0:
        pass
    if _iptables("-S", chain(lab), check=False).returncode == 0:
        _iptables("-F", chain(lab))
        _iptables("-X", chain(lab))
    return n


# --- the heal timer (--for) -------------------------------------------------------------------------

def _slug(a: str, b: str) -> str:
    return f"{a}~{b}"


def _timer_pidfile(base: Path, slug: str) -> Path:
    return base / "run" / f"net-heal-{slug}.pid"


def _start_timer(spec: LabSpec, a: str, b: str, seconds: float) -> None:
    base = Path(spec.lab_dir)
    slug = _slug(*sorted((a, b)))
    procs.spawn([sys.executable, "-m", "kafkaops_lab.net", str(base), a, b, str(seconds)],
                log=base / "log" / "net.log", pidfile=_timer_pidfile(base, slug), env={})


def _stop_timers(base: Path, slug: str = "*") -> None:
    for pidfile in base.glob(f"run/net-heal-{slug}.pid"):
        pid = procs.live_pid(pidfile)
        if pid is not None:
            procs.terminate([pid], timeout=5)
        pidfile.unlink(missing_ok=True)


def shown(spec: LabSpec) -> dict[str, Any]:
    """What ``lab net show`` prints: the partitions, their rules, the admin's identity, heal timers."""
    base = Path(spec.lab_dir)
    return {
        "lab": spec.cluster,
        "chain": chain(spec.cluster),
        "admin": {"gid": ADMIN_GID},
        "identities": {h.name: procs.identity_gid(h.address) for h in spec.hosts},
        "partitions": [{"a": a, "b": b} for a, b in partitions(spec.cluster)],
        "heal_timers": sorted(f.name.removeprefix("net-heal-").removesuffix(".pid")
                              for f in base.glob("run/net-heal-*.pid") if procs.live_pid(f)),
        "rules": listed(spec.cluster),
    }


def _heal_after(argv: Sequence[str]) -> None:
    """The ``--for`` timer: ``python -m kafkaops_lab.net LAB_DIR A B SECONDS``."""
    base, a, b, seconds = Path(argv[0]), argv[1], argv[2], float(argv[3])
    time.sleep(seconds)
    spec = LabSpec.load(base)
    # Our own pidfile goes first: heal() must not terminate the process doing the healing.
    _timer_pidfile(base, _slug(*sorted((a, b)))).unlink(missing_ok=True)
    removed = heal(spec, a, b)
    print(json.dumps({"healed": [a, b], "rules": removed, "at": time.time()}), flush=True)


if __name__ == "__main__":
    _heal_after(sys.argv[1:])
