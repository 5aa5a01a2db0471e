"""HTTP checks of a service instance: is it answering its health endpoint, and which revision does it serve.

This is what pybal's health checks and a deployer's "is the canary fine?" look at, asked directly of
one host's port (never through the load-balanced address, which would answer from any pooled host).
A check never raises for an unhealthy service: it returns what it saw (status, body, error) so steps can
say exactly why they are waiting. ``requests`` is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HttpCheck:
    """One GET of a health endpoint.

    Attributes:
        url: What was asked.
        status: HTTP status, or None when nothing answered (refused, timed out).
        body: The JSON body (empty when it was not JSON).
        error: Why nothing answered, when ``status`` is None.
    """

    url: str
    status: int | None
    body: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def healthy(self) -> bool:
        return self.status == 200

    @property
    def revision(self) -> str | None:
        """The revision the body reports (``revision``, ``version`` or ``git_sha``), if any."""
        return served_revision(self.body)

    def line(self) -> str:
        """One line for progress output and errors: ``HTTP 503 (revision r2): broken release``."""
        if self.status is None:
            return f"no answer ({self.error})"
        rev = self.revision
        why = self.body.get("error") if not self.healthy else None
        return f"HTTP {self.status}" + (f" (revision {rev})" if rev else "") + (f": {why}" if why else "")


def served_revision(body: Any) -> str | None:
    """The revision a service reports in its info/health JSON."""
    if not isinstance(body, dict):
        return None
    for key in ("revision", "version", "git_sha"):
        value = body.get(key)
        if isinstance(value, str | int) and str(value).strip():
            return str(value).strip()
    return None


def get_json(url: str, *, timeout: float = 5.0) -> HttpCheck:
    """GET ``url`` once (new connection, no retries: a check must see what a client would)."""
    import requests

    try:
        r = requests.get(url, timeout=timeout, headers={"Connection": "close"})
    except requests.RequestException as exc:
        return HttpCheck(url, None, error=type(exc).__name__)
    try:
        body = r.json()
    except ValueError:
        body = {}
    return HttpCheck(url, r.status_code, body if isinstance(body, dict) else {})
