"""``kafkaops service bench SERVICE CLUSTER|HOST``: the EventBus runbook's throughput test, repeatable.

The seed's "Throughput" section is one ``ab`` command and one figure (4425 req/s for main-codfw in 2016).
This command runs that ``ab`` (Debian's apache2-utils) from the operator's machine with the seed's
defaults (``-n 10000 -c 16``) and a valid test event, parses its report (:mod:`kafkaops.facts.ab`),
and shows requests/s, failed and non-2xx counts, the latency percentiles as bars, and the measured rate
against the inventory's recorded baseline (``services.<name>.baseline``).

What it aims at:

* a HOST: that host's own address and the service's port (the host alone, as after a deploy);
* a CLUSTER: the service's VIP when the inventory names one and it accepts a connection — the whole
  service as clients see it, which is what the seed measured and what a baseline is recorded for —
  otherwise each host of the cluster that runs the service, in turn (one report per host).

A bench is real load and real events (each 2xx is a record in ``<dc>.test.event``): against production
it refuses, without ``--yes``, a pooled host or the VIP (exit 6, one line); a depooled host needs no
``--yes``, nor does anything in an inventory marked ``environment: lab`` (the gate:
:mod:`kafkaops.policy.bench`). Any failed or non-2xx request
makes the exit code 9 after the report: a fast bench that drops requests is not a result. The load is
sent by :class:`~kafkaops.systems.load_bench.LoadBench`, whose send is a guarded write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import TableOrJson, bar, console, print_json
from kafkaops.errors import CheckFailed, ConfigError
from kafkaops.policy.bench import BenchTarget

app = typer.Typer(help="Service checks beyond the runbooks: `service bench` (the runbook's throughput test).",
                  no_args_is_help=True, rich_markup_mode=None)

#: Where an eventbus accepts events when the inventory does not say (the seed's URL).
DEFAULT_EVENTS_PATH = "/v1/events"


def _url(address: str, port: int, path: str) -> str:
    return f"http://{address}:{port}{path}"


def _resolve(target: str, service: str, inventory: Path | None) -> tuple[Any, list[BenchTarget], Any, list[str]]:
    """The cluster, the addresses to bench, the inventory's Service and notes for the report, for TARGET
    (a cluster, else a host)."""
    from kafkaops.inventory import load_inventory
    from kafkaops.lookup import find_cluster, find_host, inventory_files
    from kafkaops.systems.load_bench import accepts

    is_cluster = any(load_inventory(p).name == target for p in inventory_files(inventory))
    if is_cluster:
        cluster = find_cluster(target, inventory)
        hosts = [h for h in cluster.hosts if h.service(service) is not None]
    else:
        cluster, host = find_host(target, inventory)
        hosts = [host] if host.service(service) is not None else []
    if not hosts:
        known = sorted({s.name for h in cluster.hosts for s in h.services}) or ["none"]
        where = f"cluster {cluster.name}" if is_cluster else f"host {target}"
        raise ConfigError(f"{where} runs no service {service!r} in {cluster.source}",
                          hint="services there: " + ", ".join(known))
    svc = hosts[0].service(service)
    assert svc is not None
    path = svc.events_path or DEFAULT_EVENTS_PATH
    if is_cluster and svc.vip and accepts(svc.vip, svc.port):
        return cluster, [BenchTarget(f"VIP {svc.vip}", _url(svc.vip, svc.port, path), "vip")], svc, []
    notes = []
    if is_cluster:
        notes.append(f"the VIP {svc.vip}:{svc.port} does not accept connections: each host in turn" if svc.vip
                     else f"service {service} has no VIP in the inventory: each host in turn")
    return cluster, [BenchTarget(h.name, _url(h.address, svc.port, path), "host", h) for h in hosts], svc, notes


def _refuse_production(cluster: Any, targets: list[BenchTarget], requests: int) -> None:
    """The production gate (:func:`kafkaops.policy.bench.refuse_production_bench`), its hosts' pool state
    read from conftool through a dry-run Environment, built only when a host's state is asked."""
    from kafkaops.environment import Environment
    from kafkaops.policy.bench import refuse_production_bench

    envs: list[Any] = []

    def pool_state(host: Any) -> str:
        if not envs:
            envs.append(Environment.of(cluster, dry_run=True))
        return str(envs[0].conftool.get(host.fqdn, host.conftool_tags).pooled)

    try:
        refuse_production_bench(cluster, targets, requests, pool_state)
    finally:
        for env in envs:
            env.close()


def _chart(name: str, report: Any, comparison: Any) -> Any:
    """Two rich tables: the latency percentiles as bars, and the measured rate against the baseline."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    lat = Table(title=f"{name}: latency (ms), share of requests served within", title_justify="left",
                show_edge=False, box=None)
    lat.add_column("served", justify="right")
    lat.add_column("ms", justify="right")
    lat.add_column("")
    longest = max(report.percentiles_ms.values(), default=0.0)
    for pct, ms in sorted(report.percentiles_ms.items()):
        lat.add_row(Text(f"{pct}%"), Text(f"{ms:g}"), Text(bar(ms, longest), style="cyan"))
    rate = Table(title=f"{name}: requests per second", title_justify="left", show_edge=False, box=None)
    rate.add_column("", justify="right")
    rate.add_column("req/s", justify="right")
    rate.add_column("")
    scale = max(report.requests_per_second, comparison.baseline or 0.0)
    ok = comparison.baseline is None or (comparison.ratio or 0) >= 0.9
    rate.add_row(Text("measured"), Text(f"{report.requests_per_second:g}"),
                 Text(bar(report.requests_per_second, scale), style="green" if ok else "yellow"))
    if comparison.baseline is not None:
        rate.add_row(Text("baseline"), Text(f"{comparison.baseline:g}"), Text(bar(comparison.baseline, scale),
                                                                              style="dim"))
    return Group(lat, Text(""), rate, Text(comparison.verdict()))


def _summary(name: str, url: str, report: Any) -> Any:
    from rich.text import Text

    p = report.percentiles_ms
    pcts = ", ".join(f"p{k} {p[k]:g} ms" for k in (50, 90, 99) if k in p)
    failed = f"{report.errors} failed" + (f" ({report.failed_by})" if report.errors and report.failed_by else "")
    length = report.failed_by.get("length", 0)
    return Text(f"{name} ({url}): {report.requests_per_second:g} req/s; {report.complete} complete, {failed}, "
                f"{report.non_2xx} non-2xx, {report.ok_2xx} 2xx"
                + (f" ({length} of varying length, not errors)" if length else "")
                + (f"; {pcts}" if pcts else "") + (f"; {report.seconds:g} s" if report.seconds else ""))


def bench_cmd(
    service: str = typer.Argument(..., help="Service name from the inventory (services:), e.g. eventbus."),
    target: str = typer.Argument(..., metavar="CLUSTER|HOST",
                                 help="A cluster (its VIP if it answers, else each host) or one host."),
    requests: int = typer.Option(10000, "--requests", "-n", min=1, max=1_000_000,
                                 help="Requests in all (ab -n; the seed's 10000)."),
    concurrency: int = typer.Option(16, "--concurrency", "-c", min=1, max=1000,
                                    help="Requests at a time (ab -c; the seed's 16)."),
    output: TableOrJson = typer.Option(TableOrJson.table, "--output", "-o", help="table (with the chart) or json."),
    yes: bool = typer.Option(False, "--yes", "-y",
                             help="Bench production traffic's path anyway (a pooled host, the VIP)."),
    inventory: Path | None = typer.Option(None, "--inventory", "-i", metavar="PATH", help="Inventory file."),
) -> None:
    """Throughput of SERVICE with the runbook's `ab -n 10000 -c 16 -T application/json -p test-event.json`:
    requests/s, failed and non-2xx counts, latency percentiles, and the inventory's baseline."""
    from kafkaops.facts.ab import bench_event
    from kafkaops.policy.throughput import Comparison
    from kafkaops.systems.load_bench import LoadBench  # not at the top: `kafkaops --help` imports this module

    if concurrency > requests:
        raise typer.BadParameter(f"{concurrency} requests at a time is more than the {requests} in all",
                                 param_hint="--concurrency")
    LoadBench.check_installed()
    cluster, targets, svc, notes = _resolve(target, service, inventory)
    if not yes:
        _refuse_production(cluster, targets, requests)
    event = bench_event()
    load = LoadBench()
    results: list[dict[str, Any]] = []
    for note in notes if output is TableOrJson.table else ():
        console.print(note, highlight=False, markup=False, soft_wrap=True)
    for t in targets:
        if output is TableOrJson.table:
            console.print(f"ab -n {requests} -c {concurrency} -T application/json -p test-event.json {t.url}",
                          highlight=False, markup=False, soft_wrap=True)
        report = load.send(t.url, event, requests=requests, concurrency=concurrency)
        comparison = Comparison(report.requests_per_second, svc.baseline_rps, svc.baseline_note)
        results.append({"target": t.name, "via": t.via, "url": t.url, "report": report, "comparison": comparison})
        if output is TableOrJson.table:
            console.print(_summary(t.name, t.url, report))
            console.print(_chart(t.name, report, comparison))
    if output is TableOrJson.json:
        print_json({"service": service, "cluster": cluster.name, "environment": cluster.environment,
                    "requests": requests, "concurrency": concurrency, "event": event, "notes": notes,
                    "results": [{**{k: r[k] for k in ("target", "via", "url")}, **r["report"].to_dict(),
                                 "baseline": r["comparison"].to_dict()} for r in results]})
    bad = [(r["target"], r["report"]) for r in results if r["report"].errors or r["report"].non_2xx]
    if bad:
        listed = "; ".join(f"{n}: {rep.errors} failed, {rep.non_2xx} non-2xx of {rep.complete}" for n, rep in bad)
        raise CheckFailed(f"the bench is not clean: {listed}",
                          hint="look at the service's log; a fast bench that drops requests is not a result")


def register(root: typer.Typer) -> None:
    """Add ``kafkaops service`` (bench)."""
    app.command("bench")(bench_cmd)
    root.add_typer(app, name="service")
