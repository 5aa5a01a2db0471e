"""Which inventory a name on the command line means (for the CLI and :mod:`kafkaops.procedure`); the run
environment of the cluster found is :meth:`kafkaops.environment.Environment.of`.

``-i FILE`` (on the root command or a subcommand) restricts every lookup to that file (or directory): a
host or cluster name is never found in another inventory behind the operator's back. Without it,
``$KAFKAOPS_INVENTORY``, then the first of ``$XDG_CONFIG_HOME/kafkaops/inventory/`` and
``/etc/kafkaops/inventory/`` that holds any (:mod:`kafkaops.places`); a name defined by two inventories is
an error naming both, never the alphabetically first one. Never the lab's inventories (``kafkaops lab``
names its own).
"""

from __future__ import annotations

from pathlib import Path

from kafkaops.errors import ConfigError, UnknownHostError
from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster, Host
from kafkaops.places import inventory_files as inventory_files  # re-exported: the commands import it from here


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
