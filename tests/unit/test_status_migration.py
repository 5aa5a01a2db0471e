"""``kafkaops status`` of a cluster whose migration to KRaft is finalized while its inventory still names
ZooKeeper (issue 41, item 8): the controllers' quorum is shown (it is the cluster's controller now), and a
line says the inventory still needs its edit, naming the keys. Judged from the controllers' configured
phases (``kafka_configured``), as :func:`kafkaops.policy.migration.phase` judges ``finalized``: facts given
in memory here, no lab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkaops.health import status as status_mod
from kafkaops.inventory import load_inventory
from kafkaops.model import ClusterSnapshot, PartitionState

REPO = Path(__file__).resolve().parents[2]
CONTROLLERS = ("kafka-mctl3001", "kafka-mctl3002", "kafka-mctl3003")


@pytest.fixture
def migrating() -> Any:
    return load_inventory(REPO / "inventory" / "lab-migration.yaml")


def test_every_controller_without_zookeeper_is_finalized_and_the_inventory_edit_is_named(migrating: Any) -> None:
    seen = status_mod.judge_migration(migrating, {c: "kraft" for c in CONTROLLERS}, {})
    assert seen["phase"] == "finalized" and seen["quorum"]
    edit = seen["inventory_edit"]
    assert "\n" not in edit
    assert str(REPO / "inventory" / "lab-migration.yaml") in edit
    assert "still names ZooKeeper (kafka.zookeeper: 127.0.90.10:2181)" in edit
    assert "remove kafka.zookeeper and kafka.migration" in edit and "keep controllers:" in edit


def test_a_finalizing_quorum_is_shown_but_no_edit_is_asked_for_yet(migrating: Any) -> None:
    seen = status_mod.judge_migration(
        migrating, {"kafka-mctl3001": "kraft", "kafka-mctl3002": "kraft", "kafka-mctl3003": "migration"}, {})
    assert seen["phase"] == "finalizing" and seen["quorum"] and not seen["inventory_edit"]
    # A controller that did not answer may still be in migration mode: not finalized, whatever the others say.
    seen = status_mod.judge_migration(migrating, {"kafka-mctl3001": "kraft", "kafka-mctl3002": "kraft"},
                                      {"kafka-mctl3003": "ssh: connection refused"})
    assert seen["phase"] == "finalizing" and not seen["inventory_edit"]
    assert "kafka-mctl3003" in seen["note"] and "connection refused" in seen["note"]


def test_before_finalizing_status_stays_the_zookeeper_clusters(migrating: Any) -> None:
    for phases in ({c: "migration" for c in CONTROLLERS}, {}):
        seen = status_mod.judge_migration(migrating, phases, {})
        assert seen["phase"] is None and not seen["quorum"] and not seen["inventory_edit"] and not seen["note"]


class _Admin:
    """The finalized cluster's brokers: every partition in sync (KRaft brokers; a random one named controller)."""

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        parts = tuple(PartitionState("t", i, 1001 + i, (1001 + i, 1002, 1003), (1001 + i, 1002, 1003))
                      for i in range(2))
        return ClusterSnapshot(cluster="lab-migration", taken_at=0.0, brokers=(1001, 1002, 1003), controller=1002,
                               partitions=parts, topics={})

    def with_configs(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        return snap


def _quorum(caught_up: bool) -> dict[str, Any]:
    voters = [{"node_id": 3001 + i, "host": name, "leader": i == 0, "lag": 0 if caught_up or i == 0 else 900,
               "behind_ms": 0, "caught_up": caught_up or i == 0, "log_end_offset": 5000, "last_fetch_ms": 0,
               "last_caught_up_ms": 0} for i, name in enumerate(CONTROLLERS)]
    return {"error": "", "asked": CONTROLLERS[0], "leader": 3001, "epoch": 7, "high_watermark": 5000,
            "max_follower_lag": 0, "voters": voters, "observers": []}


def _collect(monkeypatch: pytest.MonkeyPatch, cluster: Any, phases: dict[str, str],
             quorum: dict[str, Any]) -> dict[str, Any]:
    from kafkaops.systems.kafka import KafkaAdmin

    monkeypatch.setattr(KafkaAdmin, "look", classmethod(lambda cls, c, timeout=5.0: _Admin()))
    monkeypatch.setattr(status_mod, "_pool_states", lambda c: ({}, ""))
    monkeypatch.setattr(status_mod, "alerts_state", lambda c: None)
    # raising=False: on the code before the fix there is no such reader, and the assertions say what is missing.
    monkeypatch.setattr(status_mod, "controller_phases", lambda c: (phases, {}), raising=False)
    monkeypatch.setattr(status_mod, "quorum_state", lambda c: quorum)
    return status_mod.collect(cluster)


def test_status_of_a_finalized_migration_shows_the_quorum_and_the_edit(monkeypatch: pytest.MonkeyPatch,
                                                                       migrating: Any) -> None:
    from kafkaops.cli.status import _notes, to_markdown

    data = _collect(monkeypatch, migrating, {c: "kraft" for c in CONTROLLERS}, _quorum(caught_up=True))
    assert data["healthy"]
    assert data["quorum"]["leader"] == 3001 and data["controller"] == 3001
    assert not any(b["controller"] for b in data["brokers"])  # a KRaft broker is never the controller
    notes = dict(_notes(data))
    assert "remove kafka.zookeeper and kafka.migration" in notes["inventory"]
    text = to_markdown(data)
    assert "metadata quorum (KRaft): leader 3001 (epoch 7)" in text
    assert "| kafka-mctl3002 | 3002 | follower |" in text
    assert "- **inventory:** " in text and "still names ZooKeeper" in text
    # The quorum counts in the verdict, as on any KRaft cluster: a voter behind is not healthy.
    assert not _collect(monkeypatch, migrating, {c: "kraft" for c in CONTROLLERS}, _quorum(caught_up=False))["healthy"]


def test_status_before_finalizing_does_not_ask_the_quorum(monkeypatch: pytest.MonkeyPatch, migrating: Any) -> None:
    from kafkaops.cli.status import _notes

    def no_quorum(c: Any) -> dict[str, Any]:
        raise AssertionError("the quorum was asked before the migration reached it")

    _collect(monkeypatch, migrating, {c: "migration" for c in CONTROLLERS}, {})
    monkeypatch.setattr(status_mod, "quorum_state", no_quorum)
    data = status_mod.collect(migrating)
    assert data["healthy"] and "quorum" not in data and data["brokers"][1]["controller"]
    assert "inventory" not in dict(_notes(data))
