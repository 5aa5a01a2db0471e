"""``kafkaops status CLUSTER``: the answer to "can I touch this cluster right now?" in one screen.

Brokers (registered, controller), offline / under-replicated / under-min-ISR partitions, the
preferred-leader ratio, leaders per broker and per DC, and each host's pool state — what an operator
would otherwise assemble from ``kafka topics --describe``, confctl and Grafana before a maintenance.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, console, print_json, print_text


def _pool_states(cluster: Any) -> tuple[dict[str, Any], str]:
    """{host fqdn: PoolState} from etcd, or ({}, why not): status still answers when etcd does not."""
    from kafkaops.errors import KafkaOpsError
    from kafkaops.systems.conftool import read_pools

    pools: dict[str, Any] = {}
    try:
        for tags in {tuple(sorted(h.conftool_tags.items())) for h in cluster.hosts if h.conftool_tags}:
            for state in read_pools(cluster.conftool_config, dict(tags)):
                pools[state.host] = state
    except KafkaOpsError as exc:
        return {}, str(exc)
    return pools, ""


def _snapshot(admin: Any) -> tuple[Any, str]:
    """The cluster snapshot, and why topic configs are missing from it ("" when they are not).

    Right after a controller dies, DescribeConfigs can time out for the seconds the election takes
    while metadata answers: that is exactly when an operator runs status, so it shows brokers, URP and
    leaders anyway and says min ISR is unknown (counted as 1) instead of failing.
    """
    from kafkaops.errors import UnreachableError

    snap = admin.snapshot(with_configs=False)
    try:
        return admin.with_configs(snap), ""
    except UnreachableError as exc:
        return snap, str(exc)


def collect(cluster: Any) -> dict[str, Any]:
    """Everything ``status`` shows, as plain data (also the ``--output json`` document).

    etcd is read on a second thread while librdkafka (which releases the GIL) waits on the brokers:
    an operator runs this before and after every step, so its latency is the sum of neither.
    """
    from concurrent.futures import ThreadPoolExecutor

    from kafkaops.systems.kafka import KafkaAdmin

    # Starts connecting at once. One 5 s try: an operator asking "can I touch this cluster?" wants
    # "Kafka did not answer" in seconds, not after a maintenance run's patient retries.
    admin = KafkaAdmin(cluster.bootstrap_servers, cluster=cluster.name, timeout=5.0, attempts=1)
    with ThreadPoolExecutor(max_workers=1) as executor:
        pending = executor.submit(_pool_states, cluster) if cluster.conftool_config else None
        snap, min_isr_error = _snapshot(admin)
        pools, pool_error = pending.result() if pending else ({}, "")

    from kafkaops.safety import broker_dc_map, cluster_health, partition_name

    health = cluster_health(snap, broker_dc_map(cluster))
    brokers = []
    for h in cluster.hosts:
        brokers.append({
            "host": h.name, "broker_id": h.broker_id, "dc": h.dc, "rack": h.rack,
            "registered": h.broker_id in snap.brokers, "controller": snap.controller == h.broker_id,
            "leaders": health.leaders_by_broker.get(h.broker_id, 0),
            "preferred_ratio": round(health.preferred_ratio_by_broker.get(h.broker_id, 1.0), 4),
            "pooled": pools[h.fqdn].pooled if h.fqdn in pools else (
                "unknown" if pool_error or not cluster.conftool_config else "absent"),
            "weight": pools[h.fqdn].weight if h.fqdn in pools else None,
        })
    return {
        # "healthy" is a promise that every gate would pass: not without knowing min ISR.
        "cluster": cluster.name, "healthy": health.healthy and not min_isr_error, "controller": snap.controller,
        "taken_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap.taken_at)),
        "partitions": health.partition_count,
        "offline": [partition_name(p) for p in health.offline],
        "under_replicated": [partition_name(p) for p in health.under_replicated],
        "under_min_isr": [partition_name(p) for p in health.under_min_isr],
        "at_min_isr": [partition_name(p) for p in health.at_min_isr],
        "preferred_leader_ratio": round(health.preferred_leader_ratio, 4),
        "leaders_by_dc": dict(health.leaders_by_dc), "brokers": brokers, "pool_weight": cluster.pool_weight,
        "unregistered_replica_brokers": list(health.unregistered_replica_brokers),
        "pool_error": pool_error,
        "min_isr_error": min_isr_error,
    }


def _verdict(data: dict[str, Any]) -> str:
    if data["healthy"]:
        return "healthy"
    if data["min_isr_error"] and not data["under_replicated"] and not data["offline"]:
        return "health unknown"
    return "NOT healthy"


def _counts(data: dict[str, Any]) -> list[tuple[str, int]]:
    return [("offline", len(data["offline"])), ("under-replicated", len(data["under_replicated"])),
            ("under min ISR", len(data["under_min_isr"])), ("at min ISR", len(data["at_min_isr"]))]


_COLUMNS = ("host", "broker", "dc/rack", "registered", "leaders", "preferred", "pooled", "weight")


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
    off = [b for b in data["brokers"] if b.get("weight") is not None and b["weight"] != data.get("pool_weight")]
    if off:
        out.append(("pool weight", ", ".join(f"{b['host']} at {b['weight']}" for b in off)
                    + f" (expected {data.get('pool_weight')}: a maintenance refuses to depool until it is restored)"))
    return out


def _render(data: dict[str, Any]) -> None:
    colour = {"healthy": "green", "health unknown": "bold yellow", "NOT healthy": "bold red"}[_verdict(data)]
    counts = ", ".join(f"{label} [{'red' if n and label != 'at min ISR' else 'green'}]{n}[/]"
                       for label, n in _counts(data))
    console.print(f"cluster [bold]{data['cluster']}[/]: [{colour}]{_verdict(data)}[/] — {data['partitions']} "
                  f"partitions, {counts}, preferred leaders {data['preferred_leader_ratio']:.0%}")
    from rich.table import Table

    table = Table()
    for col in _COLUMNS:
        table.add_column(col)
    for row in _rows(data):
        table.add_row(*row[:3], row[3] if row[3] == "yes" else f"[red]{row[3]}[/]", *row[4:6],
                      row[6] if row[6] == "yes" else f"[yellow]{row[6]}[/]",
                      f"[red]{row[7]}[/]" if row[7].endswith("!") else row[7])
    console.print(table)
    console.print("leaders per DC: " + ", ".join(f"{dc} {n}" for dc, n in sorted(data["leaders_by_dc"].items())))
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
    lines += ["", "leaders per DC: " + ", ".join(f"{dc} {n}" for dc, n in sorted(data["leaders_by_dc"].items()))]
    if notes := _notes(data):
        lines += ["", *(f"- **{label}:** {text}" for label, text in notes)]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
        inventory: Path | None = typer.Option(None, "--inventory", "-i", help="Inventory file."),
        output: Output = typer.Option(Output.table, "--output", "-o",
                                      help="table, json, or markdown (for the task or change review)."),
    ) -> None:
        """Cluster health before (or after) maintenance: brokers, URP, min ISR, leaders, pools.

        Exit 0 when healthy, 9 when any partition is offline, under-replicated or under min ISR, or when
        min ISR could not be read (right after a controller dies), 4 when Kafka does not answer.
        """
        from kafkaops.cli.lookup import find_cluster
        from kafkaops.errors import CheckFailed

        data = collect(find_cluster(cluster_name, inventory))
        if output == Output.json:
            print_json(data)
        elif output == Output.markdown:
            print_text(to_markdown(data))
        else:
            _render(data)
        if not data["healthy"]:
            raise typer.Exit(CheckFailed.exit_code)
