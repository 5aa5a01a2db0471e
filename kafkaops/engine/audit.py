"""Audit log: who changed what, when, why, and how it ended.

Operators reconstruct incidents from the audit trail ("who depooled kafka1003 at 03:12, and for which
task?"), so every state-changing action is one JSON line (time, run, step, operator, reason, task,
target, action, outcome), and every run opens and closes with the ``START - <runbook> <targets>
(<reason>)`` / ``END (PASS|FAIL) - ...`` lines operators know from Wikimedia's SAL; in a run of several
hosts, each host's maintenance opens and closes the same way (``START - rolling-reboot kafka1002 [2/3]
(...)``), so the SAL shows when each host was out, not only when the roll began and ended. Those records
carry ``sal``, the line as Wikimedia's server admin log receives it from the tcpircbot relay:
``!log <user>@<host> START - ...`` (spicerack's shape: ``!log``, the operator as the SAL's nick, then
the message; stashbot files it under that nick). The TCP sink sends ``sal`` when a record has one.

Sinks are pluggable: a file (default ``$KAFKAOPS_HOME/audit.log``) lives here; the network sinks (a TCP
line sink, IRC-bot style, and an HTTP webhook) live in :mod:`kafkaops.systems.audit_sinks`, because the
engine talks to no network client itself. The file sink is authoritative: if it cannot be written the
error propagates and the action does not happen (no unaudited changes). Remote sinks are best effort:
a chat outage must not stop a half-done roll, so their failures are reported and swallowed.

The network sinks an operator configures (``KAFKAOPS_AUDIT_TCP``, ``KAFKAOPS_AUDIT_WEBHOOK``) reach
:func:`default_audit` through :func:`set_remote_sinks`, which the caller that wires kafkaops together
calls once (``kafkaops.systems.audit_sinks.install()``). If those variables are set and nobody installed
the sinks, every record says so as a best-effort sink failure: an audit line silently not relayed to the
channel operators watch is worse than a warning.

Secrets never reach a sink, nor the journal: :func:`redact` masks every value whose key matches
``password|secret|token|key_file`` at any depth, and known secret shapes inside strings
(``password=...``, ``--token ...``, ``Authorization: Bearer ...``) — never free text.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kafkaops.engine.state_files import kafkaops_home

REDACTED = "***"
_SECRET_KEY = re.compile(r"password|passwd|secret|token|key_file|api_key|credential", re.IGNORECASE)
# Known secret *shapes* inside a string (command lines, error messages): ``key=value`` and
# ``key: value`` with a secret-named key, a ``--password VALUE`` style flag, an HTTP Authorization value.
# Never plain words: "fix token refresh" is a sentence, and rewriting it would change what a resumed
# run sends (a deploy message).
_SECRET_INLINE = re.compile(
    r"(?i)(\b[\w.-]*(?:password|passwd|secret|token|key_file|api_key)[\w.-]*\s*[=:]\s*"
    r"|--[\w-]*(?:password|passwd|secret|token|api-key)[\w-]*[ =]"
    r"|\bauthorization:\s*(?:bearer|basic)\s+)"
    r"(\"[^\"]*\"|'[^']*'|\S+)"
)


def redact(value: Any, *, inline: bool = True) -> Any:
    """Return a copy of ``value`` with secret-looking keys masked, recursively.

    Mapping keys matching ``password|secret|token|key_file`` (case-insensitive) get ``***``; with
    ``inline``, strings get known secret shapes (``password=...``, ``--token X``) masked too.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and _SECRET_KEY.search(k) and v not in (None, ""):
                out[k] = REDACTED
            else:
                out[k] = redact(v, inline=inline)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v, inline=inline) for v in value]
    if inline and isinstance(value, str) and _SECRET_INLINE.search(value):
        return _SECRET_INLINE.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
    return value


#: A path segment of a URL that is a credential, not a name: long (a webhook's key), or mixing a digit
#: into 8 or more characters (Slack's ``T0123ABCD``, a numeric webhook id). ``hook``, ``v1``,
#: ``events`` stay readable.
_URL_TOKEN_SEGMENT = re.compile(r"[^/]{20,}|(?=[^/]*\d)[^/]{8,}")


def redact_url(url: str) -> str:
    """``url`` fit to print: its userinfo, every query value and its fragment masked, and the path
    segments that look like tokens (:data:`_URL_TOKEN_SEGMENT`) masked too.

    A webhook's URL is often the secret itself (Slack, Mattermost and Discord put the key in the path,
    others in ``?token=`` or ``user:pass@``), yet an operator must be told *which* sink failed: the
    scheme, host, port and the plain path words are enough for that.
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return REDACTED  # not even a URL: say nothing of it
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if port is not None:
        netloc += f":{port}"
    if parts.username is not None or parts.password is not None:
        netloc = f"{REDACTED}@{netloc}"
    path = "/".join(REDACTED if _URL_TOKEN_SEGMENT.fullmatch(seg) else seg for seg in parts.path.split("/"))
    # ``?key=value``: the key names the parameter, the value may be the secret; a bare ``?word`` is the secret.
    query = "&".join(f"{piece.split('=', 1)[0]}={REDACTED}" if "=" in piece else REDACTED
                     for piece in parts.query.split("&") if piece)
    return urlunsplit((parts.scheme, netloc, path, query, REDACTED if parts.fragment else ""))


class AuditSink(Protocol):
    """Receives every audit record; ``record['message']`` is the one-line human form."""

    def emit(self, record: Mapping[str, Any]) -> None: ...


#: Outcomes written after the fact (the action done): made durable by the file's next fsync — the next
#: action's ``applying``, or the run's end — as the journal's records after the fact are (its
#: ``AFTER_THE_FACT``). A killed process loses none of them; only a machine losing power between the two can.
AFTER_THE_FACT = frozenset({"applied", "rolled-back"})


class FileSink:
    """Appends JSON lines to a file, fsynced (the audit trail must survive the crash it documents) before
    every action and at a run's start and end; an outcome after the fact waits for the next fsync."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, line.encode())
            if record.get("outcome") not in AFTER_THE_FACT:
                os.fsync(fd)
        finally:
            os.close(fd)


class MemorySink:
    """Keeps records in a list (tests, and the dry-run preview)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def emit(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))


def _targets_text(targets: Sequence[str]) -> str:
    if len(targets) <= 4:
        return ",".join(targets)
    return ",".join(targets[:3]) + f",... ({len(targets)} hosts)"


class AuditLog:
    """Writes audit records to its sinks.

    Args:
        sinks: Authoritative sinks; an error writing them propagates.
        best_effort: Sinks whose errors are reported through ``on_sink_error`` and swallowed.
        on_sink_error: Where to report best-effort failures (default: stderr).
    """

    def __init__(
        self,
        sinks: Sequence[AuditSink] = (),
        best_effort: Sequence[AuditSink] = (),
        on_sink_error: Callable[[str], None] | None = None,
    ) -> None:
        self.sinks = list(sinks)
        self.best_effort = list(best_effort)
        self.on_sink_error = on_sink_error or (lambda msg: sys.stderr.write(msg + "\n"))

    def _emit(self, record: dict[str, Any]) -> dict[str, Any]:
        clean: dict[str, Any] = redact(record)
        for sink in self.sinks:
            sink.emit(clean)
        for sink in self.best_effort:
            try:
                sink.emit(clean)
            except Exception as exc:
                self.on_sink_error(f"warning: audit sink {type(sink).__name__} failed: {exc}")
        return clean

    def record(
        self,
        *,
        run: str,
        operator: str,
        reason: str,
        action: str,
        outcome: str,
        step: str | None = None,
        task: str | None = None,
        target: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """One state-changing action and its outcome (``applying``, ``applied``, ``failed``...)."""
        where = f" {target}" if target else ""
        message = f"kafkaops {run}:{where} {step or ''} {action} -> {outcome} ({operator}: {reason})"
        rec: dict[str, Any] = {
            "time": _now_iso(),
            "event": "action",
            "run": run,
            "step": step,
            "operator": operator,
            "reason": reason,
            "task": task,
            "target": target,
            "action": action,
            "outcome": outcome,
            "message": " ".join(message.split()),
        }
        rec.update(extra)
        return self._emit(rec)

    def start(
        self, *, run: str, runbook: str, targets: Sequence[str], operator: str, reason: str, task: str | None
    ) -> dict[str, Any]:
        """The SAL-style ``START - <runbook> <targets> (<reason>)`` line."""
        why = f"{reason} - {task}" if task else reason
        msg = f"START - {runbook} {_targets_text(targets)} ({why})".replace("  ", " ")
        return self._run_line("start", "started", msg, run, runbook, targets, operator, reason, task)

    def end(
        self,
        *,
        run: str,
        runbook: str,
        targets: Sequence[str],
        operator: str,
        reason: str,
        task: str | None,
        passed: bool,
        detail: str = "",
    ) -> dict[str, Any]:
        """The SAL-style ``END (PASS|FAIL) - <runbook> <targets> (<reason>)`` line."""
        verdict = "PASS" if passed else "FAIL"
        why = f"{reason} - {task}" if task else reason
        msg = f"END ({verdict}) - {runbook} {_targets_text(targets)} ({why})"
        if detail:
            msg += f": {detail}"
        return self._run_line("end", verdict.lower(), msg, run, runbook, targets, operator, reason, task)

    def host_start(self, *, run: str, runbook: str, host: str, position: tuple[int, int], operator: str,
                   reason: str, task: str | None, resumed: bool = False) -> dict[str, Any]:
        """One host's maintenance begins, within a run of several: ``START - <runbook> <host> [i/n] (<reason>)``."""
        why = f"{reason} - {task}" if task else reason
        name = runbook + (" (resume)" if resumed else "")
        msg = f"START - {name} {host} [{position[0]}/{position[1]}] ({why})"
        return self._run_line("host_start", "started", msg, run, runbook, [host], operator, reason, task)

    def host_end(self, *, run: str, runbook: str, host: str, position: tuple[int, int], operator: str,
                 reason: str, task: str | None, passed: bool, detail: str = "") -> dict[str, Any]:
        """That host's maintenance ends: ``END (PASS|FAIL) - <runbook> <host> [i/n] (<reason>)[: detail]``."""
        verdict = "PASS" if passed else "FAIL"
        why = f"{reason} - {task}" if task else reason
        msg = f"END ({verdict}) - {runbook} {host} [{position[0]}/{position[1]}] ({why})"
        if detail:
            msg += f": {detail}"
        return self._run_line("host_end", verdict.lower(), msg, run, runbook, [host], operator, reason, task)

    def _run_line(self, event: str, outcome: str, msg: str, run: str, runbook: str, targets: Sequence[str],
                  operator: str, reason: str, task: str | None) -> dict[str, Any]:
        return self._emit({
            "time": _now_iso(), "event": event, "run": run, "operator": operator, "reason": reason,
            "task": task, "target": list(targets), "action": runbook, "outcome": outcome,
            "message": f"{operator}: {msg}", "sal": sal_line(operator, msg),
        })


def sal_line(operator: str, message: str) -> str:
    """``!log alice@cumin1001 START - reboot kafka1001 (kernel update - T123)``: what the tcpircbot relay
    hands to the SAL's stashbot, which takes the first word after ``!log`` as the nick (spicerack's
    ``SALSocketHandler`` sends the same shape). One line: a newline would start a second IRC message."""
    return " ".join(f"!log {operator} {message}".split())


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


RemoteSinks = Callable[[], Sequence[AuditSink]]
"""Builds the best-effort network sinks of :func:`default_audit` (called once per audit log)."""

#: Environment variables that configure network sinks (read by :mod:`kafkaops.systems.audit_sinks`).
REMOTE_SINK_VARIABLES = ("KAFKAOPS_AUDIT_TCP", "KAFKAOPS_AUDIT_WEBHOOK")

_remote_sinks: RemoteSinks | None = None


def set_remote_sinks(factory: RemoteSinks | None) -> None:
    """Install what builds the network sinks of :func:`default_audit` (``None`` removes it).

    The engine imports no network client, so whoever wires kafkaops together (the CLI) installs
    ``kafkaops.systems.audit_sinks.remote_sinks_from_env`` here.
    """
    global _remote_sinks
    _remote_sinks = factory


class NetworkSinksMissing:
    """Stands for network sinks configured in the environment but never installed: each record reports it
    (as a best-effort failure), so a missing relay to the operators' channel is never silent."""

    def __init__(self, variables: Sequence[str]) -> None:
        self.variables = list(variables)

    def emit(self, record: Mapping[str, Any]) -> None:
        raise RuntimeError(
            f"{', '.join(self.variables)} set, but this program did not install kafkaops' network audit "
            "sinks (kafkaops.systems.audit_sinks.install()); the record is only in the audit file"
        )


def default_audit(home: Path | None = None, *, remote: Sequence[AuditSink] | None = None) -> AuditLog:
    """File sink at ``$KAFKAOPS_HOME/audit.log`` (authoritative) plus best-effort network sinks.

    Args:
        home: kafkaops' state directory (default ``$KAFKAOPS_HOME``).
        remote: Network sinks; default: those the installed factory builds (:func:`set_remote_sinks`;
            the CLI's reads ``KAFKAOPS_AUDIT_TCP=host:port`` and ``KAFKAOPS_AUDIT_WEBHOOK=url``).
    """
    base = home or kafkaops_home()
    if remote is None:
        if _remote_sinks is not None:
            remote = list(_remote_sinks())
        else:
            configured = [v for v in REMOTE_SINK_VARIABLES if os.environ.get(v)]
            remote = [NetworkSinksMissing(configured)] if configured else []
    return AuditLog([FileSink(base / "audit.log")], remote)


def current_operator() -> str:
    """``user@host`` of whoever runs kafkaops (``SUDO_USER`` wins over root)."""
    import getpass

    user = os.environ.get("SUDO_USER") or getpass.getuser()
    return f"{user}@{os.uname().nodename}"  # gethostname(2) is uname's nodename: no socket module needed
