"""Does an address accept a TCP connection: the cheapest question a check can ask of a system.

Connect, then close at once: nothing is sent, so asking changes nothing on the other side. Used where a
protocol request would be too much or is not ours to speak (a Spark master, a VIP before a bench) and by
``kafkaops doctor``; the CLI never opens a socket itself.
"""

from __future__ import annotations

import socket


def refusal(address: str, port: int, timeout: float) -> str | None:
    """``None`` when ``address:port`` accepts a connection within ``timeout`` seconds, else why not
    (the system's words: ``Connection refused``, ``timed out``, a DNS failure)."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)
