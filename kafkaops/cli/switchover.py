"""``kafkaops switchover SERVICE --from DC --to DC`` and ``kafkaops offsets translate GROUP --from --to``.

Both act on a multi-site inventory (``sites:``, e.g. ``inventory/lab-sites.yaml``): the switchover finds
the one whose ``switchover:`` section has SERVICE; a translation the one whose sites include both
clusters (named by cluster or by DC). They are the ``switchover`` and ``offsets-translate`` runbooks:
planned, journaled, locked (the lock is in the discovery records' etcd), resumable.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt
from kafkaops.errors import ConfigError
from kafkaops.model import Cluster

offsets_app = typer.Typer(help="Consumer offsets across sites: `kafkaops offsets translate GROUP --from --to`.",
                          no_args_is_help=True)

InventoryOpt = typer.Option(None, "--inventory", "-i",
                            help="A multi-site inventory (default: the inventories found: `kafkaops --help`).")
MarginOpt = typer.Option("60s", "--margin", metavar="DURATION",
                         help="How far out of timestamp order an event may be and still not be lost: consumers "
                              "resume this much earlier (the duplicates it costs are in the plan).")


class Method(StrEnum):
    exact = "exact"
    margin = "margin"


MethodOpt = typer.Option(Method.exact, "--method",
                         help="exact: each partition resumes right after the last records the group read, found "
                              "once on the target (0 duplicates), the margin rule where they are not; margin: "
                              "by timestamp minus --margin everywhere.")


def _multi_site(inventory: Path | None) -> list[Cluster]:
    from kafkaops.inventory import load_inventory
    from kafkaops.lookup import inventory_files

    return [c for c in (load_inventory(p) for p in inventory_files(inventory)) if c.multi_site]


def find_sites_of_service(service: str, inventory: Path | None) -> Cluster:
    """The multi-site inventory that switches ``service`` (exactly one)."""
    sites = _multi_site(inventory)
    found = [c for c in sites if service in c.switched]
    if len(found) > 1:
        raise ConfigError(f"service {service!r} is switched by {found[0].source} and {found[1].source}",
                          hint="pass --inventory FILE to say which")
    if not found:
        known = ", ".join(sorted(s for c in sites for s in c.switched)) or "none"
        raise ConfigError(f"no multi-site inventory switches {service!r}",
                          hint=f"switchover services: {known}" + ("" if inventory else "; or pass --inventory FILE"))
    return found[0]


def site_of(sites: Cluster, name: str) -> str:
    """The DC of a site named by its DC or its cluster name."""
    for dc, cluster in sites.sites.items():
        if name in (dc, cluster.name):
            return dc
    known = ", ".join(f"{dc} ({c.name})" for dc, c in sites.sites.items())
    raise ConfigError(f"{name!r} is not a site of {sites.name} ({sites.source})", hint=f"sites: {known}")


def _check_site(sites: Cluster, name: str, option: str) -> str:
    try:
        return site_of(sites, name)
    except ConfigError as exc:
        raise typer.BadParameter(f"{exc}; {exc.hint}", param_hint=option) from None


def _typed(rb: Any, name: str, value: str, option: str) -> Any:
    """A command-line value as the runbook parameter's type (durations: 10s, 5m...)."""
    from kafkaops.cli.runbook_commands import parse_value

    param = rb.param(name)
    assert param is not None, f"runbook {rb.name} has no parameter {name}"
    try:
        return parse_value(param, rb.declaration(name), value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def switchover_cmd(
    service: str = typer.Argument(..., help="The service to move (the multi-site inventory's switchover: section)."),
    from_site: str = typer.Option(..., "--from", metavar="DC", help="The site the service leaves (DC or cluster)."),
    to_site: str = typer.Option(..., "--to", metavar="DC", help="The site it moves to (DC or cluster)."),
    max_lag: int = typer.Option(1000, "--max-lag", min=0,
                                help="Records MirrorMaker may be behind per mirrored partition at the start."),
    syn_window: str = typer.Option("10s", "--syn-window", metavar="DURATION",
                                   help="How long no new SYN may reach the source site's service address."),
    margin: str = MarginOpt, method: Method = MethodOpt,
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
) -> None:
    """Move SERVICE's clients and consumers from one site to the other: pre-flight both sites, depool the
    source's discovery record, zero new SYNs at its service address, MirrorMaker lag 0, consumer groups
    translated (exactly where their last records are found on the target, by timestamp minus the margin
    elsewhere), pool the target, post-check. Resumable (`kafkaops resume RUN`);
    `kafkaops runs abort RUN --rollback` switches back."""
    from kafkaops.catalog import find_runbook, load_plugins
    from kafkaops.cli.runbook_commands import run_runbook

    load_plugins()  # the step kinds the runbook is checked against

    sites = find_sites_of_service(service, inventory)
    src, dst = _check_site(sites, from_site, "--from"), _check_site(sites, to_site, "--to")
    if src == dst:
        raise typer.BadParameter(f"the service would stay in {src}", param_hint="--to")
    rb = find_runbook("switchover")
    params = {"service": service, "from_site": src, "to_site": dst, "max_lag": max_lag,
              "syn_window": _typed(rb, "syn_window", syn_window, "--syn-window"),
              "margin": _typed(rb, "margin", margin, "--margin"), "method": method.value}
    run_runbook(rb, sites, [], params, reason=reason, task=task, yes=yes, dry_run=dry_run, output=output,
                save_plan=save_plan)


def translate_cmd(
    group: str = typer.Argument(..., help="The consumer group."),
    from_site: str = typer.Option(..., "--from", metavar="CLUSTER", help="Where its offsets are read (cluster or DC)."),
    to_site: str = typer.Option(..., "--to", metavar="CLUSTER", help="Where they are set (cluster or DC)."),
    topics: str = typer.Option("", "--topics", metavar="REGEX", help="Only topics matching this (default: all)."),
    margin: str = MarginOpt, method: Method = MethodOpt,
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
) -> None:
    """Set GROUP's offsets on the target so that it resumes where it stopped on the source: per partition,
    right after the last records it read, found on the target by their timestamp, key and value (exact:
    no duplicate); where they are not found once, the CreateTime of its position minus --margin, looked
    up by timestamp. The plan shows each partition's method and duplicates, and states the zero-loss
    guarantee; refused while the group has members on the target."""
    import re

    from kafkaops.catalog import find_runbook, load_plugins
    from kafkaops.cli.runbook_commands import run_runbook

    load_plugins()  # the step kinds the runbook is checked against

    try:
        re.compile(topics)
    except re.error as exc:
        raise typer.BadParameter(f"not a regular expression: {exc}", param_hint="--topics") from None
    candidates = [c for c in _multi_site(inventory)
                  if any(from_site in (dc, s.name) for dc, s in c.sites.items())
                  and any(to_site in (dc, s.name) for dc, s in c.sites.items())]
    if len(candidates) != 1:
        raise ConfigError(f"{'no' if not candidates else 'more than one'} multi-site inventory has both {from_site} "
                          f"and {to_site} as sites", hint="pass --inventory FILE (a multi-site inventory, sites:)")
    sites = candidates[0]
    src, dst = site_of(sites, from_site), site_of(sites, to_site)
    if src == dst:
        raise typer.BadParameter("--from and --to are the same cluster", param_hint="--to")
    rb = find_runbook("offsets-translate")
    params = {"group": group, "from_site": src, "to_site": dst, "topics": topics,
              "margin": _typed(rb, "margin", margin, "--margin"), "method": method.value}
    run_runbook(rb, sites, [], params, reason=reason, task=task, yes=yes, dry_run=dry_run, output=output,
                save_plan=save_plan)


def register(root: typer.Typer) -> None:
    """Add ``kafkaops switchover`` and ``kafkaops offsets translate``."""
    root.command("switchover")(switchover_cmd)
    offsets_app.command("translate")(translate_cmd)
    root.add_typer(offsets_app, name="offsets")
