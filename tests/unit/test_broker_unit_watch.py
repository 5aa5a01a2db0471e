"""What a host says about a broker that is not registered (issue 28, item 12): the unit-state and unit-log
facts from recorded answers, and kafka.wait_in_sync's decision — wait on a unit that is starting, stop at
once on one that is down — against a scripted host (the lab inventory, SSH replaced by a script)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.context import RunContext
from kafkaops.environment import Environment
from kafkaops.errors import UnreachableError
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.systemd import parse_unit_activity, parse_unit_log
from kafkaops.inventory import load_inventory
from kafkaops.stepkit import broker_unit
from kafkaops.stepkit.broker_unit import BrokerNotRunning, UnitWatch
from kafkaops.systems.ssh import CommandResult

REPO = Path(__file__).resolve().parents[2]

# Recorded: `systemctl is-active kafka` (systemd 252) and the lab's `hostctl status kafka`, with exit codes.
RECORDED_STATES = [
    ("active\n", 0, "active", False),
    ("activating\n", 3, "activating", False),   # between two automatic restarts (Restart=on-failure)
    ("reloading\n", 0, "reloading", False),
    ("failed\n", 3, "failed", True),
    ("inactive\n", 3, "inactive", True),
    ("unknown\n", 4, "unknown", True),          # older systemd, no such unit
]
MALFORMED_STATES = [
    ("failed\n", 0),                             # a wrapper that swallowed the exit code
    ("active\n", 1),                             # the word, then the shell's or sudo's error
    ("", 255),                                   # ssh: the command never ran
    ("sudo: a password is required\n", 1),
    ("active\nactive\n", 0),
]
# Recorded from journalctl -u kafka.service on a broker whose start failed, and Kafka 3.9's LogManager.
JOURNAL_FAILED = """\
Nov 26 03:07:41 kafka1001 kafka[912]: [2026-11-26 03:07:41,201] ERROR Exiting Kafka due to fatal exception
Nov 26 03:07:41 kafka1001 kafka[912]: java.nio.file.AccessDeniedException: /srv/kafka/data/.lock
Nov 26 03:07:41 kafka1001 systemd[1]: kafka.service: Main process exited, code=exited, status=1/FAILURE
Nov 26 03:07:41 kafka1001 systemd[1]: kafka.service: Failed with result 'exit-code'.
"""
RECOVERING = """\
[2026-11-26 03:07:41,201] INFO Loading logs from log dirs ArrayBuffer(/srv/kafka/data) (kafka.log.LogManager)
[2026-11-26 03:07:42,310] INFO Completed load of Log(dir=/srv/kafka/data/a-0, topicId=x, topic=a, partition=0, \
highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=0) with 1 segments, local-log-start-offset 0 and \
log-end-offset 0 in 12ms (411/1200 completed in /srv/kafka/data) (kafka.log.LogManager)
[2026-11-26 03:07:42,311] INFO Completed load of Log(dir=/srv/kafka/data/a-1, topicId=x, topic=a, partition=1, \
highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=0) with 1 segments, local-log-start-offset 0 and \
log-end-offset 0 in 9ms (412/1200 completed in /srv/kafka/data) (kafka.log.LogManager)
"""


@pytest.mark.parametrize(("output", "code", "state", "down"), RECORDED_STATES)
def test_a_unit_state_is_read_with_its_exit_code(output: str, code: int, state: str, down: bool) -> None:
    activity = parse_unit_activity(output, host="kafka1001", command="systemctl is-active kafka", exit_code=code)
    assert (activity.state, activity.down, activity.failed) == (state, down, state == "failed")


@pytest.mark.parametrize(("output", "code"), MALFORMED_STATES)
def test_a_unit_state_that_disagrees_with_its_exit_code_is_no_answer(output: str, code: int) -> None:
    with pytest.raises(MalformedAnswer) as info:
        parse_unit_activity(output, host="kafka1001", command="systemctl is-active kafka", exit_code=code)
    assert str(info.value).startswith("malformed answer from kafka1001 (`systemctl is-active kafka`)")


def test_a_units_log_gives_its_last_lines_escaped_and_kafkas_recovery_count() -> None:
    log = parse_unit_log(JOURNAL_FAILED.splitlines(), keep=2, width=200)
    assert log.last == ("Nov 26 03:07:41 kafka1001 systemd[1]: kafka.service: Main process exited, code=exited, "
                        "status=1/FAILURE",
                        "Nov 26 03:07:41 kafka1001 systemd[1]: kafka.service: Failed with result 'exit-code'.")
    assert log.recovery is None
    rec = parse_unit_log(RECOVERING.splitlines()).recovery
    assert rec is not None and rec.describe() == "recovering its logs: 412/1200 loaded in /srv/kafka/data"
    hostile = parse_unit_log(["\x1b[2J\x1b]0;owned\x07" + "x" * 300, "", "(5/3 completed in /d)"], width=40)
    assert all(c.isprintable() for line in hostile.last for c in line), hostile.last
    assert len(hostile.last) == 2 and hostile.last[0].endswith("…"), hostile.last
    assert hostile.recovery is None  # 5 of 3 is not a count


class ScriptedHost(Environment):
    """The lab inventory with SSH replaced by a script: the unit states kafka1001 answers, in turn."""

    def __init__(self, home: Path, states: list[tuple[str, int] | Exception], *, log: str = "",
                 system: str = "running\n") -> None:
        super().__init__(load_inventory(REPO / "inventory" / "lab.yaml"), home=home)
        self.states, self.log, self.system = states, log, system
        self.commands: list[str] = []

    def run(self, host: Any, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        self.commands.append(command)
        assert timeout <= broker_unit.UNIT_CHECK_TIMEOUT, "every question to the host has a short deadline"
        if command.startswith("hostctl status"):
            answer = self.states.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return CommandResult(command, answer[1], answer[0], "", 0.0)
        if command.startswith("hostctl system-state"):
            return CommandResult(command, 0, self.system, "", 0.0)
        if command.startswith("hostctl log kafka"):
            return CommandResult(command, 0, self.log, "", 0.0)
        raise AssertionError(f"unexpected command {command!r}")


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every check asks the host (no 5 s between two questions): the decisions, not the pacing, are tested."""
    monkeypatch.setattr(broker_unit, "UNIT_CHECK_EVERY", 0.0)
    monkeypatch.setattr(broker_unit, "DOWN_CONFIRM", 0.0)
    yield


def _watch(env: Environment) -> UnitWatch:
    ctx = RunContext(run_id="r1", operator="o", reason="r", task=None, target="kafka1001", params={}, env=env)
    return UnitWatch(ctx, env.host("kafka1001"))


def test_a_failed_unit_stops_the_wait_at_once_naming_host_state_and_last_log_line(tmp_path: Path) -> None:
    env = ScriptedHost(tmp_path, [("failed\n", 3)], log=JOURNAL_FAILED)
    with pytest.raises(BrokerNotRunning) as info:
        _watch(env).check()
    err = info.value
    assert not err.retryable and "\n" not in str(err)
    assert err.message.startswith("Kafka is not running on kafka1001: the unit is failed (`hostctl status kafka`) "
                                  "and broker 1001 is not registered; its last log lines: "), err.message
    assert "Failed with result 'exit-code'." in err.message and err.message.endswith("kafka1001 stays depooled")
    assert "hostctl start kafka" in str(err.hint)


def test_an_inactive_unit_is_down_only_when_a_second_answer_says_so(tmp_path: Path) -> None:
    env = ScriptedHost(tmp_path, [("inactive\n", 3), ("inactive\n", 3)])
    watch = _watch(env)
    assert "unit inactive; asking again" in watch.check()
    with pytest.raises(BrokerNotRunning, match="the unit is inactive"):
        watch.check()


def test_a_unit_that_restarts_or_recovers_is_waited_for_with_kafkas_recovery_count(tmp_path: Path) -> None:
    env = ScriptedHost(tmp_path, [("inactive\n", 3), ("activating\n", 3), ("inactive\n", 3), ("active\n", 0)],
                       log=RECOVERING)
    watch = _watch(env)
    watch.check()
    assert watch.check() == "unit activating, recovering its logs: 412/1200 loaded in /srv/kafka/data"
    watch.check()  # a new first "inactive": the earlier one does not count any more
    assert watch.check() == "unit active, recovering its logs: 412/1200 loaded in /srv/kafka/data"


def test_no_answer_or_a_malformed_one_decides_nothing(tmp_path: Path) -> None:
    env = ScriptedHost(tmp_path, [UnreachableError("ssh to kafka1001 failed: connection refused"),
                                  ("failed\n", 0), ("inactive\n", 3), ("active\n", 1)])
    watch = _watch(env)
    assert watch.check().startswith("unit state unreadable: ssh to kafka1001 failed")
    assert watch.check().startswith("unit state unreadable: malformed answer")
    watch.check()  # inactive, first answer
    assert watch.check().startswith("unit state unreadable")  # not a second "inactive": no stop


def test_an_inactive_unit_on_a_host_still_booting_is_waited_for(tmp_path: Path) -> None:
    env = ScriptedHost(tmp_path, [("inactive\n", 3)] * 3, system="starting\n")
    watch = _watch(env)
    for _ in range(3):
        assert watch.check() == "unit inactive, the host is still booting"
