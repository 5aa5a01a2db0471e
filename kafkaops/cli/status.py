"""``kafkaops status CLUSTER``: the answer to "can I touch this cluster right now?" in one screen.

Brokers (registered, controller), offline / under-replicated / under-min-ISR partitions, the
preferred-leader ratio, leaders per broker and per DC, and each host's pool state — what an operator
would otherwise assemble from ``kafka topics --describe``, confctl and Grafana before a maintenance.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkaops.cli.common import Output, console, print_json, print_text

if TYPE_CHECKING:
    from rich.table import Table


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
    admin = KafkaAdmin(cluster.bootstrap_servers, cluster=cluster.name, timeout=5.0, attempts=1, kraft=cluster.kraft)
    with ThreadPoolExecutor(max_workers=2) as executor:
        pending = executor.submit(_pool_states, cluster) if cluster.conftool_config else None
        asking = executor.submit(quorum_state, cluster) if cluster.kraft and cluster.controllers else None
        snap, min_isr_error = _snapshot(admin)
        pools, pool_error = pending.result() if pending else ({}, "")
        quorum = asking.result() if asking else None

    from kafkaops.safety import broker_dc_map, cluster_health, partition_name

    health = cluster_health(snap, broker_dc_map(cluster))
    brokers = []
    for h in cluster.hosts:
        brokers.append({
            "host": h.name, "broker_id": h.broker_id, "dc": h.dc, "rack": h.rack,
            "registered": h.broker_id in snap.brokers,
            # On KRaft a broker is never the controller (the metadata answer names one at random).
            "controller": snap.controller == h.broker_id and not cluster.kraft,
            "leaders": health.leaders_by_broker.get(h.broker_id, 0),
            "preferred_ratio": round(health.preferred_ratio_by_broker.get(h.broker_id, 1.0), 4),
            "pooled": pools[h.fqdn].pooled if h.fqdn in pools else (
                "unknown" if pool_error or not cluster.conftool_config else "absent"),
            "weight": pools[h.fqdn].weight if h.fqdn in pools else None,
        })
    quorum_ok = quorum is None or (not quorum["error"] and quorum["leader"] is not None
                                   and all(v["caught_up"] for v in quorum["voters"]))
    return {
        # "healthy" is a promise that every gate would pass: not without knowing min ISR (nor, on KRaft,
        # without a quorum whose voters are all caught up: the controller gate would refuse).
        "cluster": cluster.name, "healthy": health.healthy and not min_isr_error and quorum_ok,
        "controller": quorum["leader"] if quorum else snap.controller,
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
        **({"quorum": quorum} if quorum is not None else {}),
    }


def quorum_state(cluster: Any) -> dict[str, Any]:
    """The KRaft metadata quorum as ``kafka-metadata-quorum describe --status`` and ``--replication`` tell
    it (over SSH on a controller node), each voter judged caught up or not as the roll's gate judges it."""
    from kafkaops.environment import Environment
    from kafkaops.errors import KafkaOpsError
    from kafkaops.quorum import judge

    env = Environment(cluster, dry_run=True, kafka_timeout=5.0)
    try:
        quorum = env.quorum()
        status = quorum.status()
        replicas = quorum.replication()
    except KafkaOpsError as exc:
        return {"error": exc.message, "leader": None, "voters": [], "observers": []}
    finally:
        env.close()
    view = judge(replicas)
    names = {h.broker_id: h.name for h in (*cluster.controllers, *cluster.hosts)}
    rows = {r.node_id: r for r in replicas}
    return {
        "error": "", "asked": quorum.asked, "leader": status.leader_id, "epoch": status.leader_epoch,
        "high_watermark": status.high_watermark, "max_follower_lag": status.max_follower_lag,
        "voters": [{"node_id": v.node_id, "host": names.get(v.node_id, "?"), "leader": v.leader, "lag": v.lag,
                    "behind_ms": v.behind_ms, "caught_up": v.caught_up,
                    "log_end_offset": rows[v.node_id].log_end_offset,
                    "last_fetch_ms": rows[v.node_id].last_fetch_ms,
                    "last_caught_up_ms": rows[v.node_id].last_caught_up_ms} for v in view.voters],
        "observers": [{"node_id": o.node_id, "host": names.get(o.node_id, "?"), "lag": o.lag} for o in view.observers],
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
    off = [b for b in data["brokers"] if b.get("weight") is not None and b["weight"] != data.get("pool_weight")]
    if off:
        out.append(("pool weight", ", ".join(f"{b['host']} at {b['weight']}" for b in off)
                    + f" (expected {data.get('pool_weight')}: a maintenance refuses to depool until it is restored)"))
    return out


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
        """Cluster health before (or after) maintenance: brokers, URP, min ISR, leaders, pools; on a KRaft
        cluster also the metadata quorum (leader, each voter's lag, as kafka-metadata-quorum tells it).

        Exit 0 when healthy, 9 when any partition is offline, under-replicated or under min ISR, when
        min ISR could not be read (right after a controller dies), or when a KRaft quorum has no leader or
        a voter that is not caught up; 4 when Kafka does not answer.
        """
        from kafkaops.errors import CheckFailed
        from kafkaops.lookup import find_cluster

        cluster = find_cluster(cluster_name, inventory)
        if cluster.multi_site:
            from kafkaops.cli.status_sites import collect_sites, render_sites, sites_markdown

            data = collect_sites(cluster, collect)
            if output == Output.json:
                print_json(data)
            elif output == Output.markdown:
                print_text(sites_markdown(data, to_markdown))
            else:
                render_sites(data, _render)
            if not data["healthy"]:
                raise typer.Exit(CheckFailed.exit_code)
            return
        data = collect(cluster)
        if output == Output.json:
            print_json(data)
        elif output == Output.markdown:
            print_text(to_markdown(data))
        else:
            _render(data)
        if not data["healthy"]:
            raise typer.Exit(CheckFailed.exit_code)
