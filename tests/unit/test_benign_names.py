"""The known-benign Kafka log patterns are named in plans and printed whole by ``kafkaops runbooks show``.

Issue 28: a roll's plan printed the four built-in regexes for every host, three lines past 80 columns
each. The plan names them; the observation keeps the patterns (a changed one still makes a saved plan
stale); ``runbooks show`` is where an operator reads what a name ignores, and why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.step import Action, Observation, get_step_kind
from kafkaops.facts.log_lines import BATCH_PEER_PATTERN, BENIGN_KAFKA_ERRORS
from kafkaops.steps.logs import benign_name


def _scan_plan(ignore: list[str]) -> Any:
    entry = get_step_kind("logs.scan_kafka")
    assert entry is not None
    step = entry.create({p.name: p.default for p in entry.params})
    return step.plan(Observation({"host": "kafka1001", "since": "at the stop", "ignore": ignore,
                                  "command": "hostctl log kafka --since @1", "resumed_after_report": False}))


def test_every_built_in_pattern_has_its_own_short_name() -> None:
    names = [b.name for b in BENIGN_KAFKA_ERRORS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", n) and len(n) <= 30 for n in names), names


def test_the_plan_names_our_patterns_and_shows_a_sites_own_as_written() -> None:
    site = r"failed to change state for partition \S+ from OfflinePartition"
    ignore = [b.pattern for b in BENIGN_KAFKA_ERRORS] + [f"{BATCH_PEER_PATTERN}1002 ", site]
    action = _scan_plan(ignore)
    assert isinstance(action, Action)
    names = ", ".join([*(b.name for b in BENIGN_KAFKA_ERRORS), "controller-send-to-batch-peer:1002"])
    assert action.commands == ("on kafka1001: hostctl log kafka --since @1", "match: ERROR | FATAL (the log4j level)",
                               f"ignore known-benign: {names}", f"ignore: {site}")
    assert f"{len(ignore)} known-benign pattern(s) ignored" in action.description
    assert not any(b.pattern in c for b in BENIGN_KAFKA_ERRORS for c in action.commands)


def test_only_our_exact_patterns_get_a_name() -> None:
    assert benign_name(BENIGN_KAFKA_ERRORS[0].pattern) == "controller-send-to-self"
    assert benign_name(f"{BATCH_PEER_PATTERN}1003 ") == "controller-send-to-batch-peer:1003"
    assert benign_name(f"{BATCH_PEER_PATTERN}1003 .*") is None  # widened by someone: shown as written
    assert benign_name(BENIGN_KAFKA_ERRORS[1].pattern + "|.*") is None


def test_runbooks_show_prints_each_name_with_its_pattern_and_why() -> None:
    md = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "runbooks", "show", "rolling-reboot",
                         "-o", "markdown"], capture_output=True, text=True, timeout=120, check=True).stdout
    for b in BENIGN_KAFKA_ERRORS:
        assert f"- `{b.name}`: {b.why}" in md and f"  {b.pattern}\n" in md, b.name
    shown = json.loads(subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "runbooks", "show", "reboot",
                                       "-o", "json"], capture_output=True, text=True, timeout=120,
                                      check=True).stdout)
    assert {r["name"]: r["pattern"] for r in shown["known_benign_kafka_errors"]}["out-of-order-sequence"] == \
        BENIGN_KAFKA_ERRORS[1].pattern


def test_a_runbook_that_does_not_scan_kafkas_log_lists_none() -> None:
    out = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "runbooks", "show", "restart-service",
                          "-o", "json"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "known_benign_kafka_errors" not in json.loads(out)
