"""Whether a broker that is not registered is still starting or down, asked of its host (``kafka.*`` steps).

A wait for a broker to register that only watches the registration waits its whole timeout (30 minutes)
for a broker whose unit already failed. So while the broker is missing, its host is asked — through the
inventory's ``kafka_status`` / ``system_state`` / ``kafka_log`` templates, each question with a short
deadline — and a unit that is down stops the run at once, quoting its last log lines. Apart from the
step kinds of :mod:`kafkaops.steps.kafka` so that module stays about the kinds.
"""

from __future__ import annotations

import time

from kafkaops.engine.context import RunContext
from kafkaops.errors import CheckFailed, UnreachableError, WaitTimeout
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.systemd import UnitActivity, parse_system_state, parse_unit_activity, parse_unit_log
from kafkaops.model import Host
from kafkaops.queries.service import disruption_key
from kafkaops.stepkit.common import environment

#: One question to the broker's host while it is not registered (connection, command and answer): a host
#: still booting must not hold the wait's polls, or Ctrl-C, for the command default's minute.
UNIT_CHECK_TIMEOUT = 10.0
#: How often the host is asked while the broker is not registered: an SSH command, where the registration
#: is a metadata request.
UNIT_CHECK_EVERY = 5.0
#: An ``inactive`` unit is taken as down only when a second answer this much later says so too: the unit
#: may be queued behind others at boot, or between a crash and its restart. ``failed`` needs no second
#: answer: the service manager gave up on it.
DOWN_CONFIRM = 5.0
#: How many of the broker's last log lines a failure quotes, and how much of each.
LOG_LINES, LOG_LINE_CHARS = 3, 200


class BrokerNotRunning(CheckFailed):
    """The broker's unit is down on its host while the run waits for it to register: no wait brings it
    back. Not retried: the run stops at once, the host stays depooled, and the message says why."""

    retryable = False


class UnitWatch:
    """While a broker is not registered: is its unit still starting (wait on, showing the log recovery
    progress), or down (stop now, not at the wait's 30-minute timeout)?

    Asked through the inventory's ``kafka_status`` template (``systemctl is-active kafka``; the lab's
    ``hostctl status kafka``), with a deadline per question. An unreadable answer — the host's SSH not up
    yet, a malformed word — decides nothing: the wait goes on, as it did before the unit was asked, and
    the progress line says so. The registration stays the only way the wait ends well.
    """

    def __init__(self, ctx: RunContext, host: Host) -> None:
        self.ctx, self.env, self.host = ctx, environment(ctx), host
        self.next_check = 0.0
        self.down_since: float | None = None
        self.note = "starting, or recovering its logs"

    def check(self) -> str:
        """What the host says now (at most every :data:`UNIT_CHECK_EVERY` s), for the progress line.

        Raises:
            BrokerNotRunning: The unit is failed, or inactive on two answers :data:`DOWN_CONFIRM` apart
                while the host is not booting.
        """
        now = time.monotonic()
        if now < self.next_check:
            return self.note
        self.next_check = now + UNIT_CHECK_EVERY
        state = self._ask()
        if isinstance(state, str):
            self.down_since = None
            self.note = f"unit state unreadable: {state}"
        elif not state.down:
            self.down_since = None
            progress = self._progress()
            self.note = f"unit {state.state}" + (f", {progress}" if progress else ", starting or recovering its logs")
        elif not state.failed and self._booting():
            self.down_since = None
            self.note = f"unit {state.state}, the host is still booting"
        elif state.failed or (self.down_since is not None and now - self.down_since >= DOWN_CONFIRM):
            raise self._down(state)
        else:
            if self.down_since is None:
                self.down_since = now
            self.next_check = now + DOWN_CONFIRM
            self.note = f"unit {state.state}; asking again in {DOWN_CONFIRM:.0f}s"
        return self.note

    def _ask(self) -> UnitActivity | str:
        command = self.env.command(self.host, "kafka_status")
        try:
            r = self.env.run(self.host, command, timeout=UNIT_CHECK_TIMEOUT, check=False)
            return parse_unit_activity(r.stdout, host=self.host.name, command=command, exit_code=r.exit_code)
        except (UnreachableError, WaitTimeout, MalformedAnswer) as exc:
            return exc.message

    def _booting(self) -> bool:
        """Still booting (``systemctl is-system-running``: initializing/starting): units wait their turn."""
        if "system_state" not in self.host.commands:
            return False
        command = self.env.command(self.host, "system_state")
        try:
            out = self.env.run(self.host, command, timeout=UNIT_CHECK_TIMEOUT, check=False).stdout
            return parse_system_state(out, host=self.host.name, command=command).state in ("initializing", "starting")
        except (UnreachableError, WaitTimeout, MalformedAnswer):
            return False

    def _log(self, since: float) -> list[str] | None:
        """The broker's log lines since ``since`` (epoch seconds), or None without a ``kafka_log`` template
        or an answer."""
        if "kafka_log" not in self.host.commands:
            return None
        command = self.env.command(self.host, "kafka_log", since=int(since))
        try:
            r = self.env.run(self.host, command, timeout=UNIT_CHECK_TIMEOUT, check=False)
        except (UnreachableError, WaitTimeout):
            return None
        return r.stdout.splitlines() if r.exit_code == 0 else None

    def _progress(self) -> str:
        """Kafka's own count of logs loaded (``(412/1200 completed in /srv/kafka/data)``), from its last
        two minutes of log; "" when it said none."""
        lines = self._log(time.time() - 120)
        recovery = parse_unit_log(lines or []).recovery if lines else None
        return recovery.describe() if recovery else ""

    def _down(self, state: UnitActivity) -> BrokerNotRunning:

        host = self.host
        mark = self.ctx.facts.get(disruption_key(host))
        since = float(mark) if isinstance(mark, (int, float)) and not isinstance(mark, bool) else time.time() - 900
        lines = self._log(since)
        tail = parse_unit_log(lines, keep=LOG_LINES, width=LOG_LINE_CHARS).last if lines else ()
        said = (f"; its last log lines: {' | '.join(tail)}" if tail else
                "; its log says nothing since the stop" if lines is not None else
                "; its log could not be read (no kafka_log template, or no answer)")
        status = self.env.command(host, "kafka_status")
        left = f"; {host.name} stays depooled" if host.services else ""
        return BrokerNotRunning(
            f"Kafka is not running on {host.name}: the unit is {state.state} (`{status}`) and broker "
            f"{host.broker_id} is not registered{said}{left}",
            hint=f"fix the cause on {host.name} and start Kafka (`{self.env.command(host, 'kafka_start')}`), then "
                 "resume the run; or roll it back (runs abort --rollback starts the broker and repools)")


