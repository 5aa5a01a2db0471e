"""``kafkaops restart-service``, ``kafkaops rolling-restart-service`` and ``kafkaops rolling-deploy``.

The EventBus runbook's "HTTP proxy restart" and "Deploying" procedures. Like every state-changing
command they show the plan first (observed live), then ask (``--yes`` to skip, ``--dry-run`` to stop at
the plan). A rolling deploy asks once more after its canary targets; when it is not confirmed the run
pauses and ``kafkaops resume RUN`` goes on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, err_console
from kafkaops.cli.maintenance import (
    DryRunOpt,
    InventoryOpt,
    OutputOpt,
    ReasonOpt,
    SavePlanOpt,
    SynWindowOpt,
    TaskOpt,
    YesOpt,
    run_runbook,
)
from kafkaops.errors import ConfigError

HealthTimeoutOpt = typer.Option("60s", "--health-timeout",
                                help="How long the service may take to answer HTTP 200 after the restart/deploy.")
LogWindowOpt = typer.Option("5s", "--log-window", help="How long to watch the service log before scanning it.")


def _say(line: str) -> None:
    err_console.print(line, highlight=False, markup=False, soft_wrap=True)


def _confirm(yes: bool) -> Any:
    """The operator's answer to "go on after the canary?": yes with --yes, asked on a terminal, else
    nobody to ask (None: the run pauses there and ``kafkaops resume`` is the answer)."""
    if yes:
        return lambda _question: True
    if sys.stdin.isatty():
        return lambda question: bool(typer.confirm(question, default=False))
    return None


def _hosts_with(cluster: Any, service: str) -> list[Any]:
    hosts = [h for h in cluster.hosts if h.service(service) is not None]
    if not hosts:
        known = sorted({s.name for h in cluster.hosts for s in h.services})
        raise ConfigError(f"no host of cluster {cluster.name} runs {service!r}",
                          hint=f"services in {cluster.source}: {', '.join(known) or 'none'}")
    return hosts


def _canary(hosts: list[Any], n: int) -> list[str]:
    if n < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--canary")
    return [h.name for h in hosts[:n]] if n < len(hosts) else []


def _common(service: Any, syn_window: str, health_timeout: str, log_window: str) -> dict[str, Any]:
    return {"service": service.name, "port": service.port, "syn_window": syn_window,
            "health_timeout": health_timeout, "log_window": log_window}


def restart_service(
    service: str = typer.Argument(..., help="Service name from the inventory (services:), e.g. eventbus."),
    host: str = typer.Argument(..., help="Host (short name or FQDN)."),
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: Output = OutputOpt, save_plan: Path | None = SavePlanOpt,
    syn_window: str = SynWindowOpt, health_timeout: str = HealthTimeoutOpt, log_window: str = LogWindowOpt,
) -> None:
    """Restart SERVICE on HOST without losing a request: depool, SYN gate, restart, HTTP health, log scan, repool."""
    from kafkaops.cli.lookup import find_host
    from kafkaops.steps.service import service_of

    cluster, h = find_host(host, inventory)
    svc = service_of(h, service)
    run_runbook("restart-service", cluster, [h], _common(svc, syn_window, health_timeout, log_window),
                reason=reason, task=task, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan,
                confirm=_confirm(yes), find_controller=False)


def rolling_restart_service(
    service: str = typer.Argument(..., help="Service name from the inventory (services:), e.g. eventbus."),
    cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
    canary: int = typer.Option(0, "--canary", help="Ask before going past the first N hosts (0: no canary)."),
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: Output = OutputOpt, save_plan: Path | None = SavePlanOpt,
    syn_window: str = SynWindowOpt, health_timeout: str = HealthTimeoutOpt, log_window: str = LogWindowOpt,
) -> None:
    """Restart SERVICE on every host of CLUSTER that runs it, one host at a time. Resumable mid-roll."""
    from kafkaops.cli.lookup import find_cluster
    from kafkaops.steps.service import service_of

    cluster = find_cluster(cluster_name, inventory)
    hosts = _hosts_with(cluster, service)
    params = {**_common(service_of(hosts[0], service), syn_window, health_timeout, log_window),
              "canary": _canary(hosts, canary)}
    run_runbook("rolling-restart-service", cluster, hosts, params, reason=reason, task=task, yes=yes,
                dry_run=dry_run, output=output, save_plan=save_plan, confirm=_confirm(yes),
                find_controller=False)


def rolling_deploy(
    cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
    service: str = typer.Option(..., "--service", "-s", help="Service name from the inventory, e.g. eventbus."),
    message: str = typer.Option(..., "--message", "-m", help="Deploy message (as for scap deploy)."),
    rev: str | None = typer.Option(None, "--rev", help="Revision to deploy (default: what the deploy host has "
                                                       "checked out, from the inventory's deploy_revision)."),
    canary: int = typer.Option(1, "--canary", help="Deploy the first N targets, then ask before the rest "
                                                   "(0: no canary)."),
    repo: str = typer.Option("eventlogging/eventbus", "--repo", help="Repository on the deploy host ({repo})."),
    inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
    yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: Output = OutputOpt, save_plan: Path | None = SavePlanOpt,
    syn_window: str = SynWindowOpt, health_timeout: str = HealthTimeoutOpt, log_window: str = LogWindowOpt,
) -> None:
    """Deploy a revision of SERVICE to every host of CLUSTER, one host at a time, canary first.

    Per target: depool, SYN gate, the inventory's deploy command on the deploy host for that one target,
    wait until it serves the revision with HTTP 200, log scan, repool. Hosts already serving the revision
    are skipped. A failed target stops the run (target depooled) with the rollback and resume commands.
    """
    from kafkaops.cli.lookup import find_cluster
    from kafkaops.steps.deploy_host import check_message, checked_out_revision, deploy_host, revision_matches
    from kafkaops.steps.service import check_health, service_of

    check_message(message)
    cluster = find_cluster(cluster_name, inventory)
    hosts = _hosts_with(cluster, service)
    from kafkaops.cli.lookup import environment

    look = environment(cluster, dry_run=True)
    deployer = deploy_host(look)
    if rev is None:
        rev = checked_out_revision(look, repo)
        _say(f"revision {rev}: what {deployer.name} has checked out")
    todo = []
    for h in hosts:
        check = check_health(h, service_of(h, service))
        if check.healthy and revision_matches(check.revision, rev):
            _say(f"{h.name}: already serves {rev} ({check.line()}): skipped")
        else:
            todo.append(h)
    if not todo:
        _say(f"nothing to deploy: every host of {cluster.name} running {service} serves {rev}")
        return
    params = {**_common(service_of(todo[0], service), syn_window, health_timeout, log_window),
              "rev": rev, "message": message, "repo": repo, "canary": _canary(todo, canary)}
    run_runbook("rolling-deploy", cluster, todo, params, reason=reason, task=task, yes=yes, dry_run=dry_run,
                output=output, save_plan=save_plan, confirm=_confirm(yes), find_controller=False)


def register(app: typer.Typer) -> None:
    app.command("restart-service")(restart_service)
    app.command("rolling-restart-service")(rolling_restart_service)
    app.command("rolling-deploy")(rolling_deploy)
