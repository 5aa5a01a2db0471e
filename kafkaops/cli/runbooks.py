"""``kafkaops runbooks list|show|docs``: the procedures as data, and their generated docs.

Docs are generated from the YAML (``kafkaops runbooks docs``) so a runbook page can never drift from
what the engine executes; ``--check`` fails CI when someone edited one without the other. Listing only
parses the YAML (no step-kind imports) so it stays instant; ``--check`` validates every runbook fully.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, console, err_console, print_json

__all__ = ["check_command", "register"]


def _dirs(directory: Path | None) -> list[Path] | None:
    """``--dir``: that directory, which must be one (a typo would list no runbooks, and pass a docs --check)."""
    if directory is None:
        return None
    if not directory.is_dir():
        from kafkaops.errors import ConfigError

        raise ConfigError(f"{directory}: no such runbook directory", hint="check the --dir path")
    return [directory]


_DIR_HELP = "Runbook directory (default: --runbooks, else $KAFKAOPS_RUNBOOKS, else the runbooks shipped with kafkaops)."


def check_command(rb: Any) -> None:
    """What ``--check`` adds for a runbook's command line: its hooks exist, its flags and its generated
    command clash with nothing built in (needs the step kinds loaded).

    Raises:
        ConfigError: Naming the file and line.
    """
    from kafkaops.cli.builtin import COMMAND_MODULES
    from kafkaops.cli.runbook_commands import build_command
    from kafkaops.errors import ConfigError
    from kafkaops.queries.selectors import check_refs

    check_refs(rb)
    build_command(rb, alias=rb.command.alias)
    if rb.command.alias and rb.name in COMMAND_MODULES:
        where = f"{rb.source}:{rb.command.line}" if rb.command.line else rb.source
        raise ConfigError(f"{where}: command: `kafkaops {rb.name}` is a built-in command; the runbook's would be "
                          "hidden", hint=f"rename the runbook, or set command.alias: false (`kafkaops run {rb.name}`)")


def list_cmd(
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    check: bool = typer.Option(False, "--check",
                               help="Validate every runbook against the step kinds and the command hooks."),
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, json or markdown."),
) -> None:
    """List the runbooks."""
    from kafkaops.catalog import load, load_plugins, runbook_files
    from kafkaops.errors import ConfigError

    if check:
        load_plugins()
    rows: list[dict[str, Any]] = []
    errors = 0
    for name, path in runbook_files(_dirs(directory)).items():
        try:
            rb = load(path, check_kinds=check)
            if check:
                check_command(rb)
            rows.append(
                {
                    "name": name,
                    "summary": rb.summary,
                    "steps": len(rb.steps),
                    "rolling": rb.rolling,
                    "command": f"kafkaops {name}" if rb.command.alias else f"kafkaops run {name}",
                    "file": str(path),
                    "error": None,
                }
            )
        except ConfigError as exc:
            errors += 1
            rows.append(
                {
                    "name": name,
                    "summary": "",
                    "steps": 0,
                    "rolling": False,
                    "command": None,
                    "file": str(path),
                    "error": str(exc),
                }
            )
    if output is Output.json:
        print_json(rows)
    elif output is Output.markdown:
        lines = ["| runbook | summary | steps |", "|---|---|---|"]
        lines += [f"| `{r['name']}` | {r['summary'] or r['error']} | {r['steps']} |" for r in rows]
        console.print("\n".join(lines), markup=False, highlight=False)
    else:
        # Plain aligned columns: rich.table would cost ~30 ms of this benchmarked cold start.
        if not rows:
            from kafkaops.catalog import runbook_dirs

            where = [str(directory)] if directory else [str(d) for d in runbook_dirs()]
            err_console.print(f"no runbooks found in {', '.join(where)}", highlight=False, markup=False)
        width = max([len(r["name"]) for r in rows] + [7])
        console.print(f"[bold]{'RUNBOOK'.ljust(width)}  STEPS  ROLLING  SUMMARY[/]", highlight=False)
        for r in rows:
            summary = r["summary"] if not r["error"] else f"[red]invalid:[/] {r['error']}"
            rolling = "yes" if r["rolling"] else ""
            console.print(
                f"{r['name'].ljust(width)}  {r['steps']!s:>5}  {rolling:7}  {summary}", highlight=False
            )
    if errors:
        raise typer.Exit(3)


def show_cmd(
    name: str = typer.Argument(..., help="Runbook name (or path to a YAML file)."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, json or markdown."),
) -> None:
    """Show one runbook: its steps, parameters, targets and rollback."""
    from kafkaops.catalog import find_runbook, load_plugins
    from kafkaops.cli.runbook_text import render_markdown

    load_plugins()
    rb = find_runbook(name, _dirs(directory))
    benign = _benign_kafka_errors(rb)
    if output is Output.json:
        print_json(
            {
                "name": rb.name,
                "summary": rb.summary,
                "file": rb.source,
                "sha256": rb.sha256,
                "document": rb.document,
                **({"known_benign_kafka_errors": benign} if benign else {}),
            }
        )
        return
    md = render_markdown(rb)
    if benign:
        md += _benign_markdown(benign)
    if output is Output.markdown:
        console.print(md, markup=False, highlight=False, soft_wrap=True)
    else:
        from rich.markdown import Markdown

        console.print(Markdown(md))


def _benign_kafka_errors(rb: Any) -> list[dict[str, str]]:
    """The built-in known-benign Kafka log patterns, if ``rb`` scans Kafka's log (``logs.scan_kafka``).

    The plan names them (their regexes, once per host, made it unreadable); this is where an operator
    reads what each name ignores, and why."""
    if not any(s.kind == "logs.scan_kafka" for s in rb.steps):
        return []
    from kafkaops.facts.log_lines import BATCH_PEER_NAME, BATCH_PEER_PATTERN, BENIGN_KAFKA_ERRORS

    rows = [{"name": b.name, "pattern": b.pattern, "why": b.why} for b in BENIGN_KAFKA_ERRORS]
    rows.append({"name": f"{BATCH_PEER_NAME}:ID", "pattern": f"{BATCH_PEER_PATTERN}ID ",
                 "why": "a batched roll (--batch): the controller fails to send to broker ID of the host's own "
                        "batch, stopped by the run at the same time (controller-send-to-self, for a peer)"})
    return rows


def _benign_markdown(rows: list[dict[str, str]]) -> str:
    """The section ``runbooks show`` adds for the patterns the plan names (not in the generated docs:
    they are the step's, not the runbook's)."""
    out = ["", "## Known-benign Kafka log errors (`logs.scan_kafka`)", "",
           "The plan names them; an ERROR/FATAL line matching none of them stops the run. "
           "The step's `ignore` parameter adds a site's own.", ""]
    for r in rows:
        out += [f"- `{r['name']}`: {r['why']}", "", "  ```", f"  {r['pattern']}", "  ```", ""]
    return "\n".join(out)


def docs_cmd(
    out: Path = typer.Option(Path("docs/runbooks"), "--out", help="Where to write NAME.md files."),
    directory: Path | None = typer.Option(None, "--dir", help=_DIR_HELP),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 3 if any page is out of date."),
) -> None:
    """Generate docs/runbooks/NAME.md from every runbook's YAML."""
    from kafkaops.catalog import load, load_plugins, runbook_files
    from kafkaops.cli.runbook_text import render_markdown
    from kafkaops.errors import ConfigError

    load_plugins()
    stale = []
    for name, path in runbook_files(_dirs(directory)).items():
        text = render_markdown(load(path))
        target = out / f"{name}.md"
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        stale.append(str(target))
        if not check:
            try:
                out.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"{target}: cannot write the runbook page: {exc.strerror or exc}",
                                  hint="pass another --out DIR") from None
            err_console.print(f"wrote {target}")
    if check and stale:
        err_console.print(f"[red]out of date:[/] {', '.join(stale)} (run `kafkaops runbooks docs`)")
        raise typer.Exit(3)
    if not stale:
        err_console.print("runbook docs are up to date")


def hooks_cmd(
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, json or markdown."),
) -> None:
    """List the hooks a runbook's command: may name (checks, select, resolve) and the parameters they read."""
    from kafkaops.catalog import load_plugins

    load_plugins()
    from kafkaops.queries.selectors import hooks

    rows: list[dict[str, Any]] = [{"name": h.name, "kind": h.kind, "reads": dict(h.roles), "summary": h.summary}
            for h in sorted(hooks().values(), key=lambda h: ("check", "select", "resolve").index(h.kind))]
    if output is Output.json:
        print_json(rows)
        return
    lines = ["| hook | kind | reads | what |", "|---|---|---|---|"] if output is Output.markdown else []
    width = max(len(str(r["name"])) for r in rows)
    for r in rows:
        reads = ", ".join(f"{role}" if role == p else f"{role}={p}" for role, p in r["reads"].items()) or "-"
        if output is Output.markdown:
            lines.append(f"| `{r['name']}` | {r['kind']} | {reads} | {r['summary']} |")
        else:
            lines.append(f"{str(r['name']).ljust(width)}  {r['kind']:7}  reads {reads}: {r['summary']}")
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``runbooks`` command group to the root app."""
    sub = typer.Typer(
        help="The procedures (runbooks/*.yaml): list, show, generate docs, the hooks commands use.",
        no_args_is_help=True,
    )
    sub.command("list")(list_cmd)
    sub.command("show")(show_cmd)
    sub.command("docs")(docs_cmd)
    sub.command("hooks")(hooks_cmd)
    app.add_typer(sub, name="runbooks")
