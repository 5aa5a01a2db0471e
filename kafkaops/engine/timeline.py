"""A run as a report: what happened when, folded from its journal (pure; the CLI renders it).

The journal is written for the engine — one record per transition, crash-safe — and answers "where do I
resume". An operator writing a change's summary or an incident timeline asks something else: which host
was depooled, stopped, rebooting, catching up, from when to when; how long each wait took and why it
started again ("new SYN from 10.2.0.7"); where the run was paused, where its process died and where it
was resumed. :func:`run_report` answers that from the same records, so the report cannot disagree with
the run.

A process that died leaves no record saying so: a session (``run_started`` or ``resumed`` up to the next
one) that ends with neither ``paused`` nor a final record was **killed** — at its last record, the last
moment the run is known to have been alive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkaops.engine.journal import TERMINAL

#: What kind of system each step kind's prefix acts on (the chart's colours, the report's "kind").
CATEGORIES: dict[str, str] = {
    "conftool": "traffic", "traffic": "traffic",
    "kafka": "kafka", "kraft": "kafka", "placement": "kafka",
    "host": "host",
    "service": "service", "deploy": "service", "deploy_host": "service", "canary": "service", "replay": "service",
    "health": "check", "logs": "check", "metrics": "check", "env": "check", "confirm": "check",
}


def category(kind: str) -> str:
    """``traffic``, ``kafka``, ``host``, ``service`` or ``check`` for a step kind (``kafka.stop_broker``)."""
    return CATEGORIES.get(kind.split(".", 1)[0], "check")


@dataclass
class StepReport:
    target: str
    step: int
    kind: str
    gate: bool = False
    start: float | None = None
    end: float | None = None
    outcome: str = "pending"  # changed | no-op | failed | rolled back | pending | running
    attempts: int = 0  # how many times it was applied (a retry or a resume applies again)
    description: str = ""
    errors: list[str] = field(default_factory=list)  # each failed attempt's error, in order
    restarts: list[dict[str, Any]] = field(default_factory=list)  # {"t", "reason"}: a wait started again
    sessions: set[int] = field(default_factory=set)  # which sessions (0: the first process) worked on it

    @property
    def interrupted(self) -> bool:
        """Begun by one process and finished by another (a pause, a kill, then a resume)."""
        return len(self.sessions) > 1

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.end is None else round(self.end - self.start, 3)

    @property
    def category(self) -> str:
        return category(self.kind)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["sessions"]
        return {**out, "duration": self.duration, "category": self.category, "interrupted": self.interrupted}


@dataclass
class Session:
    """One process's part of the run: from its start or resume to its finish, pause, failure or death."""

    how: str  # started | resumed
    start: float
    end: float
    ended_by: str  # finished | failed | aborted | paused | killed | running
    pid: int | None = None
    host: str | None = None


@dataclass
class RunReport:
    run_id: str
    runbook: str
    cluster: str
    operator: str
    reason: str
    task: str | None
    status: str
    start: float | None
    end: float | None
    sessions: list[Session]
    steps: list[StepReport]
    events: list[dict[str, Any]]

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.end is None else round(self.end - self.start, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "runbook": self.runbook, "cluster": self.cluster, "operator": self.operator,
                "reason": self.reason, "task": self.task, "status": self.status, "start": self.start,
                "end": self.end, "duration": self.duration, "sessions": [asdict(s) for s in self.sessions],
                "steps": [s.to_dict() for s in self.steps], "events": self.events}


def _sessions(records: list[Mapping[str, Any]]) -> list[Session]:
    out: list[Session] = []
    current: Session | None = None
    for rec in records:
        kind, ts = rec["type"], float(rec.get("ts") or 0)
        if kind in ("run_started", "resumed"):
            if current is not None and current.ended_by == "running":
                current.ended_by = "killed"  # a new process took over without a word from the old one
            current = Session("started" if kind == "run_started" else "resumed", ts, ts, "running",
                              rec.get("pid"), rec.get("hostname"))
            out.append(current)
            continue
        if current is None:
            continue
        current.end = max(current.end, ts)
        if kind == "paused":
            current.ended_by = "paused"
        elif kind in TERMINAL:
            current.ended_by = kind
    return out


def run_report(records: Iterable[Mapping[str, Any]], *, alive: bool = False) -> RunReport:
    """Fold a run's journal records into its report. ``alive``: the run's process still runs (its last
    session is ``running``, not ``killed``)."""
    recs = list(records)
    started = next((r for r in recs if r["type"] == "run_started"), {})
    order = [(t["name"], int(s["index"]), s["kind"], bool(s.get("gate")))
             for t in (started.get("runbook") or {}).get("targets", []) for s in t.get("steps", [])]
    steps = {(t, i): StepReport(t, i, k, g) for t, i, k, g in order}
    events = []
    prev: float | None = None  # the record before: a step starts when the one before it ended
    session = -1
    for rec in recs:
        kind = rec["type"]
        if kind in ("run_started", "resumed"):
            session += 1
        before, prev = prev, float(rec.get("ts") or 0) or prev
        key = (str(rec.get("target", "")), int(rec.get("step", -1)))
        st = steps.get(key)
        ts = float(rec.get("ts") or 0)
        if kind == "event":
            fields = {k: v for k, v in rec.items() if k not in ("type", "seq", "ts", "target", "step", "kind", "event")}
            if rec.get("event") == "wait_restarted" and st is not None:
                st.restarts.append({"t": ts, "reason": str(fields.get("reason", ""))})
            else:
                events.append({"t": ts, "target": rec.get("target"), "step": rec.get("step"),
                               "event": rec.get("event"), **fields})
            continue
        if st is None or not (kind.startswith("step_") or kind.startswith("compensate_")):
            continue
        if st.start is None:
            st.start = before if before is not None else ts  # its observation ran since then
        st.end = ts
        st.sessions.add(session)
        if kind == "step_applying":
            st.attempts += 1
            st.description = str((rec.get("action") or {}).get("description", st.description))
            if st.outcome != "rolled back":
                st.outcome = "running"
        elif kind == "step_retry":
            st.errors.append(str(rec.get("error", "")))
        elif kind == "step_failed":
            st.errors.append(str(rec.get("error", "")))
            st.outcome = "failed"
        elif kind == "step_skipped":
            # Applied before a kill and found done after the resume: the change is this run's.
            st.outcome = "changed" if st.attempts else "no-op"
            st.description = str(rec.get("reason", ""))
        elif kind == "step_verified" and st.outcome not in ("no-op", "failed"):
            st.outcome = "changed"
        elif kind in ("compensate_verified", "compensate_skipped"):
            st.outcome = "rolled back"
        elif kind == "step_observed" and st.outcome == "failed":
            st.outcome = "pending"  # observed again after a failure: a resume or retry took it up
    sessions = _sessions(recs)
    if sessions and sessions[-1].ended_by == "running" and not alive:
        sessions[-1].ended_by = "killed"
    status = sessions[-1].ended_by if sessions else "running"
    all_ts = [float(r["ts"]) for r in recs if r.get("ts")]
    return RunReport(
        run_id=str(started.get("run_id", "")), runbook=str((started.get("runbook") or {}).get("name", "")),
        cluster=str(started.get("cluster", "")), operator=str(started.get("operator", "")),
        reason=str(started.get("reason", "")), task=started.get("task"), status=status,
        start=min(all_ts) if all_ts else None, end=max(all_ts) if all_ts else None, sessions=sessions,
        steps=[steps[(t, i)] for t, i, _, _ in order], events=events,
    )
