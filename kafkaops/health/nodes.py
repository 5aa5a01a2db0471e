"""What a Kafka node says about itself over SSH: the phase its configuration is written for, the cluster id
its storage is formatted with, whether its process runs.

Read by the migration and upgrade steps and by ``kafkaops status`` alike, so it lives below both (a step
module is no library: ``status`` must not import a step kind). Every answer is input: a node's output is
checked against what it may say before anything trusts it.
"""

from __future__ import annotations

import re

from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed
from kafkaops.model import Host

#: The configuration phases of a node (``kafka_configure {phase}``), as Kafka's guide lists them.
NODE_PHASES = ("zk", "migration", "kraft")
#: A Kafka cluster id: 16 bytes, base64url without padding.
CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def first_line(text: str) -> str:
    """The first non-blank line of a command's output, stripped (what a one-value template prints)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def configured_phase(env: Environment, host: Host) -> str:
    """The phase ``host``'s configuration is written for (``kafka_configured``), checked to be one we know:
    what a host prints is input, never trusted."""
    out = first_line(env.run(host, env.command(host, "kafka_configured"), timeout=30).stdout)
    if out not in NODE_PHASES:
        raise CheckFailed(f"{host.name}: kafka_configured printed {out[:60]!r}, not one of {', '.join(NODE_PHASES)}")
    return out


def storage_id(env: Environment, host: Host) -> str | None:
    """The cluster id ``host``'s Kafka storage is formatted with (None: not formatted)."""
    out = first_line(env.run(host, env.command(host, "kafka_storage_id"), timeout=30).stdout)
    if not out:
        return None
    if not CLUSTER_ID.match(out):
        raise CheckFailed(f"{host.name}: kafka_storage_id printed {out[:60]!r}, not a Kafka cluster id")
    return out


def kafka_running(env: Environment, host: Host) -> bool:
    """Whether ``host``'s Kafka process runs now (``kafka_status`` exits 0), a broker's or a controller's."""
    return env.run(host, env.command(host, "kafka_status"), timeout=30, check=False).exit_code == 0
