"""A first inventory for a cluster kafkaops has never seen, from what the cluster says about itself.

``kafkaops inventory init`` asks the cluster (metadata, and each broker's ``broker.rack``,
``zookeeper.connect`` and quorum settings) and renders the inventory this module writes: what Kafka knows
filled in, and every key it cannot know — the hosts' DCs, SSH, pools, the command templates a site runs —
left out with a ``# TODO`` comment where it goes. Left out, not filled with a placeholder: ``kafkaops
inventory check`` then names each one (file:line) until an operator has written it, and a placeholder
can never reach a shell. Pure: the CLI does the asking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kafkaops.inventory import REQUIRED_COMMANDS


@dataclass(frozen=True)
class SeenBroker:
    """One broker as the cluster's metadata and configs describe it."""

    broker_id: int
    host: str  # its advertised listener's host
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class SeenCluster:
    """What the cluster said: its brokers, its controller, and where its metadata lives."""

    brokers: tuple[SeenBroker, ...]
    controller: int | None
    zookeeper: str | None = None  # a broker's zookeeper.connect (ZooKeeper mode)
    quorum: str | None = None  # controller.quorum.voters / bootstrap.servers (KRaft)


def _short(host: str) -> str:
    return host.split(".", 1)[0] if not host.replace(".", "").isdigit() else host


def draft(name: str, seen: SeenCluster, *, security: Mapping[str, Any] | None = None, asked: str = "",
          when: str = "") -> str:
    """The inventory text: YAML with comments, ``# TODO`` where an operator must write what Kafka cannot know."""
    brokers = sorted(seen.brokers, key=lambda b: b.broker_id)
    lines = [
        f"# Inventory of cluster {name}: drafted by `kafkaops inventory init` {when},",
        f"# from what the cluster said through {asked}: its brokers, their racks, the controller and where",
        "# its metadata lives. The lines marked TODO are what Kafka cannot know: write them, then run",
        "# `kafkaops inventory check FILE` until it says ok (`kafkaops docs inventory` describes every key).",
        "# Keys, types and descriptions in an editor, as you type: `kafkaops inventory schema --help`.",
        f"cluster: {name}",
        "environment: production",
        "kafka:",
        f"  bootstrap_servers: {','.join(f'{b.host}:{b.port}' for b in brokers)}",
    ]
    if seen.zookeeper:
        lines.append(f"  zookeeper: {seen.zookeeper}   # from the brokers' zookeeper.connect")
    elif seen.quorum:
        lines.append(f"  # KRaft: the quorum is {seen.quorum} (controller.quorum.*); list its controller nodes "
                     "under controllers: (TODO)")
    if security:
        block = yaml.safe_dump({"security": dict(security)}, default_flow_style=False, sort_keys=False)
        lines += ["  " + line for line in block.rstrip().splitlines()]
    lines += [
        "# TODO: how this site does each thing on a host, e.g. kafka_stop: sudo -n systemctl stop kafka",
        f"#   (required: {', '.join(REQUIRED_COMMANDS)}; `kafkaops docs inventory`)",
        "# commands:",
        "# ssh: TODO (user, port, key: `kafkaops docs inventory`)",
        "# conftool: TODO (etcd, config: the pools the hosts are depooled from)",
        "hosts:",
    ]
    for b in brokers:
        controller = ", the controller when asked" if b.broker_id == seen.controller else ""
        lines += [
            f"  {_short(b.host)}:   # broker {b.broker_id}{controller}",
            f"    fqdn: {b.host}",
            f"    address: {b.host}   # the advertised listener's host; SSH and the SYN gate use it",
            f"    broker_id: {b.broker_id}",
        ]
        lines.append(f"    rack: {b.rack}   # from broker.rack" if b.rack else "    # rack: TODO (no broker.rack set)")
        lines.append("    # dc: TODO (the data centre this host is in)")
    return "\n".join(lines) + "\n"


def seen_from(metadata: Any, settings: Mapping[int, Mapping[str, str]]) -> SeenCluster:
    """A :class:`SeenCluster` from an AdminClient metadata answer and the brokers' settings."""
    brokers = tuple(SeenBroker(int(b.id), str(b.host), int(b.port), settings.get(int(b.id), {}).get("broker.rack"))
                    for b in metadata.brokers.values())
    values: Sequence[Mapping[str, str]] = list(settings.values())
    zookeeper = next((s["zookeeper.connect"] for s in values if s.get("zookeeper.connect")), None)
    quorum = next((s.get("controller.quorum.voters") or s.get("controller.quorum.bootstrap.servers")
                   for s in values if s.get("controller.quorum.voters")
                   or s.get("controller.quorum.bootstrap.servers")), None)
    controller = int(metadata.controller_id) if metadata.controller_id is not None and metadata.controller_id >= 0 \
        else None
    return SeenCluster(brokers, controller, zookeeper=zookeeper if not quorum or zookeeper else None, quorum=quorum)


#: The broker configs a draft reads.
SETTINGS = ("broker.rack", "zookeeper.connect", "controller.quorum.voters", "controller.quorum.bootstrap.servers")
