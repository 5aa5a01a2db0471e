"""``kafkaops doctor``: what an operator runs first on a new admin host.

One line per check — the version and where the package is, where configuration, state, locks and the
cache live, which inventories were found (and which place is in use) with their clusters, SSH config and
known hosts, whether each cluster's Kafka, ZooKeeper and etcd answer, Java and Spark, the post-check's
reader — so a missing piece is found before the first maintenance, not in the middle of it. Each check is
``ok``, ``warn`` or ``FAIL``: a warning is what a plan-only host may lack (Java, Spark, the post-check's
reader: only the post-check's data scan needs them, ``--no-scan`` runs without) or an example inventory
that is never used; it does not change the exit code. Exit 0 when nothing failed, 9 (a check failed)
otherwise; ``-o json`` for configuration management to assert on.

The network checks only open a TCP connection (3 s each, all at once): enough to tell "a firewall is in
the way" from "it works", and nothing is asked of a production system. Nothing is written anywhere.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from kafkaops.cli.common import TableOrJson, console, print_json
from kafkaops.systems.programs import version_line
from kafkaops.systems.tcp import refusal

#: Seconds each TCP check waits for an answer.
CONNECT_TIMEOUT = 3.0


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


def _connect(endpoints: Iterable[tuple[str, int]]) -> tuple[bool, str]:
    """Does any of ``endpoints`` accept a TCP connection? (which one, or why none)"""
    errors = []
    for host, port in endpoints:
        why = refusal(host, port, CONNECT_TIMEOUT)
        if why is None:
            return True, f"{host}:{port} answers"
        errors.append(f"{host}:{port}: {why}")
    return False, "; ".join(errors) or "no address"


def _host_ports(spec: str, default_port: int) -> list[tuple[str, int]]:
    """``a:9092,b:9092`` or ``zk1:2181,zk2:2181/chroot`` or URLs -> [(host, port)]."""
    out = []
    for item in spec.split("/", 1)[0].split(",") if "://" not in spec else spec.split(","):
        item = item.strip()
        if not item:
            continue
        parsed = urlsplit(item if "://" in item else f"//{item}")
        out.append((parsed.hostname or item, parsed.port or default_port))
    return out


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
        checks.append(lambda: Result("inventories", False, f"none found; searched {searched} "
                                     f"(put one in {places.inventory_dirs()[0]}/ or {places.inventory_dirs()[1]}/)"))
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
    checks: list[Callable[[], Result]] = []
    for c in clusters:
        checks.append(partial(_reach, f"kafka {c.name}", _host_ports(c.bootstrap_servers, 9092)))
        if c.zookeeper:
            checks.append(partial(_reach, f"zookeeper {c.name}", _host_ports(c.zookeeper, 2181)))
        if c.etcd or c.conftool_config:
            checks.append(partial(_etcd, c))
    return checks


def _reach(name: str, endpoints: list[tuple[str, int]]) -> Result:
    return Result(name, *_connect(endpoints))


def _etcd(cluster: Any) -> Result:
    name = f"etcd {cluster.name}"
    hosts: list[str] = [cluster.etcd] if cluster.etcd else []
    if cluster.conftool_config:
        import yaml

        try:
            with open(cluster.conftool_config) as f:
                hosts = list((yaml.safe_load(f) or {}).get("hosts") or []) or hosts
        except (OSError, yaml.YAMLError) as exc:
            return Result(name, False, f"cannot read conftool config {cluster.conftool_config}: {exc}")
    endpoints = [hp for h in hosts for hp in _host_ports(str(h), 2379)]
    return Result(name, *_connect(endpoints))


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
    clusters, SSH known hosts, Kafka/ZooKeeper/etcd reachable per cluster, Java, Spark, the post-check's reader.

    One line per check, ok / warn / FAIL; exit 0 when none failed (a warning fails nothing), 9 otherwise.
    """
    inventory_checks, clusters = _inventory_checks()
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
