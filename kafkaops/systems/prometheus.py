"""Prometheus' HTTP API, read-only: the instant query behind ``metrics.baseline`` and ``metrics.gate``.

Operators watch produce latency, request queues and under-min-ISR in Grafana while they roll; Cruise
Control throttles itself on the same figures. A run asks the same Prometheus the dashboards ask
(``GET /api/v1/query``), once per gate and poll, with a timeout on every call: a monitoring outage must
stop a gate in seconds with a line naming the URL, never hang a half-done roll.

What can go wrong is told apart, because the operator's fix differs:

* nothing answered, or Prometheus answered 5xx (starting, overloaded): :class:`UnreachableError` (exit
  4, retried by the runner's backoff like any other system that blinks during maintenance);
* Prometheus refused the query itself (``bad_data``: a PromQL syntax error, an unknown function; or a
  query it could not execute): :class:`ConfigError` (exit 3) naming the gate, since only a changed
  inventory fixes it.

``requests`` is imported lazily. Nothing here writes: Prometheus is only read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkaops.engine.audit import redact_url
from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.model import HttpAuth
from kafkaops.systems import http_auth

__all__ = ["Prometheus", "Sample"]


@dataclass(frozen=True)
class Sample:
    """One series of an instant query's answer: its labels and its value (NaN and ±Inf as floats)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = math.nan


def _value(raw: Any, source: str) -> float:
    """``[<time>, "<value>"]`` → the value. Prometheus sends values as strings (``"NaN"``, ``"+Inf"``)."""
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[1], str)):
        raise UnreachableError(f"{source}: malformed sample {str(raw)[:80]!r} in Prometheus' answer")
    try:
        return float(raw[1])
    except ValueError:
        raise UnreachableError(f"{source}: sample value {raw[1][:40]!r} is not a number") from None


def parse_answer(body: Any, *, source: str) -> list[Sample]:
    """The samples of a successful ``/api/v1/query`` answer (a vector, a scalar; a matrix is refused:
    an instant gate needs one value per series).

    Raises:
        UnreachableError: The body is not Prometheus' answer (a proxy's error page, a truncated body).
        ConfigError: The query returned a range vector or a string.
    """
    if not isinstance(body, Mapping) or body.get("status") != "success" or not isinstance(body.get("data"), Mapping):
        raise UnreachableError(f"{source}: not a Prometheus API answer")
    data = body["data"]
    kind, result = data.get("resultType"), data.get("result")
    if kind == "vector" and isinstance(result, list):
        out = []
        for item in result:
            if not isinstance(item, Mapping) or not isinstance(item.get("metric", {}), Mapping):
                raise UnreachableError(f"{source}: malformed series in Prometheus' answer")
            labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
            out.append(Sample(labels, _value(item.get("value"), source)))
        return out
    if kind == "scalar":
        return [Sample({}, _value(result, source))]
    raise ConfigError(f"{source}: the query returns a {kind}, not an instant vector or scalar",
                      hint="a gate compares one value per series now: drop the range selector ([5m]) or "
                           "wrap it in a function (rate, max_over_time)")


class Prometheus:
    """One Prometheus server (the inventory's ``monitoring.prometheus``).

    Args:
        url: Base URL, ``http://prometheus.example:9090`` (no trailing ``/api``).
        timeout: Seconds per HTTP call (connect and read).
    """

    def __init__(self, url: str, *, timeout: float = 5.0, auth: HttpAuth | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.auth = auth
        self._session: Any = None

    def query(self, promql: str, *, what: str = "query") -> list[Sample]:
        """Evaluate ``promql`` now (an instant query).

        Args:
            promql: The expression.
            what: Who asks, for the error line (``gate produce_p99_ms``).

        Raises:
            UnreachableError: Prometheus did not answer in ``timeout``, or answered 5xx.
            ConfigError: Prometheus refused the expression (HTTP 400/422), naming ``what``.
        """
        import requests

        endpoint = f"{self.url}/api/v1/query"
        shown = redact_url(self.url)
        if self._session is None:
            self._session = http_auth.session(self.auth, f"Prometheus {shown}")
        try:
            r = self._session.get(endpoint, params={"query": promql}, timeout=self.timeout,
                                  headers={"Accept": "application/json"})
        except requests.RequestException as exc:
            raise UnreachableError(f"Prometheus {shown} did not answer {what}: {type(exc).__name__}",
                                   hint="check monitoring.prometheus in the inventory and that Prometheus runs; "
                                        "the run can be resumed once it answers") from None
        try:
            body = r.json()
        except ValueError:
            body = None
        refused = http_auth.refusal(r.status_code, f"Prometheus {shown}", what, self.auth)
        if refused is not None:
            raise refused
        if r.status_code in (400, 422):
            error = str(body.get("error", "")) if isinstance(body, Mapping) else r.text
            raise ConfigError(f"Prometheus {shown} refused {what}: {error.splitlines()[0][:300] if error else ''}",
                              hint=f"fix the PromQL in the inventory's monitoring.gates (it was: {promql[:200]})")
        if r.status_code != 200:
            raise UnreachableError(f"Prometheus {shown} answered {what} with HTTP {r.status_code}",
                                   hint="the run can be resumed once Prometheus answers")
        return parse_answer(body, source=f"Prometheus {shown}, {what}")
