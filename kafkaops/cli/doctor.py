"""``kafkaops doctor``: what an operator runs first on a new admin host.

One line per check — the version and where the package is, where configuration, state, locks and the
cache live, which inventories were found (and which place is in use) with their clusters, SSH config and
known hosts, whether each cluster's Kafka, ZooKeeper, etcd, Alertmanager and SSH hosts let kafkaops do its
work, Java and Spark, the post-check's reader — so a missing piece is found before the first maintenance,
not in the middle of it. Each check is ``ok``, ``warn`` or ``FAIL``: a warning is what a plan-only host may
lack (Java, Spark, the post-check's reader: only the post-check's data scan needs them, ``--no-scan`` runs
without) or an example inventory that is never used; it does not change the exit code. Exit 0 when nothing
failed, 9 (a check failed) otherwise; ``-o json`` for configuration management to assert on.

The network checks speak each system's protocol (:mod:`kafkaops.systems.probes`), with the cluster's own
security from the inventory, through the adapters a run uses. A TCP connect only proves a firewall is open,
not that kafkaops can work: a certificate the inventory's CA does not sign, a stale password file, a
mistyped ZooKeeper chroot, an Alertmanager that refuses kafkaops' user, a host key the known hosts do not
vouch for all let the port open and stop the first maintenance at its first step. So Kafka answers
ApiVersions and Metadata (how many brokers, which controller), ZooKeeper gives a session and has the
chroot, etcd says it is healthy, Alertmanager is ready, and one host per cluster shows an SSH key (or host
certificate) the known hosts verify — a key exchange, no login. Each is bounded (4 s) and they all
run at once. Only reads are asked; nothing is written anywhere.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import TableOrJson, console, print_json, waiting
from kafkaops.systems.programs import version_line

#: Seconds each protocol probe may take (they all run at once, so the doctor takes about this long).
PROBE_TIMEOUT = 4.0


@dataclass(frozen=True)
class Result:
    """One check: ``ok`` false fails the doctor (exit 9); ``warn`` marks an ok check the operator should
    read (it fails nothing)."""

    check: str
    ok: bool
    detail: str
    warn: bool = False

    @property
    def level(self) -> str:
        return "fail" if not self.ok else "warn" if self.warn else "ok"


def _writable(path: Path) -> tuple[bool, str]:
    """Can this user write ``path`` (or create it: its nearest existing parent is writable)?"""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return True, f"{path}" + ("" if path.exists() else " (created on first use)")
    return False, f"{path}: not writable by this user ({probe} is not)"


def _places_checks() -> list[Callable[[], Result]]:
    from kafkaops import __version__, places
    from kafkaops.health.scan_jar import reader_jars_dir

    def version() -> Result:
        return Result("version", True, f"kafkaops {__version__} at {Path(__file__).resolve().parents[1]}")

    def state() -> Result:
        return Result("state", *_writable(places.state_dir()))

    def cache() -> Result:
        ok, detail = _writable(places.cache_dir())
        return Result("cache", ok, f"{detail}; reader jars: {reader_jars_dir()}")

    return [version, state, cache]


def _inventory_checks() -> tuple[list[Callable[[], Result]], list[Any]]:
    """The inventory checks, and the clusters found (for the checks that follow)."""
    from kafkaops import places
    from kafkaops.errors import KafkaOpsError
    from kafkaops.inventory import load_inventory

    all_places, used = places.inventory_places()
    searched = ", ".join(p.describe() for p in all_places)
    checks: list[Callable[[], Result]] = []
    clusters: list[Any] = []
    if used is None or not used.files:
        home = places.inventory_dirs()[0]
        checks.append(lambda: Result("inventories", False, f"none found; searched {searched} (draft one from the "
                                     f"cluster: kafkaops inventory init CLUSTER --bootstrap HOST:PORT --out "
                                     f"{home}/CLUSTER.yaml; or put one in {home}/ or "
                                     f"{places.inventory_dirs()[1]}/)"))
        return checks, clusters
    checks.append(lambda: Result("inventories", True, f"in use: {used.describe()}; searched {searched}"))
    examples = [p for p in places.example_inventories() if used.path is not None and p.parent == used.path]
    if examples:
        checks.append(lambda: Result(
            "example inventories", True, f"skipped {', '.join(p.name for p in examples)}: a *.example.yaml is never "
            "read as an inventory (copy it to NAME.yaml and fill it in to use it)", warn=True))
    for f in used.files:
        try:
            cluster = load_inventory(f)
        except KafkaOpsError as exc:
            checks.append(partial(Result, f"inventory {f.name}", False, str(exc)))
            continue
        members = list(cluster.sites.values()) if cluster.multi_site else [cluster]
        names = ", ".join(c.name for c in members)
        checks.append(partial(Result, f"inventory {f.name}", True,
                              f"{'sites ' + cluster.name + ': ' if cluster.multi_site else ''}{names}"))
        clusters += [c for c in members if c not in clusters]
    return checks, clusters


def _lock_check(clusters: list[Any]) -> Callable[[], Result]:
    from kafkaops import places

    def locks() -> Result:
        ok, detail = _writable(places.lock_dir())
        needed = [c.name for c in clusters if not c.zookeeper and not c.etcd and not c.conftool_config]
        if ok or not needed:
            return Result("locks", True, detail + ("" if needed else " (every cluster locks in ZooKeeper or etcd)"))
        return Result("locks", False, f"{detail}; needed by {', '.join(needed)} (set $KAFKAOPS_LOCK_DIR)")

    return locks


def _ssh_config(address: str) -> dict[str, object]:
    """``~/.ssh/config``'s settings for ``address`` (empty without one)."""
    import paramiko

    path = Path("~/.ssh/config").expanduser()
    return dict(paramiko.SSHConfig.from_path(str(path)).lookup(address)) if path.is_file() else {}


def _ssh_checks(clusters: list[Any]) -> list[Callable[[], Result]]:
    def config() -> Result:
        path = Path("~/.ssh/config").expanduser()
        return Result("ssh config", True, f"{path}" if path.is_file() else f"{path} absent (the inventory's ssh: "
                      "and OpenSSH defaults apply)")

    def known(cluster: Any) -> Result:
        """Which file (in OpenSSH's order: the inventory's or ssh_config's, then the global ones) holds each
        host's key: the one a connection will be verified by."""
        from kafkaops.systems.known_hosts import host_names, trust_files, verified_by

        missing: list[str] = []
        verifying: set[str] = set()
        looked: set[str] = set()
        for h in [*cluster.hosts, *getattr(cluster, "controllers", ())]:
            files = trust_files(h.ssh.known_hosts, _ssh_config(h.ssh.address))
            looked.update(files.all)
            port = h.ssh.port or 22
            found = verified_by(files, (*host_names(h.ssh.address, port), *host_names(h.fqdn, port)))
            if found is None:
                missing.append(h.name)
            else:
                verifying.add(found)
        if missing:
            return Result(f"known hosts {cluster.name}", False, f"no key for {', '.join(missing)} in "
                          f"{', '.join(sorted(looked))} (an unknown key is refused: add the hosts' keys first)")
        return Result(f"known hosts {cluster.name}", True,
                      f"every host, verified by {', '.join(sorted(verifying))}")

    return [config, *[partial(known, c) for c in clusters]]


def _reach_checks(clusters: list[Any]) -> list[Callable[[], Result]]:
    """Per cluster, each system it has asked in its own protocol (:mod:`kafkaops.systems.probes`): Kafka,
    ZooKeeper, etcd, Alertmanager, and one host's SSH key."""
    from kafkaops.systems import probes

    checks: list[Callable[[], Result]] = []
    for c in clusters:
        checks.append(partial(_probe, f"kafka {c.name}", probes.kafka, c))
        if c.zookeeper:
            checks.append(partial(_probe, f"zookeeper {c.name}", probes.zookeeper, c))
        if c.etcd or c.conftool_config:
            checks.append(partial(_probe, f"etcd {c.name}", probes.etcd, c))
        if c.monitoring is not None and c.monitoring.alertmanager:
            checks.append(partial(_probe, f"alertmanager {c.name}", probes.alertmanager, c))
        if c.hosts:
            checks.append(partial(_probe, f"ssh host key {c.name}", probes.ssh_host_key, c))
    return checks


def _probe(name: str, probe: Callable[[Any, float], str], cluster: Any) -> Result:
    """One probe as a check: what it saw, or its error's one line (what, and in parentheses how to fix it)."""
    from kafkaops.errors import KafkaOpsError
    from kafkaops.systems.probes import Unchecked

    try:
        said = probe(cluster, PROBE_TIMEOUT)
        return Result(name, True, str(said), warn=isinstance(said, Unchecked))
    except KafkaOpsError as exc:
        return Result(name, False, " ".join(str(exc).split()))


def _runtime_checks() -> list[Callable[[], Result]]:
    def java() -> Result:
        found, answered, said = version_line("java")
        if not found:
            return Result("java", True, "no java on PATH (the post-check's Spark scan needs a JRE 17+: "
                          "apt-get install openjdk-17-jre-headless; --no-scan runs without)", warn=True)
        return Result("java", answered, said)

    def spark() -> Result:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return Result("spark", True, f"pyspark {version('pyspark')}")
        except PackageNotFoundError:
            return Result("spark", True, "pyspark is not installed: a plan-only host needs none (pip install "
                          "'kafkaops[spark]' for the post-check's data scan; --no-scan runs without it)", warn=True)

    def reader() -> Result:
        from kafkaops.health import scan_jar

        jars, missing = scan_jar._fast_jars()
        if jars:
            return Result("reader", True, f"built: {', '.join(jars)}")
        if shutil.which("javac"):
            return Result("reader", True, f"not built yet ({missing}); buildable: `{scan_jar.BUILD_COMMAND}`")
        return Result("reader", True, f"not built ({missing}) and no javac to build it: only the post-check's "
                      f"data scan needs it (apt-get install {scan_jar.JDK_PACKAGE}, then "
                      f"`{scan_jar.BUILD_COMMAND}`)", warn=True)

    return [java, spark, reader]


def _run(checks: list[Callable[[], Result]]) -> list[Result]:
    """Run every check at once (they wait on the network), keep their order."""
    def safe(check: Callable[[], Result]) -> Result:
        try:
            return check()
        except Exception as exc:  # a check that breaks is a failed check, and the others still report
            return Result(getattr(check, "__name__", "check"), False, f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(safe, checks))


def doctor(output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o", help="table or json.")) -> None:
    """Check this admin host: version, where config/state/locks/cache live, the inventories found and their
    clusters, SSH known hosts, each cluster's Kafka/ZooKeeper/etcd/Alertmanager asked in its own protocol with
    its security, one host's SSH key verified, Java, Spark, the post-check's reader.

    One line per check, ok / warn / FAIL; exit 0 when none failed (a warning fails nothing), 9 otherwise.
    """
    inventory_checks, clusters = _inventory_checks()
    with waiting(f"checking {len(clusters)} cluster(s): Kafka, ZooKeeper, etcd, Alertmanager, SSH host keys"):
        results = _run([*_places_checks(), _lock_check(clusters), *inventory_checks, *_ssh_checks(clusters),
                        *_reach_checks(clusters), *_runtime_checks()])
    healthy = all(r.ok for r in results)
    if output == TableOrJson.json:
        print_json({"ok": healthy, "checks": [{**asdict(r), "level": r.level} for r in results]})
    else:
        from rich.text import Text

        style = {"ok": ("ok  ", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
        for r in results:
            # the detail is literal text (a hint like 'kafkaops[spark]' is not console markup)
            console.print(Text.assemble(style[r.level], f" {r.check}: {r.detail}"), highlight=False, soft_wrap=True)
    if not healthy:
        raise typer.Exit(9)


def register(root: typer.Typer) -> None:
    root.command("doctor")(doctor)
