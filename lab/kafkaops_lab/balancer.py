"""A pybal-like load balancer on the service VIP: new connections go only to pooled hosts.

It re-reads the pool state from etcd through the real conftool library twice a second, so
``confctl depool`` takes effect for new connections within half a second; established connections
are left to finish, as with LVS. That is exactly why the runbook waits for zero new SYNs on a depooled
host before touching it, and what the SYN gate is tested against. If etcd is unreachable the last
known state is kept (pybal does not depool the world when its config source blips).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import sys
import time
from typing import Any

from kafkaops_lab.spec import LabSpec

REFRESH = 0.5


class PoolWatcher:
    def __init__(self, spec: LabSpec) -> None:
        from conftool.cli import ConftoolClient

        self.spec = spec
        self.client = ConftoolClient(configfile=spec.conftool_config, schema={}, irc_logging=False)
        self.node = self.client.get("node")
        self.by_fqdn = {h.fqdn: h for h in spec.hosts}
        self.pooled: list[tuple[str, int, int]] = []  # (address, port, weight)
        self.last_ok = 0.0

    def read(self) -> list[tuple[str, int, int]]:
        tags = self.spec.hosts[0].conftool_tags
        query = {k: re.compile(f"^{re.escape(v)}$") for k, v in tags.items()}
        out = []
        for obj in self.node.query(query):
            host = self.by_fqdn.get(obj.name)
            if host and obj.pooled == "yes" and int(obj.weight) > 0:
                out.append((host.address, host.http_port, int(obj.weight)))
        return sorted(out)

    def refresh(self) -> None:
        try:
            self.pooled = self.read()
            self.last_ok = time.time()
        except Exception as exc:  # keep the last known state, like pybal
            print(f"pool refresh failed, keeping last state: {exc}", flush=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


class Balancer:
    """Connects to a pooled backend *from the VIP* (``source``): as with LVS, where the packets a real
    server gets from the balancer are addressed to the service address, a client connection is told
    apart from the host's other callers (a health check, an operator's curl) by its address alone — the
    runbook's ``tcpdump dst eventbus.svc... and port 8085`` counts exactly those."""

    def __init__(self, watcher: PoolWatcher, source: str) -> None:
        self.watcher = watcher
        self.source = source
        self.rr = itertools.count()

    def candidates(self) -> list[tuple[str, int]]:
        pool = [(a, p) for a, p, w in self.watcher.pooled for _ in range(max(1, w // 10))]
        if not pool:
            return []
        start = next(self.rr) % len(pool)
        ordered = pool[start:] + pool[:start]
        seen: list[tuple[str, int]] = []
        for c in ordered:
            if c not in seen:
                seen.append(c)
        return seen

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        for address, port in self.candidates():
            try:
                backend_r, backend_w = await asyncio.wait_for(
                    asyncio.open_connection(address, port, local_addr=(self.source, 0)), 1.0)
            except (TimeoutError, OSError):
                continue  # pybal would mark it down; try the next pooled host
            await asyncio.gather(_pipe(client_r, backend_w), _pipe(backend_r, client_w))
            return
        client_w.close()


async def _serve(spec: LabSpec) -> None:
    loop = asyncio.get_running_loop()
    watcher = PoolWatcher(spec)
    await loop.run_in_executor(None, watcher.refresh)
    balancer = Balancer(watcher, spec.vip_address)

    async def refresher() -> Any:
        while True:
            await asyncio.sleep(REFRESH)
            await loop.run_in_executor(None, watcher.refresh)

    task = asyncio.create_task(refresher())
    server = await asyncio.start_server(balancer.handle, spec.vip_address, spec.vip_port, backlog=512)
    print(f"balancer on {spec.vip_address}:{spec.vip_port}, pooled: {watcher.pooled}", flush=True)
    try:
        async with server:
            await server.serve_forever()
    finally:
        task.cancel()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="balancer").parse_args(argv)
    try:
        asyncio.run(_serve(LabSpec.load()))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
