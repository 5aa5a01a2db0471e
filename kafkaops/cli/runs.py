"""``kafkaops runs list|show|abort|unlock``, ``kafkaops resume RUN`` and ``kafkaops apply PLAN``.

Runs outlive processes: their journals live under ``$KAFKAOPS_HOME/runs``. ``resume`` and ``abort``
start from only a run id: they rebuild the run's environment from the inventory file its journal
recorded, and refuse (naming the difference) when that inventory changed in what the run depends on,
unless the operator accepts it (``--accept-inventory-change``, journaled).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli import complete
from kafkaops.cli.common import Output, check_writable, console, err_console, print_json, print_text


def _echo(line: str) -> None:
    err_console.print(line, highlight=False, markup=False)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts)) if ts else "-"


def _run_row(state: Any) -> dict[str, Any]:
    from kafkaops.engine.journal import display_status

    started = state.started
    cursor = state.cursor() if started else None
    return {
        "run_id": state.run_id,
        "runbook": state.runbook,
        "cluster": state.cluster,
        "targets": state.targets,
        "status": display_status(state),
        "operator": started.get("operator"),
        "reason": started.get("reason"),
        "task": started.get("task"),
        "started_at": started.get("ts"),
        "updated_at": state.updated_at,
        "cursor": list(cursor) if cursor else None,
        "last_error": state.last_error,
    }


def list_cmd(
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, json or markdown."),
    limit: int = typer.Option(20, "--limit", "-n", min=0, help="Show at most this many runs (0 = all)."),
) -> None:
    """List runs, newest first (a running run whose process is gone shows as crashed)."""
    from kafkaops.engine.journal import list_runs

    rows = [_run_row(s) for s in list_runs()]
    if limit:
        rows = rows[:limit]
    if output is Output.json:
        print_json(rows)
        return
    if output is Output.markdown:
        lines = ["| run | runbook | cluster | status | operator | reason |", "|---|---|---|---|---|---|"]
        lines += [
            f"| `{r['run_id']}` | {r['runbook']} | {r['cluster']} | {r['status']} | "
            f"{r['operator']} | {r['reason']} |"
            for r in rows
        ]
        console.print("\n".join(lines), markup=False, highlight=False)
        return
    from rich.table import Table

    table = Table(title="runs" if rows else "no runs yet")
    for col in ("run", "runbook", "cluster", "status", "at", "operator", "reason"):
        table.add_column(col)
    for r in rows:
        at = f"{r['cursor'][0]} step {r['cursor'][1]}" if r["cursor"] and r["status"] != "finished" else ""
        table.add_row(
            r["run_id"],
            r["runbook"],
            r["cluster"],
            _status_style(r["status"]),
            at,
            str(r["operator"]),
            str(r["reason"]),
        )
    console.print(table)


def _status_style(status: str) -> str:
    color = {"finished": "green", "failed": "red", "crashed": "red", "paused": "yellow", "aborted": "dim"}
    return f"[{color.get(status, 'cyan')}]{status}[/]"


def _took(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f}s" if seconds < 90 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def _clock(ts: float | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) if ts else "-"


def _restarts(restarts: list[dict[str, Any]]) -> str:
    """``3 restart(s): new SYN from 127.0.0.1 (3)``: why a wait started again, counted per reason."""
    if not restarts:
        return ""
    counts: dict[str, int] = {}
    for r in restarts:
        counts[r["reason"]] = counts.get(r["reason"], 0) + 1
    return f"{len(restarts)} restart(s): " + ", ".join(f"{k} ({n})" if n > 1 else k for k, n in counts.items())


def _notes(s: dict[str, Any]) -> str:
    verb = "failed" if s["outcome"] == "failed" else "retried after"
    parts = [_restarts(s["restarts"])] + [f"{verb}: {e}" for e in (s["errors"] or [])[-1:]]
    if s.get("interrupted"):
        parts.append("interrupted (pause or kill); taken up again by the next session")
    return "; ".join(p for p in parts if p)


def _sessions_lines(row: dict[str, Any]) -> list[str]:
    out = []
    for x in row["sessions"]:
        who = f" (pid {x['pid']} on {x['host']})" if x.get("pid") else ""
        out.append(f"{x['how']} {_when(x['start'])}{who}; {x['ended_by']} at {_when(x['end'])} "
                   f"after {_took(x['end'] - x['start'])}")
    return out


def show_cmd(
    run_id: str = typer.Argument(..., help="Run id (see `kafkaops runs list`).", autocompletion=complete.runs),
    output: Output = typer.Option(Output.table, "--output", "-o",
                                  help="table, json (stable, for tools) or markdown (for the change or incident "
                                       "record)."),
    chart: Path | None = typer.Option(None, "--chart", metavar="FILE.png",
                                      help="Also draw the run's timeline: a lane per host, a bar per step coloured "
                                           "by kind, kills and resumes, with URP and produce rate under it."),
) -> None:
    """Show a run as a report: per host and step its start, duration, outcome, retries and why its waits
    started again; the operator, reason and task; where it was paused, killed and resumed."""
    from kafkaops.engine.journal import Journal, replay
    from kafkaops.engine.timeline import run_report

    journal = Journal.open(run_id)
    records = journal.records()  # read once: the state and the report are folded from the same records
    state = replay(records, run_id=journal.run_id)
    row = _run_row(state)
    timeline = run_report(records, alive=row["status"] == "running")
    report = timeline.to_dict()
    steps = []
    by_key = {(s["target"], s["step"]): s for s in report["steps"]}
    for t in state.started.get("runbook", {}).get("targets", []):
        for s in t.get("steps", []):
            st = state.step(t["name"], int(s["index"]))
            rep = by_key.get((t["name"], int(s["index"])), {})
            steps.append({
                "target": t["name"], "step": s["index"], "kind": s["kind"], "gate": s.get("gate", False),
                "status": st.status, "changed": st.changed, "compensated": st.compensated, "error": st.last_error,
                **{k: rep.get(k) for k in ("start", "end", "duration", "outcome", "attempts", "restarts", "errors",
                                            "category", "description", "interrupted")},
            })
    silences, silences_error = run_silences(journal.run_id, state.started)
    row.update({"steps": steps, "journal": str(journal.path), "sessions": report["sessions"],
                "events": report["events"], "duration": report["duration"], "silences": silences,
                "silences_error": silences_error})
    if chart is not None:
        from kafkaops.health.timeline_chart import draw
        from kafkaops.systems.run_samples import read_samples

        check_writable(chart, "the chart", "--chart FILE.png", parents=True)
        draw(timeline, read_samples(journal.path.parent), chart)
        err_console.print(f"chart written to {chart}", highlight=False)
    if output is Output.json:
        print_json(row)
        return
    head = [f"run {row['run_id']}: {row['runbook']} on {row['cluster']} — {row['status']}"
            + (f" in {_took(row['duration'])}" if row["duration"] else ""),
            f"operator {row['operator']}, reason: {row['reason']}" + (f", task {row['task']}" if row["task"] else ""),
            *_sessions_lines(row), *_silence_lines(row), *_gate_lines(row), f"journal {row['journal']}"]
    if output is Output.markdown:
        lines = [f"# Run `{row['run_id']}`", "", *(f"- {h}" for h in head), "",
                 "| target | step | kind | start (UTC) | took | outcome | tries | notes |",
                 "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {s['target']} | {'gate' if s['gate'] else s['step']} | `{s['kind']}` | {_clock(s['start'])} | "
                  f"{_took(s['duration'])} | {s['outcome']} | {s['attempts'] or ''} | "
                  f"{_notes(s).replace('|', '/')} |" for s in steps]
        if row["events"]:
            lines += ["", "Events:", ""]
            lines += [f"- {_clock(e['t'])} {e.get('target') or ''} {e['event']}" for e in row["events"]]
        console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
        return
    from kafkaops.cli.plan_render import wants_table

    console.print("\n".join(head), highlight=False, markup=False, soft_wrap=True)
    if not wants_table(console.is_terminal, console.width):  # a narrow terminal, a log: one line a step
        print_text(_report_text(steps))
    else:
        _report_table(steps)
    if row["status"] in ("failed", "paused", "crashed", "running"):
        console.print(
            f"resume: kafkaops resume {run_id}    roll back: kafkaops runs abort {run_id} --rollback "
            "--reason ...",
            highlight=False,
            markup=False,
        )


def _gate_lines(row: dict[str, Any]) -> list[str]:
    """Each host's last metric-gate verdict with its values (``metrics.gate``'s ``metric_gate`` events):
    ``metric gates before kafka1002: held the roll: p99 45 > 15 (1.5 x baseline 10)``."""
    from kafkaops.policy.metric_gates import GateReading, summary

    last: dict[str, dict[str, Any]] = {}
    for e in row["events"]:
        if e.get("event") == "metric_gate" and e.get("readings"):
            last[str(e.get("target") or "")] = e
    out = []
    for target, e in last.items():
        readings = [GateReading(**r) for r in e["readings"]]
        verdict = "held" if e.get("held") else "held the roll"
        out.append(f"metric gates before {target}: {verdict}: {summary(readings)}")
    return out


def _report_text(steps: list[dict[str, Any]]) -> str:
    """The report's steps for a narrow terminal or a log: per target, one line a step (time, took, outcome,
    tries, step), its notes on the line below."""
    lines: list[str] = []
    target = None
    for s in steps:
        if s["target"] != target:
            target = s["target"]
            lines += ["", target]
        tries = f"x{s['attempts']}" if (s["attempts"] or 0) > 1 else ""
        label = "gate" if s["gate"] else str(s["step"])
        lines.append(f"  {_clock(s['start'])} {_took(s['duration']):>7} {(s['outcome'] or s['status']):<11} "
                     f"{tries:<3} [{label}] {s['kind']}")
        if note := _notes(s):
            lines.append(f"      {note}")
    return "\n".join(lines) + "\n"


def _report_table(steps: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table()
    for col in ("target", "#", "kind", "start", "took", "outcome", "tries", "notes"):
        table.add_column(col)
    for s in steps:
        outcome = s["outcome"] or s["status"]
        colour = {"failed": "red", "rolled back": "yellow", "no-op": "dim"}.get(outcome)
        table.add_row(s["target"], "gate" if s["gate"] else str(s["step"]), s["kind"], _clock(s["start"]),
                      _took(s["duration"]), f"[{colour}]{outcome}[/]" if colour else outcome,
                      str(s["attempts"] or ""), _notes(s))
    console.print(table)


def _runner(confirmed: dict[str, str] | None = None) -> Any:
    from kafkaops.cli.common import checkpoint_prompt, live_status
    from kafkaops.engine.runner import Runner

    return Runner(echo=_echo, confirmed=confirmed or {}, ask=checkpoint_prompt(), status=live_status())


def _reason(value: str | None) -> str | None:
    """A required ``--reason``: a blank one (``--reason "$EMPTY"``) is refused like a missing one (exit 2)."""
    if value is not None and not value.strip():
        raise typer.BadParameter("a blank reason says nothing: say why (it is audited)")
    return value


ConfirmedOpt = typer.Option(
    [], "--confirmed", metavar="NAME",
    help="A manual checkpoint of the inventory that holds (e.g. changeprop); repeatable. --yes never confirms "
         "one; without it a terminal asks.")

AcceptOpt = typer.Option(False, "--accept-inventory-change",
                         help="Go on although the inventory changed since the run started (the differences "
                              "are recorded in the journal).")


def _run_environment(run_id: str, *, accept: bool, started: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """The environment a run started with, rebuilt from its journal (the inventory file it recorded; its
    ``run_started`` record when the caller replayed it already), refusing — and naming the difference — when
    that inventory changed in what the run depends on."""
    from kafkaops.catalog import load_plugins
    from kafkaops.engine.journal import Journal
    from kafkaops.environment import Environment

    load_plugins()
    if started is None:
        started = Journal.open(run_id).replay().started
    env, changes = Environment.from_identity(started.get("environment") or {}, accept_changes=accept)
    for line in changes:
        _echo(f"inventory changed since the run started (accepted): {line}")
    return env, changes


def abort_cmd(
    run_id: str = typer.Argument(..., help="Run id.", autocompletion=complete.runs),
    reason: str = typer.Option(..., "--reason", callback=_reason, help="Why the run is abandoned (audited)."),
    rollback: bool = typer.Option(False, "--rollback", help="Undo what this run changed (and nothing more)."),
    accept: bool = AcceptOpt,
) -> None:
    """Abort a run for good (optionally rolling back what it changed) and release its lock.

    A run of the ZooKeeper → KRaft migration rolled back goes further than its own changes: the cluster is
    taken back to ZooKeeper mode the way Kafka documents it (`kafkaops migrate-to-kraft CLUSTER --revert`, run
    right after the abort) — and refused, with nothing changed, once the migration is being finalized."""
    from kafkaops.engine.audit import current_operator
    from kafkaops.engine.journal import Journal
    from kafkaops.errors import ConfigError

    state = Journal.open(run_id).replay()
    env, _ = _run_environment(run_id, accept=accept or not rollback, started=state.started)
    revert = rollback and _is_migration(state.runbook)
    try:
        if revert:
            from kafkaops.cli.migration import refuse_past_no_return

            refuse_past_no_return(env, run_id)  # before anything of the run is undone
            if state.status in ("finished", "aborted"):
                raise ConfigError(f"run {run_id} is {state.status}: there is no run to abort",
                                  hint=f"to take {state.cluster} back to ZooKeeper mode: `kafkaops migrate-to-kraft "
                                       f"{state.cluster} --revert --reason ...`")
        res = _runner().abort(run_id, reason=reason, operator=current_operator(), rollback=rollback, env=env)
        ended = _end_silences(env, run_id)
        inventory = getattr(env, "inventory", None)
    finally:
        env.close()
    for note in res.notes:
        _echo(f"note: {note}")
    for line in ended:
        _echo(line)
    _echo(f"run {run_id} aborted" + (f"; rolled back {res.compensated} change(s)" if rollback else ""))
    if revert:
        from kafkaops.cli.migration import StageOptions, revert_migration

        _echo(f"run {run_id} was a migration to KRaft: reverting {state.cluster} to ZooKeeper mode (Kafka's revert, "
              "`kafkaops docs migration`)")
        revert_migration(state.cluster, StageOptions(reason=reason, yes=True, dry_run=False,
                                                     inventory=Path(inventory) if inventory else None))


def _is_migration(runbook: str) -> bool:
    from kafkaops.policy.migration import REVERT_STAGES, STAGES

    return runbook in {s.runbook for s in STAGES + REVERT_STAGES}


def _end_silences(env: Any, run_id: str) -> list[str]:
    """Expire the Alertmanager silences the aborted run made that still silence (found by the run id in
    their comment): an abandoned run's hosts are no longer under maintenance, so their alerts page again.
    One line per silence ended, or a warning when Alertmanager cannot be asked (they end by themselves)."""
    from kafkaops.errors import KafkaOpsError

    monitoring = getattr(getattr(env, "cluster", None), "monitoring", None)  # None: a run environment without one
    if monitoring is None or not monitoring.alertmanager:
        return []
    try:
        ended = env.alertmanager.end_run_silences(run_id)
    except KafkaOpsError as exc:
        return [f"warning: this run's silences were not ended ({exc.message}); each ends by itself at its bound "
                f"(kafkaops runs show {run_id})"]
    return [f"silence {s.id} ended ({', '.join(str(m) for m in s.matchers)})" for s in ended]


def run_silences(run_id: str, started: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The silences run ``run_id`` made, as its cluster's Alertmanager holds them (when each started and
    ended), and why they could not be read (``""``)."""
    from kafkaops.environment import Environment
    from kafkaops.errors import KafkaOpsError

    try:
        env, _ = Environment.from_identity(started.get("environment") or {}, accept_changes=True, dry_run=True,
                                           kafka_timeout=5.0)
    except KafkaOpsError:  # no inventory to ask with (an old journal, a moved file): the report goes on without
        return [], ""
    try:
        monitoring = getattr(getattr(env, "cluster", None), "monitoring", None)
        if monitoring is None or not monitoring.alertmanager:
            return [], ""
        return [s.to_dict() for s in env.alertmanager.run_silences(run_id)], ""
    except KafkaOpsError as exc:
        return [], exc.message
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()


def _silence_lines(row: dict[str, Any]) -> list[str]:
    out = [f"silence {s['id']} {', '.join(s['matchers'])}: {_when(s['starts_at'])} -> {_when(s['ends_at'])} "
           f"({'ended' if s['state'] == 'expired' else s['state']})" for s in row["silences"]]
    if row["silences_error"]:
        out.append(f"silences unknown: {row['silences_error']}")
    return out


def lock_diagnosis(holder: Any) -> tuple[bool, str]:
    """Whether the run holding a lock is gone for good, and what it is: an *orphaned* lock (its run
    finished or was aborted, or never journaled ``run_started`` — a crash between taking the lock and
    starting, or between finishing and releasing) is safe to remove; a paused, failed or crashed run
    still owns its cluster (resume or abort it instead)."""
    from kafkaops.engine.journal import Journal, check_run_id, display_status
    from kafkaops.errors import ConfigError

    try:
        state = Journal.open(check_run_id(holder.run_id)).replay()
    except ConfigError:
        return True, f"run {holder.run_id} has no journal on this host (it never started, or ran elsewhere)"
    if not state.started:
        return True, f"run {holder.run_id} never journaled its start"
    if state.terminal:
        return True, f"run {holder.run_id} is {state.status}: the lock outlived it"
    return False, (f"run {holder.run_id} is {display_status(state)}: resume it (`kafkaops resume {holder.run_id}`) "
                   f"or abort it (`kafkaops runs abort {holder.run_id} --reason ...`) instead")


def unlock_cmd(
    cluster: str = typer.Argument(..., help="Cluster name.", autocompletion=complete.clusters),
    force: bool = typer.Option(False, "--force", help="Required to remove the lock."),
    reason: str = typer.Option(..., "--reason", callback=_reason, help="Why the holding run is gone (audited)."),
    inventory: Path | None = typer.Option(None, "--inventory", "-i", help="Inventory file."),
) -> None:
    """Diagnose a cluster's lock and, with --force, remove it (audited).

    An orphaned lock (its run finished or was aborted, or never started) is said to be safe to remove;
    a lock whose run is paused, failed or crashed is the run's: resume or abort it instead (--force still
    removes it, for a run that is gone for good)."""
    from kafkaops.engine.audit import current_operator
    from kafkaops.engine.lock import force_unlock
    from kafkaops.environment import Environment
    from kafkaops.errors import ConfigError
    from kafkaops.lookup import find_cluster

    env = Environment.of(find_cluster(cluster, inventory))
    try:
        holder = env.lock.holder(cluster)
        if holder is None:
            _echo(f"cluster {cluster} is not locked ({env.lock_label})")
            return
        orphaned, why = lock_diagnosis(holder)
        if not force:
            raise ConfigError(f"cluster {cluster} is locked by {holder.describe()}; {why}",
                              hint=f"`kafkaops runs unlock {cluster} --force --reason ...` removes it"
                              + (" (safe: orphaned)" if orphaned else " (only if that run is gone for good)"))
        previous = force_unlock(cluster, reason, operator=current_operator(), backend=env.lock)
    finally:
        env.close()
    _echo(f"removed the lock of {previous.describe()}" + (f" ({why})" if previous else "")
          if previous else f"cluster {cluster} was not locked")


def resume_cmd(
    run_id: str = typer.Argument(..., help="Run id (see `kafkaops runs list`).", autocompletion=complete.runs),
    accept: bool = AcceptOpt,
    confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Continue a paused, failed or crashed run where it stopped, on the inventory it started with.

    A checkpoint the run already confirmed is not asked again; one it has not reached yet needs
    --confirmed NAME (or a terminal to ask on), else the run pauses there (exit 13)."""
    from kafkaops.engine.audit import current_operator

    env, changes = _run_environment(run_id, accept=accept)
    try:
        res = _runner(dict.fromkeys(confirmed, "--confirmed")).resume(
            run_id, env=env, operator=current_operator(), accepted_changes=changes)
    finally:
        env.close()
    _echo(f"run {res.run_id} {res.status}")


def apply_cmd(
    plan_file: Path = typer.Argument(..., help="A plan saved with --dry-run --save-plan."),
    reason: str | None = typer.Option(None, "--reason", help="Override the plan's reason (blank: keep it)."),
    task: str | None = typer.Option(None, "--task", help="Task/ticket id."),
    confirmed: list[str] = ConfirmedOpt,
) -> None:
    """Execute a saved plan exactly, on the inventory it was made with; refused if the plan was edited,
    if that inventory changed, or if the cluster changed since the plan was made. Every manual checkpoint
    the plan asks for must be confirmed (--confirmed NAME, or at a terminal prompt) first."""
    from kafkaops.catalog import load_plugins
    from kafkaops.cli.common import confirm_checkpoints
    from kafkaops.engine.audit import current_operator
    from kafkaops.engine.plan import load_plan
    from kafkaops.environment import Environment
    from kafkaops.queries.checkpoints import pending_checkpoints

    load_plugins()
    plan = load_plan(plan_file)
    checkpoints = confirm_checkpoints(pending_checkpoints(plan.steps), confirmed)  # before anything is asked
    env, _ = Environment.from_identity(plan.environment, for_plan=True)
    try:
        res = _runner(checkpoints).apply_plan(plan, env=env, operator=current_operator(),
                                   reason=reason if reason and reason.strip() else None, task=task)
    finally:
        env.close()
    _echo(f"run {res.run_id} {res.status}")


def register(app: typer.Typer) -> None:
    """Add ``runs`` (list/show/abort/unlock), ``resume`` and ``apply`` to the root app."""
    sub = typer.Typer(help="Runs: list, show, abort (with rollback), unlock.", no_args_is_help=True)
    sub.command("list")(list_cmd)
    sub.command("show")(show_cmd)
    sub.command("abort")(abort_cmd)
    sub.command("unlock")(unlock_cmd)
    app.add_typer(sub, name="runs")
    app.command("resume")(resume_cmd)
    app.command("apply")(apply_cmd)
