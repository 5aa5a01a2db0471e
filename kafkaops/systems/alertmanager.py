"""Alertmanager's v2 API: the alerts a cluster's monitoring fires, and the silences a run makes.

A reboot that pages the on-call is not used twice (Wikimedia's cookbooks downtime every host first). So a
run silences each host before it takes it down — one silence per host, made of the inventory's
``monitoring.host_matchers`` — and holds the roll while an alert of the cluster fires that it did not
silence. This adapter is all of that kafkaops does with Alertmanager:

* :meth:`Alertmanager.alerts` — the active alerts matching exact labels (the cluster's ``scope``), each
  with its state (``active``, or ``suppressed`` by a silence or an inhibition) and the silences that
  suppress it;
* :meth:`Alertmanager.silences`, :meth:`Alertmanager.run_silences` — the silences, those of one run found
  by the comment every kafkaops silence carries (:func:`silence_comment`: ``kafkaops <run id>: ...``);
* :meth:`Alertmanager.create_silence`, :meth:`Alertmanager.expire_silence`,
  :meth:`Alertmanager.end_run_silences` — the writes, marked :func:`~kafkaops.systems.guard.write` so a
  dry-run refuses them.

Every request has a timeout. What Alertmanager answers is input: labels and comments are kept as
strings, a malformed answer is an error naming the endpoint. The standard library speaks HTTP here, not
``requests``: ``kafkaops status`` asks Alertmanager on every call (:mod:`kafkaops.systems.http_json`).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.model import HttpAuth
from kafkaops.systems import http_auth, http_json
from kafkaops.systems.guard import write
from kafkaops.systems.http_json import HttpAnswer

_HINT = "check Alertmanager is up and monitoring.alertmanager in the inventory"
#: Alertmanager's ids are UUIDs: anything else is not put into a URL path.
_SILENCE_ID = re.compile(r"[0-9A-Za-z-]{1,64}")


def silence_comment(run_id: str, reason: str, task: str | None) -> str:
    """``kafkaops <run id>: <reason> (<task>)``: what an on-call reads on the silence, and how a run finds
    its own silences again (resume, abort, ``runs show``) — by the prefix, never by the author alone."""
    return f"{run_prefix(run_id)} {reason}" + (f" ({task})" if task else "")


def run_prefix(run_id: str) -> str:
    return f"kafkaops {run_id}:"


def utc(ts: float) -> str:
    """An RFC 3339 UTC time as Alertmanager takes it (``2026-11-02T10:04:05.000Z``)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(text: str) -> float | None:
    """Alertmanager's RFC 3339 time (nanoseconds and offsets included) as epoch seconds; None if unreadable."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text or "")
    if not m:
        return None
    base = dt.datetime.fromisoformat(m.group(1) + (m.group(3) if m.group(3) != "Z" else "+00:00"))
    return base.timestamp() + float(m.group(2) or 0)


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a silence: ``name=value``, or ``name=~value`` (anchored regex)."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex, "isEqual": self.is_equal}

    def __str__(self) -> str:
        op = ("=~" if self.is_regex else "=") if self.is_equal else ("!~" if self.is_regex else "!=")
        return f'{self.name}{op}"{self.value}"'


@dataclass(frozen=True)
class Alert:
    """One alert as Alertmanager holds it."""

    labels: Mapping[str, str]
    state: str  # active | suppressed | unprocessed
    silenced_by: tuple[str, ...] = ()
    inhibited_by: tuple[str, ...] = ()
    starts_at: str = ""
    summary: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "?")

    @property
    def instance(self) -> str:
        return self.labels.get("instance", "")

    def line(self) -> str:
        """``KafkaBrokerDown@kafka1002.lab.local:7800``: what a gate names."""
        return f"{self.name}@{self.instance}" if self.instance else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"alertname": self.name, "instance": self.instance, "state": self.state,
                "silenced_by": list(self.silenced_by), "starts_at": self.starts_at, "summary": self.summary,
                "labels": dict(self.labels)}


@dataclass(frozen=True)
class Silence:
    """One silence: its matchers, its window, who made it and why."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float | None
    ends_at: float | None
    created_by: str
    comment: str
    state: str  # active | pending | expired
    updated_at: float | None = None

    @property
    def live(self) -> bool:
        """Active or pending: it silences (or will)."""
        return self.state in ("active", "pending")

    def matches(self, matchers: Iterable[Matcher]) -> bool:
        return set(self.matchers) == set(matchers)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "matchers": [str(m) for m in self.matchers], "starts_at": self.starts_at,
                "ends_at": self.ends_at, "created_by": self.created_by, "comment": self.comment,
                "state": self.state}


@dataclass
class Alertmanager:
    """Alertmanager's v2 API at ``url`` (``http://alertmanager:9093``).

    Args:
        url: The base URL, from the inventory's ``monitoring.alertmanager``.
        timeout: Seconds per request.
        dry_run: Refuse every write (:mod:`kafkaops.systems.guard`).
    """

    url: str
    timeout: float = 10.0
    dry_run: bool = False
    auth: HttpAuth | None = field(default=None, repr=False)

    def close(self) -> None:
        """Nothing to release: each request has its own connection (:mod:`kafkaops.systems.http_json`)."""

    # --- the wire ----------------------------------------------------------------------------------

    def _send(self, method: str, path: str, *, params: Any = None, body: Any = None) -> HttpAnswer:
        """One request; the answer of a 2xx or 3xx.

        Raises:
            UnreachableError: Nothing answered in time, or Alertmanager failed (5xx).
            AuthError: 401/403, or TLS refused: it refused kafkaops' credentials
                (:func:`~kafkaops.systems.http_auth.refusal`).
            ConfigError: Alertmanager refused the request (another 4xx).
        """
        system = f"Alertmanager {self.url}"
        try:
            resp = http_json.send(method, http_json.url_with(self.url, path, params),
                                  headers=http_auth.headers(self.auth, system), body=body, timeout=self.timeout,
                                  ca_file=self.auth.ca_file if self.auth else None)
        except http_json.HttpFailure as exc:
            if exc.timed_out:
                raise UnreachableError(f"{system} did not answer {method} {path} within {self.timeout:g}s",
                                       hint=_HINT) from None
            raise UnreachableError(f"{system} did not answer {method} {path}: {exc.reason}", hint=_HINT) from None
        text = resp.text.strip()[:200].replace("\n", " ")
        refused = http_auth.refusal(resp.status, system, f"{method} {path}", self.auth)
        if refused is not None:
            raise refused
        if resp.status >= 500:
            raise UnreachableError(f"{system} failed {method} {path}: HTTP {resp.status} {text}", hint=_HINT)
        if resp.status >= 400:
            raise ConfigError(f"{system} refused {method} {path}: HTTP {resp.status} {text}",
                              hint="monitoring.alertmanager must be an Alertmanager (>= 0.16, API v2) base URL")
        return resp

    def _request(self, method: str, path: str, *, params: Any = None, body: Any = None) -> Any:
        """One request (:meth:`_send`); the decoded JSON answer (None for an empty one).

        Raises:
            as :meth:`_send`; ConfigError also for an answer that is not JSON.
        """
        resp = self._send(method, path, params=params, body=body)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise ConfigError(f"Alertmanager {self.url} answered {method} {path} with something that is not JSON",
                              hint="monitoring.alertmanager must be an Alertmanager base URL") from None

    # --- reads ------------------------------------------------------------------------------------

    def ready(self) -> str:
        """``GET /-/ready`` answered 200, with the inventory's auth: Alertmanager serves and kafkaops' credentials
        are accepted — what a run's silences need (``kafkaops doctor``). Raises as :meth:`_send`."""
        self._send("GET", "/-/ready")
        return f"{self.url}/-/ready answers" + (f" (as {self.auth.username})" if self.auth and self.auth.username
                                                 else " (bearer token)" if self.auth and self.auth.token else "")

    def alerts(self, labels: Sequence[tuple[str, str]] = (), *, silenced: bool = True,
               inhibited: bool = True) -> list[Alert]:
        """The active alerts (firing in Prometheus) whose labels equal ``labels``; with ``silenced`` /
        ``inhibited`` the suppressed ones too (their :attr:`Alert.state` says ``suppressed``)."""
        params: list[tuple[str, str]] = [("active", "true"), ("silenced", str(silenced).lower()),
                                         ("inhibited", str(inhibited).lower()), ("unprocessed", "true")]
        params += [("filter", f"{name}={_quote(value)}") for name, value in labels]
        data = self._request("GET", "/api/v2/alerts", params=params)
        if not isinstance(data, list):
            raise ConfigError(f"Alertmanager {self.url} answered /api/v2/alerts with a {type(data).__name__}",
                              hint=_HINT)
        out = [_alert(a) for a in data if isinstance(a, Mapping)]
        # Alertmanager filtered already; this keeps the promise whatever it did with the filter.
        return [a for a in out if all(a.labels.get(k) == v for k, v in labels)]

    def silences(self) -> list[Silence]:
        """Every silence Alertmanager still holds (expired ones are kept for its retention)."""
        data = self._request("GET", "/api/v2/silences")
        if not isinstance(data, list):
            raise ConfigError(f"Alertmanager {self.url} answered /api/v2/silences with a {type(data).__name__}",
                              hint=_HINT)
        return [_silence(s) for s in data if isinstance(s, Mapping)]

    def run_silences(self, run_id: str) -> list[Silence]:
        """The silences run ``run_id`` made (its id starts their comment), oldest first."""
        if not run_id:
            return []
        prefix = run_prefix(run_id)
        found = [s for s in self.silences() if s.comment.startswith(prefix)]
        return sorted(found, key=lambda s: s.starts_at or 0)

    # --- writes -----------------------------------------------------------------------------------

    @write
    def create_silence(self, matchers: Sequence[Matcher], *, starts_at: float, ends_at: float, created_by: str,
                       comment: str) -> str:
        """Create a silence; its id."""
        if not matchers:
            raise ConfigError("refusing a silence without matchers: it would silence everything",
                              hint="set monitoring.host_matchers in the inventory")
        body = {"matchers": [m.to_api() for m in matchers], "startsAt": utc(starts_at), "endsAt": utc(ends_at),
                "createdBy": created_by, "comment": comment}
        data = self._request("POST", "/api/v2/silences", body=body)
        sid = data.get("silenceID") if isinstance(data, Mapping) else None
        if not isinstance(sid, str) or not _SILENCE_ID.fullmatch(sid):
            raise ConfigError(f"Alertmanager {self.url} created a silence but named no usable id ({data!r:.80})",
                              hint=_HINT)
        return sid

    @write
    def extend_silence(self, silence: Silence, *, ends_at: float) -> str:
        """Make ``silence`` end at ``ends_at``, same matchers, author and comment; the id that now holds it.

        Alertmanager updates an active silence in place when it is posted again with its id (its end moved
        later); for any other it expires the old one and answers with a new id.
        """
        if not isinstance(silence.id, str) or not _SILENCE_ID.fullmatch(silence.id):
            raise ConfigError(f"not an Alertmanager silence id: {silence.id!r}")
        body = {"id": silence.id, "matchers": [m.to_api() for m in silence.matchers],
                "startsAt": utc(silence.starts_at or time.time()), "endsAt": utc(ends_at),
                "createdBy": silence.created_by, "comment": silence.comment}
        data = self._request("POST", "/api/v2/silences", body=body)
        sid = data.get("silenceID") if isinstance(data, Mapping) else None
        if not isinstance(sid, str) or not _SILENCE_ID.fullmatch(sid):
            raise ConfigError(f"Alertmanager {self.url} extended a silence but named no usable id ({data!r:.80})",
                              hint=_HINT)
        return sid

    @write
    def expire_silence(self, silence_id: str) -> None:
        """End a silence now (Alertmanager keeps it, expired, for its retention)."""
        if not isinstance(silence_id, str) or not _SILENCE_ID.fullmatch(silence_id):
            raise ConfigError(f"not an Alertmanager silence id: {silence_id!r}")
        self._request("DELETE", f"/api/v2/silence/{silence_id}")

    @write
    def end_run_silences(self, run_id: str) -> list[Silence]:
        """Expire every silence of run ``run_id`` that still silences (``runs abort``); those it ended."""
        ended = [s for s in self.run_silences(run_id) if s.live]
        for s in ended:
            self.expire_silence(s.id)
        return ended


def _quote(value: str) -> str:
    """A label value as Alertmanager's filter syntax quotes it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _strs(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _alert(a: Mapping[str, Any]) -> Alert:
    status = a.get("status") if isinstance(a.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    annotations = _strs(a.get("annotations"))
    return Alert(labels=_strs(a.get("labels")), state=str(status.get("state", "")),
                 silenced_by=tuple(str(s) for s in status.get("silencedBy") or ()),
                 inhibited_by=tuple(str(s) for s in status.get("inhibitedBy") or ()),
                 starts_at=str(a.get("startsAt", "")), summary=annotations.get("summary", "")[:300])


def _silence(s: Mapping[str, Any]) -> Silence:
    status = s.get("status") if isinstance(s.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    matchers = tuple(Matcher(str(m.get("name", "")), str(m.get("value", "")), bool(m.get("isRegex")),
                             bool(m.get("isEqual", True)))
                     for m in s.get("matchers") or () if isinstance(m, Mapping))
    return Silence(id=str(s.get("id", "")), matchers=matchers, starts_at=parse_time(str(s.get("startsAt", ""))),
                   ends_at=parse_time(str(s.get("endsAt", ""))), created_by=str(s.get("createdBy", "")),
                   comment=str(s.get("comment", "")), state=str(status.get("state", "")),
                   updated_at=parse_time(str(s.get("updatedAt", ""))))
