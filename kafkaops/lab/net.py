"""Network faults on the lab: partitions made of ``iptables`` DROP rules on loopback.

A broker cut off from ZooKeeper, an admin host that loses ZooKeeper mid-roll, SSH that *hangs* instead
of refusing: the faults behind real Kafka incidents are network faults, and a DROP (not a REJECT) is
what makes them hang the way they do in production. Every lab address is a loopback address, so the
lab can cut them with ``iptables`` on this machine.

**Who "admin" is.** Every process on this machine connects to a lab address from ``127.0.0.1`` (the
kernel's source for ``127.0.0.0/8`` on ``lo``): kafkaops, and the brokers themselves (a broker's
ZooKeeper session and its replica fetchers come from ``127.0.0.1`` too; the JVM has no setting to bind
another source). A rule on addresses alone would therefore cut every broker from ZooKeeper when asked to
cut kafkaops from it. So the lab's *admin* is a process group identity: processes running with the group
id :data:`ADMIN_GID` (``setpriv --regid 64600 --clear-groups kafkaops ...``, or ``subprocess``'s
``group=``). Their packets are matched by ``-m owner --gid-owner`` in ``OUTPUT``; the connection is
marked (``CONNMARK``), and the replies of a marked connection are dropped too: both directions, as in a
real partition. A partition between two lab components that does not involve the admin cannot be told
apart from the rest of the lab's traffic by address and is refused (one line saying so).

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
from kafkaops.lab import procs
from kafkaops.lab.spec import LabSpec

#: The group id of the lab's "admin" processes (kafkaops run as the operator's admin host would).
ADMIN_GID = 64600
#: The kernel's source address of every loopback connection made without binding one.
ADMIN_ADDRESS = "127.0.0.1"
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
    """One side of a partition: its name as given, and the lab addresses it stands for."""

    name: str
    addresses: tuple[str, ...]
    admin: bool = False


def resolve(spec: LabSpec, name: str) -> Side:
    """``admin``, ``zookeeper``, ``etcd``, ``brokers`` or a lab host (short name or FQDN)."""
    if name == "admin":
        return Side("admin", (ADMIN_ADDRESS,), admin=True)
    if name == "zookeeper":
        if not spec.zk_address:
            raise LabError(f"lab {spec.cluster} has no ZooKeeper (KRaft)", hint=f"sides: {_sides(spec)}")
        return Side(name, (spec.zk_address,))
    if name == "etcd":
        return Side(name, (spec.etcd_address,))
    if name == "brokers":
        return Side(name, tuple(h.address for h in spec.brokers))
    hosts = [*spec.hosts, *([spec.deploy] if spec.deploy else [])]
    for h in hosts:
        if name in (h.name, h.fqdn):
            return Side(h.name, (h.address,))
    raise LabError(f"no lab host or role {name!r} in lab {spec.cluster}", hint=f"sides: {_sides(spec)}")


def _sides(spec: LabSpec) -> str:
    return ", ".join([*(r for r in ROLES if r != "zookeeper" or spec.zk_address), *(h.name for h in spec.hosts)])


def _loopback(address: str, *, admin: bool) -> str:
    """``address`` as a /32, refusing anything outside 127.0.0.0/8 (and 127.0.0.1 unless admin)."""
    ip = ipaddress.ip_address(address)
    if not ip.is_loopback or ip.version != 4 or (address == ADMIN_ADDRESS) != admin:
        raise LabError(f"refusing a network rule on {address!r}: not a lab loopback address")
    return f"{address}/32"


def rules(lab: str, a: Side, b: Side) -> list[list[str]]:
    """The ``iptables`` arguments (after ``-A CHAIN``) that cut ``a`` from ``b`` both ways. Pure.

    One side must be the admin (see the module docstring). For each address of the other side: mark
    the admin's connections to it, drop the admin's packets of a marked connection, drop the replies.
    """
    if a.admin == b.admin:
        raise LabError(
            f"cannot partition {a.name} from {b.name}: every lab process connects from {ADMIN_ADDRESS}, so "
            "only the admin's traffic (processes of group "
            f"{ADMIN_GID}) can be told apart from the rest",
            hint="partition one side from `admin`, e.g. `kafkaops lab net partition admin zookeeper`")
    admin, other = (a, b) if a.admin else (b, a)
    comment = ["-m", "comment", "--comment", f"kafkaops-lab:{a.name}~{b.name}"]
    src = _loopback(admin.addresses[0], admin=True)
    out: list[list[str]] = []
    for address in other.addresses:
        dst = _loopback(address, admin=False)
        out += [
            ["-s", src, "-d", dst, "-m", "owner", "--gid-owner", str(ADMIN_GID), *comment,
             "-j", "CONNMARK", "--set-xmark", MARK],
            ["-s", src, "-d", dst, "-m", "connmark", "--mark", MARK, *comment, "-j", "DROP"],
            ["-s", dst, "-d", src, "-m", "connmark", "--mark", MARK, *comment, "-j", "DROP"],
        ]
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
    procs.spawn([sys.executable, "-m", "kafkaops.lab.net", str(base), a, b, str(seconds)],
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
        "admin": {"address": ADMIN_ADDRESS, "gid": ADMIN_GID},
        "partitions": [{"a": a, "b": b} for a, b in partitions(spec.cluster)],
        "heal_timers": sorted(f.name.removeprefix("net-heal-").removesuffix(".pid")
                              for f in base.glob("run/net-heal-*.pid") if procs.live_pid(f)),
        "rules": listed(spec.cluster),
    }


def _heal_after(argv: Sequence[str]) -> None:
    """The ``--for`` timer: ``python -m kafkaops.lab.net LAB_DIR A B SECONDS``."""
    base, a, b, seconds = Path(argv[0]), argv[1], argv[2], float(argv[3])
    time.sleep(seconds)
    spec = LabSpec.load(base)
    # Our own pidfile goes first: heal() must not terminate the process doing the healing.
    _timer_pidfile(base, _slug(*sorted((a, b)))).unlink(missing_ok=True)
    removed = heal(spec, a, b)
    print(json.dumps({"healed": [a, b], "rules": removed, "at": time.time()}), flush=True)


if __name__ == "__main__":
    _heal_after(sys.argv[1:])
