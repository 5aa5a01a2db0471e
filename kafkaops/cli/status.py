"""``kafkaops status CLUSTER``: the answer to "can I touch this cluster right now?" in one screen.

Brokers (registered, controller), offline / under-replicated / under-min-ISR partitions, the
preferred-leader ratio, leaders per broker and per DC, and each host's pool state — what an operator
would otherwise assemble from ``kafka topics --describe``, confctl and Grafana before a maintenance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kafkaops.cli.common import Output, console, print_json


def _pool_states(cluster: Any) -> tuple[dict[str, str], str]:
    """{host fqdn: pooled} from etcd, or ({}, why not): status still answers when etcd does not."""
    from kafkaops.errors import KafkaOpsError
    from kafkaops.systems.conftool import read_pools

    pools: dict[str, str] = {}
    try:
        for tags in {tuple(sorted(h.conftool_tags.items())) for h in cluster.hosts if h.conftool_tags}:
            for state in read_pools(cluster.conftool_config, dict(tags)):
                pools[state.host] = state.pooled
    except KafkaOpsError as exc:
        return {}, str(exc)
    return pools, ""


def _snapshot(admin: Any) -> tuple[Any, str]:
    """The cluster snapshot, and why topic configs are missing from it ("" when they are not).

    Right after a controller dies, DescribeConfigs can time out for the seconds the election takes
    while metadata answers: that is exactly when an operator runs status, so it shows brokers, URP and
    leaders anyway and says min ISR is unknown (counted as 1) instead of failing.
    """
    import dataclasses

    from kafkaops.errors import UnreachableError

    snap = admin.snapshot(with_configs=False)
    replication: dict[str, int] = {}
    for p in snap.partitions:
        replication.setdefault(p.topic, len(p.replicas))
    try:
        return dataclasses.replace(snap, topics=admin.topic_configs(replication, replication)), ""
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
            "pooled": pools.get(h.fqdn, "unknown" if pool_error or not cluster.conftool_config else "absent"),
        })
    return {
        # "healthy" is a promise that every gate would pass: not without knowing min ISR.
        "cluster": cluster.name, "healthy": health.healthy and not min_isr_error, "controller": snap.controller,
        "partitions": health.partition_count,
        "offline": [partition_name(p) for p in health.offline],
        "under_replicated": [partition_name(p) for p in health.under_replicated],
        "under_min_isr": [partition_name(p) for p in health.under_min_isr],
        "at_min_isr": [partition_name(p) for p in health.at_min_isr],
        "preferred_leader_ratio": round(health.preferred_leader_ratio, 4),
        "leaders_by_dc": dict(health.leaders_by_dc), "brokers": brokers,
        "unregistered_replica_brokers": list(health.unregistered_replica_brokers),
        "pool_error": pool_error,
        "min_isr_error": min_isr_error,
    }


def _render(data: dict[str, Any]) -> None:
    def count(key: str) -> str:
        n = len(data[key])
        return f"[{'red' if n else 'green'}]{n}[/]"

    verdict = ("[green]healthy[/]" if data["healthy"] else
               "[bold yellow]health unknown[/]" if data["min_isr_error"] and not data["under_replicated"]
               and not data["offline"] else "[bold red]NOT healthy[/]")
    console.print(f"cluster [bold]{data['cluster']}[/]: {verdict} — {data['partitions']} partitions, "
                  f"offline {count('offline')}, under-replicated {count('under_replicated')}, "
                  f"under min ISR {count('under_min_isr')}, at min ISR {len(data['at_min_isr'])}, "
                  f"preferred leaders {data['preferred_leader_ratio']:.0%}")
    from rich.table import Table

    table = Table()
    for col in ("host", "broker", "dc/rack", "registered", "leaders", "preferred", "pooled"):
        table.add_column(col)
    for b in data["brokers"]:
        table.add_row(b["host"], f"{b['broker_id']}{' ctrl' if b['controller'] else ''}",
                      f"{b['dc']}/{b['rack']}", "yes" if b["registered"] else "[red]no[/]", str(b["leaders"]),
                      f"{b['preferred_ratio']:.0%}",
                      b["pooled"] if b["pooled"] == "yes" else f"[yellow]{b['pooled']}[/]")
    console.print(table)
    console.print("leaders per DC: " + ", ".join(f"{dc} {n}" for dc, n in sorted(data["leaders_by_dc"].items())))
    for key, label in (("offline", "offline"), ("under_min_isr", "under min ISR"),
                       ("under_replicated", "under-replicated")):
        if data[key]:
            shown = ", ".join(data[key][:10]) + (f" and {len(data[key]) - 10} more" if len(data[key]) > 10 else "")
            console.print(f"[red]{label}:[/] {shown}")
    if data["min_isr_error"]:
        console.print(f"[yellow]min ISR unknown (counted as 1):[/] {data['min_isr_error']}")
    if data["pool_error"]:
        console.print(f"[yellow]pool state unavailable:[/] {data['pool_error']}")


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        cluster_name: str = typer.Argument(..., metavar="CLUSTER", help="Cluster name from the inventory."),
        inventory: Path | None = typer.Option(None, "--inventory", "-i", help="Inventory file."),
        output: Output = typer.Option(Output.table, "--output", "-o", help="table or json."),
    ) -> None:
        """Cluster health before (or after) maintenance: brokers, URP, min ISR, leaders, pools.

        Exit 0 when healthy, 9 when any partition is offline, under-replicated or under min ISR, or when
        min ISR could not be read (right after a controller dies), 4 when Kafka does not answer.
        """
        from kafkaops.cli.wiring import find_cluster
        from kafkaops.errors import CheckFailed

        data = collect(find_cluster(cluster_name, inventory))
        if output == Output.json:
            print_json(data)
        else:
            _render(data)
        if not data["healthy"]:
            raise typer.Exit(CheckFailed.exit_code)
