"""Prometheus and Alertmanager behind authentication: the inventory's ``monitoring.auth`` on every request,
and a refusal told apart from an outage.

Production monitoring is rarely open: Alertmanager's silences are writes anyone could make, so it sits
behind basic auth (its own ``--web.config.file``) or a proxy that wants a bearer token, on https with the
site's CA. The secret is read when the session is made (a rotated password reaches the next run) and lives
only in the ``requests`` session. A 401 or 403 is :class:`~kafkaops.errors.AuthError` (exit 14): waiting
does not fix a credential, so it is never retried as "did not answer".
"""

from __future__ import annotations

from typing import Any

from kafkaops.errors import AuthError
from kafkaops.model import HttpAuth, Secret
from kafkaops.systems.credentials import reveal


def _reveal(secret: Secret, system: str, what: str) -> str:
    return reveal(secret, system, what, "check monitoring.auth in the inventory")


def pinned_session() -> Any:
    """A ``requests`` session whose own ``verify`` (the inventory's CA) is the one used.

    A plain session loses it to the environment: ``requests`` lets ``REQUESTS_CA_BUNDLE`` or
    ``CURL_CA_BUNDLE`` — set on many admin hosts, and on this lab's — override a session's ``verify``
    (psf/requests#3829), so the site's CA was silently replaced by the system's and every https request to a
    privately signed server failed. Passing ``verify`` with each request is what takes precedence."""
    import requests

    class Pinned(requests.Session):
        def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("verify", self.verify)
            return super().request(method, url, *args, **kwargs)

    return Pinned()


def headers(auth: HttpAuth | None, system: str) -> dict[str, str]:
    """The ``Authorization`` header ``auth`` asks for (basic auth, or a bearer token), read from where its
    secret lives now; none without credentials."""
    import base64

    if auth is None:
        return {}
    if auth.token is not None:
        return {"Authorization": f"Bearer {_reveal(auth.token, system, 'bearer token')}"}
    if auth.username and auth.password is not None:
        pair = f"{auth.username}:{_reveal(auth.password, system, 'password')}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode('ascii')}"}
    return {}


def session(auth: HttpAuth | None, system: str) -> Any:
    """A ``requests`` session that authenticates as ``auth`` says (none: a plain session)."""
    s = pinned_session()
    if auth is None:
        return s
    if auth.ca_file:
        s.verify = auth.ca_file
    s.headers.update(headers(auth, system))
    return s


def refusal(status: int, system: str, what: str, auth: HttpAuth | None) -> AuthError | None:
    """The error of an HTTP 401/403 from ``system``, naming who kafkaops was; None for any other status."""
    if status not in (401, 403):
        return None
    who = (f"basic auth as {auth.username}" if auth and auth.username else "a bearer token" if auth and auth.token
           else "no credentials")
    verb = "did not accept" if status == 401 else "forbids"
    return AuthError(f"{system} {verb} {what} (HTTP {status}, with {who})",
                     hint="check monitoring.auth in the inventory (username, password_file or bearer_token_file)")
