"""Network audit sinks: relay every audit line to the channel operators watch (IRC bot, webhook).

Operators learn that a roll started, paused or failed from the channel they watch, the way Wikimedia's
``!log`` relays SAL lines; the audit *file* stays the authoritative record
(:class:`kafkaops.engine.audit.FileSink`). These sinks are best effort: a chat outage must not stop a
half-done roll, so :class:`~kafkaops.engine.audit.AuditLog` reports their failures and goes on.

They live here, not in the engine, because the engine talks to no network client (``requests`` is
imported lazily, on the first webhook post). The operator configures them with environment variables:

* ``KAFKAOPS_AUDIT_TCP=host:port``: one line per record over TCP (what tcpircbot reads);
* ``KAFKAOPS_AUDIT_WEBHOOK=url``: each record POSTed as JSON.

:func:`install` hands :func:`remote_sinks_from_env` to the engine's
:func:`~kafkaops.engine.audit.set_remote_sinks`, so every :func:`~kafkaops.engine.audit.default_audit`
built afterwards includes them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.audit import AuditSink, redact_url, set_remote_sinks
from kafkaops.errors import ConfigError

__all__ = ["TcpSink", "WebhookSink", "install", "remote_sinks_from_env"]


class TcpSink:
    """Sends one line per record over TCP, like the tcpircbot behind Wikimedia's ``!log``: a run's or a
    host's START/END as its SAL line (``sal``: ``!log alice@admin1001 START - ...``), every other record as
    its ``message`` (seen in the channel, not filed in the SAL)."""

    def __init__(self, host: str, port: int, timeout: float = 3.0, prefix: str = "") -> None:
        self.host, self.port, self.timeout, self.prefix = host, port, timeout, prefix

    def emit(self, record: Mapping[str, Any]) -> None:
        line = record.get("sal") or record.get("message", "")
        text = (self.prefix + str(line)).replace("\n", " ")[:450]
        import socket  # here: every command installs the sinks at start-up, few ever relay a line

        with socket.create_connection((self.host, self.port), timeout=self.timeout) as sock:
            sock.sendall(text.encode() + b"\n")


class WebhookSink:
    """POSTs each record as JSON (``requests`` imported on the first post)."""

    def __init__(self, url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None) -> None:
        self.url, self.timeout, self.headers = url, timeout, dict(headers or {})

    def emit(self, record: Mapping[str, Any]) -> None:
        import requests

        try:
            resp = requests.post(self.url, json=dict(record), timeout=self.timeout, headers=self.headers)
            resp.raise_for_status()
        except requests.RequestException as exc:
            # One line naming the URL — its secrets masked (redact_url) — not requests' own message, which
            # nests urllib3's retry chain and quotes the whole URL.
            raise RuntimeError(f"POST {redact_url(self.url)}: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    """``ConnectionError`` / ``HTTP 500`` rather than a page of nested urllib3 reprs."""
    response = getattr(exc, "response", None)
    if response is not None:
        return f"HTTP {response.status_code}"
    return type(exc).__name__


def remote_sinks_from_env(environ: Mapping[str, str] | None = None) -> list[AuditSink]:
    """The network sinks the environment configures (``KAFKAOPS_AUDIT_TCP``, ``KAFKAOPS_AUDIT_WEBHOOK``).

    Raises:
        ConfigError: ``KAFKAOPS_AUDIT_TCP`` is not ``host:port``.
    """
    env = os.environ if environ is None else environ
    sinks: list[AuditSink] = []
    tcp = env.get("KAFKAOPS_AUDIT_TCP", "").strip()
    if tcp:
        host, sep, port = tcp.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"KAFKAOPS_AUDIT_TCP={tcp!r} is not host:port",
                              hint="e.g. KAFKAOPS_AUDIT_TCP=ircbot.example.org:9200, or unset it")
        sinks.append(TcpSink(host.strip("[]"), int(port)))
    hook = env.get("KAFKAOPS_AUDIT_WEBHOOK", "").strip()
    if hook:
        sinks.append(WebhookSink(hook))
    return sinks


def install() -> None:
    """Make every default audit log of this process include the environment's network sinks."""
    set_remote_sinks(remote_sinks_from_env)
