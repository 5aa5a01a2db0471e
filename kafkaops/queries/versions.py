"""Kafka releases: which one each node runs, which are behind a target, and the feature levels
(``kafka-features``). Asked by the upgrade's steps and by ``kafkaops upgrade status``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, KafkaOpsError
from kafkaops.model import Host
from kafkaops.stepkit.common import first_line
from kafkaops.systems import command_config

_VERSION = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,3}$")


def check_version(value: Any) -> str | None:
    """Why ``value`` is not a Kafka release (``4.3.1``), or None."""
    if not isinstance(value, str) or not _VERSION.match(value):
        return f"{value!r} is not a Kafka release version (MAJOR.MINOR.PATCH, e.g. 4.3.1)"
    return None


def installed_version(env: Environment, host: Host) -> str:
    """The Kafka release installed on ``host`` (``kafka_version``), checked to be one: input, not trusted."""
    out = first_line(env.run(host, env.command(host, "kafka_version"), timeout=60).stdout)
    if check_version(out):
        raise CheckFailed(f"{host.name}: kafka_version printed {out[:40]!r}, not a Kafka release version")
    return out


def nodes(env: Environment) -> list[Host]:
    """Every node of the cluster: the KRaft controllers, then the brokers."""
    return list(env.cluster.controllers) + list(env.cluster.hosts)


def versions(env: Environment) -> dict[str, str]:
    """Each node's installed Kafka release, by node name."""
    return {h.name: installed_version(env, h) for h in nodes(env)}


def behind(installed: Mapping[str, str], want: str) -> list[str]:
    """The nodes (by name, sorted) whose installed release is not ``want``."""
    return sorted(n for n, v in installed.items() if v != want)


def features(env: Environment, args: str, *, change: bool = False) -> str:
    """``kafka_features`` (Kafka's ``kafka-features``) with ``args``, asked of the controllers in turn until
    one answers: the quorum is asked, not a member."""
    failures = []
    for node in env.cluster.controllers:
        command, stdin = command_config.wrap(env.cluster.kafka, env.command(node, "kafka_features"), subcommand=args)
        try:
            result = (env.change(node, command, timeout=120, check=False, stdin=stdin) if change
                      else env.run(node, command, timeout=120, check=False, stdin=stdin))
        except KafkaOpsError as exc:
            failures.append(f"{node.name}: {exc.message}")
            continue
        if result.exit_code == 0:
            return result.stdout
        failures.append(f"{node.name}: exit {result.exit_code} {first_line(result.stderr or result.stdout)[:120]}")
    raise CheckFailed(f"no controller answered kafka-features {args.split()[0]}: " + "; ".join(failures),
                      hint="check the controllers are up and the inventory's kafka_features template")
