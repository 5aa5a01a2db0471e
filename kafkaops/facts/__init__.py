"""Facts: typed values parsed from what a target host answers (command output, HTTP replies).

Values read from a host decide what a run does next: a boot id says whether a reboot happened, a main
pid whether a restart did, a SYN count whether a depooled host still receives requests, a host's clock
where a log scan starts, a revision whether a deploy is skipped — and a revision read before a deploy
later becomes part of the rollback's shell command. Everything a host sends is untrusted input: a
broken command, a banner on stdout, a half-booted host or a hostile one can answer anything.

So each fact is a small frozen dataclass and a pure ``parse_*(output, *, host=None, command=None)``
function (pyinfra's facts are the model: ``command()`` + a pure ``process(output)``, tested from
recorded output). A parser accepts exactly the shapes the inventory's commands print and nothing
else: a malformed answer raises :class:`MalformedAnswer` — one line saying what was expected, from
which host and command, and what came back (escaped, cut short) — which stops the step (a
:class:`~kafkaops.errors.CheckFailed`: retried by the runner's policy, then exit 9). Never guessed at:
an unreadable pid is not "0", an empty boot id is not "unchanged", a revision is not trimmed into shape.

The parsers run no command and import no client library; the adapters and steps run the commands and
hand the output over. Recorded outputs, valid and malformed, live under ``tests/fixtures/facts/``.
"""

from __future__ import annotations

from kafkaops.facts.boot import BootId, parse_boot_id
from kafkaops.facts.clock import EpochSeconds, parse_epoch_seconds
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.revision import Revision, parse_checked_out_revision, parse_served_revision
from kafkaops.facts.systemd import (
    MainPid,
    SystemdUnit,
    SystemState,
    UnitActivity,
    parse_main_pid,
    parse_system_state,
    parse_systemd_show,
    parse_unit_activity,
)
from kafkaops.facts.tcpdump import SynCount, parse_syn_count

__all__ = [
    "BootId",
    "EpochSeconds",
    "MainPid",
    "MalformedAnswer",
    "Revision",
    "SynCount",
    "SystemState",
    "SystemdUnit",
    "UnitActivity",
    "parse_boot_id",
    "parse_checked_out_revision",
    "parse_epoch_seconds",
    "parse_main_pid",
    "parse_served_revision",
    "parse_syn_count",
    "parse_system_state",
    "parse_systemd_show",
    "parse_unit_activity",
]
