"""Where a ZooKeeper → KRaft migration stands, judged from what the cluster shows (issue 33).

Kafka's migration (KIP-866, the operations guide's "ZooKeeper to KRaft Migration") has no single
switch to read: its state is spread over ZooKeeper, the KRaft quorum and each node's configuration.
A tool that resumes a migration after a crash, or refuses to go back past the point of no return, must
say which phase the cluster is in from those observations alone — never from its own journal, which
may be behind what was done by hand.

The phases, in order (Strimzi's state machine names them ZooKeeper → KRaftMigration →
KRaftDualWriting → KRaftPostMigration → PreKRaft → KRaft):

* ``zookeeper``: no KRaft controller runs;
* ``controllers``: the quorum runs in migration mode; brokers not all registered with it yet, so the
  metadata is not copied (``/migration`` absent, or its ``kraft_metadata_offset`` still -1);
* ``dual-write``: the metadata was copied; a KRaft controller is the cluster's controller
  (``/controller`` carries ``kraftControllerEpoch``) and writes every change to ZooKeeper too; brokers
  may be in migration mode or already KRaft brokers;
* ``kraft-brokers``: every broker is a KRaft broker; the controllers still dual-write;
* ``finalizing``: some controllers were restarted without ZooKeeper (the finalizing roll is under way);
* ``finalized``: the controllers no longer know ZooKeeper.

From ``finalizing`` on there is **no way back**: ZooKeeper stops receiving the metadata, and Kafka
documents no revert once a controller left migration mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PHASES = ("zookeeper", "controllers", "dual-write", "kraft-brokers", "finalizing", "finalized")
#: The first phase Kafka documents no way back from: a controller already restarted without ZooKeeper.
NO_RETURN = "finalizing"


@dataclass(frozen=True)
class MigrationView:
    """The observations a phase is judged from.

    ``broker_configs``/``controller_configs``: each node's configuration phase as its own
    ``server.properties`` says (``zk``, ``migration``, ``kraft``; a controller not provisioned is absent).
    ``controller_record``/``migration_record``: ZooKeeper's ``/controller`` and ``/migration`` (None when
    absent or ZooKeeper is gone). ``quorum_leader``: the KRaft quorum's leader (None: no quorum)."""

    broker_configs: Mapping[int, str]
    controller_configs: Mapping[int, str] = field(default_factory=dict)
    controller_record: Mapping[str, Any] | None = None
    migration_record: Mapping[str, Any] | None = None
    quorum_leader: int | None = None

    @property
    def metadata_copied(self) -> bool:
        """The KRaft controller finished copying ZooKeeper's metadata into its log."""
        offset = (self.migration_record or {}).get("kraft_metadata_offset", -1)
        return isinstance(offset, int) and offset >= 0

    @property
    def kraft_controls(self) -> bool:
        """A KRaft controller holds the cluster's controllership in ZooKeeper (dual-write). A 3.9 broker
        elected controller writes ``kraftControllerEpoch: -1`` (seen on the lab): only an epoch ≥ 0 is a
        KRaft controller's."""
        epoch = (self.controller_record or {}).get("kraftControllerEpoch", -1)
        return isinstance(epoch, int) and epoch >= 0


def phase(view: MigrationView) -> str:
    """The phase ``view`` shows (:data:`PHASES`). Inconsistent views raise ``ValueError`` naming what does
    not fit: a half-finalized quorum, KRaft brokers with no copied metadata."""
    ctrl = set(view.controller_configs.values())
    brokers = set(view.broker_configs.values())
    if "kraft" in ctrl:
        if brokers != {"kraft"}:
            raise ValueError("a controller left migration mode but brokers are not all KRaft brokers: "
                             + _nodes(view.broker_configs))
        return "finalized" if ctrl == {"kraft"} else "finalizing"
    if not ctrl or view.quorum_leader is None:
        if brokers - {"zk", "migration"}:
            raise ValueError(f"KRaft brokers without a running quorum: {_nodes(view.broker_configs)}")
        return "zookeeper"
    if not view.metadata_copied:
        if "kraft" in brokers:
            raise ValueError("KRaft brokers, but the metadata was never copied from ZooKeeper (/migration)")
        return "controllers"
    if brokers == {"kraft"}:
        return "kraft-brokers"
    return "dual-write"


@dataclass(frozen=True)
class Stage:
    """One run of ``kafkaops migrate-to-kraft``: a step of Kafka's guide made a runbook of its own.

    A migration is four reviewed changes, not one: each stage is planned, locked, journaled and resumed on
    its own, and the operator sees the cluster whole between them — Kafka's guide checks the cluster after
    each step too. ``start``: the phases the stage may start (or resume) in; ``end``: the phase it leaves the
    cluster in; ``runbook``/``params``/``nodes``: what runs it, on which nodes (``controllers`` or
    ``brokers``); ``brokers``: the configuration every broker has when the stage ends (a broker stage; a phase
    alone does not say it: brokers half in KRaft mode are ``dual-write`` too); ``no_return``: past it, no
    revert (the plan says so)."""

    name: str
    start: tuple[str, ...]
    end: str
    runbook: str
    nodes: str
    what: str
    params: Mapping[str, str] = field(default_factory=dict)
    no_return: bool = False
    brokers: str | None = None


STAGES: tuple[Stage, ...] = (
    Stage("controllers", ("zookeeper", "controllers"), "controllers", "migration-controllers", "controllers",
          "provision the KRaft controllers in migration mode (formatted with the cluster's id) until they form a "
          "quorum"),
    Stage("brokers-migration", ("controllers", "dual-write"), "dual-write", "migration-brokers", "brokers",
          "roll the brokers with the migration settings until the controller has copied the metadata "
          "(dual-write)", {"mode": "migration"}, brokers="migration"),
    Stage("brokers-kraft", ("dual-write", "kraft-brokers"), "kraft-brokers", "migration-brokers", "brokers",
          "roll the brokers into KRaft mode (process.roles=broker, no zookeeper.connect)", {"mode": "kraft"},
          brokers="kraft"),
    Stage("finalize", ("kraft-brokers", "finalizing", "finalized"), "finalized", "migration-finalize",
          "controllers", "roll the controllers without ZooKeeper and the migration setting", no_return=True),
)


#: Kafka's revert ("Reverting to ZooKeeper mode During the Migration" in its operations guide), one stage
#: per change, in the order the guide gives: KRaft brokers back to ZooKeeper mode while the quorum still runs
#: (they keep the migration setting: the guide says not to drop it on this roll); the quorum deprovisioned
#: and ZooKeeper's ``/controller`` and ``/migration`` deleted right after, so that a broker is elected
#: controller again and a later migration starts afresh; the brokers rolled without the migration settings.
REVERT_STAGES: tuple[Stage, ...] = (
    Stage("revert-brokers-kraft", ("dual-write", "kraft-brokers"), "dual-write", "migration-brokers", "brokers",
          "roll the KRaft brokers back to ZooKeeper mode, the migration setting kept (the quorum still runs)",
          {"mode": "migration"}, brokers="migration"),
    Stage("revert-controllers", ("controllers", "dual-write", "zookeeper"), "zookeeper", "migration-revert-controllers",
          "controllers", "deprovision the KRaft controllers (stopped, storage removed), then delete ZooKeeper's "
          "/controller and /migration so that a broker is the controller again"),
    Stage("revert-brokers-zk", ("zookeeper",), "zookeeper", "migration-brokers", "brokers",
          "roll the brokers without the migration settings (pure ZooKeeper mode)", {"mode": "zk"}, brokers="zk"),
)


def stage(name: str) -> Stage:
    """The stage called ``name``, forward or revert (``ValueError`` naming the stages otherwise)."""
    found = next((s for s in STAGES + REVERT_STAGES if s.name == name), None)
    if found is None:
        raise ValueError(f"unknown migration stage {name!r} (stages: "
                         f"{', '.join(s.name for s in STAGES + REVERT_STAGES)})")
    return found


def next_stage(current: str) -> Stage | None:
    """The stage to run from phase ``current``: the first one not finished (None: the migration is done).
    A stage interrupted half-way is the one to run again: its phase is still one it starts from."""
    if current == "finalized":
        return None
    return next(s for s in STAGES if PHASES.index(current) < PHASES.index(s.end))


def can_revert(current: str) -> bool:
    """Kafka documents a way back to ZooKeeper from every phase before :data:`NO_RETURN`."""
    return PHASES.index(current) < PHASES.index(NO_RETURN)


def next_revert_stage(view: MigrationView) -> Stage | None:
    """The revert stage to run from what ``view`` shows (None: the cluster is back in ZooKeeper mode, every
    broker configured without the migration, no controller provisioned, nothing of the migration left in
    ZooKeeper). Judged from the nodes and ZooKeeper, not the phase alone: the quorum gone but ``/controller``
    still the KRaft controller's is a deprovisioning stopped half-way, not a cluster back in ZooKeeper mode.

    Raises:
        ValueError: the phase is past :data:`NO_RETURN`, or no phase at all (:func:`phase`).
    """
    current = phase(view)
    if not can_revert(current):
        raise ValueError(f"the migration is {current}: a controller already runs without ZooKeeper, which no "
                         "longer receives the metadata; Kafka documents no way back from there")
    brokers = set(view.broker_configs.values())
    if "kraft" in brokers:
        return REVERT_STAGES[0]
    if view.controller_configs or view.kraft_controls or view.migration_record is not None:
        return REVERT_STAGES[1]
    if brokers != {"zk"}:
        return REVERT_STAGES[2]
    return None


def stage_reached(this: Stage, view: MigrationView) -> bool:
    """The cluster is where ``this`` stage leaves it: its end phase, every broker configured as the stage
    leaves them, and after the controllers' revert nothing of the migration left (no controller provisioned,
    ``/controller`` a broker's again, no ``/migration``)."""
    if phase(view) != this.end:
        return False
    if this.brokers is not None and set(view.broker_configs.values()) != {this.brokers}:
        return False
    if this.name == "revert-controllers":
        record = view.controller_record
        return (not view.controller_configs and view.migration_record is None and record is not None
                and not view.kraft_controls)
    return True


def revert_order_problem(this: Stage, view: MigrationView) -> str | None:
    """Why revert stage ``this`` may not run now (None: it may). Kafka's revert is an order: a stage runs
    when it is the next one, or again when it just finished (a resumed run); never before the one ahead of it
    is done (brokers rolled to ZooKeeper mode while a KRaft controller still holds ``/controller`` would find
    no controller), and not once the cluster is back in ZooKeeper mode."""
    following = next_revert_stage(view)
    at = REVERT_STAGES.index(this)
    now = len(REVERT_STAGES) if following is None else REVERT_STAGES.index(following)
    if following is not None and now < at:
        return f"the revert's stage {following.name} comes first: {following.what}"
    if following is None and at < len(REVERT_STAGES) - 1:
        return "the cluster is back in ZooKeeper mode: nothing of the migration is left to revert"
    return None


def _nodes(configs: Mapping[int, str]) -> str:
    return ", ".join(f"{n}={c}" for n, c in sorted(configs.items()))


def controller_fencing(controller_record: Mapping[str, Any] | None, controller_epoch: int | None,
                       highest: tuple[int, str] | None) -> str:
    """Why the broker ZooKeeper elected controller cannot change partition state ("" when it can).

    A ZooKeeper-mode controller refuses to change a partition whose state was written by a higher controller
    epoch than its own ("Leader and isr path written by another controller"): it then moves no leader off a
    stopped broker, and a roll's ``kafka.verify_not_leader`` waits for ever. During a migration the KRaft
    controller writes the partition states with its KRaft epoch, which can exceed the epoch the broker is
    elected with after a revert (KAFKA-20488; on the lab, a revert killed with the quorum half down and
    resumed: elected at 5, states at 6). ``/controller`` naming a broker is therefore not proof enough that
    the cluster has a working controller; its epoch must be at least every partition state's.

    Args:
        controller_record: ZooKeeper's ``/controller``.
        controller_epoch: ZooKeeper's ``/controller_epoch`` (the elected broker's epoch).
        highest: The highest ``controller_epoch`` among the partition states, and a partition carrying it.
    """
    if controller_record is None or int(controller_record.get("kraftControllerEpoch", -1)) >= 0:
        return "no broker is the controller"
    if highest is None or controller_epoch is None or controller_epoch >= highest[0]:
        return ""
    return (f"broker {controller_record.get('brokerid')} is the controller at epoch {controller_epoch}, below the "
            f"epoch {highest[0]} partition states were written with ({highest[1]}, by the KRaft controller): it "
            "can change no partition's state (KAFKA-20488)")
