"""Wiring between the engine and the real world: which inventory a cluster name means, the services
its steps use, and its lock (ZooKeeper when the cluster has one, so two operators on two machines
cannot roll the same cluster at once; a local lock file otherwise).

Imported by the CLI before any run starts, resumes or rolls back (``register_all``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kafkaops.errors import ConfigError
from kafkaops.inventory import DEFAULT_INVENTORY_DIR, load_inventory
from kafkaops.model import Cluster, Host

if TYPE_CHECKING:
    from kafkaops.engine.lock import LockBackend


def inventory_files() -> list[Path]:
    """Inventories searched for a cluster or host name: $KAFKAOPS_INVENTORY, then inventory/*.yaml."""
    files: list[Path] = []
    env = os.environ.get("KAFKAOPS_INVENTORY")
    if env:
        files.append(Path(env))
    files += sorted(p for p in DEFAULT_INVENTORY_DIR.glob("*.yaml") if ".example." not in p.name)
    return files


def find_cluster(name: str, inventory: Path | None = None) -> Cluster:
    """The cluster called ``name``: from ``inventory`` if given, else the first inventory that defines it."""
    if inventory is not None:
        cluster = load_inventory(inventory)
        if name != cluster.name:
            raise ConfigError(f"{inventory} describes cluster {cluster.name!r}, not {name!r}",
                              hint=f"use `{cluster.name}` or another --inventory")
        return cluster
    seen = []
    for path in inventory_files():
        cluster = load_inventory(path)
        if cluster.name == name:
            return cluster
        seen.append(cluster.name)
    raise ConfigError(f"unknown cluster {name!r}", hint=f"known clusters: {', '.join(seen) or 'none'}; "
                      "or pass --inventory FILE")


def find_host(name: str, inventory: Path | None = None) -> tuple[Cluster, Host]:
    """The host called ``name`` (short or FQDN) and its cluster."""
    from kafkaops.inventory import resolve_host

    if inventory is not None:
        cluster = load_inventory(inventory)
        return cluster, resolve_host(cluster, name)
    known: list[str] = []
    for path in inventory_files():
        cluster = load_inventory(path)
        host = cluster.host(name)
        if host is not None:
            return cluster, host
        known += [h.name for h in cluster.hosts]
    raise ConfigError(f"unknown host {name!r}", hint=f"known hosts: {', '.join(known) or 'none'}; "
                      "or pass --inventory FILE")


def _services(cluster_name: str, *, dry_run: bool = False) -> object:
    from kafkaops.steps.services import Services

    return Services(find_cluster(cluster_name))


def _lock(cluster_name: str) -> LockBackend:
    from kafkaops.engine.journal import kafkaops_home
    from kafkaops.engine.lock import FileLockBackend, ZooKeeperLockBackend

    try:
        cluster = find_cluster(cluster_name)
    except ConfigError:
        cluster = None
    if cluster is not None and cluster.zookeeper:
        return ZooKeeperLockBackend(cluster.zookeeper)
    return FileLockBackend(kafkaops_home() / "locks")


def register_all() -> None:
    """Register the step kinds and, unless a caller (a plugin, a test) already did, the factories."""
    import kafkaops.steps  # noqa: F401  - registers the step kinds
    from kafkaops.engine import context, lock

    if context._factory is None:
        context.set_context_factory(_services)  # type: ignore[arg-type]
    if lock._lock_factory is None:
        lock.set_lock_factory(_lock)
