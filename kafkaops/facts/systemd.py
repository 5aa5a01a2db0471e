"""What the service manager says about a unit: its main pid and whether it is active.

The restart step records the service's main pid before restarting and waits for a *different* live pid:
that is how a resumed run knows the restart already happened. A misread pid is a wrong decision — an
error message read as "0" looks like "stopped", garbage read twice looks like "not restarted" — so every
answer is parsed strictly. Three shapes are read, matching the inventory's command templates:

* ``systemctl show -p MainPID -p ActiveState -p SubState [-p LoadState] UNIT``: ``KEY=VALUE`` lines
  → :class:`SystemdUnit` (pyinfra's ``SystemdStatus`` fact reads the same output);
* ``systemctl show -p MainPID --value UNIT`` (production ``service_pid``) and ``hostctl pid UNIT``
  (the lab's): one decimal, 0 when there is no main process → :class:`MainPid`;
* ``systemctl is-active UNIT`` (production ``service_status``/``kafka_status``) and ``hostctl status
  UNIT`` (the lab's, which prints ``active`` or ``inactive``): one state word → :class:`UnitActivity`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

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


def parse_unit_activity(output: str, *, host: str | None = None, command: str | None = None) -> UnitActivity:
    """Parse ``systemctl is-active UNIT`` or ``hostctl status UNIT``.

    Accepts one of systemd's ActiveState words (or ``unknown``), blanks around it allowed. Rejects
    empty output (a command that failed to run says nothing about the unit), other words, several lines.
    The exit code (0 when active) is the caller's to read; this reads what was printed.

    Raises:
        MalformedAnswer: The output is not one unit state.
    """
    text = output.strip()
    if text not in IS_ACTIVE_WORDS:
        raise MalformedAnswer(ACTIVITY_EXPECTED, output, host=host, command=command)
    return UnitActivity(text)


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
