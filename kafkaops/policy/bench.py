"""May a throughput bench (``kafkaops service bench``) aim at these addresses without ``--yes``?

A bench is real load and real events (each 2xx is a record in ``<dc>.test.event``). Against production
it is refused, without the operator's ``--yes``, when it would run alongside live traffic: through the
service's VIP, or on a host conftool says is pooled (or whose pool state cannot be read, or that has no
conftool tags to read it by). A depooled host (``no``, or ``inactive``, which pybal ignores too) needs no
``--yes``, nor does anything in an inventory marked ``environment: lab``.

Pure decision: the pool state of a host is read by the caller's ``pool_state`` (conftool, in
:mod:`kafkaops.cli.service`), asked only for the hosts that need it, in order, and never in the lab.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkaops.errors import ConfigError, SafetyRefusal, UnreachableError
from kafkaops.model import Cluster, Host


@dataclass(frozen=True)
class BenchTarget:
    """One address to bench: the VIP or a host, with what the safety check needs."""

    name: str  # "VIP eventbus.svc.codfw.wmnet" or the host's short name
    url: str
    via: str  # "vip" or "host"
    host: Host | None = None  # the inventory Host for a host target


def refuse_production_bench(cluster: Cluster, targets: Sequence[BenchTarget], requests: int,
                            pool_state: Callable[[Host], str]) -> None:
    """Refuse (exit 6, one line) a bench of production traffic's path; return when it may run.

    Args:
        cluster: The inventory's cluster (its ``environment``).
        targets: What the bench aims at, in the order it would.
        requests: The bench's size, for the message.
        pool_state: A host's conftool ``pooled`` value; only called for a host with conftool tags. May
            raise ConfigError or UnreachableError when the state cannot be read.

    Raises:
        SafetyRefusal: A production VIP, or a production host that is (or may be) in service.
    """
    if cluster.environment == "lab":
        return
    load = f"{requests} requests and as many test events"
    for t in targets:
        if t.via == "vip":
            raise SafetyRefusal(f"{t.name} of production cluster {cluster.name} serves live traffic: a bench "
                                f"sends {load} through it", hint="pass --yes to bench it anyway")
    for t in targets:
        host = t.host
        assert host is not None, f"bench target {t.name} is a host target without its host"
        try:
            pooled = pool_state(host) if host.conftool_tags else None
        except (ConfigError, UnreachableError) as exc:
            raise SafetyRefusal(f"{host.name} of production cluster {cluster.name}: its pool state cannot be "
                                f"read ({exc.message}), so it may be serving live traffic",
                                hint="pass --yes to bench it anyway") from None
        if pooled not in ("no", "inactive"):  # "inactive": out of the pool too (pybal ignores it)
            state = f"pooled={pooled}" if pooled else "no conftool tags: pool state unknown"
            raise SafetyRefusal(f"{host.name} of production cluster {cluster.name} is in service ({state}): "
                                f"a bench sends {load} alongside live traffic",
                                hint="depool it first, or pass --yes to bench it anyway")
