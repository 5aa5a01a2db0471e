"""``kafkaops controllers add|remove NODE``: a KRaft controller joins or leaves the metadata quorum (KIP-853).

* ``add NODE``: NODE (listed under the inventory's ``controllers:``, racked, Kafka installed and configured
  with ``controller.quorum.bootstrap.servers``) is formatted for the cluster with no initial voters, started,
  caught up as an observer, then added as a voter through Kafka's ``kafka-metadata-quorum add-controller``.
* ``remove NODE``: NODE leaves the voters (``remove-controller`` with its directory id) and is stopped —
  never leaving fewer than ``--min-voters`` (3) or the quorum without a caught-up majority.

Each binds a runbook (``controllers-add``, ``controllers-remove``): a plan for review (``--dry-run``,
``--save-plan``), the cluster lock, the journal, ``kafkaops resume RUN`` after a kill. Both are refused on a
static quorum (``kraft.version`` 0) with the documented way to a dynamic one; the refusals are the plan's,
made from what the quorum says now (:mod:`kafkaops.policy.quorum_membership`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt
from kafkaops.cli.runs import ConfirmedOpt

app = typer.Typer(help="A KRaft cluster's metadata quorum: add or remove a controller (KIP-853, dynamic quorums).",
                  no_args_is_help=True, rich_markup_mode=None)

NodeArg = typer.Argument(..., metavar="NODE", help="The controller node (short name or FQDN, under the inventory's "
                                                   "controllers:).")
InventoryOpt = typer.Option(None, "--inventory", "-i", help="Inventory file.")
MaxLagOpt = typer.Option(1000, "--max-lag", min=0, max=10_000_000,
                         help="Records a voter (or the new observer) may be behind the leader and count as caught up.")
TimeoutOpt = typer.Option("5m", "--timeout", help="How long each wait of the procedure may take (e.g. 5m).")


def _controller(node: str, inventory: Path | None) -> tuple[Any, Any]:
    """NODE's cluster and host; refused (exit 3) unless NODE is a controller node of a KRaft cluster."""
    from kafkaops.errors import ConfigError
    from kafkaops.lookup import find_host

    cluster, host = find_host(node, inventory)
    if host.role != "controller" or not cluster.kraft:
        raise ConfigError(f"{host.name} is not a KRaft controller node of {cluster.name}",
                          hint=f"list it under controllers: in {cluster.source} (a KRaft cluster: no kafka.zookeeper)")
    return cluster, host


def _timeout(value: str) -> float:
    from kafkaops.engine.step import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timeout") from None


def add_cmd(node: str = NodeArg, max_lag: int = MaxLagOpt, timeout: str = TimeoutOpt,
            reason: str | None = ReasonOpt, task: str | None = TaskOpt, yes: bool = YesOpt,
            dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
            confirmed: list[str] | None = ConfirmedOpt, inventory: Path | None = InventoryOpt) -> None:
    """Add NODE to the voters of a dynamic KRaft quorum: format its storage (no initial voters), start it,
    wait until it has caught up as an observer, add it with `kafka-metadata-quorum add-controller`, wait until
    it is a caught-up voter. The quorum gated before and after; refused on a static quorum."""
    from kafkaops.cli.runbook_commands import require_reason, run_runbook

    require_reason(reason, dry_run)  # before any system is asked
    seconds = _timeout(timeout)
    cluster, host = _controller(node, inventory)
    run_runbook("controllers-add", cluster, [host], {"max_lag": max_lag, "timeout": seconds}, reason=reason,
                task=task, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan,
                confirmed=tuple(confirmed or ()))


def remove_cmd(node: str = NodeArg,
               min_voters: int = typer.Option(3, "--min-voters", min=1, max=9,
                                              help="Fewest voters the removal may leave (3: one failure survived)."),
               max_lag: int = MaxLagOpt, timeout: str = TimeoutOpt, reason: str | None = ReasonOpt,
               task: str | None = TaskOpt, yes: bool = YesOpt, dry_run: bool = DryRunOpt,
               output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
               confirmed: list[str] | None = ConfirmedOpt, inventory: Path | None = InventoryOpt) -> None:
    """Remove NODE from the voters of a dynamic KRaft quorum (`kafka-metadata-quorum remove-controller`), then
    stop it. Refused when fewer than --min-voters would stay, another voter lags, or the voters left would not
    hold a caught-up majority; refused on a static quorum."""
    from kafkaops.cli.runbook_commands import require_reason, run_runbook

    require_reason(reason, dry_run)
    seconds = _timeout(timeout)
    cluster, host = _controller(node, inventory)
    run_runbook("controllers-remove", cluster, [host],
                {"min_voters": min_voters, "max_lag": max_lag, "timeout": seconds}, reason=reason, task=task,
                yes=yes, dry_run=dry_run, output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


def register(root: typer.Typer) -> None:
    """Add ``kafkaops controllers`` (add, remove)."""
    app.command("add")(add_cmd)
    app.command("remove")(remove_cmd)
    root.add_typer(app, name="controllers")
