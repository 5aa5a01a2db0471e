"""``kafkaops failed-events list|replay``: what eventbus failed to produce, and producing it again once.

eventbus writes the events it could not produce (a Kafka outage, an unknown topic, a broken event) to a
failed-events log on each host instead of Kafka. ``list`` reads those logs over SSH and counts them per
host, stream and error — the question before any replay is "how many, of what, failing why". ``replay``
is the ``failed-events-replay`` runbook (plan first, journal, ``kafkaops resume RUN``, the cluster lock):
each event is sent once even across a crash, rate-limited, and the events refused again go to a report.

Only parsing and rendering live here; the reading and the replay are :mod:`kafkaops.steps.failed_events`, the
parsing :mod:`kafkaops.facts.failed_events`.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkaops.cli.common import CommandLineError, Output, TableOrJson, check_writable, console, err_console, print_json
from kafkaops.errors import ConfigError, UnknownHostError

if TYPE_CHECKING:
    from kafkaops.model import Cluster, Host

#: Largest --since: the same bound as `check --since` (a typo of "1000d" must not read years of logs).
MAX_SINCE = 30 * 86400.0
DEFAULT_RATE = 50.0

_TARGET_HELP = "A cluster (every host of it running the service) or one host (short name or FQDN)."
_SERVICE_HELP = ("Service whose failed-events log is read (inventory services.<name>.failed_events_log); "
                 "default: the only service that has one.")
_SINCE_HELP = "Only events that failed in the last DURATION (90s, 15m, 2h, 1d; at most 30d). Default: the whole log."
_TOPIC_HELP = "Only events whose stream (meta.stream, else meta.topic) matches this regular expression (searched)."


# --- command-line values ------------------------------------------------------------------------------


def parse_since(text: str | None) -> float:
    """``--since``: a positive duration of at most 30 days (0.0 when not given). Usage error otherwise."""
    from kafkaops.engine.step import parse_duration

    if text is None:
        return 0.0
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise CommandLineError(f"--since {text!r}: {exc}") from None
    if seconds <= 0 or seconds > MAX_SINCE:
        raise CommandLineError(f"--since {text!r}: must be more than 0 and at most 30d (e.g. 2h)")
    return seconds


def parse_topic(text: str | None) -> re.Pattern[str] | None:
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise CommandLineError(f"--topic {text!r} is not a valid regular expression: {exc}") from None


def parse_rate(text: str) -> float:
    """``--rate``: events per second, ``50`` or ``50/s``, from 0.1 to 10000."""
    value = text.strip().removesuffix("/s").strip()
    try:
        rate = float(value)
    except ValueError:
        raise CommandLineError(f"--rate {text!r}: expected events per second, e.g. 50 or 50/s") from None
    if not 0.1 <= rate <= 10000:
        raise CommandLineError(f"--rate {text!r}: must be between 0.1/s and 10000/s")
    return rate


# --- targets -----------------------------------------------------------------------------------------


def resolve_target(target: str, inventory: Path | None, service: str | None) -> tuple[Cluster, list[Host], str]:
    """TARGET as a cluster (its hosts running the service) or a host, and the service name.

    Raises:
        UnknownHostError: TARGET is neither (exit 3, naming the known clusters and hosts).
        ConfigError: The service is unknown, or which one is meant cannot be told.
    """
    from kafkaops.lookup import _loaded

    clusters = _loaded(inventory)
    by_name = [c for c in clusters if c.name == target]
    if len(by_name) > 1:
        raise ConfigError(f"cluster {target!r} is defined by {by_name[0].source} and {by_name[1].source}",
                          hint="pass --inventory FILE to say which")
    if by_name:
        cluster, hosts = by_name[0], list(by_name[0].hosts)
    else:
        found = [(c, h) for c in clusters if (h := c.host(target)) is not None]
        if len(found) > 1:
            raise ConfigError(f"host {target!r} is defined by {found[0][0].source} and {found[1][0].source}",
                              hint="pass --inventory FILE to say which")
        if not found:
            raise UnknownHostError(
                f"{target!r} is neither a cluster nor a host of the inventory",
                hint="clusters: " + (", ".join(sorted(c.name for c in clusters)) or "none")
                     + "; hosts: " + (", ".join(h.name for c in clusters for h in c.hosts) or "none"))
        cluster, hosts = found[0][0], [found[0][1]]
    if service is None:
        names = sorted({s.name for h in hosts for s in h.services if s.failed_events_log})
        if len(names) != 1:
            raise ConfigError(
                f"{target}: " + ("no service has a failed_events_log in the inventory" if not names else
                                 f"several services have a failed-events log ({', '.join(names)})"),
                hint="pass --service NAME" if names else "add services.<name>.failed_events_log to the inventory")
        service = names[0]
    running = [h for h in hosts if h.service(service) is not None]
    if not running:
        raise ConfigError(f"no host of {target} runs service {service!r}",
                          hint="its services: " + (", ".join(sorted({s.name for h in hosts for s in h.services}))
                                                   or "none"))
    return cluster, running, service


# --- list ----------------------------------------------------------------------------------------------


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t is not None else "-"


def list_failed_events(target: str, *, service: str | None, since: str | None, topic: str | None,
                       output: TableOrJson, inventory: Path | None) -> int:
    """Read, parse, select and group each host's failed events; render them. Returns the exit code."""
    from kafkaops.environment import Environment
    from kafkaops.facts.failed_events import group, parse_failed_events, select
    from kafkaops.queries.failed_events import read_failed_log

    since_s, pattern = parse_since(since), parse_topic(topic)
    cluster, hosts, name = resolve_target(target, inventory, service)
    env = Environment.of(cluster, dry_run=True)
    now = time.time()
    per_host: list[tuple[str, Any]] = []
    hosts_out: list[dict[str, Any]] = []
    try:
        for host in hosts:
            svc = host.service(name)
            assert svc is not None
            path, text, exists = read_failed_log(env, host, svc)
            log = parse_failed_events(text)
            chosen = select(log.events, since=since_s or None, topic=pattern, now=now)
            per_host.append((host.name, chosen))
            hosts_out.append({
                "host": host.name, "path": path, "exists": exists, "lines": log.lines, "records": len(log.events),
                "selected": len(chosen), "distinct": len({e.key for e in chosen}),
                "not_replayable": sum(1 for e in chosen if not e.replayable),
                "malformed": [{"line": m.line, "head": m.head, "why": m.why} for m in log.malformed],
            })
    finally:
        env.close()
    groups = group(per_host)
    total = sum(h["selected"] for h in hosts_out)
    malformed = sum(len(h["malformed"]) for h in hosts_out)
    if output == TableOrJson.json:
        print_json({"cluster": cluster.name, "service": name, "since": since_s or None, "topic": topic or None,
                    "total": total, "malformed": malformed, "hosts": hosts_out,
                    "groups": [g.to_dict() for g in groups]})
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"failed events of {name} on {target}", title_justify="left")
    for col in ("host", "stream", "error", "count", "first", "last"):
        table.add_column(col, justify="right" if col == "count" else "left", overflow="fold")
    for g in groups:
        table.add_row(Text(g.host), Text(g.topic), Text(g.error), str(g.count), _when(g.first), _when(g.last))
    if groups:
        console.print(table)
    for h in hosts_out:
        state = "" if h["exists"] else " (no such file: nothing has failed there)"
        line = (f"{h['host']}: {h['selected']} of {h['records']} record(s) selected, {h['distinct']} distinct"
                + (f", {h['not_replayable']} not replayable" if h["not_replayable"] else "")
                + f" — {h['path']}{state}")
        console.print(Text(line))
        for m in h["malformed"][:20]:
            console.print(Text(f"  malformed line {m['line']}: {m['why']}: {m['head']!r}"))
        if len(h["malformed"]) > 20:
            console.print(Text(f"  ... and {len(h['malformed']) - 20} more malformed line(s) (-o json lists them)"))
    more = f", {malformed} malformed line(s)" if malformed else ""
    console.print(Text(f"total: {total} failed event record(s){more}"))
    return 0


# --- replay ------------------------------------------------------------------------------------------------


def _default_report(cluster: str) -> Path:
    from kafkaops.engine.state_files import kafkaops_home

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return kafkaops_home() / "failed-events" / f"rejected-{cluster}-{stamp}.jsonl"


def _run_summary(report: Path) -> dict[str, Any]:
    """What the run that wrote ``report`` did (its journal's ``failed_events_replayed`` records)."""
    from kafkaops.engine.state_files import runs_dir

    out: dict[str, Any] = {"report": str(report), "rejected_in_report": 0, "hosts": {}, "run": None}
    if report.exists():
        out["rejected_in_report"] = len({json.loads(line).get("key") for line in report.read_text().splitlines()
                                         if line.strip().startswith("{")})
    runs = sorted((p for p in runs_dir().glob("*/journal.jsonl")), key=lambda p: p.stat().st_mtime, reverse=True)
    for journal in runs[:20]:
        lines = journal.read_text(errors="replace").splitlines()
        if not lines or str(report) not in lines[0]:
            continue
        out["run"] = journal.parent.name
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") == "event" and rec.get("event") == "failed_events_replayed":
                out["hosts"][rec.get("host")] = {k: rec.get(k) for k in ("sent", "found", "rejected")}
        break
    return out


def replay_failed_events(target: str, *, service: str | None, since: str | None, topic: str | None, via: str,
                         rate: str, output_invalid: Path | None, inventory: Path | None, reason: str | None,
                         task: str | None, yes: bool, dry_run: bool, output: Output, save_plan: Path | None) -> None:
    """Bind and run the ``failed-events-replay`` runbook on TARGET's hosts (see the module docstring)."""
    from kafkaops.catalog import find_runbook
    from kafkaops.cli.runbook_commands import run_runbook

    if not dry_run and not (reason or "").strip():
        raise typer.BadParameter("--reason is required for anything that changes state (or use --dry-run)",
                                 param_hint="--reason")
    since_s, rate_v = parse_since(since), parse_rate(rate)
    parse_topic(topic)
    if via not in ("kafka", "http"):
        raise CommandLineError(f"--via {via!r}: one of kafka, http")
    cluster, hosts, name = resolve_target(target, inventory, service)
    report = (output_invalid or _default_report(cluster.name)).expanduser().resolve()
    check_writable(report, "the report of rejected events", "--output-invalid PATH", parents=True)
    if save_plan is not None:
        check_writable(save_plan, "the plan", "--save-plan PATH", parents=True)
    params = {"service": name, "since": since_s, "topic": topic or "", "via": via, "rate": rate_v,
              "report": str(report)}
    from kafkaops.catalog import load_plugins

    load_plugins()  # the step kinds, before the runbook is loaded (it names them)
    run_runbook(find_runbook("failed-events-replay"), cluster, hosts, params, reason=reason, task=task, yes=yes,
                dry_run=dry_run, output=output, save_plan=save_plan)
    if dry_run:
        return
    summary = _run_summary(report)
    if output == Output.json:
        print_json({"replay": summary})
    rejected = summary["rejected_in_report"]
    err_console.print(f"rejected events: {rejected}" + (f", written to {report}" if rejected else
                                                          f" (the report would be {report})"),
                      highlight=False, markup=False, soft_wrap=True)


# --- registration ---------------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        rich_markup_mode=None, no_args_is_help=True,
        help="The events eventbus failed to produce (each host's failed-events log): list them, replay them "
             "once.\n\nTypical use after a Kafka outage: `kafkaops failed-events list CLUSTER` to see how many "
             "failed, for which streams and why; `kafkaops failed-events replay CLUSTER --dry-run` to review "
             "the plan; then the same with --reason to produce them again. A replay interrupted (Ctrl-C, a "
             "crash) resumes with `kafkaops resume RUN` and sends no event twice.",
    )

    @sub.command("list", epilog="Exit codes: 0 listed (whatever it found); 3 unknown target/service or a log "
                                "that cannot be read; 4 SSH did not answer.")
    def list_cmd(
        target: str = typer.Argument(..., metavar="CLUSTER|HOST", help=_TARGET_HELP),
        service: str | None = typer.Option(None, "--service", "-s", help=_SERVICE_HELP),
        since: str | None = typer.Option(None, "--since", metavar="DURATION", help=_SINCE_HELP),
        topic: str | None = typer.Option(None, "--topic", metavar="REGEX", help=_TOPIC_HELP),
        output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o", help="table, or json for tools."),
        inventory: Path | None = typer.Option(None, "--inventory", "-i", metavar="PATH",
                                              help="Inventory file (only this one is searched)."),
    ) -> None:
        """Count the failed events of each host, per stream and error; show malformed lines.

        Reads each host's failed-events log over SSH (the inventory's failed_events_read template: `cat
        {path}` in the lab, `sudo -n cat {path}` in production). Lines that are not EventError records
        are counted and shown with their line number and first characters; they never stop the listing.
        Events whose rawEvent is not a JSON object or names no stream are counted as not replayable.
        """
        rc = list_failed_events(target, service=service, since=since, topic=topic, output=output,
                                inventory=inventory)
        if rc:
            raise typer.Exit(rc)

    @sub.command("replay", epilog="Exit codes: 0 done (rejected events are in the report, not an error); 2 usage; "
                                  "3 configuration; 4 a system did not answer; 7 the cluster is locked; "
                                  "11 the run stopped (resumable with `kafkaops resume RUN`); 130 paused.")
    def replay_cmd(
        target: str = typer.Argument(..., metavar="CLUSTER|HOST", help=_TARGET_HELP),
        service: str | None = typer.Option(None, "--service", "-s", help=_SERVICE_HELP),
        since: str | None = typer.Option(None, "--since", metavar="DURATION", help=_SINCE_HELP),
        topic: str | None = typer.Option(None, "--topic", metavar="REGEX", help=_TOPIC_HELP),
        via: str = typer.Option("kafka", "--via", metavar="kafka|http",
                                help="kafka: produce to <dc>.<stream> (acks=all, idempotent), as eventlogging-replay "
                                     "does; http: POST each event to the host's own eventbus (events_path), as the "
                                     "runbook's curl loop does."),
        rate: str = typer.Option(f"{DEFAULT_RATE:g}", "--rate", metavar="N[/s]",
                                 help="At most N events per second per host (0.1 to 10000)."),
        output_invalid: Path | None = typer.Option(
            None, "--output-invalid", metavar="PATH",
            help="Where events refused again go, one JSON line each (default: "
                 "$KAFKAOPS_HOME/failed-events/rejected-CLUSTER-TIME.jsonl)."),
        inventory: Path | None = typer.Option(None, "--inventory", "-i", metavar="PATH",
                                              help="Inventory file (only this one is searched)."),
        reason: str | None = typer.Option(None, "--reason", "-r",
                                          help="Why (required unless --dry-run; goes to the audit log)."),
        task: str | None = typer.Option(None, "--task", help="Task or ticket id, e.g. T123456."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation after showing the plan."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Read the logs, show the plan, send nothing."),
        output: Output = typer.Option(Output.table, "--output", "-o",
                                      help="Plan format: table, markdown (change review), json (then, after a "
                                           "run, one JSON object with the report path and counts)."),
        save_plan: Path | None = typer.Option(None, "--save-plan", metavar="PATH",
                                              help="Write the plan (with its fingerprint) for `kafkaops apply`."),
    ) -> None:
        """Produce each failed event again, exactly once, rate-limited (runbook failed-events-replay).

        The plan shows, per host, the events selected (duplicates are one event) and how many go to each
        destination topic. Every event is journaled by content hash before and after it is sent: a
        replay killed mid-way resumes with `kafkaops resume RUN` and first looks in Kafka for an event
        whose send was interrupted. Events refused again (HTTP 4xx, a produce error naming the event or
        its topic, not JSON, no stream) go to the --output-invalid report, never to Kafka.
        """
        replay_failed_events(target, service=service, since=since, topic=topic, via=via, rate=rate,
                             output_invalid=output_invalid, inventory=inventory, reason=reason, task=task, yes=yes,
                             dry_run=dry_run, output=output, save_plan=save_plan)

    app.add_typer(sub, name="failed-events")
