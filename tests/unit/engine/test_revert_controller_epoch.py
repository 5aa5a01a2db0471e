"""Issue 42.2: a revert killed with the quorum half down and resumed left the brokers' controller at epoch 5
while the partition states carried controller_epoch 6 (the KRaft controller writes them with its KRaft
epoch, KAFKA-20488); every state change it tried was refused and the brokers' roll back to ZooKeeper mode
stopped depooled. Against a real ZooKeeper, with the znodes as Kafka 3.9 leaves them mid-revert:

- ``migration.release_zookeeper``'s deletion of the KRaft controller's ``/controller`` raises
  ``/controller_epoch`` in the same transaction, so the broker elected next (Kafka's own election: the
  epoch read plus one) holds at least every partition state's epoch;
- the gate before the brokers' roll (:func:`~kafkaops.policy.migration.controller_fencing`) refuses a broker
  controller elected below them, which ``/controller`` naming a broker alone does not show.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_servers import Server, start_zookeeper

from kafkaops.policy.migration import controller_fencing
from kafkaops.systems.zookeeper import ZooKeeper


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_zookeeper(tmp_path_factory.mktemp("zookeeper-revert"))
    yield started
    started.stop()


def _mid_revert(zk: ZooKeeper, *, zk_epoch: int, kraft_epoch: int, states: dict[str, int]) -> None:
    """ZooKeeper as a migration leaves it once every KRaft controller is stopped: the KRaft controller's
    persistent /controller, /controller_epoch, /migration, and partition states written by dual-write."""
    client = zk.open()._zk
    for path in ("/controller", "/controller_epoch", "/migration", "/brokers"):
        if client.exists(path):
            client.delete(path, recursive=True)
    client.create("/controller_epoch", str(zk_epoch).encode())
    client.create("/controller", json.dumps({"version": 2, "brokerid": 3001, "timestamp": str(int(time.time() * 1000)),
                                             "kraftControllerEpoch": kraft_epoch}).encode())
    client.create("/migration", json.dumps({"version": 0, "kraft_controller_id": 3001}).encode())
    for name, epoch in states.items():
        topic, partition = name.rsplit("-", 1)
        client.create(f"/brokers/topics/{topic}/partitions/{partition}/state",
                      json.dumps({"controller_epoch": epoch, "leader": 1001, "version": 1, "leader_epoch": 10,
                                  "isr": [1001, 1002, 1003]}).encode(), makepath=True)


def _elect(zk: ZooKeeper, broker: int) -> int:
    """Kafka's election of a ZooKeeper-mode controller (KafkaZkClient.registerControllerAndIncrementController
    Epoch): the epoch read plus one, set at the version read, with /controller created, in one transaction."""
    client = zk.open()._zk
    value, stat = client.get("/controller_epoch")
    epoch = int(value) + 1
    change = client.transaction()
    change.create("/controller", json.dumps({"version": 2, "brokerid": broker, "timestamp": "0"}).encode(),
                  ephemeral=True)
    change.set_data("/controller_epoch", str(epoch).encode(), version=stat.version)
    assert not [r for r in change.commit() if isinstance(r, Exception)]
    return epoch


def _fencing(zk: ZooKeeper) -> str:
    return controller_fencing(zk.controller_record(), zk.controller_epoch(), zk.highest_partition_controller_epoch())


def test_the_release_raises_the_epoch_so_the_elected_broker_can_change_every_partition(server: Server) -> None:
    with ZooKeeper(server.address) as zk:
        _mid_revert(zk, zk_epoch=4, kraft_epoch=6, states={"lab.load-0": 6, "lab.load-1": 3, "other-0": 5})
        assert _fencing(zk) == "no broker is the controller"  # the KRaft controller's /controller
        assert zk.highest_partition_controller_epoch() == (6, "lab.load-0")
        assert zk.delete_migration_state() == ["/controller_epoch 4 -> 6", "/controller", "/migration"]
        assert zk.controller_epoch() == 6 and zk.controller_record() is None and zk.migration_record() is None
        assert _elect(zk, 1003) == 7
        assert _fencing(zk) == ""


def test_without_the_raise_the_gate_refuses_the_broker_controller_kafka_would_fence(server: Server) -> None:
    """What the killed revert left (elected at 5, states at 6): the gate names the epochs, the partition and
    the Kafka issue, where ``/controller`` alone names a broker and looks whole."""
    with ZooKeeper(server.address) as zk:
        _mid_revert(zk, zk_epoch=4, kraft_epoch=6, states={"lab.load-0": 6})
        zk.open()._zk.delete("/controller")  # a revert by hand: /controller deleted, the epoch left as it was
        assert _elect(zk, 1003) == 5
        fenced = _fencing(zk)
        assert "broker 1003 is the controller at epoch 5, below the epoch 6" in fenced, fenced
        assert "lab.load-0" in fenced and "KAFKA-20488" in fenced


def test_an_epoch_already_above_every_state_is_left_as_it_is(server: Server) -> None:
    with ZooKeeper(server.address) as zk:
        _mid_revert(zk, zk_epoch=9, kraft_epoch=6, states={"lab.load-0": 6})
        assert zk.delete_migration_state() == ["/controller", "/migration"]
        assert zk.controller_epoch() == 9 and _elect(zk, 1001) == 10 and _fencing(zk) == ""


def test_a_broker_controller_is_never_touched(server: Server, tmp_path: Path) -> None:
    """A revert resumed after the brokers elected: their /controller (no KRaft epoch) stays, and so does the
    epoch, whatever the states say (the gate, not this deletion, is what judges it then)."""
    with ZooKeeper(server.address) as zk:
        _mid_revert(zk, zk_epoch=4, kraft_epoch=6, states={"lab.load-0": 6})
        client = zk.open()._zk
        client.delete("/controller")
        client.delete("/migration")
        _elect(zk, 1002)
        assert zk.delete_migration_state() == []
        assert zk.controller_epoch() == 5 and (zk.controller_record() or {}).get("brokerid") == 1002
