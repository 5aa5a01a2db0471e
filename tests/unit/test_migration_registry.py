"""Which brokers count as registered during a migration to KRaft (issue 33).

Seen on the migration lab: a broker in KRaft mode is never in ZooKeeper's ``/brokers/ids``, and the quorum
kept listing a stopped migrating ZooKeeper-mode broker in the metadata for minutes. A stop confirmed from
the metadata alone would wait forever; from ZooKeeper alone, a KRaft broker would never count as started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace

from kafkaops.environment import Environment
from kafkaops.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
ENDPOINTS = {1001: ("127.0.90.1", 9092), 1002: ("127.0.90.2", 9092), 1003: ("127.0.90.3", 9092)}


class Probe:
    """Answers for the brokers told to answer; records whom it was asked about."""

    def __init__(self, answering: set[int]) -> None:
        self.answering, self.asked = answering, set[int]()

    def serving(self, endpoints: Mapping[int, tuple[str, int]], brokers: Iterable[int] | None = None) -> set[int]:
        wanted = set(endpoints if brokers is None else brokers)
        self.asked |= wanted
        return wanted & self.answering


def _registered(migrating: bool, in_zookeeper: list[int], answering: set[int]) -> tuple[set[int], set[int]]:
    cluster = load_inventory(REPO / "inventory" / "lab-migration.yaml")
    env = Environment(dataclasses.replace(cluster, migrating=migrating))
    probe = Probe(answering)
    env._probe = probe  # type: ignore[assignment]
    zk = SimpleNamespace(registered_brokers=lambda: list(in_zookeeper))
    return env._registered(zk, ENDPOINTS), probe.asked  # type: ignore[arg-type]


def test_a_kraft_broker_counts_when_it_answers_and_a_stopped_one_the_metadata_still_lists_does_not() -> None:
    # 1002 still in ZooKeeper mode; 1001 a KRaft broker (answers); 1003 stopped (listed, silent)
    registered, asked = _registered(True, [1002], {1001, 1002})
    assert registered == {1001, 1002}
    assert asked == {1001, 1003}  # a ZooKeeper registration needs no second opinion


def test_outside_a_migration_zookeeper_alone_decides() -> None:
    registered, asked = _registered(False, [1002], {1001, 1002, 1003})
    assert registered == {1002} and asked == set()
