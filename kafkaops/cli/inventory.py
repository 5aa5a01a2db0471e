"""``kafkaops inventory check FILE...``: every mistake of an inventory at once, before any command needs it.
``init`` drafts a first inventory from a cluster; ``schema`` prints the format's JSON Schema for an editor.

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
from rich.text import Text

from kafkaops.cli.common import TableOrJson, console, print_json

app = typer.Typer(help="Inventories: draft one from a cluster (init), check a file before a command needs it, "
                       "the format's JSON Schema for an editor (schema).",
                  no_args_is_help=True)


def check_cmd(
    files: list[Path] = typer.Argument(..., metavar="FILE...", help="Inventory files (YAML) to check."),
    output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o", help="table (one line each) or json."),
) -> None:
    """Every error of each inventory FILE at once, one line each with its file:line; exit 3 if any."""
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
                          "inventory file(s)",
                          hint="fix each line above; `kafkaops docs inventory` describes every key")


def init_cmd(
    cluster: str = typer.Argument(..., metavar="CLUSTER", help="The name the new inventory gives the cluster."),
    bootstrap: str = typer.Option(..., "--bootstrap", "-b", metavar="HOST:PORT[,...]",
                                  help="Where to ask the cluster (one broker is enough)."),
    security_from: Path | None = typer.Option(
        None, "--security-from", metavar="FILE",
        help="A YAML file with kafka.security (an inventory, or that section alone): how to connect to a "
             "secured cluster; copied into the draft (secrets stay named by file or variable)."),
    out: Path | None = typer.Option(None, "--out", metavar="FILE", help="Write the draft here (never over a file); "
                                                                        "else stdout."),
) -> None:
    """Draft an inventory of CLUSTER from what it says about itself: brokers, their racks, the controller,
    ZooKeeper or the KRaft quorum. What Kafka cannot know (DCs, SSH, pools, command templates) is left as
    TODO comments: `kafkaops inventory check FILE` names each until it is written. Read-only."""
    import datetime as dt

    from kafkaops.cli.common import check_writable, waiting
    from kafkaops.environment import Environment
    from kafkaops.errors import ConfigError
    from kafkaops.inventory import read_kafka_security
    from kafkaops.inventory_draft import SETTINGS, draft, seen_from
    from kafkaops.model import PLAINTEXT, Cluster

    if out is not None:
        if out.exists():
            raise ConfigError(f"{out} exists: the draft never overwrites a file", hint="pass another --out FILE")
        check_writable(out, "the draft", "--out FILE")
    security, written = read_kafka_security(security_from) if security_from is not None else (PLAINTEXT, None)
    asking = Cluster(name=cluster, bootstrap_servers=bootstrap, hosts=(), kafka_security=security)
    env = Environment(asking, dry_run=True)
    try:
        with waiting(f"asking Kafka at {bootstrap}"):
            metadata = env.kafka.metadata()
            settings = env.kafka.broker_settings([int(b) for b in metadata.brokers], SETTINGS)
    finally:
        env.close()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    text = draft(cluster, seen_from(metadata, settings), security=written, asked=bootstrap, when=f"on {when}")
    if out is None:
        typer.echo(text, nl=False)
        return
    out.write_text(text)
    console.print(Text(f"draft of {cluster} written to {out}: fill in its TODO lines, then "
                       f"`kafkaops inventory check {out}`"), highlight=False, soft_wrap=True)


#: The inventory format's JSON Schema, inside the package (pyproject.toml's package-data ships it).
SCHEMA = ("schemas", "inventory.schema.json")


def schema_cmd() -> None:
    """Print the JSON Schema (draft 2020-12) of the inventory format, for an editor: every key, its type and
    what it means, shown and checked as you type.

    Write it to a file and point the editor at it. With yaml-language-server (VS Code's YAML extension, or
    an editor's LSP client running it), the first line of an inventory:

    # yaml-language-server: $schema=inventory.schema.json

    (a path relative to the inventory, or absolute), after `kafkaops inventory schema > inventory.schema.json`.
    The schema knows keys, types and fixed values; `kafkaops inventory check FILE` is still the authority
    (templates, regexes, names that must exist elsewhere, file modes)."""
    from importlib.resources import files

    typer.echo(files("kafkaops").joinpath(*SCHEMA).read_text(encoding="utf-8"), nl=False)


def register(root: typer.Typer) -> None:
    """Add ``kafkaops inventory`` (check, init, schema)."""
    app.command("check")(check_cmd)
    app.command("init")(init_cmd)
    app.command("schema")(schema_cmd)
    root.add_typer(app, name="inventory")
