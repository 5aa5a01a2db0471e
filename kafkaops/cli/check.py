"""``kafkaops check`` (the topic-health post-check) and ``kafkaops snapshot`` (its baseline).

Thin: parse, resolve the inventory, call :func:`kafkaops.health.check.run_post_check`, render. Heavy
imports (confluent_kafka, pyspark, matplotlib) happen inside the commands so ``kafkaops --help``
stays instant.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from kafkaops.cli.common import CommandLineError, Output, TableOrJson, check_writable, console, err_console, print_json
from kafkaops.errors import ConfigError
from kafkaops.model import Cluster

_InventoryOpt = typer.Option(None, "--inventory", "-i",
                             help="Inventory file (default: the inventories found: `kafkaops --help`).")


class Reader(StrEnum):
    """The scan's Kafka reader (``kafkaops.health.scan_jar``): the same report either way."""

    fast = "fast"
    builtin = "builtin"


def _cluster(name: str, inventory: Path | None) -> Cluster:
    from kafkaops.lookup import find_cluster

    return find_cluster(name, inventory)


def check(
    cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="The inventory's cluster name."),
    inventory: Path | None = _InventoryOpt,
    topics: str | None = typer.Option(None, "--topics", help="Only topics matching this regex (re.search)."),
    since: str | None = typer.Option(None, "--since",
                                     help="Check what was produced in this last duration (15m, 1h30m; at "
                                          "most 30d; default 10m when no --baseline)."),
    baseline: Path | None = typer.Option(None, "--baseline",
                                         help="Compare with this `kafkaops snapshot` file (taken before the run)."),
    spark_master: str = typer.Option("local[2]", "--spark-master",
                                     help="Spark master URL: local[N], spark://HOST:7077, yarn."),
    spark_conf: list[str] = typer.Option([], "--spark-conf", help="Extra Spark setting KEY=VALUE (repeatable)."),
    reader: Reader = typer.Option(Reader.fast, "--reader",
                                  help="Kafka reader of the scan: fast (ours, columnar) or builtin (Spark's kafka "
                                       "source). Same report; fast falls back to builtin when not built."),
    no_scan: bool = typer.Option(False, "--no-scan", help="Metadata checks only (no Spark)."),
    jars: Path | None = typer.Option(None, "--jars", metavar="DIR",
                                     help="A directory holding kafka-clients-*.jar for the fast reader, instead of "
                                          "the pinned download (air-gapped sites; else $KAFKAOPS_READER_JARS)."),
    output: Output = typer.Option(Output.table, "--output", "-o", help="table, json or markdown."),
    chart: Path | None = typer.Option(None, "--chart", help="Write a PNG of produce rate and URP across the run."),
) -> None:
    """Topic-health post-check: metadata against the baseline, then a Spark scan of the data.

    Exit 0 when healthy, 9 when any finding is critical or a warning (each one names topic, partition,
    check and how bad), 2 on a command-line mistake, 3 on a configuration error, 4 when Kafka or Spark
    failed.
    """
    import re

    from kafkaops.health.check import parse_since, read_urp_samples, run_post_check
    from kafkaops.health.metadata import OffsetsSnapshot
    from kafkaops.health.report import render_chart, render_markdown, render_table

    # Command-line mistakes first (exit 2), before the inventory is read or Kafka asked.
    if since and baseline:
        raise CommandLineError("--since and --baseline are exclusive (a baseline already says where to start)")
    conf = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandLineError(f"--spark-conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    if topics:
        try:
            re.compile(topics)
        except re.error as exc:
            raise CommandLineError(f"--topics {topics!r}: invalid regex: {exc}") from None
    try:
        since_s = parse_since(since) if since else None
    except ConfigError as exc:
        raise CommandLineError(exc.message) from None
    if chart is not None:  # not after the scan: its chart would be lost
        check_writable(chart, "the chart", "--chart PATH")
    if jars is not None:
        if not jars.is_dir():
            raise ConfigError(f"{jars}: no such directory", hint="--jars names a directory holding kafka-clients-*.jar")
        from dataclasses import replace

        from kafkaops import places

        places.use(replace(places.given(), reader_jars=jars.resolve()))  # the reader's jar is found there
    cluster = _cluster(cluster_name, inventory)
    base = OffsetsSnapshot.read(baseline) if baseline else None
    # A run's baseline.json has the URP samples of that run beside it: the chart shows the run.
    samples = read_urp_samples(baseline.parent) if baseline else []
    result = run_post_check(
        cluster, base, topics_regex=topics, spark_master=spark_master, window=None,
        since=since_s, scan=not no_scan, spark_conf=conf, urp_samples=samples,
        reader=reader.value, notify=lambda line: err_console.print(line, highlight=False, markup=False,
                                                                    soft_wrap=True),
    )
    if chart is not None:
        try:
            render_chart(result, chart)
        except OSError as exc:
            raise ConfigError(f"{chart}: cannot write the chart: {exc.strerror or exc}",
                              hint="pass another --chart PATH") from None
    if output == Output.json:
        print_json(result.to_dict())
    elif output == Output.markdown:
        typer.echo(render_markdown(result), nl=False)
    else:
        render_table(result, console)
    if chart is not None and output != Output.json:
        err_console.print(f"chart written to {chart}", highlight=False)
    raise typer.Exit(result.exit_code)


def snapshot(
    cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="The inventory's cluster name."),
    out: Path = typer.Option(..., "--out", help="Snapshot file to write (JSON)."),
    inventory: Path | None = _InventoryOpt,
    output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o",
                                       help="What is said about the file written: a line, or json."),
) -> None:
    """Write end/start offsets, leaders, ISR and configs per partition: the baseline of a run.

    ``--out FILE`` is the file; ``-o`` is the output format, as in every other command."""
    from kafkaops.health.check import take_snapshot

    check_writable(out, "the snapshot", "--out PATH")  # before Kafka is asked
    cluster = _cluster(cluster_name, inventory)
    snap = take_snapshot(cluster)
    try:
        snap.write(out)
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write the snapshot: {exc.strerror or exc}",
                          hint="pass another --out PATH") from None
    urp = sum(1 for p in snap.partitions if len(p.isr) < len(p.replicas))
    if output is TableOrJson.json:
        print_json({"cluster": cluster.name, "file": str(out), "partitions": len(snap.partitions),
                    "brokers": len(snap.brokers), "under_replicated": urp})
        return
    console.print(f"snapshot of {cluster.name}: {len(snap.partitions)} partitions, {len(snap.brokers)} brokers, "
                  f"{urp} under-replicated -> {out}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``check`` and ``snapshot`` to the root app."""
    app.command("check")(check)
    app.command("snapshot")(snapshot)
