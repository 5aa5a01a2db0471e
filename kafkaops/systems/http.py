"""HTTP checks of a service instance: is it answering its health endpoint, and which revision does it serve.

This is what pybal's health checks and a deployer's "is the canary fine?" look at, asked directly of
one host's port (never through the load-balanced address, which would answer from any pooled host).
A check never raises for an unhealthy service: it returns what it saw (status, body, error) so steps can
say exactly why they are waiting. The revision in the body is another matter: it is read by the
:mod:`kafkaops.facts.revision` fact, and a body that names a malformed revision raises
:class:`~kafkaops.facts.MalformedAnswer` when the revision is asked for — that value decides whether a
deploy is skipped and may become the rollback's deploy command. ``requests`` is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkaops.facts.errors import MalformedAnswer, escaped, shown
from kafkaops.facts.revision import parse_served_revision


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
        """The revision the body reports (``revision``, ``version`` or ``git_sha``), if any.

        Raises:
            MalformedAnswer: The body names a revision that is not one (see :func:`served_revision`).
        """
        return served_revision(self.body, source=self.url)

    def line(self) -> str:
        """One line for progress output and errors: ``HTTP 503 (revision r2): broken release``.

        Never raises: a malformed revision is shown escaped (``revision malformed: 'r1; x'``), so a
        health wait that does not care about revisions still says what it saw.
        """
        if self.status is None:
            return f"no answer ({self.error})"
        try:
            rev = self.revision
        except MalformedAnswer as exc:
            rev = f"malformed: {shown(exc.output, 40)}"
        why = escaped(str(self.body.get("error") or "")[:200]) if not self.healthy else None  # host-written text
        return f"HTTP {self.status}" + (f" (revision {rev})" if rev else "") + (f": {why}" if why else "")


def served_revision(body: Any, *, source: str | None = None) -> str | None:
    """The revision a service reports in its info/health JSON (``revision``, ``version`` or ``git_sha``).

    None when the body is not a JSON object or names no revision. A named revision must match the
    strict revision pattern of :mod:`kafkaops.facts.revision` (no trimming, no empty string).

    Args:
        body: The decoded JSON body.
        source: Where it came from (the URL), for the error message.

    Raises:
        MalformedAnswer: The body names a revision that is not one (blanks, ``;``, ``$(``, quotes,
            newlines, empty, a float or boolean...): exit 9 once the runner's retries are spent.
    """
    revision = parse_served_revision(body, source=source)
    return revision.value if revision is not None else None


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
