"""The migration lab's node configurations (issue 33): each phase of Kafka's ZooKeeper → KRaft migration
as the operations guide writes it, from ``inventory/lab-migration.yaml``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.lab import configs
from kafkaops.lab.paths import host_dirs
from kafkaops.lab.spec import LabSpec, from_inventory

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec() -> LabSpec:
    return from_inventory(load_inventory(REPO / "inventory" / "lab-migration.yaml"))


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
    assert "CONTROLLER:PLAINTEXT" in mig["listener.security.protocol.map"]
    assert mig["zookeeper.connect"] == spec.zk_connect and mig["inter.broker.protocol.version"] == "3.9"

    kraft = _props(spec, "kafka-mig1001", "kraft")
    assert kraft["process.roles"] == "broker" and kraft["node.id"] == "1001"  # the same id, as node.id
    assert not {"broker.id", "zookeeper.connect", "zookeeper.metadata.migration.enable",
                "inter.broker.protocol.version"} & set(kraft)
    assert kraft["log.dirs"] == zk["log.dirs"]  # the same data: the partitions stay where they are


def test_a_controller_writes_to_zookeeper_until_finalized_and_has_no_zookeeper_phase(spec: LabSpec) -> None:
    mig = _props(spec, "kafka-mctl3002", "migration")
    assert mig["process.roles"] == "controller" and mig["node.id"] == "3002"
    assert mig["zookeeper.metadata.migration.enable"] == "true" and mig["zookeeper.connect"] == spec.zk_connect
    assert mig["inter.broker.listener.name"] == "PLAINTEXT"  # it sends the ZooKeeper brokers their RPCs
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
