"""Audit log: who changed what, when, why, and how it ended.

Operators reconstruct incidents from the audit trail ("who depooled kafka1003 at 03:12, and for which
task?"), so every state-changing action is one JSON line (time, run, step, operator, reason, task,
target, action, outcome), and every run opens and closes with the ``START - <runbook> <targets>
(<reason>)`` / ``END (PASS|FAIL) - ...`` lines operators know from Wikimedia's SAL, which an IRC bot can
relay as-is.

Sinks are pluggable: a file (default ``$KAFKAOPS_HOME/audit.log``), a TCP line sink (IRC-bot style:
one line per message) and an HTTP webhook. The file sink is authoritative: if it cannot be written the
error propagates and the action does not happen (no unaudited changes). Remote sinks are best effort:
a chat outage must not stop a half-done roll, so their failures are reported and swallowed.

Secrets never reach a sink, nor the journal: :func:`redact` masks every value whose key matches
``password|secret|token|key_file`` at any depth.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

REDACTED = "***"
_SECRET_KEY = re.compile(r"password|passwd|secret|token|key_file|api_key|credential", re.IGNORECASE)
# key=value / key: value inside free text (command lines, error messages)
_SECRET_INLINE = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|secret|token|key_file|api_key)[\w.-]*)(\s*[=:]\s*|\s+)(\"[^\"]*\"|'[^']*'|\S+)"
)


def redact(value: Any) -> Any:
    """Return a copy of ``value`` with secret-looking keys masked, recursively.

    Mapping keys matching ``password|secret|token|key_file`` (case-insensitive) get ``***``; strings get
    ``password=...``-style fragments masked too.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and _SECRET_KEY.search(k) and v not in (None, ""):
                out[k] = REDACTED
            else:
                out[k] = redact(v)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str) and _SECRET_INLINE.search(value):
        return _SECRET_INLINE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", value)
    return value


class AuditSink(Protocol):
    """Receives every audit record; ``record['message']`` is the one-line human form."""

    def emit(self, record: Mapping[str, Any]) -> None: ...


class FileSink:
    """Appends JSON lines to a file (fsynced: the audit trail must survive the crash it documents)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)


class TcpSink:
    """Sends ``message`` as one line over TCP, like the tcpircbot behind Wikimedia's ``!log``."""

    def __init__(self, host: str, port: int, timeout: float = 3.0, prefix: str = "") -> None:
        self.host, self.port, self.timeout, self.prefix = host, port, timeout, prefix

    def emit(self, record: Mapping[str, Any]) -> None:
        text = (self.prefix + str(record.get("message", ""))).replace("\n", " ")[:450]
        with socket.create_connection((self.host, self.port), timeout=self.timeout) as sock:
            sock.sendall(text.encode() + b"\n")


class WebhookSink:
    """POSTs each record as JSON (``requests`` imported lazily)."""

    def __init__(self, url: str, timeout: float = 5.0, headers: Mapping[str, str] | None = None) -> None:
        self.url, self.timeout, self.headers = url, timeout, dict(headers or {})

    def emit(self, record: Mapping[str, Any]) -> None:
        import requests

        resp = requests.post(self.url, json=dict(record), timeout=self.timeout, headers=self.headers)
        resp.raise_for_status()


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

    def _run_line(self, event: str, outcome: str, msg: str, run: str, runbook: str, targets: Sequence[str],
                  operator: str, reason: str, task: str | None) -> dict[str, Any]:
        return self._emit({
            "time": _now_iso(), "event": event, "run": run, "operator": operator, "reason": reason,
            "task": task, "target": list(targets), "action": runbook, "outcome": outcome,
            "message": f"{operator}: {msg}",
        })


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def default_audit(home: Path | None = None) -> AuditLog:
    """File sink at ``$KAFKAOPS_HOME/audit.log``; optional remote sinks from the environment.

    ``KAFKAOPS_AUDIT_TCP=host:port`` adds a TCP (IRC bot) sink, ``KAFKAOPS_AUDIT_WEBHOOK=url`` a webhook.
    """
    from kafkaops.engine.journal import kafkaops_home

    base = home or kafkaops_home()
    remote: list[AuditSink] = []
    tcp = os.environ.get("KAFKAOPS_AUDIT_TCP")
    if tcp and ":" in tcp:
        host, _, port = tcp.rpartition(":")
        remote.append(TcpSink(host, int(port)))
    hook = os.environ.get("KAFKAOPS_AUDIT_WEBHOOK")
    if hook:
        remote.append(WebhookSink(hook))
    return AuditLog([FileSink(base / "audit.log")], remote)


def current_operator() -> str:
    """``user@host`` of whoever runs kafkaops (``SUDO_USER`` wins over root)."""
    import getpass

    user = os.environ.get("SUDO_USER") or getpass.getuser()
    return f"{user}@{socket.gethostname()}"
