"""The migration lab's node configurations (issue 33): each phase of Kafka's ZooKeeper → KRaft migration
as the operations guide writes it, from ``inventory/lab-migration.yaml``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops_lab import configs
from kafkaops_lab.dirs import host_dirs, lab_dir_env
from kafkaops_lab.spec import LabSpec, from_inventory

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabSpec]:
    """The migration lab's spec, its lab directory holding the passwords ``lab up`` writes (a secured
    node's configuration names them)."""
    base = tmp_path_factory.mktemp("lab-migration")
    (base / "secrets").mkdir(mode=0o700)
    for user in ("broker", "kafkaops"):
        secret = base / "secrets" / f"{user}.password"
        secret.write_text(f"{user}-password-0123456789\n")
        secret.chmod(0o600)
    env = lab_dir_env("lab-migration")
    before = os.environ.get(env)
    os.environ[env] = str(base)
    try:
        yield from_inventory(load_inventory(REPO / "inventory" / "lab-migration.yaml"))
    finally:
        if before is None:
            del os.environ[env]
        else:
            os.environ[env] = before


def _props(spec: LabSpec, name: str, phase: str) -> dict[str, str]:
    h = spec.host(name)
    text = configs.migration_properties(spec, h, host_dirs(h.name, Path(spec.lab_dir)), phase)
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_the_inventory_is_a_zookeeper_cluster_migrating_to_its_controllers(spec: LabSpec) -> None:
    cluster = load_inventory(REPO / "inventory" / "lab-migration.yaml")
    assert cluster.migrating and not cluster.kraft and cluster.zookeeper == "127.0.90.10:2181"
    assert [c.broker_id for c in cluster.controllers] == [3001, 3002, 3003]
    assert spec.migration and not spec.kraft and spec.kafka_jars.endswith("/kafka")  # Kafka 3.9: the bridge release
    assert spec.quorum_voters == "3001@127.0.90.4:9093,3002@127.0.90.5:9093,3003@127.0.90.6:9093"


def test_a_broker_goes_from_zookeeper_to_migration_to_kraft_keeping_its_id(spec: LabSpec) -> None:
    zk = _props(spec, "kafka-mig1001", "zk")
    assert zk["broker.id"] == "1001" and zk["zookeeper.connect"] == spec.zk_connect
    assert zk["inter.broker.protocol.version"] == "3.9"  # pinned before the migration: it must not change
    assert "zookeeper.metadata.migration.enable" not in zk and "process.roles" not in zk

    mig = _props(spec, "kafka-mig1001", "migration")
    assert mig["zookeeper.metadata.migration.enable"] == "true" and mig["broker.id"] == "1001"
    assert mig["controller.quorum.voters"] == spec.quorum_voters and mig["controller.listener.names"] == "CONTROLLER"
    # Secured (docs/security.md): the controller listener is SASL_SSL too, PLAIN between the nodes.
    assert mig["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL"
    assert mig["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert zk["authorizer.class.name"].endswith("AclAuthorizer")
    assert mig["zookeeper.connect"] == spec.zk_connect and mig["inter.broker.protocol.version"] == "3.9"

    kraft = _props(spec, "kafka-mig1001", "kraft")
    assert kraft["process.roles"] == "broker" and kraft["node.id"] == "1001"  # the same id, as node.id
    assert not {"broker.id", "zookeeper.connect", "zookeeper.metadata.migration.enable",
                "inter.broker.protocol.version"} & set(kraft)
    assert kraft["log.dirs"] == zk["log.dirs"]  # the same data: the partitions stay where they are
    # KRaft's authorizer, reading the ACLs the migration copied; the same super user as before.
    assert kraft["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert kraft["super.users"] == zk["super.users"] == "User:broker"
    assert kraft["security.inter.broker.protocol"] == "SASL_SSL" and "inter.broker.listener.name" not in kraft


def test_a_controller_writes_to_zookeeper_until_finalized_and_has_no_zookeeper_phase(spec: LabSpec) -> None:
    mig = _props(spec, "kafka-mctl3002", "migration")
    assert mig["process.roles"] == "controller" and mig["node.id"] == "3002"
    assert mig["zookeeper.metadata.migration.enable"] == "true" and mig["zookeeper.connect"] == spec.zk_connect
    assert mig["inter.broker.listener.name"] == "SASL_SSL"  # it sends the ZooKeeper brokers their RPCs
    # No ACL is in the metadata log until the migration copies ZooKeeper's: kafkaops asks the controllers
    # DescribeQuorum before that, as a super user of the controllers only.
    assert mig["super.users"] == "User:broker;User:kafkaops"
    assert mig["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert mig["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512"
    final = _props(spec, "kafka-mctl3002", "kraft")
    assert not {k for k in final if k.startswith("zookeeper.")}, final
    with pytest.raises(ValueError, match="no 'zk' configuration for a controller"):
        _props(spec, "kafka-mctl3002", "zk")
    assert configs.initial_phase(spec.host("kafka-mctl3002")) == "migration"
    assert configs.initial_phase(spec.host("kafka-mig1002")) == "zk"


def test_controllers_beside_zookeeper_need_the_migration_said(tmp_path: Path) -> None:
    text = (REPO / "inventory" / "lab-migration.yaml").read_text()
    bad = tmp_path / "no-migration.yaml"
    bad.write_text(text.replace("  migration: to-kraft\n", ""))
    with pytest.raises(ConfigError, match=r"kafka\.migration: to-kraft"):
        load_inventory(bad)
    odd = tmp_path / "odd.yaml"
    odd.write_text(text.replace("migration: to-kraft", "migration: sideways"))
    with pytest.raises(ConfigError, match="expected to-kraft"):
        load_inventory(odd)
