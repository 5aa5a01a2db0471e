"""``kafkaops placement check|plan|apply``: the stretch layout of seed 004 as a reviewed, resumable procedure.

* ``check CLUSTER``: every partition against the layout (two replicas per DC, first two in one DC, DCs
  grouped), preferred leaders per broker and DC, what losing a whole DC would do, and the cluster's
  stretch-readiness (quorum over three DCs, follower fetching, ``broker.rack``). Exit 9 when a DC loss
  would take a partition offline or under min ISR.
* ``plan CLUSTER [--rf 4] --save-plan FILE``: the target with the fewest replica moves, compared with
  what Kafka's own ``kafka-reassign-partitions --generate`` proposes; the data to move (per broker pair
  and across DCs), its time at the throttle, the cross-DC traffic now and after at the measured produce
  rate; saved as a plan of the ``placement-apply`` runbook (fingerprinted like every plan).
* ``apply FILE``: runs that plan (``kafkaops apply FILE`` does the same); ``kafkaops resume RUN`` after a
  kill, ``kafkaops runs abort RUN --rollback`` to cancel what is moving and clear the throttles.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, check_writable, console, err_console, print_json
from kafkaops.cli.runs import ConfirmedOpt
from kafkaops.errors import CheckFailed

app = typer.Typer(help="Replica placement of a cluster stretched over DCs: check, plan, apply.",
                  no_args_is_help=True, rich_markup_mode=None)

#: Violations listed in a table or Markdown before the rest are only counted (JSON lists them all).
SHOWN = 25

TopicsOpt = typer.Option(None, "--topics", metavar="REGEX",
                         help="Only topics whose whole name matches (default: every topic but Kafka's internal "
                              "__ ones; --topics '__consumer_offsets' checks that one).")
InventoryOpt = typer.Option(None, "--inventory", "-i",
                            help="Inventory file (default: the inventories found: `kafkaops --help`).")


def _live(cluster_name: str, inventory: Path | None, topics: str | None) -> dict[str, Any]:
    """What the check and the plan work on, read from the live cluster once."""
    from kafkaops.environment import Environment
    from kafkaops.lookup import find_cluster

    if topics is not None:
        try:
            pattern = re.compile(topics)
        except re.error as exc:
            raise typer.BadParameter(f"not a regular expression: {exc}", param_hint="--topics") from None
    cluster = find_cluster(cluster_name, inventory)
    env = Environment.of(cluster, dry_run=True)
    snap = env.kafka.snapshot(with_configs=True)
    everything = {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}
    selected = {tp: r for tp, r in everything.items()
                if (pattern.fullmatch(tp[0]) if topics is not None else not tp[0].startswith("__"))}
    if not selected:
        # An empty selection is never a pass: a typo in --topics, or a topic this broker does not know yet.
        env.close()
        raise CheckFailed(f"no topic of {cluster.name} matches" + (f" --topics {topics!r}" if topics else ""),
                          hint="check --topics (`kafkaops status` lists the topics' partitions)")
    dc_of = {h.broker_id: h.dc for h in cluster.hosts}
    return {"cluster": cluster, "env": env, "snap": snap, "all": everything, "selected": selected,
            "dc_of": dc_of, "min_isr": {t: c.min_insync_replicas for t, c in snap.topics.items()},
            "leaders": {(p.topic, p.partition): p.leader for p in snap.partitions}}


def readiness(live: dict[str, Any]) -> list[dict[str, Any]]:
    """The stretch-readiness facts (:func:`kafkaops.policy.stretch.stretch_readiness`) of the live cluster."""
    from kafkaops.policy.stretch import READINESS_SETTINGS, stretch_readiness

    cluster = live["cluster"]
    settings = live["env"].kafka.broker_settings([h.broker_id for h in cluster.hosts], READINESS_SETTINGS)
    return stretch_readiness(cluster, settings)


# --- check ---------------------------------------------------------------------------------------------

def check_cmd(
    cluster: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
    topics: str | None = TopicsOpt,
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, markdown or json."),
    inventory: Path | None = InventoryOpt,
) -> None:
    """Check every partition against the stretch layout, and what losing a whole DC would do.

    Rules (seed 004): at least 2 replicas per DC (consumers survive a failure without reading across DCs),
    the first two replicas in one DC (producers survive a failure without switching DC), each DC's
    replicas grouped, preferred leaders even over brokers and DCs. Critical (exit 9): a partition that
    would go offline, or under min.insync.replicas, if one DC were lost."""
    from kafkaops.placement.layout import check_layout

    live = _live(cluster, inventory, topics)
    try:
        report = check_layout(live["selected"], live["dc_of"], live["min_isr"])
        facts = readiness(live)
    finally:
        live["env"].close()
    data = {"cluster": live["cluster"].name, **report.to_dict(), "readiness": facts,
            "by_partition": _by_partition(report.violations, live["selected"], live["dc_of"])}
    if output is Output.json:
        print_json(data)
    elif output is Output.markdown:
        console.print(_check_markdown(data), markup=False, highlight=False, soft_wrap=True)
    else:
        _check_table(data)
    if report.critical_partitions():
        raise CheckFailed(f"{report.critical_partitions()} partition(s) of {live['cluster'].name} would "
                          "go offline or under min ISR if a DC were lost",
                          hint=f"`kafkaops placement plan {live['cluster'].name} --save-plan FILE` lays them out")


def _by_partition(violations: Any, assignment: dict[Any, Any], dc_of: dict[int, str]) -> list[dict[str, Any]]:
    """One row per partition that breaks a rule: its replicas with their DCs, critical rules first."""
    rows: dict[str, dict[str, Any]] = {}
    for v in violations:
        row = rows.setdefault(v.name, {"partition": v.name, "replicas": " ".join(
            f"{b}/{dc_of.get(b, '?')}" for b in assignment[(v.topic, v.partition)]), "critical": [], "warnings": []})
        row["critical" if v.severity == "critical" else "warnings"].append(v.rule if v.severity != "critical"
                                                                           else v.detail)
    return sorted(rows.values(), key=lambda r: (not r["critical"], r["partition"]))


def _verdict(data: dict[str, Any]) -> str:
    crit = {v["partition"] for v in data["violations"] if v["severity"] == "critical"}
    warn = {v["partition"] for v in data["violations"]} - crit
    return (f"{data['cluster']}: {data['partitions']} partition(s) over DCs {', '.join(data['dcs'])}: "
            + ("layout OK" if data["ok"] else
               f"{len(crit)} critical, {len(warn)} with warnings"
               + ("" if not data["leaders"]["unbalanced_topics"] else
                  f", leaders unbalanced in {len(data['leaders']['unbalanced_topics'])} topic(s)")))


def _check_table(data: dict[str, Any]) -> None:
    from rich.table import Table

    console.print(_verdict(data), highlight=False, markup=False, soft_wrap=True)
    if data["counts"]:
        console.print("rules broken (partitions): " + ", ".join(f"{k} {v}" for k, v in data["counts"].items()),
                      highlight=False, markup=False, soft_wrap=True)
    rows = data["by_partition"]
    if rows:
        t = Table(title="partitions breaking the layout (critical first)")
        for col in ("partition", "replicas (broker/DC)", "critical", "warnings"):
            t.add_column(col, overflow="fold")
        for r in rows[:SHOWN]:
            t.add_row(r["partition"], r["replicas"], "; ".join(r["critical"]) or "-", ", ".join(r["warnings"]))
        console.print(t)
        if len(rows) > SHOWN:
            console.print(f"... and {len(rows) - SHOWN} more partition(s) (-o json lists them all)", markup=False)
    loss = Table(title="if a whole DC were lost")
    for col in ("DC lost", "offline", "under min ISR", "leaders moving to another DC"):
        loss.add_column(col)
    for d in data["dc_loss"]:
        loss.add_row(d["dc"], str(len(d["offline"])), str(len(d["under_min_isr"])), str(d["leaders_moved"]))
    console.print(loss)
    lead = data["leaders"]
    console.print("preferred leaders per DC: " + ", ".join(f"{k} {v}" for k, v in lead["per_dc"].items())
                  + "; per broker: " + ", ".join(f"{k} {v}" for k, v in lead["per_broker"].items()),
                  highlight=False, markup=False, soft_wrap=True)
    ready = Table(title="stretch readiness")
    for col in ("fact", "ok", "detail"):
        ready.add_column(col, overflow="fold")
    for f in data["readiness"]:
        ready.add_row(f["fact"], {True: "yes", False: "no", None: "-"}[f["ok"]], f["detail"])
    console.print(ready)


def _check_markdown(data: dict[str, Any]) -> str:
    lines = [f"# Placement check: {data['cluster']}", "", _verdict(data), ""]
    rows = data["by_partition"]
    if rows:
        lines += ["| partition | replicas (broker/DC) | critical | warnings |", "|---|---|---|---|"]
        lines += [f"| {r['partition']} | {r['replicas']} | {'; '.join(r['critical']) or '-'} | "
                  f"{', '.join(r['warnings'])} |" for r in rows[:SHOWN]]
        if len(rows) > SHOWN:
            lines.append(f"\n... and {len(rows) - SHOWN} more partition(s)")
        lines.append("")
    lines += ["| DC lost | offline | under min ISR | leaders moving |", "|---|---|---|---|"]
    lines += [f"| {d['dc']} | {len(d['offline'])} | {len(d['under_min_isr'])} | {d['leaders_moved']} |"
              for d in data["dc_loss"]]
    lines += ["", "Preferred leaders per DC: " + ", ".join(f"{k} {v}" for k, v in data["leaders"]["per_dc"].items()),
              "", "| readiness | ok | detail |", "|---|---|---|"]
    lines += [f"| {f['fact']} | {({True: 'yes', False: 'no', None: '-'})[f['ok']]} | {f['detail']} |"
              for f in data["readiness"]]
    return "\n".join(lines) + "\n"


# --- plan ----------------------------------------------------------------------------------------------

def _rates(env: Any, partitions: list[tuple[str, int]], seconds: float) -> dict[tuple[str, int], float]:
    """Produce rate per partition (bytes/s), from two log-size readings ``seconds`` apart."""
    if seconds <= 0 or not partitions:
        return {}
    first = env.kafka.partition_sizes(partitions)
    time.sleep(seconds)
    second = env.kafka.partition_sizes(partitions)
    return {tp: max(0.0, (second[tp] - first[tp]) / seconds) for tp in first if tp in second}


def plan_cmd(
    cluster: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
    topics: str | None = TopicsOpt,
    rf: int | None = typer.Option(None, "--rf", min=1, max=32,
                                  help="Replication factor of the target (default: 2 per DC, 4 over two DCs)."),
    throttle: str = typer.Option("10MB/s", "--throttle",
                                 help="Replication throttle per broker while moving (e.g. 10MB/s, 512KiB/s)."),
    batch_size: int = typer.Option(20, "--batch-size", min=1, max=10000, help="Partitions submitted together."),
    sample: float = typer.Option(5.0, "--sample", min=0, max=300,
                                 help="Seconds to measure the produce rate over (0: skip the traffic estimate)."),
    compare: bool = typer.Option(True, "--compare/--no-compare",
                                 help="Also ask Kafka's kafka-reassign-partitions --generate, over SSH, and compare."),
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, markdown or json."),
    save_plan: Path | None = typer.Option(None, "--save-plan", metavar="FILE",
                                          help="Save the placement-apply plan for `kafkaops placement apply FILE`."),
    reason: str | None = typer.Option(None, "--reason", "-r", help="Why (recorded in the plan and the audit log)."),
    task: str | None = typer.Option(None, "--task", help="Task or ticket id, e.g. T123456."),
    inventory: Path | None = InventoryOpt,
) -> None:
    """Compute the target layout with the fewest replica moves, what it costs, and save it as a plan.

    Moves (copies of a partition to a broker that lacks it) are the least possible: each DC keeps the
    replicas it has up to its share and only the shortfall is added, on the DC's least-loaded brokers;
    reordering is free. Compared with Kafka's own --generate, which rebuilds every replica list from
    scratch and keeps the replication factor."""
    from kafkaops.placement.estimate import cross_dc_traffic, estimate_moves, parse_rate
    from kafkaops.placement.layout import check_layout
    from kafkaops.placement.planner import plan_layout

    try:
        rate = parse_rate(throttle)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--throttle") from None
    if save_plan is not None:
        check_writable(save_plan, "the plan", "--save-plan FILE", parents=True)
    if rf is not None:  # against the inventory's DCs, before any system is asked
        from kafkaops.errors import ConfigError
        from kafkaops.lookup import find_cluster
        from kafkaops.placement.layout import dcs_of
        from kafkaops.placement.planner import shares

        try:
            shares(rf, dcs_of({h.broker_id: h.dc for h in find_cluster(cluster, inventory).hosts}))
        except ConfigError as exc:
            raise typer.BadParameter(f"{exc.message} ({exc.hint})", param_hint="--rf") from None
    live = _live(cluster, inventory, topics)
    env = live["env"]
    try:
        current, dc_of = live["selected"], live["dc_of"]
        plan = plan_layout(current, dc_of, rf=rf, load=live["all"])
        moving = [tp for tp in plan.changed if set(plan.target[tp]) - set(current[tp])]
        sizes = env.kafka.partition_sizes(moving) if moving else {}
        estimate = estimate_moves(current, plan.target, sizes, dc_of, leaders=live["leaders"])
        rates = _rates(env, sorted(current), sample)
        before, after = cross_dc_traffic(current, rates, dc_of), cross_dc_traffic(plan.target, rates, dc_of)
        after_check = check_layout(plan.target, dc_of, live["min_isr"])
        kafka: dict[str, Any] | None = None
        if compare:
            kafka = _kafka_generate(env, current, dc_of, live["min_isr"], sizes, live["leaders"])
        data: dict[str, Any] = {
            "cluster": live["cluster"].name, "partitions": len(current), "rf": plan.rf,
            "before": check_layout(current, dc_of, live["min_isr"]).counts(), "after": after_check.counts(),
            "changed": len(plan.changed), "moves": plan.moves, "data": estimate.to_dict(rate),
            "traffic": {"sampled_seconds": sample, "before": before.to_dict(), "after": after.to_dict()},
            "kafka_generate": kafka, "leaders_after": after_check.leaders.to_dict(),
            "throttle_bytes_per_s": rate, "batch_size": batch_size, "plan_file": str(save_plan) if save_plan else None}
    finally:
        env.close()
    if output is Output.json:
        print_json(data)
    else:  # the report reads the same in a terminal and in a change review
        console.print(_plan_markdown(data), markup=False, highlight=False, soft_wrap=True)
    if not plan.changed:
        err_console.print("nothing to change: every partition already meets the layout", highlight=False)
        return
    if save_plan is None:
        err_console.print("review, then save it with --save-plan FILE and run `kafkaops placement apply FILE`",
                          highlight=False)
        return
    from kafkaops.cli.runbook_commands import run_runbook
    from kafkaops.placement.assignment import assignment_param

    params = {"assignment": assignment_param({tp: plan.target[tp] for tp in plan.changed}), "throttle": rate,
              "batch_size": batch_size}
    run_runbook("placement-apply", live["cluster"], [], params, reason=reason, task=task, yes=False, dry_run=True,
                output=output, save_plan=save_plan, show=output is not Output.json)


def _kafka_generate(env: Any, current: dict[Any, Any], dc_of: dict[int, str], min_isr: dict[str, int],
                    sizes: dict[Any, int], leaders: dict[Any, Any]) -> dict[str, Any]:
    """What Kafka's own --generate proposes, judged by the same rules and costs (or why it could not run)."""
    from kafkaops.errors import KafkaOpsError
    from kafkaops.placement.estimate import estimate_moves
    from kafkaops.placement.layout import check_layout, moves

    try:
        _, proposed = env.reassigner().generate(sorted({t for t, _ in current}), sorted(dc_of))
    except KafkaOpsError as exc:
        return {"error": exc.message}
    proposed = {tp: r for tp, r in proposed.items() if tp in current}
    report = check_layout(proposed, dc_of, min_isr)
    missing = [tp for tp in proposed if tp not in sizes and set(proposed[tp]) - set(current[tp])]
    if missing:
        sizes = {**sizes, **env.kafka.partition_sizes(missing)}
    est = estimate_moves(current, proposed, sizes, dc_of, leaders=leaders)
    return {"moves": moves(current, proposed), "bytes": est.bytes_total, "bytes_cross_dc": est.bytes_cross_dc,
            "violations": report.counts(), "critical": report.critical_partitions()}


def _plan_markdown(data: dict[str, Any]) -> str:
    from kafkaops.placement.estimate import human_bytes

    d, t = data["data"], data["traffic"]
    lines = [f"# Placement plan: {data['cluster']}", "",
             f"{data['partitions']} partition(s), target RF {data['rf']}: {data['changed']} partition(s) change, "
             f"**{data['moves']} replica move(s)** ({human_bytes(d['bytes'])}, {human_bytes(d['bytes_cross_dc'])} "
             "across DCs).", "",
             "| | rules broken (partitions) |", "|---|---|",
             f"| now | {_counts(data['before'])} |", f"| after | {_counts(data['after'])} |", ""]
    k = data.get("kafka_generate")
    if k:
        lines += [("Kafka's `kafka-reassign-partitions --generate`: could not run (" + k["error"] + ")") if "error" in k
                  else f"Kafka's `kafka-reassign-partitions --generate` (keeps RF, rebuilds every list): "
                       f"{k['moves']} replica move(s) ({human_bytes(k['bytes'])}, {human_bytes(k['bytes_cross_dc'])} "
                       f"across DCs), leaving {_counts(k['violations'])} ({k['critical']} critical).", ""]
    if d["by_pair"]:
        lines += ["| from (leader) | to | bytes |", "|---|---|---|"]
        lines += [f"| {p['from']} | {p['to']} | {human_bytes(p['bytes'])} |" for p in d["by_pair"][:SHOWN]]
        lines.append("")
    if "seconds_at_throttle" in d:
        unknown = f" {d['unknown_size']} partition(s) of unknown size counted as 0." if d["unknown_size"] else ""
        lines.append(f"Time to move at {human_bytes(d['throttle_bytes_per_s'])}/s per broker: at least "
                     f"{d['seconds_at_throttle']:.0f} s (the busiest broker's bytes / the throttle).{unknown}")
    before, after = t["before"], t["after"]
    if t["sampled_seconds"]:
        lines.append(f"Cross-DC traffic in steady state at the measured produce rate N = "
                     f"{human_bytes(before['produce_bytes_per_s'])}/s (over {t['sampled_seconds']:g} s): now "
                     f"{before['factor']:.2f} N = {human_bytes(before['cross_dc_bytes_per_s'])}/s, after "
                     f"{after['factor']:.2f} N = {human_bytes(after['cross_dc_bytes_per_s'])}/s (the seed's model: "
                     "each remote follower fetches N, plus the produce share from the other DC).")
    lead = data["leaders_after"]
    lines += ["", "Preferred leaders after: per DC " + ", ".join(f"{k} {v}" for k, v in lead["per_dc"].items())
              + "; per broker " + ", ".join(f"{k} {v}" for k, v in lead["per_broker"].items()), ""]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


# --- apply ---------------------------------------------------------------------------------------------

def apply_cmd(
    plan_file: Path = typer.Argument(..., metavar="FILE",
                                     help="A plan saved by `kafkaops placement plan --save-plan`."),
    reason: str | None = typer.Option(None, "--reason", help="Override the plan's reason (blank: keep it)."),
    task: str | None = typer.Option(None, "--task", help="Task/ticket id."),
    confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Run a saved placement plan: throttled batches, resumable (`kafkaops resume RUN`), refused when the plan
    was edited or the cluster changed since (`kafkaops runs abort RUN --rollback` cancels what is moving)."""
    from kafkaops.cli.runs import apply_cmd as apply_plan
    from kafkaops.engine.plan import load_plan
    from kafkaops.errors import ConfigError

    plan = load_plan(plan_file)
    if plan.runbook != "placement-apply":
        raise ConfigError(f"{plan_file} is a plan of {plan.runbook}, not of placement-apply",
                          hint=f"run it with `kafkaops apply {plan_file}`")
    apply_plan(plan_file, reason=reason, task=task, confirmed=confirmed)


def register(root: typer.Typer) -> None:
    """Add ``kafkaops placement`` (check, plan, apply)."""
    app.command("check")(check_cmd)
    app.command("plan")(plan_cmd)
    app.command("apply")(apply_cmd)
    root.add_typer(app, name="placement")
