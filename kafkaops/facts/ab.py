"""``ab``, the EventBus runbook's throughput test: the event it posts, its command line, its report parsed.

The seed measured main-codfw in August 2016 with::

    ab -n 10000 -c 16 -T 'application/json' -p ./test-event.json http://eventbus.svc.codfw.wmnet:8085/v1/events
    Requests per second:    4425.03 [#/sec] (mean)

and nobody could tell afterwards whether a cluster still does that: the event file was lost, the figure
lived in a wiki page, and an operator reading ``ab``'s output by eye misses the failed and non-2xx lines
that make a fast run meaningless. This module keeps what must not drift between runs — the test event,
the exact ``ab`` command and the parsing of its report — free of I/O, so it is tested against recorded
``ab`` output (``tests/fixtures/ab/``). The command and the parser live together because the flags decide
what the report says: with ``-r`` a refused connection is a counted failure instead of the end of the run,
which is what :attr:`AbReport.answered` reads. The comparison with the inventory's recorded baseline is
a judgement (:mod:`kafkaops.policy.throughput`); the CLI (:mod:`kafkaops.cli.service`) runs ``ab`` and
draws the chart.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkaops.facts.errors import MalformedAnswer, escaped

#: The stream the test event goes to: the eventbus produces it to topic ``<dc>.test.event``, the topic
#: the seed's ``kafka topic --describe`` lists (``test.event``) and the lab creates.
TEST_STREAM = "test.event"
#: Per-request timeout given to ``ab -s`` (seconds): a stalled request is a failure, not a hang.
REQUEST_TIMEOUT = 30


def bench_event(*, stream: str = TEST_STREAM, now: float | None = None, event_id: str | None = None) -> dict[str, Any]:
    """The event ``ab`` posts, ``requests`` times: valid for an eventbus (it needs ``meta.stream``; the
    2016 service read ``meta.topic``), and recognisable in the topic (``meta.domain``) as a bench's.

    ``ab`` posts the same body every time, so every record of one bench carries the same ``meta.id``.
    """
    dt = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {
        "$schema": "/test/event/1.0.0",
        "meta": {"stream": stream, "topic": stream, "id": event_id or str(uuid.uuid4()), "dt": dt,
                 "domain": "kafkaops.bench"},
        "test": "kafkaops service bench (the EventBus runbook's throughput test)",
    }


def bench_event_body(event: dict[str, Any]) -> bytes:
    """The file ``ab -p`` posts: one JSON object, no trailing newline."""
    return json.dumps(event, separators=(",", ":"), sort_keys=True).encode()


def ab_command(url: str, body_file: str, *, requests: int, concurrency: int,
               timeout: int = REQUEST_TIMEOUT) -> list[str]:
    """The ``ab`` argv: the seed's command (``-n -c -T application/json -p FILE URL``) plus ``-s`` (a
    per-request timeout) and ``-r`` (a refused or reset connection is counted as a failure, not the end
    of the run — the failures are what the operator needs to see)."""
    return ["ab", "-r", "-n", str(requests), "-c", str(concurrency), "-s", str(timeout),
            "-T", "application/json", "-p", body_file, url]


@dataclass(frozen=True)
class AbReport:
    """What ``ab`` reported for one run.

    Attributes:
        complete: ``Complete requests``.
        failed: ``Failed requests`` as ``ab`` counts them (includes ``length`` mismatches).
        failed_by: The breakdown ``(Connect: .., Receive: .., Length: .., Exceptions: ..)``.
        non_2xx: ``Non-2xx responses`` (absent from the report when there were none: 0).
        requests_per_second: ``Requests per second`` (mean).
        mean_ms: ``Time per request`` (mean, per request).
        mean_across_ms: ``Time per request`` (mean, across all concurrent requests).
        seconds: ``Time taken for tests``.
        concurrency: ``Concurrency Level``.
        percentiles_ms: ``Percentage of the requests served within a certain time`` (50 -> ms ...);
            100 is the longest request.
    """

    complete: int
    failed: int
    non_2xx: int
    requests_per_second: float
    mean_ms: float | None = None
    mean_across_ms: float | None = None
    seconds: float | None = None
    concurrency: int | None = None
    failed_by: dict[str, int] = field(default_factory=dict)
    percentiles_ms: dict[int, float] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        """Requests that got no complete response (connect, receive, exceptions). ``ab`` also counts as
        "failed" a response whose length differs from the first one's; for an eventbus that is not an
        error by itself (the status decides), so it is left out here and shown apart."""
        if not self.failed_by:
            return self.failed
        return sum(v for k, v in self.failed_by.items() if k != "length")

    @property
    def ok_2xx(self) -> int:
        """Requests answered 2xx: the events the service accepted (each one record in Kafka)."""
        return max(self.complete - self.non_2xx - self.errors, 0)

    @property
    def answered(self) -> bool:
        """Whether any request got an answer at all. With ``-r``, ``ab`` against a closed port completes
        every request as a failure — and reports a splendid rate (20408 req/s in the recorded fixture):
        that is an unreachable service, never a throughput."""
        return self.ok_2xx > 0 or self.non_2xx > 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["percentiles_ms"] = {str(k): v for k, v in self.percentiles_ms.items()}
        out["errors"], out["ok_2xx"] = self.errors, self.ok_2xx
        return out


_NUM = r"([0-9]+(?:\.[0-9]+)?)"


def _number(text: str, label: str) -> float | None:
    m = re.search(rf"^{re.escape(label)}:\s+{_NUM}", text, re.M)
    return float(m.group(1)) if m else None


def parse_ab(text: str, *, command: str | None = None) -> AbReport:
    """Parse ``ab``'s report (its stdout).

    Raises:
        MalformedAnswer: ``text`` has no ``Requests per second`` line (``ab`` gave up: its last line says
            why, e.g. ``apr_socket_recv: Connection refused (111)``), or a count is missing.
    """
    rps = _number(text, "Requests per second")
    if rps is None:
        last = next((line.strip() for line in reversed(text.strip().splitlines()) if line.strip()), "no output")
        raise MalformedAnswer(f"ab's report (ab did not report a result: {escaped(last.split('...')[-1])})",
                              text, command=command)
    complete = _number(text, "Complete requests")
    failed = _number(text, "Failed requests")
    if complete is None or failed is None:
        raise MalformedAnswer("ab's report with 'Complete requests' and 'Failed requests' lines", text,
                              command=command)
    by: dict[str, int] = {}
    m = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", text)
    if m:
        by = dict(zip(("connect", "receive", "length", "exceptions"), (int(g) for g in m.groups()), strict=True))
    per = re.findall(rf"^Time per request:\s+{_NUM} \[ms\] \(mean(, across all concurrent requests)?\)", text, re.M)
    mean = next((float(v) for v, across in per if not across), None)
    across = next((float(v) for v, a in per if a), None)
    seconds = re.search(rf"^Time taken for tests:\s+{_NUM} seconds", text, re.M)
    percentiles: dict[int, float] = {}
    table = text.split("Percentage of the requests served within a certain time (ms)", 1)
    if len(table) == 2:
        for pct, ms in re.findall(rf"^\s+(\d+)%\s+{_NUM}", table[1], re.M):
            percentiles[int(pct)] = float(ms)
    non_2xx = _number(text, "Non-2xx responses")
    concurrency = _number(text, "Concurrency Level")
    return AbReport(
        complete=int(complete), failed=int(failed), non_2xx=int(non_2xx or 0), requests_per_second=rps,
        mean_ms=mean, mean_across_ms=across, seconds=float(seconds.group(1)) if seconds else None,
        concurrency=int(concurrency) if concurrency is not None else None, failed_by=by,
        percentiles_ms=percentiles,
    )
