"""Does an address accept a TCP connection: the cheapest question a check can ask of a system.

Connect, then close at once: nothing is sent, so asking changes nothing on the other side. Used where a
protocol request would be too much or is not ours to speak (a Spark master, a VIP before a bench) and by
``kafkaops doctor``; the CLI never opens a socket itself.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def unresolved(address: str) -> str | None:
    """``None`` when ``address`` resolves (or is an IP address), else the resolver's words (``Name or
    service not known``, ``Temporary failure in name resolution``)."""
    try:
        socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)
        return None
    except (OSError, UnicodeError) as exc:
        return str(getattr(exc, "strerror", None) or exc)


def refusal(address: str, port: int, timeout: float) -> str | None:
    """``None`` when ``address:port`` accepts a connection within ``timeout`` seconds, else why not
    (the system's words: ``Connection refused``, ``timed out``, a DNS failure)."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


def host_ports(spec: str, default_port: int) -> list[tuple[str, int]]:
    """``a:9092,b:9092``, ``zk1:2181,zk2:2181/chroot`` or URLs -> ``[(host, port)]``."""
    out = []
    for item in spec.split("/", 1)[0].split(",") if "://" not in spec else spec.split(","):
        item = item.strip()
        if not item:
            continue
        parsed = urlsplit(item if "://" in item else f"//{item}")
        out.append((parsed.hostname or item, parsed.port or default_port))
    return out
