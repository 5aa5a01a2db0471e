"""What the service manager says about a unit: its main pid and whether it is active.

The restart step records the service's main pid before restarting and waits for a *different* live pid:
that is how a resumed run knows the restart already happened. A misread pid is a wrong decision — an
error message read as "0" looks like "stopped", garbage read twice looks like "not restarted" — so every
answer is parsed strictly. Four shapes are read, matching the inventory's command templates:

* ``systemctl show -p MainPID -p ActiveState -p SubState [-p LoadState] UNIT``: ``KEY=VALUE`` lines
  → :class:`SystemdUnit` (pyinfra's ``SystemdStatus`` fact reads the same output);
* ``systemctl show -p MainPID --value UNIT`` (production ``service_pid``) and ``hostctl pid UNIT``
  (the lab's): one decimal, 0 when there is no main process → :class:`MainPid`;
* ``systemctl is-active UNIT`` (production ``service_status``/``kafka_status``) and ``hostctl status
  UNIT`` (the lab's, which prints the same words): one state word → :class:`UnitActivity`, checked
  against the command's exit code when the caller gives it;
* a unit's log (``journalctl -u kafka.service``, ``hostctl log kafka``): free text, escaped, its last
  lines and Kafka's log-loading count → :class:`UnitLog` (what a broker that does not come back said).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer, escaped

#: PID_MAX_LIMIT on 64-bit Linux: no pid is larger.
MAX_PID = 4_194_304

#: systemd's ActiveState values (``systemctl --state=help``).
ACTIVE_STATES = frozenset({"active", "reloading", "inactive", "failed", "activating", "deactivating",
                           "maintenance", "refreshing"})
#: systemd's LoadState values.
LOAD_STATES = frozenset({"stub", "loaded", "not-found", "bad-setting", "error", "merged", "masked"})
#: What ``systemctl is-active`` may print: an ActiveState, or ``unknown`` (older systemd, unknown unit).
IS_ACTIVE_WORDS = ACTIVE_STATES | {"unknown"}

_PID = re.compile(r"0|[1-9][0-9]{0,6}", re.ASCII)
_KEY = re.compile(r"[A-Z][A-Za-z0-9]*", re.ASCII)
_SUB_STATE = re.compile(r"[a-z][a-z-]{0,31}", re.ASCII)

SHOW_EXPECTED = ("`systemctl show` KEY=VALUE lines with MainPID (a pid, 0 for none), ActiveState "
                 f"({'/'.join(sorted(ACTIVE_STATES))}) and SubState")
PID_EXPECTED = "a main pid (one decimal number, 0 for none, as `systemctl show -p MainPID --value` prints)"
ACTIVITY_EXPECTED = f"one unit state word ({'/'.join(sorted(IS_ACTIVE_WORDS))}, as `systemctl is-active` prints)"


def _is_pid(value: str) -> bool:
    """Is ``value`` a pid as systemd prints it (0 for none)?"""
    return bool(_PID.fullmatch(value)) and int(value) <= MAX_PID


@dataclass(frozen=True)
class SystemdUnit:
    """A unit as ``systemctl show`` describes it.

    Attributes:
        main_pid: The main process's pid; None when there is none (``MainPID=0``).
        active_state: ``active``, ``inactive``, ``failed``, ``activating``, ... (systemd's ActiveState).
        sub_state: The unit-type-specific state: ``running``, ``dead``, ``exited``, ``auto-restart``, ...
        load_state: ``loaded``, ``not-found``, ``masked``, ... when asked for (``-p LoadState``), else None.
    """

    main_pid: int | None
    active_state: str
    sub_state: str
    load_state: str | None = None

    @property
    def active(self) -> bool:
        return self.active_state == "active"

    @property
    def running(self) -> bool:
        """Active with a main process: what "the service runs" means for a restart."""
        return self.active and self.main_pid is not None


def parse_systemd_show(output: str, *, host: str | None = None, command: str | None = None) -> SystemdUnit:
    """Parse ``systemctl show -p MainPID -p ActiveState -p SubState [-p LoadState ...] UNIT``.

    Accepts ``KEY=VALUE`` lines (blank lines ignored; properties other than the four read are
    ignored, so a plain ``systemctl show UNIT`` works too). MainPID, ActiveState and SubState are
    required; MainPID is a decimal (0 = none), ActiveState and LoadState one of systemd's values,
    SubState a lower-case word. Rejects empty output, a line without ``=``, a property given twice,
    ``--value`` output (no keys), and values outside those sets.

    Raises:
        MalformedAnswer: The output is not such a description.
    """
    props: dict[str, str] = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not _KEY.fullmatch(key) or key in props:
            raise MalformedAnswer(SHOW_EXPECTED, output, host=host, command=command)
        props[key] = value
    missing = [k for k in ("MainPID", "ActiveState", "SubState") if k not in props]
    load = props.get("LoadState")
    if (missing or not _is_pid(props["MainPID"]) or props["ActiveState"] not in ACTIVE_STATES
            or not _SUB_STATE.fullmatch(props["SubState"]) or (load is not None and load not in LOAD_STATES)):
        raise MalformedAnswer(SHOW_EXPECTED + (f" (missing: {', '.join(missing)})" if missing else ""), output,
                              host=host, command=command)
    return SystemdUnit(main_pid=int(props["MainPID"]) or None, active_state=props["ActiveState"],
                       sub_state=props["SubState"], load_state=load)


@dataclass(frozen=True)
class MainPid:
    """A unit's main pid.

    Attributes:
        pid: The pid; None when the unit has no main process (the command printed 0).
    """

    pid: int | None


def parse_main_pid(output: str, *, host: str | None = None, command: str | None = None) -> MainPid:
    """Parse ``systemctl show -p MainPID --value UNIT`` or ``hostctl pid UNIT``.

    Accepts one decimal between 0 and 4194304 (0 = no main process), optionally as ``MainPID=N``
    (``systemctl show -p MainPID`` without ``--value``), blanks around it allowed. Rejects empty
    output (a failed command prints nothing: that is not "no process"), signs, other text, several lines.

    Raises:
        MalformedAnswer: The output is not one pid.
    """
    text = output.strip()
    if text.startswith("MainPID="):
        text = text.removeprefix("MainPID=")
    if not _is_pid(text):
        raise MalformedAnswer(PID_EXPECTED, output, host=host, command=command)
    return MainPid(int(text) or None)


@dataclass(frozen=True)
class UnitActivity:
    """What ``systemctl is-active UNIT`` printed.

    Attributes:
        state: ``active``, ``inactive``, ``failed``, ``activating``, ... (or ``unknown``).
    """

    state: str

    @property
    def active(self) -> bool:
        return self.state == "active"

    @property
    def down(self) -> bool:
        """No process and none coming: ``inactive``, ``failed`` (its start failed, or its restarts ran
        out), or ``unknown``. A unit between two automatic restarts is ``activating``, not down: a wait
        for the broker must not give up on a restart the service manager is about to make."""
        return self.state in DOWN_STATES

    @property
    def failed(self) -> bool:
        """The service manager gave up on it: nothing will start it again by itself."""
        return self.state == "failed"


#: The states of a unit that is not running and is not being started (see :attr:`UnitActivity.down`).
DOWN_STATES = frozenset({"inactive", "failed", "unknown"})
#: The states ``systemctl is-active`` exits 0 for (systemd counts a reloading unit as active).
_EXIT_0_STATES = frozenset({"active", "reloading", "refreshing"})


def parse_unit_activity(output: str, *, host: str | None = None, command: str | None = None,
                        exit_code: int | None = None) -> UnitActivity:
    """Parse ``systemctl is-active UNIT`` or ``hostctl status UNIT``.

    Accepts one of systemd's ActiveState words (or ``unknown``), blanks around it allowed. Rejects
    empty output (a command that failed to run says nothing about the unit), other words, several lines.
    With ``exit_code`` (the command's), the word and the code must agree as systemctl's do — 0 exactly
    for ``active``/``reloading``/``refreshing``: a wrapper that prints ``failed`` and exits 0, or an
    ``active`` with exit 1 (sudo's or the shell's error after the word), is not an answer to act on.

    Raises:
        MalformedAnswer: The output is not one unit state, or disagrees with the exit code.
    """
    text = output.strip()
    if text not in IS_ACTIVE_WORDS:
        raise MalformedAnswer(ACTIVITY_EXPECTED, output, host=host, command=command)
    if exit_code is not None and (exit_code == 0) != (text in _EXIT_0_STATES):
        raise MalformedAnswer(ACTIVITY_EXPECTED + f" with a matching exit code (0 only for "
                              f"{'/'.join(sorted(_EXIT_0_STATES))}; it exited {exit_code})", output,
                              host=host, command=command)
    return UnitActivity(text)


@dataclass(frozen=True)
class LogRecovery:
    """Kafka's count of the logs it has loaded at start-up (recovered, after an unclean stop).

    Attributes:
        loaded: Logs (partition directories) loaded so far in ``directory``.
        total: Logs to load in ``directory``.
        directory: The log directory (escaped: it came from the host).
    """

    loaded: int
    total: int
    directory: str

    def describe(self) -> str:
        return f"recovering its logs: {self.loaded}/{self.total} loaded in {self.directory}"


@dataclass(frozen=True)
class UnitLog:
    """The end of what a unit logged (``journalctl -u kafka.service``; the lab's ``hostctl log kafka``).

    Attributes:
        last: Its last non-blank lines, oldest first, control characters escaped and each cut short: they
            go into a one-line error message on the operator's terminal.
        recovery: Kafka's last log-loading count, if the lines have one.
    """

    last: tuple[str, ...]
    recovery: LogRecovery | None


#: Kafka's LogManager, once per log loaded at start-up: ``Completed load of Log(...) with 1 segments, ...
#: in 12ms (412/1200 completed in /srv/kafka/data)``.
_RECOVERY = re.compile(r"\((\d{1,9})/(\d{1,9}) completed in (\S{1,300})\)")


def parse_unit_log(lines: list[str], *, keep: int = 3, width: int = 200) -> UnitLog:
    """The last ``keep`` non-blank lines of a unit's log and Kafka's last log-loading count in them.

    A log is free text: nothing is rejected, but nothing is shown as it came either — every line is
    escaped (no control character reaches the terminal) and cut to ``width`` characters, and a loading
    count is taken only in Kafka's shape with ``loaded <= total``.
    """
    text = [line.strip() for line in lines if line.strip()]
    last = tuple(escaped(t[:width]) + ("…" if len(t) > width else "") for t in text[-keep:]) if keep else ()
    recovery = None
    for line in reversed(text):
        m = _RECOVERY.search(line)
        if m and int(m.group(2)) > 0 and int(m.group(1)) <= int(m.group(2)):
            recovery = LogRecovery(int(m.group(1)), int(m.group(2)), escaped(m.group(3)))
            break
    return UnitLog(last, recovery)


#: ``systemctl is-system-running``'s answers.
SYSTEM_STATES = frozenset({"initializing", "starting", "running", "degraded", "maintenance", "stopping",
                           "offline", "unknown"})


@dataclass(frozen=True)
class SystemState:
    """The machine's state as systemd reports it. ``stopping``: a shutdown (or reboot) is under way."""

    state: str

    @property
    def shutting_down(self) -> bool:
        return self.state in ("stopping", "offline")


def parse_system_state(output: str, *, host: str | None = None, command: str | None = None) -> SystemState:
    """``systemctl is-system-running`` (or the lab's ``hostctl system-state``): one state word."""
    word = output.strip()
    if word not in SYSTEM_STATES:
        raise MalformedAnswer(f"one system state ({'/'.join(sorted(SYSTEM_STATES))})", output, host=host,
                              command=command)
    return SystemState(word)
