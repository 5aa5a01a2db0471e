"""The last-moment preconditions of the migration's and the upgrade's disruptive steps (issue 33).

Each of these kinds changes a node or ZooKeeper for good (a configuration written, a storage formatted or
removed, a controller stopped, ``/controller`` deleted, a release installed, ``metadata.version`` raised). The
stage's gate ran minutes — or, for a resumed run, days — earlier; so right before each apply the runner asks
the step to re-read the one fact that makes it safe. Here against the migration lab's inventory with SSH,
ZooKeeper and the quorum replaced by an in-memory cluster: a precondition that holds says what it found, one
that does not refuses, and none of them writes anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.binding import BoundStep
from kafkaops.engine.context import Projection, RunContext
from kafkaops.engine.step import Action, Observation, get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.facts.quorum import QuorumReplica
from kafkaops.inventory import load_inventory
from kafkaops.systems.ssh import CommandResult

#: The Kafka tools' --command-config is built from the lab inventory's CA and password files.
pytestmark = pytest.mark.usefixtures("lab_secrets")

REPO = Path(__file__).resolve().parents[2]
OURS, OTHER = "OY1P1D2cTLyvXpcrpaR9Dw", "A" * 22
BROKERS = ("kafka-mig1001", "kafka-mig1002", "kafka-mig1003")
CONTROLLERS = ("kafka-mctl3001", "kafka-mctl3002", "kafka-mctl3003")
KRAFT = {"brokerid": 3001, "kraftControllerEpoch": 4}
COPIED = {"kraft_metadata_offset": 812}
#: ``kafka-features`` of the migrated lab (a static quorum, kraft.version 0) and of the KRaft lab (dynamic),
#: and ``version-mapping --release-version 4.3``: recorded from Kafka 4.3.1.
RECORDED = Path(__file__).parent / "recorded"
STATIC = (RECORDED / "kafka-features-describe-4.3.1.txt").read_text()
DYNAMIC = (RECORDED / "kafka-features-describe-4.3.1-dynamic.txt").read_text()
MAPPING = (RECORDED / "kafka-features-version-mapping-4.3.txt").read_text()

DISRUPTIVE = ("migration.configure", "migration.format", "migration.stop_controller", "migration.release_zookeeper",
              "migration.deprovision", "upgrade.install", "upgrade.metadata_version")


class Migrating(Environment):
    """The migration lab as SSH, ZooKeeper and the quorum show it, held in memory: each node's configured
    phase, storage, process and release; ZooKeeper's ``/cluster/id``, ``/controller`` and ``/migration``; the
    quorum's leader. Every write fails the test: a precondition only reads."""

    def __init__(self, home: Path, *, brokers: str = "migration", controllers: str = "migration",
                 storage: str | None = OURS, running: bool = True, record: Any = KRAFT, migration: Any = COPIED,
                 leader: int | None = 3001) -> None:
        super().__init__(load_inventory(REPO / "inventory" / "lab-migration.yaml"), home=home)
        self.configured = {**dict.fromkeys(BROKERS, brokers), **dict.fromkeys(CONTROLLERS, controllers)}
        self.storage: dict[str, str | None] = dict.fromkeys(CONTROLLERS, storage)
        self.running = set(BROKERS) | (set(CONTROLLERS) if running else set())
        self.versions = dict.fromkeys(BROKERS + CONTROLLERS, "3.9.1")
        self.zk_id, self.record, self.migration, self.leader = OURS, record, migration, leader
        self.features = STATIC  # kafka-features describe: kraft.version 0, a static quorum

    def run(self, host: Any, command: str, *, timeout: float = 60.0, check: bool = True,
            stdin: bytes | None = None) -> CommandResult:
        if "kafka-features" in command and command.endswith(" describe"):
            out, code = self.features.rstrip("\n"), 0
        elif "kafka-features" in command and "version-mapping --release-version" in command:
            out, code = MAPPING.rstrip("\n"), 0
        elif command.endswith("kafka-config show"):
            out, code = self.configured[host.name], 0
        elif command.endswith("kafka-storage-id"):
            out, code = self.storage.get(host.name) or "", 0
        elif command.endswith("status kafka"):
            out, code = "", 0 if host.name in self.running else 3
        elif command.endswith("kafka-version"):
            out, code = self.versions[host.name], 0
        else:
            raise AssertionError(f"unexpected command on {host.name}: {command}")
        return CommandResult(command, code, out + "\n", "", 0.0)

    def change(self, host: Any, command: str, *, timeout: float = 60.0, check: bool = True,
               stdin: bytes | None = None) -> CommandResult:
        raise AssertionError(f"a precondition wrote: {command} on {host.name}")

    @contextmanager
    def zookeeper(self) -> Iterator[Any]:
        yield SimpleNamespace(cluster_id=lambda: self.zk_id, controller_record=lambda: self.record,
                              migration_record=lambda: self.migration, controller_epoch=lambda: 7,
                              highest_partition_controller_epoch=lambda: (3, "events-0"),
                              controller_epoch_raise=lambda kraft_epoch: None,
                              delete_migration_state=lambda: pytest.fail("a precondition deleted ZooKeeper's state"))

    def quorum(self) -> Any:
        def replication() -> list[QuorumReplica]:
            if self.leader is None:
                raise CheckFailed("no controller node answered")
            return [QuorumReplica(n, 100, 0, 1000, 1000, "Leader" if n == self.leader else "Follower")
                    for n in (3001, 3002, 3003)]

        return SimpleNamespace(replication=replication)


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params if p.default is not None}, **params})


def _ctx(env: Migrating, target: str, *, stage: str | None = None, targets: tuple[str, ...] = (),
         projected: dict[str, Any] | None = None) -> RunContext:
    """The context the runner gives a step of a migration stage: the stage's gate among the target's steps."""
    projection = Projection()
    for key, value in (projected or {}).items():
        projection.set(key, value, "kafka-mctl3001 step 3 (an earlier step)")
    steps = (BoundStep(1, "migration.phase_gate", {"stage": stage, "mode": ""}),) if stage else ()
    return RunContext(run_id="r", operator="o", reason="r", task=None, target=target, params={}, env=env,
                      projected=projection, targets=targets, steps=steps)


def _act(step: Any, ctx: RunContext) -> Action:
    action = step.plan(step.observe(ctx))
    assert isinstance(action, Action), action
    return action


def test_each_of_them_is_disruptive_and_re_checks_before_acting() -> None:
    for kind in DISRUPTIVE:
        entry = get_step_kind(kind)
        assert entry is not None and entry.effect == "disruptive", kind
        assert callable(getattr(entry.factory, "precondition", None)), kind
    start = get_step_kind("migration.start_controller")
    assert start is not None and start.effect == "change"  # a start takes nothing out of service


# --- migration.configure: the cluster still in a phase the run's stage configures from ---------------------


def test_configure_holds_in_a_phase_its_stage_runs_from(tmp_path: Path) -> None:
    env = Migrating(tmp_path, brokers="kraft")  # kraft-brokers: the finalize stage's start
    step = _step("migration.configure", phase="kraft")
    ctx = _ctx(env, "kafka-mctl3001", stage="finalize")
    found = step.precondition(ctx, _act(step, ctx))
    assert "kraft-brokers" in found and "finalize" in found


def test_configure_refuses_once_the_cluster_left_the_phases_of_its_stage(tmp_path: Path) -> None:
    # a revert's broker roll (KRaft brokers back to migration mode), but a controller meanwhile finalized
    env = Migrating(tmp_path, brokers="kraft")
    env.configured["kafka-mctl3001"] = "kraft"
    step = _step("migration.configure", phase="migration")
    ctx = _ctx(env, "kafka-mig1001", stage="revert-brokers-kraft")
    action = _act(step, ctx)
    with pytest.raises(SafetyRefusal, match="runs from dual-write or kraft-brokers, but the cluster is in phase "
                                            "finalizing"):
        step.precondition(ctx, action)


def test_configure_refuses_a_run_that_names_no_stage(tmp_path: Path) -> None:
    env = Migrating(tmp_path, brokers="kraft")
    step = _step("migration.configure", phase="kraft")
    ctx = _ctx(env, "kafka-mctl3001")  # no migration.phase_gate among the run's steps
    with pytest.raises(SafetyRefusal, match=r"no migration\.phase_gate"):
        step.precondition(ctx, _act(step, ctx))


def test_configure_reads_the_phases_the_earlier_steps_of_a_dry_run_write(tmp_path: Path) -> None:
    env = Migrating(tmp_path, brokers="kraft")
    step = _step("migration.configure", phase="kraft")
    ctx = _ctx(env, "kafka-mctl3002", stage="finalize", projected={"configured/kafka-mctl3001": "kraft"})
    found = step.precondition(ctx, _act(step, ctx))
    assert "finalizing" in found and "projected" in found


# --- migration.format: not another cluster's storage, and the id the action formats with still ZooKeeper's --


def test_format_holds_for_an_empty_storage_and_the_cluster_id_zookeeper_still_holds(tmp_path: Path) -> None:
    env = Migrating(tmp_path, storage=None, brokers="zk", record=None, migration=None, leader=None)
    step = _step("migration.format")
    ctx = _ctx(env, "kafka-mctl3001")
    action = _act(step, ctx)
    assert OURS in step.precondition(ctx, action)


def test_format_refuses_a_storage_formatted_since_for_another_cluster(tmp_path: Path) -> None:
    env = Migrating(tmp_path, storage=None, brokers="zk", record=None, migration=None, leader=None)
    step = _step("migration.format")
    ctx = _ctx(env, "kafka-mctl3001")
    action = _act(step, ctx)
    env.storage["kafka-mctl3001"] = OTHER
    with pytest.raises(SafetyRefusal, match=f"formatted for cluster {OTHER}, not this cluster's {OURS}"):
        step.precondition(ctx, action)


def test_format_refuses_when_zookeepers_cluster_id_is_not_the_one_planned(tmp_path: Path) -> None:
    env = Migrating(tmp_path, storage=None, brokers="zk", record=None, migration=None, leader=None)
    step = _step("migration.format")
    ctx = _ctx(env, "kafka-mctl3001")
    action = _act(step, ctx)
    env.zk_id = OTHER  # another ZooKeeper ensemble behind the same address, or /cluster/id rewritten
    with pytest.raises(SafetyRefusal, match=f"/cluster/id is now {OTHER}"):
        step.precondition(ctx, action)


# --- migration.stop_controller: the revert still possible ----------------------------------------------------


def test_stop_controller_holds_before_the_point_of_no_return(tmp_path: Path) -> None:
    env = Migrating(tmp_path)  # dual-write
    step = _step("migration.stop_controller")
    ctx = _ctx(env, "kafka-mctl3001")
    assert "dual-write" in step.precondition(ctx, _act(step, ctx))


def test_stop_controller_refuses_once_a_controller_runs_without_zookeeper(tmp_path: Path) -> None:
    env = Migrating(tmp_path, brokers="kraft")
    env.configured["kafka-mctl3003"] = "kraft"  # finalizing: no way back
    step = _step("migration.stop_controller")
    ctx = _ctx(env, "kafka-mctl3001")
    with pytest.raises(SafetyRefusal, match=r"finalizing.*no way back"):
        step.precondition(ctx, _act(step, ctx))


# --- migration.release_zookeeper: no KRaft controller left running -------------------------------------------


def test_release_zookeeper_holds_once_every_controller_is_stopped(tmp_path: Path) -> None:
    env = Migrating(tmp_path, running=False, leader=None)
    step = _step("migration.release_zookeeper")
    ctx = _ctx(env, "kafka-mctl3003", targets=CONTROLLERS)
    assert "stopped" in step.precondition(ctx, _act(step, ctx))


def test_release_zookeeper_refuses_while_a_controller_runs_again(tmp_path: Path) -> None:
    env = Migrating(tmp_path, running=False, leader=None)
    step = _step("migration.release_zookeeper")
    ctx = _ctx(env, "kafka-mctl3003", targets=CONTROLLERS)
    action = _act(step, ctx)
    env.running.add("kafka-mctl3002")  # started again by hand (or by a supervisor) since the plan
    with pytest.raises(SafetyRefusal, match="controllers 3002 still run"):
        step.precondition(ctx, action)


def test_release_zookeeper_counts_the_stops_planned_before_it_in_a_dry_run(tmp_path: Path) -> None:
    env = Migrating(tmp_path, running=False, leader=None)
    env.running.add("kafka-mctl3003")  # live: the last controller runs; this dry-run stops it first
    step = _step("migration.release_zookeeper")
    ctx = _ctx(env, "kafka-mctl3003", targets=CONTROLLERS, projected={"migration/controller/3003/stopped": True})
    found = step.precondition(ctx, _act(step, ctx))
    assert "stopped" in found and "projected" in found


# --- migration.deprovision: the controller's process not running ----------------------------------------------


def test_deprovision_holds_for_a_stopped_controller_and_refuses_a_running_one(tmp_path: Path) -> None:
    env = Migrating(tmp_path, running=False, leader=None)
    step = _step("migration.deprovision")
    ctx = _ctx(env, "kafka-mctl3001")
    action = _act(step, ctx)
    assert "not running" in step.precondition(ctx, action)
    env.running.add("kafka-mctl3001")
    with pytest.raises(SafetyRefusal, match="controller 3001 runs: its storage is in use"):
        step.precondition(ctx, action)


def test_deprovision_counts_the_stop_planned_before_it_in_a_dry_run(tmp_path: Path) -> None:
    env = Migrating(tmp_path, running=True)
    step = _step("migration.deprovision")
    ctx = _ctx(env, "kafka-mctl3001", projected={"migration/controller/3001/stopped": True})
    assert "not running" in step.precondition(ctx, _act(step, ctx))


# --- upgrade.install: the node's Kafka stopped ------------------------------------------------------------------


def test_install_holds_on_a_stopped_node_and_refuses_a_running_one(tmp_path: Path) -> None:
    env = Migrating(tmp_path)
    env.running.discard("kafka-mig1001")
    step = _step("upgrade.install", version="4.3.1")
    ctx = _ctx(env, "kafka-mig1001")
    action = _act(step, ctx)
    assert "stopped" in step.precondition(ctx, action)
    env.running.add("kafka-mig1001")  # started again since its stop: its jars would be replaced under the JVM
    with pytest.raises(SafetyRefusal, match="kafka-mig1001: Kafka runs"):
        step.precondition(ctx, action)


@pytest.mark.parametrize(("target", "key"), [("kafka-mig1001", "broker/1001"),
                                             ("kafka-mctl3001", "controller/3001")])
def test_install_counts_the_stop_planned_before_it_in_a_dry_run(tmp_path: Path, target: str, key: str) -> None:
    env = Migrating(tmp_path)  # live: every node runs; this dry-run stopped the target first
    step = _step("upgrade.install", version="4.3.1")
    ctx = _ctx(env, target, projected={key: "stopped"})
    found = step.precondition(ctx, _act(step, ctx))
    assert "stopped" in found and "projected" in found


# --- upgrade.metadata_version: every node on the release --------------------------------------------------------


def test_metadata_version_holds_only_while_every_node_runs_the_release(tmp_path: Path) -> None:
    env = Migrating(tmp_path)
    env.versions = dict.fromkeys(env.versions, "4.3.1")
    step = _step("upgrade.metadata_version", version="4.3.1")
    ctx = _ctx(env, "kafka-mctl3001")
    action = step.plan(Observation({"done": False, "want": "4.3.1", "level": "3.9-IV0",
                                    "versions": dict(env.versions)}))
    assert isinstance(action, Action)
    assert "6 nodes run Kafka 4.3.1" in step.precondition(ctx, action)
    env.versions["kafka-mig1002"] = "3.9.1"  # installed back by hand since the plan
    with pytest.raises(SafetyRefusal, match=r"kafka-mig1002 do not run Kafka 4\.3\.1"):
        step.precondition(ctx, action)


@pytest.mark.parametrize(("features", "kraft"), [(STATIC, "0"), (DYNAMIC, "1")])
def test_metadata_version_sends_only_its_own_feature_and_leaves_kraft_version(tmp_path: Path, features: str,
                                                                             kraft: str) -> None:
    """KAFKA-21426: the bump is `--feature metadata.version=30` (the level of 4.3's version-mapping), judged
    before it is sent: it leaves kraft.version as it is, a static quorum static."""
    env = Migrating(tmp_path)
    env.versions = dict.fromkeys(env.versions, "4.3.1")
    env.features = features
    step = _step("upgrade.metadata_version", version="4.3.1")
    ctx = _ctx(env, "kafka-mctl3001")
    action = step.plan(Observation({"done": False, "want": "4.3.1", "level": "3.9-IV0", "kraft": kraft,
                                    "versions": dict(env.versions)}))
    assert isinstance(action, Action)
    assert ("kraft.version stays 0" in action.description) == (kraft == "0")
    found = step.precondition(ctx, action)
    assert f"kafka-features upgrade --feature metadata.version=30 leaves kraft.version at {kraft}" in found


def test_metadata_version_refuses_arguments_that_would_raise_kraft_version_on_a_static_quorum(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the bump ever built as Kafka's upgrade notes write it (`upgrade --release-version 4.3`), the
    precondition refuses it on a static quorum: that would set kraft.version=1 too (KAFKA-21426)."""
    from kafkaops.steps import upgrade

    env = Migrating(tmp_path)
    env.versions = dict.fromkeys(env.versions, "4.3.1")
    real = upgrade._upgrade_args

    def release_version(e: Any, release: str) -> Any:
        _, levels, mapping = real(e, release)
        return f"upgrade --release-version {release}", levels, mapping

    monkeypatch.setattr(upgrade, "_upgrade_args", release_version)
    step = _step("upgrade.metadata_version", version="4.3.1")
    ctx = _ctx(env, "kafka-mctl3001")
    action = step.plan(Observation({"done": False, "want": "4.3.1", "level": "3.9-IV0", "kraft": "0",
                                    "versions": dict(env.versions)}))
    with pytest.raises(SafetyRefusal, match=r"raise kraft.version from 0 to 1: the static metadata quorum") as no:
        step.precondition(ctx, action)
    assert "kraft.version=1" in (no.value.hint or "")
    env.features = DYNAMIC  # already dynamic: --release-version moves nothing that matters here
    assert "leaves kraft.version at 1" in step.precondition(ctx, action)
