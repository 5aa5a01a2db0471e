"""Kafka's revert of a migration, as kafkaops decides it from what the cluster shows (issue 33).

The guide's revert depends on how far the migration went: KRaft brokers go back to ZooKeeper mode first
(while the quorum still runs), then the quorum is deprovisioned and ZooKeeper's ``/controller`` and
``/migration`` deleted, then the brokers lose the migration settings. A revert stopped half-way must resume
at the right stage from the cluster alone; a stage run out of order (brokers rolled to ZooKeeper mode while a
KRaft controller still holds ``/controller``) must be refused; and nothing goes back once a controller runs
without ZooKeeper. The lab proves the revert end to end (tests/lab/test_migrate_to_kraft_on_lab.py).
"""

from __future__ import annotations

from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import SafetyRefusal
from kafkaops.policy.migration import (
    REVERT_STAGES,
    MigrationView,
    next_revert_stage,
    revert_order_problem,
    stage,
    stage_reached,
)

KRAFT = {"brokerid": 3001, "kraftControllerEpoch": 4}
BROKER = {"brokerid": 1002, "kraftControllerEpoch": -1}
COPIED = {"kraft_metadata_offset": 812}
CONTROLLERS = {3001: "migration", 3002: "migration", 3003: "migration"}


def _view(brokers: dict[int, str], controllers: dict[int, str] | None = None, record: Any = None,
          migration: Any = None, leader: int | None = None) -> MigrationView:
    return MigrationView(brokers, controllers or {}, record, migration, leader)


def _next(view: MigrationView) -> str | None:
    found = next_revert_stage(view)
    return found.name if found else None


def test_the_revert_starts_where_the_migration_got_to() -> None:
    kraft_brokers = _view({1001: "kraft", 1002: "kraft"}, CONTROLLERS, KRAFT, COPIED, 3001)
    half_kraft = _view({1001: "kraft", 1002: "migration"}, CONTROLLERS, KRAFT, COPIED, 3001)
    dual_write = _view({1001: "migration", 1002: "migration"}, CONTROLLERS, KRAFT, COPIED, 3001)
    only_quorum = _view({1001: "zk", 1002: "migration"}, CONTROLLERS, BROKER, None, 3001)
    assert [_next(v) for v in (kraft_brokers, half_kraft, dual_write, only_quorum)] == [
        "revert-brokers-kraft", "revert-brokers-kraft", "revert-controllers", "revert-controllers"]


def test_a_deprovisioning_stopped_half_way_is_resumed_not_mistaken_for_zookeeper_mode() -> None:
    # every controller stopped (no quorum: the phase reads "zookeeper"), but /controller still the KRaft one's
    quorum_gone = _view({1001: "migration"}, CONTROLLERS, KRAFT, COPIED, None)
    assert _next(quorum_gone) == "revert-controllers"
    # /controller deleted, /migration still there
    assert _next(_view({1001: "migration"}, {}, BROKER, COPIED, None)) == "revert-controllers"
    # a controller's storage not removed yet
    assert _next(_view({1001: "migration"}, {3003: "migration"}, BROKER, None, None)) == "revert-controllers"


def test_the_brokers_lose_the_migration_settings_last_and_then_nothing_is_left() -> None:
    assert _next(_view({1001: "migration", 1002: "zk"}, {}, BROKER, None, None)) == "revert-brokers-zk"
    assert _next(_view({1001: "zk", 1002: "zk"}, {}, BROKER, None, None)) is None


def test_no_revert_once_a_controller_runs_without_zookeeper() -> None:
    finalizing = _view({1001: "kraft"}, {3001: "kraft", 3002: "migration"}, KRAFT, COPIED, 3001)
    with pytest.raises(ValueError, match="finalizing: a controller already runs without ZooKeeper"):
        next_revert_stage(finalizing)
    with pytest.raises(ValueError, match="finalized"):
        next_revert_stage(_view({1001: "kraft"}, {3001: "kraft"}, None, COPIED, 3001))


def test_a_revert_stage_is_refused_before_the_one_ahead_of_it_is_done() -> None:
    dual_write = _view({1001: "migration"}, CONTROLLERS, KRAFT, COPIED, 3001)
    problem = revert_order_problem(stage("revert-brokers-zk"), dual_write)
    assert problem and "revert-controllers comes first" in problem
    assert revert_order_problem(stage("revert-controllers"), dual_write) is None
    # run again once it finished (a resumed run): allowed; and the revert is over once nothing is left
    reverted = _view({1001: "zk"}, {}, BROKER, None, None)
    assert revert_order_problem(stage("revert-brokers-zk"), reverted) is None
    assert "nothing of the migration is left" in (revert_order_problem(stage("revert-controllers"), reverted) or "")


def test_each_revert_stage_is_reached_only_when_the_whole_of_it_is_done() -> None:
    controllers = stage("revert-controllers")
    assert not stage_reached(controllers, _view({1001: "migration"}, CONTROLLERS, KRAFT, COPIED, None))
    assert not stage_reached(controllers, _view({1001: "migration"}, {}, None, None, None))  # no broker controller yet
    assert stage_reached(controllers, _view({1001: "migration"}, {}, BROKER, None, None))
    back = stage("revert-brokers-kraft")
    assert not stage_reached(back, _view({1001: "kraft", 1002: "migration"}, CONTROLLERS, KRAFT, COPIED, 3001))
    assert stage_reached(back, _view({1001: "migration", 1002: "migration"}, CONTROLLERS, KRAFT, COPIED, 3001))
    assert [s.brokers for s in REVERT_STAGES] == ["migration", None, "zk"]


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params if p.default is not None}, **params})


def test_zookeeper_is_released_only_when_every_controller_is_stopped() -> None:
    step = _step("migration.release_zookeeper")
    left = ["/controller (KRaft controller 3001)", "/migration"]
    with pytest.raises(SafetyRefusal, match="controllers 3002 still run"):
        step.plan(Observation({"skip": False, "left": left, "running": [3002], "zookeeper": "zk:2181"}))
    act = step.plan(Observation({"skip": False, "left": left, "running": [], "zookeeper": "zk:2181"}))
    assert isinstance(act, Action) and act.commands == ("zookeeper zk:2181: delete /controller /migration "
                                                        "(at the version read)",)
    assert isinstance(step.plan(Observation({"skip": False, "left": [], "running": [], "zookeeper": "z"})), Noop)
    # the epoch below the partition states' (issue 42.2): the plan says it is raised, in the same transaction
    raised = step.plan(Observation({"skip": False, "left": left, "running": [], "zookeeper": "zk:2181",
                                    "epoch_raise": [4, 6]}))
    assert isinstance(raised, Action) and raised.commands == (
        "zookeeper zk:2181: set /controller_epoch 6 (from 4: the epoch the KRaft controller wrote the partition "
        "states with, KAFKA-20488) and delete /controller /migration (at the versions read, in one transaction)",)
    assert raised.description.endswith("a broker is elected controller at epoch 7, above every partition state's")


def test_a_running_controller_is_never_deprovisioned() -> None:
    step = _step("migration.deprovision")
    with pytest.raises(SafetyRefusal, match="controller 3001 runs"):
        step.plan(Observation({"host": "c1", "node": 3001, "has": "A" * 22, "active": True, "command": "d"}))
    assert isinstance(step.plan(Observation({"host": "c1", "node": 3001, "has": "A" * 22, "active": False,
                                             "command": "d"})), Action)
    assert isinstance(step.plan(Observation({"host": "c1", "node": 3001, "has": None, "active": False,
                                             "command": "d"})), Noop)


def test_a_broker_stage_bound_with_another_stages_configuration_is_refused() -> None:
    gate = get_step_kind("migration.phase_gate")
    assert gate is not None and gate.check is not None
    assert gate.check({"stage": "revert-brokers-zk", "mode": "kraft"}) == (
        "stage revert-brokers-zk configures the brokers for zk, not kraft")
    assert gate.check({"stage": "revert-brokers-zk", "mode": "zk"}) is None
    assert gate.check({"stage": "revert-controllers", "mode": ""}) is None


class _Nodes:
    """A cluster's nodes as SSH shows them (each node's configured phase, every controller formatted), with
    ZooKeeper stopped and no quorum answering: what a finalized migration looks like once ZooKeeper is gone."""

    def __init__(self, controller_phase: str) -> None:
        from pathlib import Path

        from kafkaops.inventory import load_inventory

        self.cluster = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-migration.yaml")
        self.phase = {**{h.name: "kraft" for h in self.cluster.hosts},
                      **{h.name: controller_phase for h in self.cluster.controllers}}

    def command(self, host: Any, name: str, **_: Any) -> str:
        return f"{name} {host.name}"

    def run(self, host: Any, command: str, **_: Any) -> Any:
        from types import SimpleNamespace

        out = self.phase[host.name] if command.startswith("kafka_configured") else "A" * 22
        return SimpleNamespace(stdout=out + "\n", exit_code=0)

    def zookeeper(self) -> Any:
        from kafkaops.errors import UnreachableError

        raise UnreachableError("ZooKeeper at 127.0.90.10:2181 did not answer (connection refused)")

    def quorum(self) -> Any:
        from kafkaops.errors import CheckFailed

        raise CheckFailed("no controller node answered")


def test_a_finalized_migration_is_judged_without_zookeeper_and_an_earlier_phase_never_is() -> None:
    from kafkaops.errors import UnreachableError
    from kafkaops.queries.migration import judge_phase, migration_view

    assert judge_phase(migration_view(_Nodes("kraft"))) == "finalized"  # type: ignore[arg-type]
    with pytest.raises(UnreachableError):  # dual-write or earlier: what ZooKeeper holds decides
        migration_view(_Nodes("migration"))  # type: ignore[arg-type]


def _snapshot(isr: tuple[int, ...]) -> Any:
    from kafkaops.model import ClusterSnapshot, PartitionState

    return ClusterSnapshot("c", 0.0, (1001, 1002, 1003), 1002,
                           (PartitionState("t", 0, 1002, (1002, 1001, 1003), isr),))


def test_the_controller_revert_ends_only_with_every_partition_back_in_its_isr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The KRaft quorum's last minutes leave ISRs shrunk; the broker controller restores them as followers
    catch up. The stage waits for that, so the next stage's pre-flight (which refuses to stop a broker while
    partitions sit under min ISR) never meets the dip the revert itself caused (CI at 1b2b3b0)."""
    import kafkaops.steps.migration as m
    from kafkaops.engine.context import RunContext
    from kafkaops.errors import CheckFailed

    shrunk, whole = _snapshot((1002,)), _snapshot((1002, 1001, 1003))
    answers = [shrunk, shrunk, whole]
    monkeypatch.setattr(m, "environment", lambda ctx: object())
    monkeypatch.setattr(m, "migration_view", lambda env: _view({1001: "migration"}, {}, BROKER, None, None))
    monkeypatch.setattr(m, "_controller_fenced", lambda env: "")
    monkeypatch.setattr(m, "cluster_snapshot", lambda ctx, configs=False: answers[0] if len(answers) == 1
                        else answers.pop(0))
    ctx = RunContext(run_id="r1", operator="o", reason="r", task=None, target="c1", params={}, env=None,
                     targets=["c1"])
    step = _step("migration.wait_phase", stage="revert-controllers", timeout=30.0)
    obs = step.observe(ctx)
    assert obs.data["reached"] is False                     # a broker controller, but a partition out of its ISR
    with pytest.raises(CheckFailed, match="back whole: 1 URP"):
        step.verify(ctx)
    action = step.plan(obs)
    assert isinstance(action, Action)
    step.apply(ctx, action)                                 # polls until the ISR is full again
    assert answers == [whole]
    step.verify(ctx)
    assert isinstance(step.plan(step.observe(ctx)), Noop)
