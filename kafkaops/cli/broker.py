"""``kafkaops broker demote|promote HOST``: leadership off a broker that stays up, and back (issue 46).

* ``demote HOST``: the broker last in the replica list of every partition it holds (a reorder: no data
  moves), then one preferred election: it leads nothing, its replicas stay in sync. Refused up front
  when a partition's leadership cannot move (the broker its only in-sync replica, or the ISR without it
  under the topic's min ISR). The order before is recorded in the plan and the run's journal.
* ``promote HOST``: the order the last finished demote of HOST recorded, put back for every partition whose
  replicas are still the same brokers, then one election: the broker leads its preferred partitions again.

Each binds a runbook (``broker-demote``, ``broker-promote``): a plan for review (``--dry-run``,
``--save-plan``), the cluster lock, the journal, ``kafkaops resume RUN`` after a kill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import DryRunOpt, OutputOpt, PlanOutput, ReasonOpt, SavePlanOpt, TaskOpt, YesOpt, waiting
from kafkaops.cli.runs import ConfirmedOpt

app = typer.Typer(help="A broker's life: move its leadership off (demote) and back (promote).",
                  no_args_is_help=True, rich_markup_mode=None)

HostArg = typer.Argument(..., metavar="HOST", help="The broker's host (short name or FQDN).")
InventoryOpt = typer.Option(None, "--inventory", "-i", help="Inventory file.")


def _current(env: Any) -> tuple[dict[tuple[str, int], tuple[int, ...]], Any]:
    """Every partition's replica list now, and the snapshot it came from (leaders, ISRs, min ISR)."""
    snap = env.kafka.snapshot(with_configs=True)
    return {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}, snap


def _refuse_leadership(current: dict[tuple[str, int], tuple[int, ...]], snap: Any, broker: int, action: str) -> None:
    """Refuse ``action`` (exit 6) when a partition cannot safely lose ``broker`` as its leader."""
    from kafkaops.placement.lifecycle import leadership_refusals, refuse_leadership

    refuse_leadership(leadership_refusals(
        current, {(p.topic, p.partition): tuple(p.isr) for p in snap.partitions},
        {(p.topic, p.partition): p.leader for p in snap.partitions}, broker,
        {t: c.min_insync_replicas for t, c in snap.topics.items()}), broker, action)


def demote_cmd(host: str = HostArg, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
               yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
               save_plan: Path | None = SavePlanOpt, confirmed: list[str] | None = ConfirmedOpt,
               inventory: Path | None = InventoryOpt) -> None:
    """Move every partition's leadership off HOST's broker; it stays up and in sync (maintenance by hand).

    The broker goes last in the replica list of each partition it holds (no data moves), then one
    preferred-replica election. Refused when a partition's leadership cannot move safely. `kafkaops broker
    promote HOST` puts the recorded order back."""
    from kafkaops.cli.runbook_commands import require_reason, run_runbook
    from kafkaops.environment import Environment
    from kafkaops.lookup import find_host
    from kafkaops.placement.assignment import assignment_param
    from kafkaops.placement.lifecycle import demote_order

    require_reason(reason, dry_run)  # before any system is asked
    cluster, target = find_host(host, inventory)
    env = Environment.of(cluster, dry_run=True)
    try:
        with waiting(f"asking {cluster.name} for every partition's replicas"):
            current, snap = _current(env)
        broker = target.broker_id
        _refuse_leadership(current, snap, broker, "demote")
        order = demote_order(current, broker)
        if not order:
            from kafkaops.cli.render import nothing_to_do

            nothing_to_do(f"broker {broker} is already last in every replica list it is in (`kafkaops broker "
                          f"promote {target.name}` puts the order back)", output)
            return
        params = {"assignment": assignment_param(order),
                  "original": assignment_param({tp: current[tp] for tp in order})}
    finally:
        env.close()
    run_runbook("broker-demote", cluster, [target], params, reason=reason, task=task, yes=yes, dry_run=dry_run,
                output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


def promote_cmd(host: str = HostArg, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
                yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
                save_plan: Path | None = SavePlanOpt, confirmed: list[str] | None = ConfirmedOpt,
                inventory: Path | None = InventoryOpt) -> None:
    """Put back the replica order the last finished `broker demote HOST` recorded, then elect: HOST's broker
    leads its preferred partitions again. Partitions reassigned since (other brokers) are left as they are,
    and counted."""
    from kafkaops.cli.common import err_console
    from kafkaops.cli.runbook_commands import require_reason, run_runbook
    from kafkaops.engine.journal import list_runs
    from kafkaops.environment import Environment
    from kafkaops.errors import ConfigError
    from kafkaops.lookup import find_host
    from kafkaops.placement.assignment import assignment_param, target_assignment

    require_reason(reason, dry_run)  # before any system is asked
    cluster, target = find_host(host, inventory)
    demotes = sorted((s for s in list_runs() if s.runbook == "broker-demote" and s.cluster == cluster.name
                      and s.targets == [target.name] and s.status == "finished"), key=lambda s: s.run_id)
    if not demotes:
        raise ConfigError(f"no finished `broker demote {target.name}` run on this admin host: nothing to put back",
                          hint="`kafkaops runs list` shows the runs; a demote recorded elsewhere is promoted there")
    demote = demotes[-1]
    original = target_assignment(demote.started["runbook"]["params"].get("original"))
    env = Environment.of(cluster, dry_run=True)
    try:
        with waiting(f"asking {cluster.name} for every partition's replicas"):
            current, _ = _current(env)
    finally:
        env.close()
    restore = {tp: r for tp, r in original.items() if tp in current and set(current[tp]) == set(r)
               and current[tp] != r}
    moved = sorted(tp for tp, r in original.items() if tp not in current or set(current[tp]) != set(r))
    if moved:
        err_console.print(f"{len(moved)} partition(s) of run {demote.run_id} have other replicas now: left as they "
                          "are", highlight=False)
    if not restore:
        from kafkaops.cli.render import nothing_to_do

        nothing_to_do(f"every partition of run {demote.run_id} is already in its recorded order", output)
        return
    params = {"assignment": assignment_param(restore), "demote_run": demote.run_id}
    run_runbook("broker-promote", cluster, [target], params, reason=reason, task=task, yes=yes, dry_run=dry_run,
                output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


ThrottleOpt = typer.Option("10MB/s", "--throttle", help="Replication throttle per broker while moving (e.g. 10MB/s).")
BatchOpt = typer.Option(20, "--batch-size", min=1, max=10000, help="Partitions submitted to Kafka together.")
ScanOpt = typer.Option(True, "--scan/--no-scan", help="The post-check scans the data on Spark (--no-scan: metadata "
                                                      "only).")


def _moving(env: Any, cluster: Any, current: dict[tuple[str, int], tuple[int, ...]]) -> dict[str, Any]:
    """What the planners need of the live cluster beside the replica lists: DCs, racks, partition sizes."""
    return {"dc_of": {h.broker_id: h.dc for h in cluster.hosts},
            "rack_of": {h.broker_id: h.rack for h in cluster.hosts},
            "sizes": env.kafka.partition_sizes(sorted(current))}


def _rate(text: str, flag: str = "--throttle") -> float:
    from kafkaops.placement.estimate import parse_rate

    try:
        return parse_rate(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from None


def _say_moves(what: str, moves: int, estimate: Any, rate: float) -> None:
    from kafkaops.cli.common import err_console
    from kafkaops.placement.estimate import human_bytes

    err_console.print(f"{what}: {moves} replica copy(ies), {human_bytes(estimate.bytes_total)} "
                      f"({human_bytes(estimate.bytes_cross_dc)} across DCs), about "
                      f"{estimate.seconds_at(rate):.0f} s at {human_bytes(rate)}/s per broker", highlight=False)


def add_cmd(host: str = HostArg, throttle: str = ThrottleOpt, batch_size: int = BatchOpt, scan: bool = ScanOpt,
            reason: str | None = ReasonOpt, task: str | None = TaskOpt, yes: bool = YesOpt, dry_run: bool = DryRunOpt,
            output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
            confirmed: list[str] | None = ConfirmedOpt, inventory: Path | None = InventoryOpt) -> None:
    """Give a new broker (running, registered, holding nothing) its share: the fewest replica copies that bring
    it to its DC's mean load by bytes, throttled and resumable, then its share of leaders, then pool it."""
    from kafkaops.cli.runbook_commands import require_reason, run_runbook
    from kafkaops.environment import Environment
    from kafkaops.errors import SafetyRefusal
    from kafkaops.lookup import find_host
    from kafkaops.placement.assignment import assignment_param
    from kafkaops.placement.lifecycle import add_plan

    require_reason(reason, dry_run)
    rate = _rate(throttle)
    cluster, target = find_host(host, inventory)
    env = Environment.of(cluster, dry_run=True)
    try:
        with waiting(f"asking {cluster.name} for every partition's replicas and size"):
            current, snap = _current(env)
            if target.broker_id not in snap.brokers:
                raise SafetyRefusal(f"broker {target.broker_id} ({target.name}) is not registered: nothing can move "
                                    "onto it", hint="start its broker first (it joins holding no replica)")
            plan = add_plan(current, target.broker_id, **_moving(env, cluster, current))
    finally:
        env.close()
    if not plan.target:
        from kafkaops.cli.render import nothing_to_do

        nothing_to_do(f"broker {target.broker_id} already holds its share ({plan.stopped})", output)
        return
    _say_moves(f"add broker {target.broker_id}", plan.moves, plan.estimate, rate)
    params = {"assignment": assignment_param(plan.target), "throttle": rate, "batch_size": batch_size, "scan": scan}
    run_runbook("broker-add", cluster, [target], params, reason=reason, task=task, yes=yes, dry_run=dry_run,
                output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


def decommission_cmd(host: str = HostArg, throttle: str = ThrottleOpt, batch_size: int = BatchOpt,
                     capacity: str | None = typer.Option(None, "--capacity", metavar="BYTES",
                                                         help="Bytes a broker may hold (e.g. 4TB): refused when a "
                                                              "broker receiving data would exceed it."),
                     syn_window: str = typer.Option("10s", "--syn-window", help="How long new SYNs must stay at "
                                                    "zero after the depool."),
                     scan: bool = ScanOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt,
                     yes: bool = YesOpt, dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt,
                     save_plan: Path | None = SavePlanOpt, confirmed: list[str] | None = ConfirmedOpt,
                     inventory: Path | None = InventoryOpt) -> None:
    """Retire HOST's broker for good: its leadership off first, the fewest replica moves off it that keep the
    placement rules (throttled, resumable), an emptiness check, silence, depool, stop. Refused up front when
    the brokers left cannot hold it (RF, min ISR, a DC's share, --capacity)."""
    from kafkaops.cli.runbook_commands import require_reason, run_runbook
    from kafkaops.engine.step import parse_duration
    from kafkaops.environment import Environment
    from kafkaops.lookup import find_host
    from kafkaops.placement.assignment import assignment_param
    from kafkaops.placement.lifecycle import decommission_plan, demote_order

    require_reason(reason, dry_run)
    rate = _rate(throttle)
    limit = int(_rate(capacity.removesuffix("/s"))) if capacity else None
    try:
        window = parse_duration(syn_window)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--syn-window") from None
    cluster, target = find_host(host, inventory)
    broker = target.broker_id
    env = Environment.of(cluster, dry_run=True)
    try:
        with waiting(f"asking {cluster.name} for every partition's replicas and size"):
            current, snap = _current(env)
            min_isr = {t: c.min_insync_replicas for t, c in snap.topics.items()}
            _refuse_leadership(current, snap, broker, "decommission")
            plan = decommission_plan(current, broker, capacity=limit, min_isr=min_isr,
                                     **_moving(env, cluster, current))
    finally:
        env.close()
    _say_moves(f"decommission broker {broker}", plan.moves, plan.estimate, rate)
    # Already last everywhere (a demote before, or a decommission rolled back after its demote): the reorder is a
    # no-op, given as the current order (the runbook's reassignment refuses an empty one).
    demote = demote_order(current, broker) or {tp: r for tp, r in current.items() if broker in r}
    params = {"demote": assignment_param(demote), "assignment": assignment_param(plan.target),
              "throttle": rate, "batch_size": batch_size, "syn_window": window, "scan": scan}
    run_runbook("broker-decommission", cluster, [target], params, reason=reason, task=task, yes=yes,
                dry_run=dry_run, output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


def _recorded_order(host: str, cluster: str, current: dict[tuple[str, int], tuple[int, ...]]
                    ) -> dict[tuple[str, int], tuple[int, ...]]:
    """The replica order the last demote or replace of ``host`` on this admin host recorded (its ``original``),
    for the partitions whose replicas are still the same brokers in another order; empty: none."""
    from kafkaops.engine.journal import list_runs
    from kafkaops.placement.assignment import target_assignment

    runs = sorted((r for r in list_runs() if r.runbook in ("broker-demote", "broker-replace") and r.cluster == cluster
                   and r.targets == [host]), key=lambda r: r.run_id)
    for run in reversed(runs):
        recorded = (run.started.get("runbook") or {}).get("params", {}).get("original")
        if not recorded:
            continue
        found = {tp: r for tp, r in target_assignment(recorded).items()
                 if tp in current and set(current[tp]) == set(r) and current[tp] != r}
        if found:
            return found
    return {}


def replace_cmd(host: str = HostArg,
                throttle: str = typer.Option("1MB/s", "--throttle", help="The catch-up's starting replication rate "
                                             "per broker (e.g. 1MB/s)."),
                min_throttle: str = typer.Option("100KB/s", "--min-throttle", help="The autothrottle's lowest rate."),
                max_throttle: str = typer.Option("50MB/s", "--max-throttle", help="The autothrottle's highest rate."),
                interval: str = typer.Option("10s", "--interval", help="How often the autothrottle reads the gates "
                                             "and adjusts the rate."),
                syn_window: str = typer.Option("10s", "--syn-window", help="How long new SYNs must stay at zero "
                                               "after the depool."),
                storage_timeout: str = typer.Option("4h", "--storage-timeout", help="How long the run waits for the "
                                                    "disk or the machine to be replaced."),
                scan: bool = ScanOpt, reason: str | None = ReasonOpt, task: str | None = TaskOpt, yes: bool = YesOpt,
                dry_run: bool = DryRunOpt, output: PlanOutput = OutputOpt, save_plan: Path | None = SavePlanOpt,
                confirmed: list[str] | None = ConfirmedOpt, inventory: Path | None = InventoryOpt) -> None:
    """Replace HOST's disk or machine under the same broker id: its leadership off and its catch-up throttle
    set while it is up, depooled and stopped, the run waiting for the empty disk, then started and caught up
    under an autothrottle (raised while the cluster's gates hold, lowered when not), leading nothing until in
    sync; the order put back, one election, repooled last."""
    from kafkaops.cli.common import err_console
    from kafkaops.cli.runbook_commands import require_reason, run_runbook
    from kafkaops.engine.step import parse_duration
    from kafkaops.environment import Environment
    from kafkaops.errors import SafetyRefusal
    from kafkaops.lookup import find_host
    from kafkaops.placement.assignment import assignment_param
    from kafkaops.placement.estimate import human_bytes
    from kafkaops.placement.lifecycle import demote_order
    from kafkaops.policy.autothrottle import seconds_at

    require_reason(reason, dry_run)
    rates = {flag: _rate(text, flag) for flag, text in (("--throttle", throttle), ("--min-throttle", min_throttle),
                                                        ("--max-throttle", max_throttle))}
    if not rates["--min-throttle"] <= rates["--throttle"] <= rates["--max-throttle"]:
        raise typer.BadParameter(f"{throttle} is not between --min-throttle {min_throttle} and --max-throttle "
                                 f"{max_throttle}", param_hint="--throttle")
    durations: dict[str, float] = {}
    for flag, text in (("--interval", interval), ("--syn-window", syn_window), ("--storage-timeout", storage_timeout)):
        try:
            durations[flag] = parse_duration(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=flag) from None
    cluster, target = find_host(host, inventory)
    broker = target.broker_id
    env = Environment.of(cluster, dry_run=True)
    try:
        with waiting(f"asking {cluster.name} for every partition's replicas and size"):
            current, snap = _current(env)
            if broker not in snap.brokers:
                raise SafetyRefusal(f"broker {broker} ({target.name}) is not registered: its leadership cannot be "
                                    "moved off nor its catch-up throttle set while it is up",
                                    hint="start it first; a broker whose disk already failed is not handled by "
                                         "`broker replace` yet (`kafkaops docs lifecycle`)")
            _refuse_leadership(current, snap, broker, "replace")
            hosted = sorted(tp for tp, r in current.items() if broker in r)
            sizes = env.kafka.partition_sizes(hosted)
    finally:
        env.close()
    order = demote_order(current, broker)
    original = {tp: current[tp] for tp in order}
    if not order:  # already last everywhere (a demote, or a replace stopped before): the reorder is a no-op
        order = {tp: current[tp] for tp in hosted}
        original = _recorded_order(target.name, cluster.name, current) or order
        err_console.print(f"broker {broker} is already last in every replica list: " + (
            f"the order a run of this admin host recorded before is put back at the end ({len(original)} "
            "partition(s))" if original != order else "no recorded order to put back; it stays last (a "
            "preferred-leader rebalance, `kafkaops placement plan`, spreads the leaders)"), highlight=False)
    total = sum(sizes.get(tp, 0) for tp in hosted)
    err_console.print(f"replace broker {broker}: {human_bytes(total)} to catch up in {len(hosted)} partition(s), about "
                      f"{seconds_at(total, rates['--throttle']):.0f} s at {human_bytes(rates['--throttle'])}/s, "
                      f"{seconds_at(total, rates['--max-throttle']):.0f} s at {human_bytes(rates['--max-throttle'])}/s "
                      "per broker", highlight=False)
    params = {"demote": assignment_param(order), "original": assignment_param(original),
              "throttle": rates["--throttle"], "min_throttle": rates["--min-throttle"],
              "max_throttle": rates["--max-throttle"], "interval": durations["--interval"],
              "syn_window": durations["--syn-window"], "storage_timeout": durations["--storage-timeout"], "scan": scan}
    run_runbook("broker-replace", cluster, [target], params, reason=reason, task=task, yes=yes, dry_run=dry_run,
                output=output, save_plan=save_plan, confirmed=tuple(confirmed or ()))


def register(root: typer.Typer) -> None:
    """Add ``kafkaops broker`` (demote, promote, add, decommission, replace)."""
    app.command("demote")(demote_cmd)
    app.command("promote")(promote_cmd)
    app.command("add")(add_cmd)
    app.command("decommission")(decommission_cmd)
    app.command("replace")(replace_cmd)
    root.add_typer(app, name="broker")
