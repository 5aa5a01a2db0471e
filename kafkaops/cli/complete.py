"""Shell completion of the names an operator types most: clusters, hosts and run ids.

Each answers from what is on this admin host — the inventories in use (as a command would find them,
:func:`kafkaops.places.inventory_files`) and the runs directory — never from a cluster: completion runs on
every Tab and must answer at once. A broken inventory completes nothing instead of failing the shell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _inventories() -> list[Any]:
    from kafkaops.errors import KafkaOpsError
    from kafkaops.inventory import load_inventory
    from kafkaops.places import inventory_files

    try:
        files = inventory_files(None)
    except KafkaOpsError:
        return []
    out = []
    for f in files:
        try:
            cluster = load_inventory(f)
        except KafkaOpsError:
            continue
        out += list(cluster.sites.values()) if cluster.multi_site else [cluster]
        if cluster.multi_site:
            out.append(cluster)
    return out


def clusters(incomplete: str) -> list[str]:
    """Cluster names of the inventories in use that start with ``incomplete``."""
    return sorted({c.name for c in _inventories() if c.name and c.name.startswith(incomplete)})


def hosts(incomplete: str) -> list[str]:
    """Host names (brokers and KRaft controllers) of the inventories in use that start with ``incomplete``."""
    return sorted({h.name for c in _inventories() for h in (*c.hosts, *c.controllers)
                   if h.name.startswith(incomplete)})


def runs(incomplete: str) -> list[str]:
    """Run ids under ``$KAFKAOPS_HOME/runs``, newest first, that start with ``incomplete``."""
    from kafkaops.engine.state_files import runs_dir

    directory = runs_dir()
    if not directory.is_dir():
        return []
    found = [p.name for p in directory.iterdir() if p.is_dir() and p.name.startswith(incomplete)]
    return sorted(found, reverse=True)  # run ids begin with their start time: newest first


def for_target(kind: str) -> Callable[[Any, Any, str], list[str]]:
    """The completion of a generated procedure command's TARGET (a click ``shell_complete``): a host or a
    cluster, as its runbook's command declares."""
    names = hosts if kind == "host" else clusters
    return lambda ctx, param, incomplete: names(incomplete)
