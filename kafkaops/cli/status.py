"""``kafkaops status CLUSTER``: the answer to "can I touch this cluster right now?" in one screen.

Brokers (registered, controller), offline / under-replicated / under-min-ISR partitions, the
preferred-leader ratio, leaders per broker and per DC, and each host's pool state — what an operator
would otherwise assemble from ``kafka topics --describe``, confctl and Grafana before a maintenance.
Of a multi-site inventory: each site's status, which site each switched service is active in, and
MirrorMaker's lag per direction. Of a cluster being migrated to KRaft: its quorum once the controllers run
without ZooKeeper, and the inventory edit a finalized migration still needs.

Rendering only (table, Markdown, JSON): what is gathered and how it is judged is
:mod:`kafkaops.health.status`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkaops.cli import complete
from kafkaops.cli.common import Output, console, print_json, print_text, waiting

if TYPE_CHECKING:
    from rich.table import Table


def _verdict(data: dict[str, Any]) -> str:
    if data["healthy"]:
        return "healthy"
    if data["min_isr_error"] and not data["under_replicated"] and not data["offline"]:
        return "health unknown"
    return "NOT healthy"


def _counts(data: dict[str, Any]) -> list[tuple[str, int]]:
    return [("offline", len(data["offline"])), ("under-replicated", len(data["under_replicated"])),
            ("under min ISR", len(data["under_min_isr"])), ("at min ISR", len(data["at_min_isr"]))]


_COLUMNS = ("host", "broker", "dc/rack", "alive", "leaders", "preferred", "pooled", "weight")


def _rows(data: dict[str, Any]) -> list[tuple[str, ...]]:
    return [(b["host"], f"{b['broker_id']}{' ctrl' if b['controller'] else ''}", f"{b['dc']}/{b['rack']}",
             "yes" if b["registered"] else "no", str(b["leaders"]), f"{b['preferred_ratio']:.0%}", b["pooled"],
             _weight(b.get("weight"), data.get("pool_weight")))
            for b in data["brokers"]]


def _weight(weight: int | None, expected: int | None) -> str:
    """The pool weight, flagged when it is not the inventory's (the runbook expects every host at 10)."""
    if weight is None:
        return "-"
    return f"{weight}" if weight == expected else f"{weight}!"


def _notes(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) for what needs attention: the partitions at fault, and what could not be read."""
    out = []
    for key, label in (("offline", "offline"), ("under_min_isr", "under min ISR"),
                       ("under_replicated", "under-replicated")):
        if data[key]:
            more = len(data[key]) - 10
            out.append((label, ", ".join(data[key][:10]) + (f" and {more} more" if more > 0 else "")))
    if data["preferred_leader_ratio"] < 1 and not out:
        out.append(("leaders not preferred", f"{1 - data['preferred_leader_ratio']:.0%} of partitions are led by "
                    "another replica than their preferred one; a preferred-replica election rebalances them"))
    if data["min_isr_error"]:
        out.append(("min ISR unknown (counted as 1)", data["min_isr_error"]))
    if data["pool_error"]:
        out.append(("pool state unavailable", data["pool_error"]))
    quorum = data.get("quorum")
    if quorum and quorum["error"]:
        out.append(("quorum unknown", quorum["error"]))
    elif quorum and (quorum["leader"] is None or not all(v["caught_up"] for v in quorum["voters"])):
        lagging = [v["host"] for v in quorum["voters"] if not v["caught_up"]]
        out.append(("quorum", ("no leader; " if quorum["leader"] is None else "")
                    + (f"voter(s) not caught up: {', '.join(lagging)} (a controller roll refuses)" if lagging else "")))
    migration = data.get("migration")  # a migrating inventory: what its edit should be, once finalized
    if migration and migration["inventory_edit"]:
        out.append(("inventory", migration["inventory_edit"]))
    elif migration and migration["note"]:
        out.append(("migration", migration["note"]))
    alerts = data.get("alerts")
    if alerts and alerts["error"]:
        out.append(("alerts unknown", alerts["error"]))
    elif alerts and alerts["firing"]:
        out.append(("alerts firing", ", ".join(_alert_line(a) for a in alerts["firing"][:10])
                    + " (unsilenced: a maintenance's alerts.gate holds until they clear)"))
    off = [b for b in data["brokers"] if b.get("weight") is not None and b["weight"] != data.get("pool_weight")]
    if off:
        out.append(("pool weight", ", ".join(f"{b['host']} at {b['weight']}" for b in off)
                    + f" (expected {data.get('pool_weight')}: a maintenance refuses to depool until it is restored)"))
    return out


def _alert_line(a: dict[str, Any]) -> str:
    return f"{a['alertname']}@{a['instance']}" if a["instance"] else a["alertname"]


def _alerts_lines(data: dict[str, Any]) -> list[str]:
    """The cluster's monitoring in a few lines: what fires, what is silenced, and by which silences."""
    alerts = data.get("alerts")
    if not alerts or alerts["error"]:
        return []
    firing = ", ".join(_alert_line(a) for a in alerts["firing"]) or "none"
    lines = [f"alerts ({alerts['alertmanager']}): firing {firing}; silenced {len(alerts['silenced'])}"]
    for s in alerts["silences"]:
        until = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(s["ends_at"])) if s["ends_at"] else "?"
        lines.append(f"  silence {s['id']}" + (f" ({s['host']})" if s.get("host") else "")
                     + f" until {until} by {s['created_by']}: {s['comment']}")
    return lines


_QUORUM_COLUMNS = ("controller", "node", "role", "log end", "lag", "last caught up", "caught up")


def _quorum_rows(quorum: dict[str, Any]) -> list[tuple[str, ...]]:
    def ago(v: dict[str, Any]) -> str:
        return "now" if v["leader"] else "never" if v["behind_ms"] is None else f"{v['behind_ms'] / 1000:.1f}s ago"

    return [(v["host"], str(v["node_id"]), "leader" if v["leader"] else "follower", str(v["log_end_offset"]),
             str(v["lag"]), ago(v), "yes" if v["caught_up"] else "no") for v in quorum["voters"]]


def _quorum_line(quorum: dict[str, Any]) -> str:
    if quorum["error"]:
        return "metadata quorum: unknown"
    leader = f"leader {quorum['leader']} (epoch {quorum['epoch']})" if quorum["leader"] is not None else "NO LEADER"
    return (f"metadata quorum (KRaft): {leader}, high watermark {quorum['high_watermark']}, "
            f"{len(quorum['voters'])} voters, {len(quorum['observers'])} observers (asked {quorum['asked']})")


def _plain_table() -> Table:
    """A table without vertical rules: at 80 columns (a log, a narrow pane) the boxed one truncated every
    host name to "kafka-…", the one column an operator reads first (the name columns are also no_wrap)."""
    from rich import box
    from rich.table import Table

    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))


def _render(data: dict[str, Any]) -> None:
    colour = {"healthy": "green", "health unknown": "bold yellow", "NOT healthy": "bold red"}[_verdict(data)]
    counts = ", ".join(f"{label} [{'red' if n and label != 'at min ISR' else 'green'}]{n}[/]"
                       for label, n in _counts(data))
    console.print(f"cluster [bold]{data['cluster']}[/]: [{colour}]{_verdict(data)}[/] — {data['partitions']} "
                  f"partitions, {counts}, preferred leaders {data['preferred_leader_ratio']:.0%}")
    table = _plain_table()
    for col in _COLUMNS:
        table.add_column(col, no_wrap=col == "host")
    for row in _rows(data):
        table.add_row(*row[:3], row[3] if row[3] == "yes" else f"[red]{row[3]}[/]", *row[4:6],
                      row[6] if row[6] == "yes" else f"[yellow]{row[6]}[/]",
                      f"[red]{row[7]}[/]" if row[7].endswith("!") else row[7])
    console.print(table)
    if quorum := data.get("quorum"):
        console.print(_quorum_line(quorum), highlight=False)
        if quorum["voters"]:
            qt = _plain_table()
            for col in _QUORUM_COLUMNS:
                qt.add_column(col, no_wrap=col == "controller")
            for row in _quorum_rows(quorum):
                qt.add_row(*row[:6], row[6] if row[6] == "yes" else f"[red]{row[6]}[/]")
            console.print(qt)
    console.print("leaders per DC: " + ", ".join(f"{dc} {n}" for dc, n in sorted(data["leaders_by_dc"].items())))
    for line in _alerts_lines(data):
        console.print(line, highlight=False, markup=False)
    for label, text in _notes(data):
        severe = label in ("offline", "under min ISR", "under-replicated")
        console.print(f"[{'red' if severe else 'yellow'}]{label}:[/] {text}", highlight=False)


def to_markdown(data: dict[str, Any]) -> str:
    """Status as Markdown, to paste into the maintenance's task or change review."""
    counts = ", ".join(f"{label} {n}" for label, n in _counts(data))
    lines = [f"**{data['cluster']}: {_verdict(data)}** — {data['partitions']} partitions, {counts}, "
             f"preferred leaders {data['preferred_leader_ratio']:.0%} ({data['taken_at']})", "",
             "| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(data)]
    if quorum := data.get("quorum"):
        lines += ["", _quorum_line(quorum), ""]
        if quorum["voters"]:
            lines += ["| " + " | ".join(_QUORUM_COLUMNS) + " |", "|" + "---|" * len(_QUORUM_COLUMNS)]
            lines += ["| " + " | ".join(row) + " |" for row in _quorum_rows(quorum)]
    lines += ["", "leaders per DC: " + ", ".join(f"{dc} {n}" for dc, n in sorted(data["leaders_by_dc"].items()))]
    if alert_lines := _alerts_lines(data):
        lines += ["", *(f"- {line.strip()}" for line in alert_lines)]
    if notes := _notes(data):
        lines += ["", *(f"- **{label}:** {text}" for label, text in notes)]
    return "\n".join(lines) + "\n"


# --- a multi-site inventory: each site's status, the switched services, MirrorMaker's lag ------------


def _service_lines(data: dict[str, Any]) -> list[str]:
    out = []
    for name, s in data["services"].items():
        if s["error"]:
            out.append(f"{name}: discovery record {s['record']} unreadable: {s['error']}")
            continue
        where = ", ".join(s["active"]) if s["active"] else "NO site (depooled everywhere)"
        if len(s["active"]) > 1:
            where += " (active in more than one site)"
        out.append(f"{name}: active in {where} (discovery {s['record']}: "
                   + ", ".join(f"{dc} {'pooled' if p else 'depooled'}" for dc, p in s["records"].items()) + ")")
    return out


def _mirror_lines(data: dict[str, Any]) -> list[str]:
    return [f"MirrorMaker {flow}: " + (m["error"] or f"lag {m['lag']} over {m['partitions']} partition(s)"
                                       + (f", worst {', '.join(m['worst'])}" if m["worst"] else ""))
            for flow, m in data["mirror"].items()]


def _render_sites(data: dict[str, Any]) -> None:
    """A multi-site inventory's status: the services and MirrorMaker flows, then each site's own."""
    verdict = "[green]healthy[/]" if data["healthy"] else "[bold red]NOT healthy[/]"
    console.print(f"sites [bold]{data['sites']}[/]: {verdict}")
    for line in _service_lines(data) + _mirror_lines(data):
        console.print("  " + line, highlight=False)
    for dc, cluster in data["clusters"].items():
        console.print(f"\n[bold]site {dc}[/]")
        if "error" in cluster:
            console.print(f"[red]{cluster['cluster']}: {cluster['error']}[/]", highlight=False)
        else:
            _render(cluster)


def sites_markdown(data: dict[str, Any]) -> str:
    """A multi-site inventory's status as Markdown."""
    lines = [f"**{data['sites']}: {'healthy' if data['healthy'] else 'NOT healthy'}**", ""]
    lines += [f"- {line}" for line in _service_lines(data) + _mirror_lines(data)]
    for dc, cluster in data["clusters"].items():
        lines += ["", f"### site {dc}", ""]
        lines.append(f"{cluster['cluster']}: {cluster['error']}" if "error" in cluster else to_markdown(cluster))
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory.",
                                           autocompletion=complete.clusters),
        inventory: Path | None = typer.Option(None, "--inventory", "-i", help="Inventory file."),
        output: Output = typer.Option(Output.table, "--output", "-o",
                                      help="table, json, or markdown (for the task or change review)."),
    ) -> None:
        """Cluster health before (or after) maintenance: brokers, URP, min ISR, leaders, pools; on a KRaft
        cluster also the metadata quorum (leader, each voter's lag, as kafka-metadata-quorum tells it) — and
        on a cluster migrating to KRaft once its controllers run without ZooKeeper, with the inventory edit a
        finalized migration still needs.

        Exit 0 when healthy, 9 when any partition is offline, under-replicated or under min ISR, when
        min ISR could not be read (right after a controller dies), or when a KRaft quorum has no leader or
        a voter that is not caught up; 4 when Kafka does not answer.
        """
        from kafkaops.errors import CheckFailed
        from kafkaops.health.status import status
        from kafkaops.lookup import find_cluster

        cluster = find_cluster(cluster_name, inventory)
        with waiting(f"asking {cluster.name}: Kafka at {cluster.bootstrap_servers}, its pools and alerts"):
            data = status(cluster)
        if output == Output.json:
            print_json(data)
        elif output == Output.markdown:
            print_text(sites_markdown(data) if cluster.multi_site else to_markdown(data))
        elif cluster.multi_site:
            _render_sites(data)
        else:
            _render(data)
        if not data["healthy"]:
            raise typer.Exit(CheckFailed.exit_code)
