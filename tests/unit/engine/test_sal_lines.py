"""The SAL lines of a run (issue 31): each run's and, in a run of several hosts, each host's START and END,
as Wikimedia's server admin log receives them from the tcpircbot relay (``!log <user>@<host> <message>``).

A roll of twenty brokers that logs only "START rolling-reboot" and, hours later, "END (PASS)" leaves the
SAL unable to say when kafka1012 was out — the question an incident review asks first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.engine.audit import MemorySink, sal_line
from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import RunFailed

OP = "alice@admin1"


def rolling(steps: list[Any], hosts: tuple[str, ...] = ("h1", "h2")) -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": steps})
    return bind_runbook(rb, cluster="c1", targets=[Target(h) for h in hosts])


def sal(sink: MemorySink) -> list[str]:
    return [r["sal"] for r in sink.records if "sal" in r]


def test_a_roll_logs_its_start_each_hosts_start_and_end_and_its_end(
    make_runner: Callable[..., Runner], world: World, audit_sink: MemorySink
) -> None:
    make_runner().start(rolling([{"test.depool": {}}]), env=world, operator=OP, reason="kernel update", task="T123")
    assert sal(audit_sink) == [
        f"!log {OP} START - r h1,h2 (kernel update - T123)",
        f"!log {OP} START - r h1 [1/2] (kernel update - T123)",
        f"!log {OP} END (PASS) - r h1 [1/2] (kernel update - T123)",
        f"!log {OP} START - r h2 [2/2] (kernel update - T123)",
        f"!log {OP} END (PASS) - r h2 [2/2] (kernel update - T123)",
        f"!log {OP} END (PASS) - r h1,h2 (kernel update - T123)",
    ]
    events = [r["event"] for r in audit_sink.records if "sal" in r]
    assert events == ["start", "host_start", "host_end", "host_start", "host_end", "end"]
    # the action records between them have no SAL line: the channel sees them, the SAL files only these
    assert any(r["event"] == "action" and "sal" not in r for r in audit_sink.records)


def test_a_host_that_stops_the_run_ends_failed_and_its_resume_starts_it_again(
    make_runner: Callable[..., Runner], world: World, home: Path, audit_sink: MemorySink
) -> None:
    world.data["broken"] = True
    with pytest.raises(RunFailed):
        make_runner().start(rolling([{"test.depool": {}}, {"test.fail": {}}]), env=world, operator=OP,
                            reason="why")
    assert sal(audit_sink)[-2:] == [
        f"!log {OP} END (FAIL) - r h1 [1/2] (why): stopped at step 2 (test.fail); resumable",
        f"!log {OP} END (FAIL) - r h1,h2 (why): stopped at h1 step 2 (test.fail); resumable",
    ]
    world.data["broken"] = False
    audit_sink.records.clear()
    make_runner().resume(os.listdir(home / "runs")[0], env=world)
    assert sal(audit_sink) == [
        f"!log {OP} START - r (resume) h1,h2 (why)",
        f"!log {OP} START - r (resume) h1 [1/2] (why)",  # the host in flight is taken up again
        f"!log {OP} END (PASS) - r h1 [1/2] (why)",
        f"!log {OP} START - r h2 [2/2] (why)",  # a host the first process never reached starts plainly
        f"!log {OP} END (PASS) - r h2 [2/2] (why)",
        f"!log {OP} END (PASS) - r h1,h2 (why)",
    ]


def test_a_single_host_run_logs_only_the_runs_lines(
    make_runner: Callable[..., Runner], world: World, audit_sink: MemorySink
) -> None:
    """Its START/END are the host's: a second pair would say the same thing twice in the SAL."""
    make_runner().start(rolling([{"test.depool": {}}], hosts=("h1",)), env=world, operator=OP, reason="why")
    assert sal(audit_sink) == [f"!log {OP} START - r h1 (why)", f"!log {OP} END (PASS) - r h1 (why)"]


def test_a_sal_line_is_one_line() -> None:
    """A reason with a newline must not become a second IRC message (a second, forged SAL entry)."""
    line = sal_line("bob@h", "START - r h1 (a\n!log mallory@x did it)")
    assert line == "!log bob@h START - r h1 (a !log mallory@x did it)"
