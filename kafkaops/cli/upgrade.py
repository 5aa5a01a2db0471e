"""``kafkaops rolling-upgrade CLUSTER --to VERSION``: a KRaft cluster's Kafka upgraded, then its
``metadata.version`` raised.

Kafka's upgrade is two changes of different kinds, so two runs: the roll (every node stopped, the release
installed, started; the controllers first, the active one last, then the brokers — runbook
``rolling-upgrade``), which can be undone node by node by installing the old release again; and the
``metadata.version`` bump (runbook ``upgrade-metadata-version``), which cannot, and asks for ``--confirmed
metadata-version``. The command reads what the cluster runs — each node's installed release, the finalized
metadata version — and plans the one the cluster is ready for: run it again after the roll for the bump.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Search only this inventory file.")
ConfirmedOpt = typer.Option([], "--confirmed", metavar="NAME",
                            help="A manual checkpoint the plan asks for, confirmed (the metadata.version bump asks "
                                 "for metadata-version: no way back). --yes does not confirm it.")


def upgrade_cmd(
    cluster: str = typer.Argument(..., help="The KRaft cluster (or one whose migration to KRaft is finalized)."),
    to: str = typer.Option(..., "--to", metavar="VERSION", help="The Kafka release to move to (4.3.1)."),
    scan: bool = typer.Option(True, "--scan/--no-scan", help="The roll's post-check scans the data on Spark "
                                                              "(--no-scan: on metadata only)."),
    syn_window: str = typer.Option("10s", "--syn-window", metavar="DURATION",
                                   help="How long new SYNs must stay at zero after each broker's depool."),
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
    save_plan: Path | None = SavePlanOpt, confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Upgrade CLUSTER's Kafka to VERSION: first the roll (each node stopped, VERSION installed, started, with
    every gate of a rolling restart; controllers first, the active one last, then brokers), then — run the
    command again once every node runs VERSION — metadata.version raised to VERSION's (no way back: --confirmed
    metadata-version). A roll stopped half-way resumes with `kafkaops resume RUN`."""
    from kafkaops.catalog import find_runbook, load_plugins
    from kafkaops.cli.render import nothing_to_do
    from kafkaops.cli.runbook_commands import _echo, given_options, require_reason, run_procedure
    from kafkaops.environment import Environment
    from kafkaops.facts.features import parse_features, release_of
    from kafkaops.lookup import find_cluster
    from kafkaops.queries.versions import check_version, features, versions

    problem = check_version(to)
    if problem:
        raise typer.BadParameter(problem, param_hint="--to")
    require_reason(reason, dry_run)  # before any system is asked
    load_plugins()
    found = find_cluster(cluster, inventory)
    env = Environment.of(found, dry_run=True)
    try:
        if not found.controllers:
            from kafkaops.errors import ConfigError

            raise ConfigError(f"the inventory lists no KRaft controller nodes for {found.name}",
                              hint="Kafka 4 runs in KRaft mode: migrate first (kafkaops migrate-to-kraft) and list "
                                   f"the quorum under controllers: in {found.source}")
        installed = versions(env)
        behind = [n for n, v in installed.items() if v != to]
        level = "" if behind else parse_features(features(env, "describe"))["metadata.version"].finalized
    finally:
        env.close()
    release = ".".join(to.split(".")[:2])
    if behind:
        runbook = "rolling-upgrade"
        _echo(f"{found.name}: {len(installed) - len(behind)} of {len(installed)} nodes run Kafka {to}; this run: the "
              f"roll, installing it on {', '.join(behind)} (metadata.version is raised afterwards, on its own)")
    elif release_of(level) < tuple(int(p) for p in release.split(".")):
        runbook = "upgrade-metadata-version"
        _echo(f"{found.name}: every node runs Kafka {to}; this run: metadata.version from {level} to release "
              f"{release}'s (the point of no return of the upgrade)")
    else:
        nothing_to_do(f"{found.name}: every node runs Kafka {to} and metadata.version is {level}: the upgrade is "
                      "done", output)
        return
    rb = find_runbook(runbook)
    given = given_options(rb, {"version": to}, scan=scan, syn_window=syn_window)
    run_procedure(rb, found.name, given, inventory=inventory, reason=reason, task=task, yes=yes, dry_run=dry_run,
                  output=output, save_plan=save_plan, confirmed=tuple(confirmed))


def register(root: typer.Typer) -> None:
    """Add ``kafkaops rolling-upgrade``."""
    root.command("rolling-upgrade")(upgrade_cmd)
