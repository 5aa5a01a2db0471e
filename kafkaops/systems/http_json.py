"""One request to a JSON HTTP API with the standard library: what ``kafkaops status`` asks on its start-up path.

``status`` asks Alertmanager on every call, and importing ``requests`` cost ~115 ms of CPU on the lab's
admin host (measured: ``python -c 'import requests'`` against ``python -c pass``, 7 runs each) — a quarter
of the whole command, for two GETs. ``urllib.request`` costs ~40 ms, does the same TLS (the inventory's
CA, verified; the system's store otherwise) and honours the same ``*_proxy`` environment. The etcd pool
read already speaks it (:func:`kafkaops.systems.conftool.read_pools`), for the same reason.

One connection per request, never kept alive: an adapter reused across a run's minutes would otherwise
meet a connection Alertmanager closed while idle, and retrying a POST on a stale connection could make a
silence twice. On loopback or a LAN the handshake costs milliseconds.

The CA is the inventory's when it gives one, and only then the system's: ``REQUESTS_CA_BUNDLE`` and its
kin are never read (they replaced a session's CA silently: psf/requests#3829).
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class HttpFailure(Exception):
    """Nothing usable answered: refused, timed out, TLS failed, or the connection dropped. ``reason`` is a few
    words (``connection refused``, ``no answer within 5s``, ``TLS handshake failed``)."""

    def __init__(self, reason: str, *, timed_out: bool = False, tls: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
        self.tls = tls


@dataclass(frozen=True)
class HttpAnswer:
    """An HTTP answer of any status: its code and its body (at most :data:`MAX_BODY` bytes)."""

    status: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON. Raises ValueError when it is not."""
        return json.loads(self.content)


#: The most of one answer read: a silence list of a busy Alertmanager is a few MB; more is not an answer.
MAX_BODY = 64 * 1024 * 1024


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificates verified, host names checked: against ``ca_file`` when given, else the system's store."""
    return ssl.create_default_context(cafile=ca_file)


def url_with(base: str, path: str, params: Sequence[tuple[str, str]] | Mapping[str, str] | None = None) -> str:
    query = urllib.parse.urlencode(params or (), doseq=True)
    return f"{base}{path}" + (f"?{query}" if query else "")


def send(method: str, url: str, *, headers: Mapping[str, str] | None = None, body: Any = None,
         timeout: float, ca_file: str | None = None) -> HttpAnswer:
    """One ``method`` request of ``url``, ``body`` sent as JSON when not None; the answer of any HTTP status.

    Raises:
        HttpFailure: Nothing answered (see the class).
    """
    if not url.startswith(("http://", "https://")):  # urllib would also open file:// and ftp://
        raise HttpFailure(f"not an http(s) URL: {url[:60]!r}")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    context = tls_context(ca_file) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return HttpAnswer(resp.status, resp.read(MAX_BODY))
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpAnswer(exc.code, exc.read(MAX_BODY))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise _failure(exc, timeout) from None


def _failure(exc: BaseException, timeout: float) -> HttpFailure:
    cause: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(cause, TimeoutError):
        return HttpFailure(f"no answer within {timeout:g}s", timed_out=True)
    if isinstance(cause, ssl.SSLError):
        return HttpFailure("TLS handshake failed" + (f" ({cause.reason.lower().replace('_', ' ')})"
                                                     if getattr(cause, "reason", None) else ""), tls=True)
    if isinstance(cause, OSError) and cause.strerror:
        return HttpFailure(cause.strerror.lower().rstrip("."))
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(cause))
    if found:
        return HttpFailure(found.group(1).strip().rstrip(".").lower())
    return HttpFailure(str(cause) or type(cause).__name__)
