"""A run's identity: which inventory it acts on, and a hash of everything of it the run depends on.

The runner journals :func:`identity` when a run starts (and a saved plan carries it). ``resume`` and
``apply`` rebuild the environment from that record and refuse, naming the difference, when the inventory
changed under the run: a resumed roll must act on the world it started on, or a host renamed, a
bootstrap moved or a command template edited would silently change what the half-done run does next.
The hash decides (:func:`digest` of :func:`dependencies`); the journaled copy (secret-named values
masked by the journal) only names the difference (:func:`environment_changes`).

Pure: data in, data out; :meth:`kafkaops.environment.Environment.from_identity` loads the inventory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkaops.errors import ConfigError, StalePlanError
from kafkaops.model import Cluster


class EnvironmentChanged(StalePlanError):
    """The inventory changed in something the run depends on since the run started (exit 8)."""


def dependencies(cluster: Cluster) -> dict[str, Any]:
    """Everything of the inventory a run depends on, as canonical JSON-able data.

    The whole cluster model except where it was read from: addresses, broker ids, bootstrap servers,
    ZooKeeper, etcd/conftool, SSH endpoints, services, pool tags and every command template.
    """
    data = dataclasses.asdict(cluster)
    data.pop("source", None)
    for name, default in _ADDED_LATER.items():
        if data.get(name) == default:
            data.pop(name)
    return json.loads(json.dumps(data, sort_keys=True, default=str))


#: Model fields added after runs and plans were already journaled, left out at their default value: a
#: run started by the previous kafkaops and resumed by this one (an upgrade mid-roll) depends on the same
#: inventory, and must not be refused as "changed: migrating: '<absent>' -> False".
_ADDED_LATER: dict[str, Any] = {"migrating": False}


def digest(deps: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(deps, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def identity(cluster: Cluster, inventory: Path | None, lock_label: str) -> dict[str, Any]:
    """What the journal records at run start: the inventory path, the cluster, the lock, and the hash
    (with the data) of everything the run depends on."""
    deps = dependencies(cluster)
    return {"inventory": str(inventory) if inventory else None, "cluster": cluster.name,
            "lock": lock_label, "sha256": digest(deps), "depends": deps}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, Mapping) and "name" in v for v in value):
        return _flatten({str(v["name"]): v for v in value}, prefix)
    return {prefix: value}


#: What the journal writes in place of a secret-named value (it never stores secrets).
_REDACTED = "***"


def environment_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between a journaled :func:`identity` and the current inventory, one line per key path
    (``bootstrap_servers: '127.0.10.1:9092' -> '127.0.10.9:9092'``).

    The hash decides; the journaled copy (secret-named values masked) names the difference."""
    deps = dict(current)
    if recorded.get("sha256") == digest(deps):
        return []
    old, new = _flatten(recorded.get("depends") or {}), _flatten(deps)
    lines = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, "<absent>"), new.get(key, "<absent>")
        if before != after and before != _REDACTED:
            lines.append(f"{key}: {before!r} -> {after!r}")
    return lines or ["a secret-named value (not journaled) changed"]


def recorded_inventory(recorded: Mapping[str, Any], *, for_plan: bool = False) -> str:
    """The inventory file a journaled (or planned) :func:`identity` names, checked to still exist.

    Raises:
        ConfigError: The record names none (an older kafkaops), or the file is gone.
    """
    path = recorded.get("inventory")
    what = "plan" if for_plan else "run"
    if not path:
        raise ConfigError(f"the {what} did not record its inventory (made by an older kafkaops)",
                          hint="re-create the plan" if for_plan else
                          "finish it with that version, or abort it and start a new run")
    if not Path(path).is_file():
        raise ConfigError(f"the run's inventory {path} is gone",
                          hint="restore it (the run acts on the cluster it describes)")
    return str(path)


def check_same_world(recorded: Mapping[str, Any], cluster: Cluster, path: Path | str, *,
                     accept_changes: bool = False, for_plan: bool = False) -> list[str]:
    """Compare the cluster loaded from ``path`` now with the run's (or plan's) recorded identity.

    Returns:
        The differences found (empty, or accepted with ``accept_changes``).

    Raises:
        ConfigError: ``path`` now describes another cluster.
        EnvironmentChanged: It changed in what the run depends on (without ``accept_changes``).
    """
    if cluster.name != recorded.get("cluster"):
        raise ConfigError(f"{path} now describes cluster {cluster.name!r}, not the run's "
                          f"{recorded.get('cluster')!r}", hint="restore the inventory the run started with")
    changes = environment_changes(recorded, dependencies(cluster))
    if changes and not accept_changes:
        listed = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
        since = "the plan was made" if for_plan else "the run started"
        raise EnvironmentChanged(
            f"the inventory {path} changed since {since}: {listed}",
            hint="review a fresh plan: re-run with --dry-run --save-plan FILE" if for_plan else
            "restore it, or pass --accept-inventory-change to go on with the new values (recorded in the journal)")
    return changes
