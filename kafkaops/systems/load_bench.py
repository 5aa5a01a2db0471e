"""The service bench's load: ``ab`` posting the test event at a service, from this machine.

Why an adapter with a guarded send: ``kafkaops service bench`` aims ten thousand requests at a
production service — real load on the path live traffic takes, and real events in its topic. Sending it
is a change to the world like any other, so :meth:`LoadBench.send` is a :func:`~kafkaops.systems.guard.write`:
a dry-run environment, or code that may change nothing, cannot send it by mistake. The CLI decides
whether to (the production gate, :mod:`kafkaops.policy.bench`) and draws the result; the command line and
the report's parsing are :mod:`kafkaops.facts.ab`'s.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.facts.ab import REQUEST_TIMEOUT, AbReport, ab_command, bench_event_body, parse_ab
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.systems.guard import write
from kafkaops.systems.tcp import refusal


def accepts(address: str, port: int, timeout: float = 2.0) -> bool:
    """Whether ``address:port`` accepts a TCP connection (read-only: connect, then close): is the VIP there
    to bench, or each host in turn."""
    return refusal(address, port, timeout) is None


class LoadBench:
    """``ab`` on this machine, against one URL at a time."""

    def __init__(self, *, dry_run: bool = False) -> None:
        self.dry_run = dry_run

    @staticmethod
    def check_installed() -> None:
        """Refuse before anything is resolved or asked when ``ab`` is missing."""
        if shutil.which("ab") is None:
            raise ConfigError("ab (ApacheBench) is not installed on this machine",
                              hint="apt-get install apache2-utils")

    @write
    def send(self, url: str, event: dict[str, Any], *, requests: int, concurrency: int) -> AbReport:
        """Post ``event`` ``requests`` times, ``concurrency`` at a time, to ``url``; ``ab``'s report.

        Raises:
            UnreachableError: ``ab`` never finished, gave no report, or no request got an answer.
        """
        with tempfile.TemporaryDirectory(prefix="kafkaops-bench-") as tmp:
            body = Path(tmp) / "test-event.json"
            body.write_bytes(bench_event_body(event))
            argv = ab_command(url, str(body), requests=requests, concurrency=concurrency)
            try:
                # ab stops on its own after -n requests; a stalled one ends after -s seconds. The bound here
                # is for an ab that never ends (a 10 req/s floor, plus the per-request timeout).
                done = subprocess.run(argv, capture_output=True, text=True,
                                      timeout=REQUEST_TIMEOUT + requests / 10 + 60)
            except subprocess.TimeoutExpired:
                raise UnreachableError(f"ab against {url} did not finish",
                                       hint="the service is too slow; try fewer --requests") from None
        try:
            report = parse_ab(done.stdout, command=f"ab {url}")
        except MalformedAnswer as exc:
            last = (done.stderr.strip().splitlines() or [""])[-1]
            raise UnreachableError(f"{url}: {exc}" + (f" ({last})" if last and last not in str(exc) else ""),
                                   hint="is the service up on that address and port?") from None
        if not report.answered:
            raise UnreachableError(f"{url}: no request got an answer ({report.errors} failed: {report.failed_by}; "
                                   "Connection refused or reset)", hint="is the service up on that address and port?")
        return report
