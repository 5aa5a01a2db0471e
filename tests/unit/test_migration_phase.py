"""Where a ZooKeeper → KRaft migration stands, from the cluster's own observations (issue 33)."""

from __future__ import annotations

import pytest

from kafkaops.policy.migration import PHASES, MigrationView, can_revert, phase

BROKERS = (1001, 1002, 1003)
CONTROLLERS = (3001, 3002, 3003)
COPIED = {"version": 0, "kraft_metadata_offset": 120, "kraft_controller_id": 3001, "kraft_metadata_epoch": 1,
          "kraft_controller_epoch": 1}
KRAFT_CONTROLLER = {"version": 2, "brokerid": 3001, "timestamp": "1", "kraftControllerEpoch": 1}


def view(brokers: str | dict[int, str], controllers: str | None = None, *, leader: int | None = 3001,
         migration: dict[str, int] | None = None, controller: dict[str, object] | None = None) -> MigrationView:
    b = brokers if isinstance(brokers, dict) else dict.fromkeys(BROKERS, brokers)
    c = dict.fromkeys(CONTROLLERS, controllers) if controllers else {}
    return MigrationView(broker_configs=b, controller_configs=c, controller_record=controller,
                         migration_record=migration, quorum_leader=leader if c else None)


def test_each_phase_of_the_migration_is_told_from_what_the_cluster_shows() -> None:
    assert phase(view("zk")) == "zookeeper"
    assert phase(view("zk", "migration")) == "controllers"
    assert phase(view({1001: "migration", 1002: "migration", 1003: "zk"}, "migration",
                      migration={**COPIED, "kraft_metadata_offset": -1})) == "controllers"  # not copied yet
    assert phase(view("migration", "migration", migration=COPIED, controller=KRAFT_CONTROLLER)) == "dual-write"
    assert phase(view({1001: "kraft", 1002: "migration", 1003: "migration"}, "migration", migration=COPIED,
                      controller=KRAFT_CONTROLLER)) == "dual-write"
    assert phase(view("kraft", "migration", migration=COPIED, controller=KRAFT_CONTROLLER)) == "kraft-brokers"
    partly = view("kraft", "migration", migration=COPIED)
    partly = MigrationView(partly.broker_configs, {3001: "kraft", 3002: "migration", 3003: "migration"},
                           migration_record=COPIED, quorum_leader=3002)
    assert phase(partly) == "finalizing"
    assert phase(view("kraft", "kraft", migration=COPIED)) == "finalized"


def test_a_zookeeper_controller_writes_a_kraft_epoch_of_minus_one_and_is_not_a_kraft_controller() -> None:
    zk_controller = {"version": 2, "brokerid": 1001, "timestamp": "1", "kraftControllerEpoch": -1}  # seen on 3.9
    assert not view("zk", controller=zk_controller).kraft_controls
    assert view("migration", "migration", migration=COPIED, controller=KRAFT_CONTROLLER).kraft_controls


def test_a_quorum_that_is_not_up_is_not_a_migration_under_way() -> None:
    assert phase(view("migration", "migration", leader=None)) == "zookeeper"


def test_the_way_back_ends_where_the_first_controller_leaves_zookeeper() -> None:
    assert [p for p in PHASES if can_revert(p)] == ["zookeeper", "controllers", "dual-write", "kraft-brokers"]


def test_views_no_migration_can_produce_are_refused_naming_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="never copied"):
        phase(view({1001: "kraft", 1002: "zk", 1003: "zk"}, "migration"))
    with pytest.raises(ValueError, match="without a running quorum"):
        phase(view({1001: "kraft", 1002: "zk", 1003: "zk"}))
    with pytest.raises(ValueError, match="1002=migration"):
        phase(view({1001: "kraft", 1002: "migration", 1003: "kraft"}, "kraft", migration=COPIED))
