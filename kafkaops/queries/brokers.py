"""The brokers as a run sees them: the cluster's snapshot and registrations as the steps planned before
will have left them, and whether taking one broker down keeps every partition online and at min ISR.

Shared by the step kinds that take a broker down (``kafka.stop_broker``, ``host.reboot``): the min-ISR
precondition is one function, asked by each just before its change.
"""

from __future__ import annotations

from kafkaops.engine.context import RunContext
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.facts.registrations import parse_endpoints
from kafkaops.model import ClusterSnapshot, Host
from kafkaops.policy.snapshot_scan import partition_name
from kafkaops.policy.stop_impact import stop_impact
from kafkaops.stepkit.common import environment, names
from kafkaops.stepkit.projection import (
    project_registered,
    project_snapshot,
)
from kafkaops.systems import command_config


def cluster_snapshot(ctx: RunContext, *, configs: bool = False) -> ClusterSnapshot:
    """Leaders/ISR always; topic configs (min ISR) only where a decision needs them. While planning, the
    cluster as the steps planned before will have left it (:mod:`kafkaops.stepkit.projection`)."""
    return project_snapshot(environment(ctx).snapshot(with_configs=configs), ctx)


def registered_brokers(ctx: RunContext) -> list[int]:
    return project_registered(environment(ctx).registered_brokers(), ctx)


def stop_keeps_min_isr(ctx: RunContext, broker: int, doing: str) -> str:
    """Refuse ``doing`` (which takes ``broker`` down) when, on a snapshot taken now, it would take a
    partition offline or below min ISR; else say so. The precondition of every step that takes a broker down."""
    impact = stop_impact(cluster_snapshot(ctx, configs=True), broker)
    hurt = [partition_name(p) for p in (*impact.goes_offline, *impact.below_min_isr)]
    if hurt:

        raise SafetyRefusal(f"{doing} now would take {len(hurt)} partition(s) offline or below "
                            f"min.insync.replicas: {names(hurt)}",
                            hint="wait until their ISR is complete again, then resume the run")
    return f"{doing} keeps every partition online and at min ISR ({len(impact.loses_isr_replica)} lose a replica)"


def registrations(env: Environment, target: Host) -> tuple[dict[int, str], Host]:
    """Every broker's registration state on KRaft, fenced ones too (``kafka_cluster list-endpoints
    --include-fenced-brokers``, :mod:`kafkaops.facts.registrations`), asked on a running broker other than
    ``target``; and that broker, the one ``unregister`` is sent from."""
    alive = set(env.registered_brokers())
    via = next((h for h in env.cluster.hosts if h.broker_id in alive and h.name != target.name), None)
    if via is None:
        raise CheckFailed(f"no running broker of {env.cluster.name} other than {target.name} to ask kafka-cluster on")
    command, stdin = command_config.wrap(env.cluster.kafka, env.command(via, "kafka_cluster",
                                                                         subcommand="list-endpoints"),
                                         subcommand="--include-fenced-brokers")
    return parse_endpoints(env.run(via, command, timeout=120, stdin=stdin).stdout), via


def unregister_command(env: Environment, via: Host, broker: int) -> tuple[str, bytes | None]:
    """``kafka_cluster unregister --id BROKER`` on ``via``, with its standard input (a secured cluster's client
    settings)."""
    return command_config.wrap(env.cluster.kafka, env.command(via, "kafka_cluster", subcommand="unregister"),
                               subcommand=f"--id {int(broker)}")
