"""``kafkaops inventory check FILE...``: every mistake of an inventory at once, before any command needs it.

A command loading an inventory stops at its first error — the right thing before a maintenance. Writing
one is another job: an operator fixing a new inventory one error per run learns the format the slowest
way. ``check`` reads each file with the same reader (:func:`kafkaops.inventory.check_inventory`) but
goes on after an error, to the next host, section and key, and prints one line per problem, each with
its file:line. Exit 0 when every file loads, 3 (a configuration error) otherwise; nothing is asked of
any system.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kafkaops.cli.common import TableOrJson, console, print_json

app = typer.Typer(help="Inventories: check a file before a command needs it.", no_args_is_help=True)


def check_cmd(
    files: list[Path] = typer.Argument(..., metavar="FILE...", help="Inventory files (YAML) to check."),
    output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o", help="table (one line each) or json."),
) -> None:
    """Every error of each inventory FILE at once, one line each with its file:line; exit 3 if any."""
    from rich.text import Text

    from kafkaops.errors import ConfigError
    from kafkaops.inventory import check_inventory, load_inventory

    report: list[dict[str, object]] = []
    failed = 0
    for file in files:
        errors = check_inventory(file)
        failed += len(errors)
        entry: dict[str, object] = {"file": str(file), "ok": not errors,
                                    "errors": [{"message": e.message, "hint": e.hint} for e in errors]}
        if not errors:
            cluster = load_inventory(file)
            entry["cluster"] = cluster.name or ", ".join(cluster.sites)
            entry["hosts"] = len(cluster.hosts) + len(cluster.controllers)
        report.append(entry)
        if output is TableOrJson.table:
            if not errors:
                console.print(Text(f"{file}: ok (cluster {entry['cluster']}, {entry['hosts']} hosts)"),
                              highlight=False, soft_wrap=True)
            for e in errors:  # the error's own words, file:line first; literal text, never markup
                console.print(Text(str(e)), highlight=False, soft_wrap=True)
    if output is TableOrJson.json:
        print_json({"ok": all(e["ok"] for e in report), "files": report})
    if failed:
        raise ConfigError(f"{failed} error(s) in {sum(1 for e in report if not e['ok'])} of {len(report)} "
                          "inventory file(s)", hint="fix each line above; docs/inventory.md describes every key")


def register(root: typer.Typer) -> None:
    """Add ``kafkaops inventory`` (check)."""
    app.command("check")(check_cmd)
    root.add_typer(app, name="inventory")
