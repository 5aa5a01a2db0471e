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
    ``brokers``); ``no_return``: past it, no revert (the plan says so)."""

    name: str
    start: tuple[str, ...]
    end: str
    runbook: str
    nodes: str
    what: str
    params: Mapping[str, str] = field(default_factory=dict)
    no_return: bool = False


STAGES: tuple[Stage, ...] = (
    Stage("controllers", ("zookeeper", "controllers"), "controllers", "migration-controllers", "controllers",
          "provision the KRaft controllers in migration mode (formatted with the cluster's id) until they form a "
          "quorum"),
    Stage("brokers-migration", ("controllers", "dual-write"), "dual-write", "migration-brokers", "brokers",
          "roll the brokers with the migration settings until the controller has copied the metadata "
          "(dual-write)", {"mode": "migration"}),
    Stage("brokers-kraft", ("dual-write", "kraft-brokers"), "kraft-brokers", "migration-brokers", "brokers",
          "roll the brokers into KRaft mode (process.roles=broker, no zookeeper.connect)", {"mode": "kraft"}),
    Stage("finalize", ("kraft-brokers", "finalizing", "finalized"), "finalized", "migration-finalize",
          "controllers", "roll the controllers without ZooKeeper and the migration setting", no_return=True),
)


def stage(name: str) -> Stage:
    """The stage called ``name`` (``ValueError`` naming the stages otherwise)."""
    found = next((s for s in STAGES if s.name == name), None)
    if found is None:
        raise ValueError(f"unknown migration stage {name!r} (stages: {', '.join(s.name for s in STAGES)})")
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


def _nodes(configs: Mapping[int, str]) -> str:
    return ", ".join(f"{n}={c}" for n, c in sorted(configs.items()))
