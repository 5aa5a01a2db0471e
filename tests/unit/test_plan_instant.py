"""A plan is made of one instant of the cluster (issue 47): inside ``Environment.one_instant()`` every snapshot
is the first one, outside it every snapshot asks the cluster again — a run's gates never see an old answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkaops.environment import Environment
from kafkaops.inventory import load_inventory
from kafkaops.model import ClusterSnapshot, PartitionState

REPO = Path(__file__).resolve().parents[2]

#: The inventory names the lab's CA and password files: a directory of the test's own holds them.
pytestmark = pytest.mark.usefixtures("lab_secrets")


class CountingKafka:
    """Kafka's metadata as a counter: each snapshot a new instant (its ``taken_at`` is the call's number)."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        self.calls.append(with_configs)
        return ClusterSnapshot(cluster="lab-kraft", taken_at=float(len(self.calls)), brokers=(1, 2, 3),
                               controller=None, partitions=(PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3)),),
                               endpoints={b: (f"127.0.50.{b}", 9092) for b in (1, 2, 3)})


class AllServe:
    def serving(self, endpoints: Any, brokers: Any) -> set[int]:
        return set(brokers)


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    # KRaft: no ZooKeeper registrations or controller view to read, only Kafka's metadata and the probe.
    made = Environment(load_inventory(REPO / "inventory" / "lab-kraft.yaml"), home=tmp_path, dry_run=True)
    made._kafka = CountingKafka()  # type: ignore[assignment]
    made._probe = AllServe()  # type: ignore[assignment]
    return made


def test_inside_one_instant_every_snapshot_is_the_first(env: Environment) -> None:
    kafka: Any = env._kafka
    with env.one_instant():
        first = env.snapshot()
        assert env.snapshot() is first
        assert env.snapshot(with_configs=False) is first  # the configs' snapshot answers the one without
    assert kafka.calls == [True]


def test_outside_it_every_snapshot_asks_again(env: Environment) -> None:
    kafka: Any = env._kafka
    with env.one_instant():
        pinned = env.snapshot()
    after = env.snapshot()
    assert after is not pinned and after.taken_at == 2.0
    assert env.snapshot().taken_at == 3.0
    assert kafka.calls == [True, True, True]


def test_an_instant_without_configs_asks_again_for_them(env: Environment) -> None:
    kafka: Any = env._kafka
    with env.one_instant():
        bare = env.snapshot(with_configs=False)
        full = env.snapshot()
        assert full is not bare and env.snapshot() is full and env.snapshot(with_configs=False) is bare
    assert kafka.calls == [False, True]
