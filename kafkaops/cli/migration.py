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

from pathlib import Path

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Search only this inventory file.")
ConfirmedOpt = typer.Option([], "--confirmed", metavar="NAME",
                            help="A manual checkpoint the plan asks for, confirmed (the last stage asks for "
                                 "finalize-migration: the point of no return). --yes does not confirm it.")


def migrate_cmd(
    cluster: str = typer.Argument(..., help="The cluster (its inventory says kafka.migration: to-kraft)."),
    scan: bool = typer.Option(True, "--scan/--no-scan", help="Broker stages: the post-check scans the data on "
                                                              "Spark (--no-scan: on metadata only)."),
    syn_window: str = typer.Option("10s", "--syn-window", metavar="DURATION",
                                   help="Broker stages: how long new SYNs must stay at zero after each depool."),
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
    save_plan: Path | None = SavePlanOpt, confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Run the next stage of CLUSTER's migration from ZooKeeper to KRaft, the one its phase is ready for:
    provision the controllers; roll the brokers into migration mode (the metadata copied: dual-write); roll
    them into KRaft mode; finalize (the controllers without ZooKeeper: no way back, --confirmed
    finalize-migration). One stage per run: run the command again for the next. A stage stopped half-way
    resumes with `kafkaops resume RUN` (or this command again, once its lock is released)."""
    from kafkaops.catalog import find_runbook, load_plugins
    from kafkaops.cli.procedures import _echo, _require_reason, parse_value, run_procedure
    from kafkaops.cli.render import nothing_to_do
    from kafkaops.lookup import environment, find_cluster
    from kafkaops.policy.migration import STAGES, next_stage
    from kafkaops.steps.migration import judge_phase, migration_view

    _require_reason(reason, dry_run)  # before any system is asked
    load_plugins()
    found = find_cluster(cluster, inventory)
    env = environment(found, dry_run=True)
    try:
        current = judge_phase(migration_view(env))
    finally:
        env.close()
    stage = next_stage(current)
    if stage is None:
        nothing_to_do(f"{found.name}: the migration to KRaft is finalized (every node runs without ZooKeeper): "
                      "nothing to do; ZooKeeper can be stopped, and `kafka.migration` and `zookeeper` removed from "
                      f"{found.source}", output)
        return
    number = STAGES.index(stage) + 1
    _echo(f"{found.name}: migration phase {current}; this run: stage {number} of {len(STAGES)}, {stage.name}: "
          f"{stage.what}" + (" (the point of no return)" if stage.no_return else ""))
    rb = find_runbook(stage.runbook)
    given: dict[str, object] = dict(stage.params)
    for name, value in (("scan", scan), ("syn_window", syn_window)):
        param = rb.param(name)
        if param is not None:
            try:
                given[name] = parse_value(param, rb.declaration(name), value) if isinstance(value, str) else value
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None
    run_procedure(rb, found.name, given, inventory=inventory, reason=reason, task=task, yes=yes, dry_run=dry_run,
                  output=output, save_plan=save_plan, confirmed=tuple(confirmed))


def register(root: typer.Typer) -> None:
    """Add ``kafkaops migrate-to-kraft``."""
    root.command("migrate-to-kraft")(migrate_cmd)
