"""``kafkaops migrate-to-kraft CLUSTER``: the next stage of a ZooKeeper → KRaft migration.

A migration is four changes, each one reviewed, locked, journaled and resumable on its own (the
runbooks ``migration-controllers``, ``migration-brokers`` with ``mode: migration`` then ``mode: kraft``,
``migration-finalize``; :data:`kafkaops.policy.migration.STAGES`). The command reads where the cluster
stands — each node's configuration, ZooKeeper's ``/controller`` and ``/migration``, the quorum — and plans
the stage that phase is ready for; run it again for the next one. Between stages the cluster is whole and
the operator checks it, as Kafka's guide asks. The last stage is the point of no return and asks for
``--confirmed finalize-migration``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt

if TYPE_CHECKING:
    from kafkaops.environment import Environment
    from kafkaops.policy.migration import MigrationView, Stage

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Search only this inventory file.")
ConfirmedOpt = typer.Option([], "--confirmed", metavar="NAME",
                            help="A manual checkpoint the plan asks for, confirmed (the last stage asks for "
                                 "finalize-migration: the point of no return). --yes does not confirm it.")
RevertOpt = typer.Option(False, "--revert", help="Go back to ZooKeeper mode instead, the way Kafka documents it "
                                                 "(refused once the migration is being finalized): every revert "
                                                 "stage the cluster still needs, one run each.")


def migrate_cmd(
    cluster: str = typer.Argument(..., help="The cluster (its inventory says kafka.migration: to-kraft)."),
    scan: bool = typer.Option(True, "--scan/--no-scan", help="Broker stages: the post-check scans the data on "
                                                              "Spark (--no-scan: on metadata only)."),
    syn_window: str = typer.Option("10s", "--syn-window", metavar="DURATION",
                                   help="Broker stages: how long new SYNs must stay at zero after each depool."),
    revert: bool = RevertOpt,
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
    save_plan: Path | None = SavePlanOpt, confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Run the next stage of CLUSTER's migration from ZooKeeper to KRaft, the one its phase is ready for:
    provision the controllers; roll the brokers into migration mode (the metadata copied: dual-write); roll
    them into KRaft mode; finalize (the controllers without ZooKeeper: no way back, --confirmed
    finalize-migration). One stage per run: run the command again for the next. A stage stopped half-way
    resumes with `kafkaops resume RUN` (or this command again, once its lock is released).

    --revert goes back instead, by Kafka's revert: KRaft brokers rolled back to ZooKeeper mode, the controllers
    deprovisioned and ZooKeeper's /controller and /migration deleted, the brokers rolled without the migration
    settings — the stages the cluster still needs, in one command (`runs abort RUN --rollback` on a migration
    run does the same)."""
    from kafkaops.catalog import load_plugins
    from kafkaops.cli.render import nothing_to_do
    from kafkaops.cli.runbook_commands import _echo, require_reason
    from kafkaops.lookup import find_cluster
    from kafkaops.policy.migration import STAGES, next_stage
    from kafkaops.queries.migration import judge_phase

    require_reason(reason, dry_run)  # before any system is asked
    load_plugins()
    found = find_cluster(cluster, inventory)
    options = StageOptions(scan=scan, syn_window=syn_window, inventory=inventory, reason=reason, task=task, yes=yes,
                           dry_run=dry_run, output=output, save_plan=save_plan, confirmed=tuple(confirmed))
    if revert:
        revert_migration(found.name, options)
        return
    current = judge_phase(_view(found.name, inventory))
    stage = next_stage(current)
    if stage is None:
        nothing_to_do(f"{found.name}: the migration to KRaft is finalized (every node runs without ZooKeeper): "
                      "nothing to do; ZooKeeper can be stopped, and `kafka.migration` and `zookeeper` removed from "
                      f"{found.source}", output)
        return
    number = STAGES.index(stage) + 1
    _echo(f"{found.name}: migration phase {current}; this run: stage {number} of {len(STAGES)}, {stage.name}: "
          f"{stage.what}" + (" (the point of no return)" if stage.no_return else ""))
    _run_stage(found.name, stage, options)


@dataclass(frozen=True)
class StageOptions:
    """The command line a stage's run is made with (the same for every stage of one command)."""

    reason: str | None
    yes: bool
    dry_run: bool
    output: PlanOutput = PlanOutput.auto
    scan: bool = True
    syn_window: str = "10s"
    inventory: Path | None = None
    task: str | None = None
    save_plan: Path | None = None
    confirmed: tuple[str, ...] = ()


def _view(cluster: str, inventory: Path | None) -> MigrationView:
    from kafkaops.environment import Environment
    from kafkaops.lookup import find_cluster
    from kafkaops.queries.migration import migration_view

    env = Environment.of(find_cluster(cluster, inventory), dry_run=True)
    try:
        return migration_view(env)
    finally:
        env.close()


def revert_migration(cluster: str, options: StageOptions) -> None:
    """Kafka's revert, from wherever the cluster stands before the point of no return: each revert stage it
    still needs (:func:`kafkaops.policy.migration.next_revert_stage`), one run each, judged again from the
    cluster after every run. A dry run plans the next stage only (the later ones depend on what it leaves)
    and names the others.

    Raises:
        SafetyRefusal: The migration is being finalized or is finalized (no way back), or the cluster is in
            no phase of a migration.
    """
    from kafkaops.cli.render import nothing_to_do
    from kafkaops.cli.runbook_commands import _echo
    from kafkaops.errors import SafetyRefusal
    from kafkaops.policy.migration import REVERT_STAGES, next_revert_stage

    first = True
    while True:
        view = _view(cluster, options.inventory)
        try:
            stage = next_revert_stage(view)
        except ValueError as exc:
            raise SafetyRefusal(f"{cluster}: no revert to ZooKeeper mode: {exc}",
                                hint="finish the migration: `kafkaops migrate-to-kraft CLUSTER` "
                                     "(`kafkaops docs migration`)"
                                ) from None
        if stage is None:
            if first:
                nothing_to_do(f"{cluster}: in ZooKeeper mode, nothing of a migration left to revert", options.output)
            else:
                _echo(f"{cluster}: back in ZooKeeper mode (every broker without the migration settings, no KRaft "
                      "controller, ZooKeeper's /controller a broker's)")
            return
        number = REVERT_STAGES.index(stage) + 1
        _echo(f"{cluster}: revert to ZooKeeper mode, stage {number} of {len(REVERT_STAGES)}, {stage.name}: "
              f"{stage.what}")
        _run_stage(cluster, stage, options)
        first = False
        if options.dry_run:
            later = REVERT_STAGES[number:]
            if later:
                _echo("then, each planned from what the one before leaves: "
                      + "; ".join(f"{s.name}: {s.what}" for s in later))
            return


def refuse_past_no_return(env: Environment, run_id: str) -> None:
    """``runs abort RUN --rollback`` of a migration run: refuse, before anything is undone, once the migration
    is being finalized (a controller runs without ZooKeeper: Kafka documents no way back)."""
    from kafkaops.errors import SafetyRefusal
    from kafkaops.policy.migration import can_revert
    from kafkaops.queries.migration import judge_phase, migration_view

    current = judge_phase(migration_view(env))
    if not can_revert(current):
        raise SafetyRefusal(
            f"no rollback of run {run_id}: the migration is {current} — a controller already runs without "
            "ZooKeeper, which no longer receives the metadata, and Kafka documents no way back",
            hint=f"finish it: `kafkaops resume {run_id}` (or end the run without --rollback: "
                 f"`kafkaops runs abort {run_id} --reason ...`)")


def _run_stage(cluster: str, stage: Stage, options: StageOptions) -> None:
    """Plan, show and (unless a dry run) run one stage's runbook with the command line's options."""
    from kafkaops.catalog import find_runbook
    from kafkaops.cli.runbook_commands import given_options, run_procedure

    rb = find_runbook(stage.runbook)
    given: dict[str, object] = dict(stage.params)
    if rb.param("stage") is not None:
        given["stage"] = stage.name
    given = given_options(rb, given, scan=options.scan, syn_window=options.syn_window)
    run_procedure(rb, cluster, given, inventory=options.inventory, reason=options.reason, task=options.task,
                  yes=options.yes, dry_run=options.dry_run, output=options.output, save_plan=options.save_plan,
                  confirmed=options.confirmed)


def register(root: typer.Typer) -> None:
    """Add ``kafkaops migrate-to-kraft``."""
    root.command("migrate-to-kraft")(migrate_cmd)
