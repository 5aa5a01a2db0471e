"""Which inventory a name on the command line means, and the run environment built from it.

``-i FILE`` (on the root command or a subcommand) restricts every lookup to that file: a host or cluster
name is never found in another inventory behind the operator's back. Without it, ``$KAFKAOPS_INVENTORY``
then ``inventory/*.yaml`` are searched, and a name defined by two inventories is an error naming both,
never the alphabetically first one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafkaops.errors import ConfigError, UnknownHostError
from kafkaops.inventory import DEFAULT_INVENTORY_DIR, load_inventory
from kafkaops.model import Cluster, Host


def inventory_files(inventory: Path | None = None) -> list[Path]:
    """The inventories a name is looked up in: only ``inventory`` when given (``-i``), else
    ``$KAFKAOPS_INVENTORY`` alone when set (the root ``-i`` sets it), else ``inventory/*.yaml``."""
    if inventory is not None:
        return [Path(inventory)]
    env = os.environ.get("KAFKAOPS_INVENTORY")
    if env:
        return [Path(env)]
    return sorted(p for p in DEFAULT_INVENTORY_DIR.glob("*.yaml") if ".example." not in p.name)


def _loaded(inventory: Path | None) -> list[Cluster]:
    return [load_inventory(p) for p in inventory_files(inventory)]


def find_cluster(name: str, inventory: Path | None = None) -> Cluster:
    """The cluster called ``name``, from exactly one inventory."""
    clusters = _loaded(inventory)
    found = [c for c in clusters if c.name == name]
    if len(found) > 1:
        raise ConfigError(f"cluster {name!r} is defined by {found[0].source} and {found[1].source}",
                          hint="pass --inventory FILE to say which")
    if not found:
        known = ", ".join(sorted(c.name for c in clusters)) or "none"
        where = f" in {clusters[0].source}" if len(clusters) == 1 else ""
        raise ConfigError(f"unknown cluster {name!r}{where}",
                          hint=f"known clusters: {known}" + ("" if inventory else "; or pass --inventory FILE"))
    return found[0]


def find_host(name: str, inventory: Path | None = None) -> tuple[Cluster, Host]:
    """The host called ``name`` (short name or FQDN) and its cluster, from exactly one inventory."""
    clusters = _loaded(inventory)
    found = [(c, h) for c in clusters if (h := c.host(name)) is not None]
    if len(found) > 1:
        raise ConfigError(f"host {name!r} is defined by {found[0][0].source} and {found[1][0].source}",
                          hint="pass --inventory FILE to say which")
    if not found:
        known = ", ".join(h.name for c in clusters for h in c.hosts) or "none"
        where = f" in {clusters[0].source}" if len(clusters) == 1 else ""
        raise UnknownHostError(f"unknown host {name!r}{where}",
                               hint=f"known hosts: {known}" + ("" if inventory else "; or pass --inventory FILE"))
    return found[0]


def environment(cluster: Cluster, **kwargs: Any) -> Any:
    """The run environment of ``cluster`` (from the inventory file it was loaded from)."""
    from kafkaops.environment import Environment

    return Environment(cluster, inventory=cluster.source, **kwargs)
