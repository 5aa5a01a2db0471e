"""``kafkaops reboot|restart HOST`` and ``kafkaops rolling-reboot|rolling-restart CLUSTER``.

Every command shows its plan first (observed live), then asks before changing anything (``--yes`` to
skip, ``--dry-run`` to stop at the plan). The plan is what a change review gets (``-o markdown``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, console, err_console

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Inventory file (only this one is searched; default: "
                            "$KAFKAOPS_INVENTORY, else inventory/*.yaml).")
ReasonOpt = typer.Option(None, "--reason", "-r", help="Why (required unless --dry-run; goes to the audit log).")
TaskOpt = typer.Option(None, "--task", help="Task or ticket id, e.g. T123456.")
YesOpt = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation after showing the plan.")
DryRunOpt = typer.Option(False, "--dry-run", help="Observe and plan for real, show the plan, change nothing.")
OutputOpt = typer.Option(Output.table, "--output", "-o", help="Plan format: table, markdown (change review), json.")
SavePlanOpt = typer.Option(None, "--save-plan", help="Write the plan (with its fingerprint) for `kafkaops apply`.")
ForceOpt = typer.Option(False, "--force", help="Proceed despite under-replicated partitions elsewhere.")
HeadroomOpt = typer.Option(0, "--isr-headroom", help="Require N ISR replicas above min.insync.replicas.")
NoElectionOpt = typer.Option(False, "--no-election", help="Skip the preferred-replica election.")
SynWindowOpt = typer.Option("10s", "--syn-window", help="How long new SYNs must stay at zero after the depool.")
NoScanOpt = typer.Option(False, "--no-scan", help="Post-check on metadata only (skip the Spark scan of the data).")
SparkOpt = typer.Option("local[2]", "--spark-master", help="Where the post-check scan runs (spark://h:7077, yarn).")
StableOpt = typer.Option("5s", "--stable-for", help="Rolling: how long the cluster must be healthy between hosts.")
GraceOpt = typer.Option("0s", "--grace", help="Rolling: an extra fixed pause between hosts.")
AtEndOpt = typer.Option(False, "--election-at-end",
                        help="Rolling: one preferred-replica election for the whole cluster after the last host.")


def _echo(line: str) -> None:
    err_console.print(line, highlight=False, markup=False, soft_wrap=True)


def run_runbook(runbook: str, cluster: Any, hosts: list[Any], params: dict[str, Any], *, reason: str | None,
                task: str | None, yes: bool, dry_run: bool, output: Output, save_plan: Path | None,
                confirm: Any = None, find_controller: bool = True) -> None:
    """Plan, show, confirm, run: the shape of every state-changing command.

    The plan is always made in a dry-run environment (its adapters refuse every write); the run gets a
    fresh environment of the same inventory. ``confirm``: how a step asks the operator a question
    (e.g. after a canary); ``find_controller=False`` skips asking Kafka for its controller up front
    (runbooks that neither order by it nor need Kafka).
    """
    from kafkaops.cli.lookup import environment
    from kafkaops.cli.plan_render import render_plan
    from kafkaops.cli.runbooks import load_plugins
    from kafkaops.engine import Runner, Target, bind_runbook, find_runbook
    from kafkaops.engine.audit import current_operator
    from kafkaops.engine.plan import save_plan as write_plan

    if not dry_run and not reason:
        raise typer.BadParameter("--reason is required for anything that changes state (or use --dry-run)",
                                 param_hint="--reason")
    load_plugins()
    rb = find_runbook(runbook)
    plan_env = environment(cluster, dry_run=True, confirm=confirm)
    order = rb.targets.order if rb.targets else "inventory"
    if find_controller and order != "controller_last":
        plan_env.kafka.controller(attempts=1)  # the first word with Kafka: one try, so a dead cluster shows fast
    ordered, notes = plan_env.order_hosts(list(hosts), order)
    bound = bind_runbook(rb, cluster=cluster, targets=[Target(h.name, host=h) for h in ordered], params=params)
    runner = Runner(echo=_echo)
    operator = current_operator()
    plan = runner.dry_run(bound, env=plan_env, operator=operator, reason=reason or "", task=task,
                          notes=tuple(notes))
    plan_env.close()
    if output == Output.json:
        sys.stdout.write(plan.to_json())
    elif output == Output.markdown:
        sys.stdout.write(plan.to_markdown())
    else:
        console.print(render_plan(plan))
    if save_plan is not None:
        write_plan(plan, save_plan)
        err_console.print(f"plan saved to {save_plan}; run it with `kafkaops apply {save_plan}`")
    if dry_run:
        return
    if not yes:
        if not sys.stdin.isatty():
            raise typer.BadParameter("not confirmed: no terminal to ask on; pass --yes after reviewing the plan",
                                     param_hint="--yes")
        typer.confirm(f"Run {runbook} on {', '.join(h.name for h in ordered)}?", abort=True)
    env = plan_env.live()
    try:
        result = runner.start(bound, env=env, operator=operator, reason=reason or "", task=task)
    finally:
        env.close()
    err_console.print(f"journal: {result.journal}", highlight=False, soft_wrap=True)


def _params(force: bool, headroom: int, no_election: bool, syn_window: str, no_scan: bool,
            spark_master: str) -> dict[str, Any]:
    return {"allow_urp": force, "isr_headroom": headroom, "election": not no_election, "syn_window": syn_window,
            "scan": not no_scan, "spark_master": spark_master}


def register(app: typer.Typer) -> None:
    def one_host(runbook: str, verb: str) -> None:
        @app.command(runbook, help=f"{verb} one broker host safely: depool, SYN gate, pre-flight, stop, "
                     f"{'reboot' if runbook == 'reboot' else 'start'}, wait in sync, preferred election, repool, "
                     "post-check. HOST is the short name or the FQDN.")
        def command(
            host: str = typer.Argument(..., help="Host (short name or FQDN)."),
            inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
            yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: Output = OutputOpt,
            save_plan: Path | None = SavePlanOpt, force: bool = ForceOpt, isr_headroom: int = HeadroomOpt,
            no_election: bool = NoElectionOpt, syn_window: str = SynWindowOpt, no_scan: bool = NoScanOpt,
            spark_master: str = SparkOpt,
        ) -> None:
            from kafkaops.cli.lookup import find_host

            cluster, h = find_host(host, inventory)
            run_runbook(runbook, cluster, [h], _params(force, isr_headroom, no_election, syn_window, no_scan,
                                                       spark_master),
                        reason=reason, task=task, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan)

    def rolling(runbook: str, verb: str) -> None:
        @app.command(runbook, help=f"{verb} every broker of CLUSTER one host at a time, the controller last, "
                     "with a health gate between hosts. Resumable mid-roll.")
        def command(
            cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
            inventory: Path | None = InventoryOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
            yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: Output = OutputOpt,
            save_plan: Path | None = SavePlanOpt, force: bool = ForceOpt, isr_headroom: int = HeadroomOpt,
            no_election: bool = NoElectionOpt, syn_window: str = SynWindowOpt, stable_for: str = StableOpt,
            grace: str = GraceOpt, election_at_end: bool = AtEndOpt, no_scan: bool = NoScanOpt,
            spark_master: str = SparkOpt,
        ) -> None:
            from kafkaops.cli.lookup import find_cluster

            cluster = find_cluster(cluster_name, inventory)
            if no_election and election_at_end:
                raise typer.BadParameter("--no-election and --election-at-end contradict each other",
                                         param_hint="--election-at-end")
            params = {**_params(force, isr_headroom, no_election, syn_window, no_scan, spark_master),
                      "stable_for": stable_for,
                      "grace": grace, "election_at_end": election_at_end}
            run_runbook(runbook, cluster, list(cluster.hosts), params, reason=reason, task=task, yes=yes,
                        dry_run=dry_run, output=output, save_plan=save_plan)

    one_host("reboot", "Reboot")
    one_host("restart", "Restart the Kafka broker of")
    rolling("rolling-reboot", "Reboot")
    rolling("rolling-restart", "Restart")
