"""``kafkaops status SITES`` of a multi-site inventory: each site's status, which site each switched
service is active in, and MirrorMaker's lag per direction (worst partitions named).

Healthy means a switchover could start either way: every site healthy, every service active in exactly
one site, and MirrorMaker's lag readable in every direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkaops.cli.common import console
from kafkaops.errors import KafkaOpsError

Data = dict[str, Any]


def collect_sites(sites: Any, collect: Callable[[Any], Data]) -> Data:
    """``collect``: one cluster's status (:func:`kafkaops.cli.status.collect`), passed in by the status command
    so that this module does not import it back."""
    from concurrent.futures import ThreadPoolExecutor

    from kafkaops.systems.conftool import read_discovery
    from kafkaops.systems.mirror import MirrorLag

    def site(dc: str) -> Data:
        try:
            return collect(sites.sites[dc])
        except KafkaOpsError as exc:
            return {"cluster": sites.sites[dc].name, "healthy": False, "error": str(exc)}

    def flow(src: str, dst: str) -> Data:
        try:
            lags = MirrorLag(sites, src, dst, timeout=5.0).partitions()
        except KafkaOpsError as exc:
            return {"lag": None, "partitions": 0, "worst": [], "error": str(exc)}
        behind = sorted((p for p in lags if p.lag), key=lambda p: -p.lag)
        return {"lag": sum(p.lag for p in lags), "partitions": len(lags),
                "worst": [f"{p.topic}-{p.partition} ({p.lag})" for p in behind[:3]], "error": ""}

    flows = [(a, b) for a in sites.sites for b in sites.sites if a != b]
    # Every site and every flow at once: with a site down, each waits out its own 5 s, not the sum of them.
    with ThreadPoolExecutor(max_workers=len(sites.sites) + len(flows)) as pool:
        asked = {dc: pool.submit(site, dc) for dc in sites.sites}
        lagging = {f"{a}->{b}": pool.submit(flow, a, b) for a, b in flows}
        services = {}
        for name, svc in sites.switched.items():
            try:
                records, error = read_discovery(sites.conftool_config, svc.discovery), ""
            except KafkaOpsError as exc:
                records, error = {}, str(exc)
            services[name] = {"record": svc.discovery, "records": records, "error": error,
                              "active": [dc for dc, pooled in records.items() if pooled],
                              "consumer_groups": list(svc.consumer_groups)}
        clusters = {dc: f.result() for dc, f in asked.items()}
        mirror = {name: f.result() for name, f in lagging.items()}
    healthy = (all(c.get("healthy") for c in clusters.values())
               and all(len(s["active"]) == 1 and not s["error"] for s in services.values())
               and all(not m["error"] for m in mirror.values()))
    return {"sites": sites.name, "healthy": healthy, "clusters": clusters, "services": services, "mirror": mirror}


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


def render_sites(data: Data, render: Callable[[Data], None]) -> None:
    verdict = "[green]healthy[/]" if data["healthy"] else "[bold red]NOT healthy[/]"
    console.print(f"sites [bold]{data['sites']}[/]: {verdict}")
    for line in _service_lines(data) + _mirror_lines(data):
        console.print("  " + line, highlight=False)
    for dc, cluster in data["clusters"].items():
        console.print(f"\n[bold]site {dc}[/]")
        if "error" in cluster:
            console.print(f"[red]{cluster['cluster']}: {cluster['error']}[/]", highlight=False)
        else:
            render(cluster)


def sites_markdown(data: Data, to_markdown: Callable[[Data], str]) -> str:
    lines = [f"**{data['sites']}: {'healthy' if data['healthy'] else 'NOT healthy'}**", ""]
    lines += [f"- {line}" for line in _service_lines(data) + _mirror_lines(data)]
    for dc, cluster in data["clusters"].items():
        lines += ["", f"### site {dc}", ""]
        lines.append(f"{cluster['cluster']}: {cluster['error']}" if "error" in cluster else to_markdown(cluster))
    return "\n".join(lines) + "\n"
