"""Where a ZooKeeper → KRaft migration stands: the quorum's leader, the migration's view of the cluster
and the phase judged from it. Asked by the migration's steps, by ``kafkaops migration status``, by the
upgrade's gate and by the procedure (the active controller goes last)."""

from __future__ import annotations

from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, ConfigError, KafkaOpsError, UnreachableError
from kafkaops.health.nodes import configured_phase, storage_id
from kafkaops.policy.migration import (
    MigrationView,
    phase,
)
from kafkaops.policy.quorum import judge


def quorum_leader(env: Environment) -> int | None:
    """The KRaft quorum's leader, or None while there is no quorum (no controller answers, or none leads)."""

    try:
        return judge(env.quorum().replication()).leader_id
    except KafkaOpsError:
        return None


def migration_view(env: Environment) -> MigrationView:
    """Everything the phase is judged from, read now: each broker's and each provisioned controller's
    configuration phase (over SSH), ZooKeeper's ``/controller`` and ``/migration``, the quorum's leader.
    ZooKeeper unreachable is an error, unless a controller already runs without it (finalizing, finalized:
    judged from the nodes alone — ZooKeeper may have been stopped, as the guide's last step says).

    Raises:
        ConfigError: The cluster is not being migrated (no ``kafka.migration: to-kraft``) or lists no
            controllers.
    """
    cluster = env.cluster
    if not cluster.migrating or not cluster.controllers:
        raise ConfigError(f"{cluster.name} is not being migrated to KRaft",
                          hint=f"in {cluster.source}: kafka.migration: to-kraft, and the quorum under controllers: "
                               "(`kafkaops docs migration`)")
    brokers = {h.broker_id: configured_phase(env, h) for h in cluster.hosts}
    provisioned = [c for c in cluster.controllers if storage_id(env, c) is not None]
    controllers = {c.broker_id: configured_phase(env, c) for c in provisioned}
    try:
        with env.zookeeper() as zk:
            record = zk.controller_record() if zk is not None else None
            migration = zk.migration_record() if zk is not None else None
    except UnreachableError:
        # Once a controller runs without ZooKeeper the phase is judged from the nodes alone, and ZooKeeper may
        # be gone (the guide's last step stops it). Before that, what ZooKeeper holds decides the phase.
        if "kraft" not in controllers.values():
            raise
        record = migration = None
    # Fewer than a majority of the voters provisioned cannot have elected a leader: not asked (each ask of a
    # quorum that is not there waits out kafka-metadata-quorum's timeouts, node after node).
    leader = quorum_leader(env) if len(provisioned) > len(cluster.controllers) // 2 else None
    return MigrationView(brokers, controllers, record, migration, leader)


def judge_phase(view: MigrationView) -> str:
    """:func:`~kafkaops.policy.migration.phase`, a view no migration can produce refused as a check."""
    try:
        return phase(view)
    except ValueError as exc:
        raise CheckFailed(f"the cluster is in no phase of a migration: {exc}") from None
