"""Reviewable plans: what a run would do, as observed on the live systems, before it does it.

A dry-run calls every step's ``observe`` and ``plan`` for real, so the plan shows the cluster as it is
(which broker is the controller, which leaders will move, which hosts are already depooled) and, per
step, the exact command or API call, the predicted impact and how to roll it back. It renders as
Markdown for a change review and JSON for tools; the terminal table is the CLI's
(:mod:`kafkaops.cli.plan_render`), since the engine imports no presentation library.

Like ``terraform plan -out``, a plan can be saved and applied later, but only if the world still looks
the way it did when it was reviewed: the plan carries a ``fingerprint`` (sha256 over the canonical JSON
of what every step observed, via ``Observation.fingerprint_data()``). ``kafkaops apply PLAN`` re-observes
and refuses a stale plan with :class:`~kafkaops.errors.StalePlanError`, naming each observation that
changed -- approving "depool kafka1003" when kafka1003 has meanwhile become the controller is exactly the
review that must be redone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.errors import ConfigError

PLAN_VERSION = 1


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) used for fingerprints."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class PlannedStep:
    """One step of one target as planned."""

    target: str
    index: int
    kind: str
    params: Mapping[str, Any]
    observed: str  # observation summary
    fingerprint_data: Any
    action: Mapping[str, Any] | None = None  # Action.to_dict(), None for a no-op
    noop_reason: str | None = None
    gate: bool = False
    title: str = ""
    rollback: str = ""  # declared compensation / rollback note

    @property
    def key(self) -> str:
        return f"{self.target} step {self.index} ({self.kind})"


@dataclass
class Plan:
    """A run's plan. ``bound`` is the :class:`~kafkaops.engine.runbook.BoundRunbook` as a dict."""

    runbook: str
    summary: str
    cluster: str
    operator: str
    reason: str
    task: str | None
    created_at: float
    bound: Mapping[str, Any]
    steps: list[PlannedStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fingerprint: str = ""
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = compute_fingerprint(self.steps)

    @property
    def targets(self) -> list[str]:
        return [t["name"] for t in self.bound.get("targets", [])]

    @property
    def changes(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.action is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "runbook": self.runbook,
            "summary": self.summary,
            "cluster": self.cluster,
            "operator": self.operator,
            "reason": self.reason,
            "task": self.task,
            "created_at": self.created_at,
            "targets": self.targets,
            "fingerprint": self.fingerprint,
            "notes": list(self.notes),
            "bound": dict(self.bound),
            "steps": [asdict(s) for s in self.steps],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        if d.get("version") != PLAN_VERSION:
            raise ConfigError(f"plan version {d.get('version')!r} is not supported (expected {PLAN_VERSION})")
        steps = [PlannedStep(**s) for s in d.get("steps", [])]
        return cls(
            runbook=d["runbook"],
            summary=d.get("summary", ""),
            cluster=d.get("cluster", ""),
            operator=d.get("operator", ""),
            reason=d.get("reason", ""),
            task=d.get("task"),
            created_at=float(d.get("created_at", 0)),
            bound=d["bound"],
            steps=steps,
            notes=list(d.get("notes", [])),
            fingerprint=d.get("fingerprint", ""),
            version=int(d["version"]),
        )

    # --- renderers -------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str) + "\n"

    def to_markdown(self) -> str:
        return render_markdown(self)


def _fp_entries(steps: Sequence[PlannedStep]) -> list[Any]:
    return [[s.target, s.index, s.kind, s.fingerprint_data] for s in steps]


def compute_fingerprint(steps: Sequence[PlannedStep]) -> str:
    """sha256 over the canonical JSON of (target, step, kind, observed data) for every step."""
    return hashlib.sha256(canonical_json(_fp_entries(steps)).encode()).hexdigest()


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write the plan as JSON (atomically: a half-written plan must never be applied)."""
    import os

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(plan.to_json(), encoding="utf-8")
    os.replace(tmp, p)
    return p


def load_plan(path: str | Path) -> Plan:
    """Read a saved plan and check its integrity (an edited plan is refused).

    Raises:
        ConfigError: Unreadable, not a plan, or its fingerprint does not match its content.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read plan: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not a plan file (invalid JSON at line {exc.lineno})") from exc
    if not isinstance(data, dict) or "bound" not in data or "steps" not in data:
        raise ConfigError(f"{p}: not a kafkaops plan", hint="create one with --dry-run --save-plan FILE")
    try:
        plan = Plan.from_dict(data)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{p}: malformed plan: {exc}") from exc
    if compute_fingerprint(plan.steps) != plan.fingerprint:
        raise ConfigError(
            f"{p}: the plan's content does not match its fingerprint (edited after it was saved?)",
            hint="re-create it with --dry-run --save-plan",
        )
    return plan


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    return {prefix: value}


def diff_observations(old: Sequence[PlannedStep], new: Sequence[PlannedStep]) -> list[str]:
    """Human lines naming what changed between two sets of observations."""
    before = {(s.target, s.index): s for s in old}
    after = {(s.target, s.index): s for s in new}
    lines: list[str] = []
    for key in list(before) + [k for k in after if k not in before]:
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            s = a or b
            assert s is not None
            lines.append(f"{s.key}: {'no longer in the run' if b is None else 'new in the run'}")
            continue
        if canonical_json(a.fingerprint_data) == canonical_json(b.fingerprint_data):
            continue
        fa, fb = _flatten(a.fingerprint_data), _flatten(b.fingerprint_data)
        for field_name in sorted(set(fa) | set(fb)):
            va, vb = fa.get(field_name, "<absent>"), fb.get(field_name, "<absent>")
            if canonical_json(va) != canonical_json(vb):
                lines.append(f"{a.key}: {field_name or 'observation'} {_change(va, vb)}")
    return lines


def _change(old: Any, new: Any, shown: int = 3) -> str:
    """``was X, now Y`` for scalars; for lists, the sizes and a few of the items added and removed."""
    if isinstance(old, list) and isinstance(new, list):
        added = [x for x in new if x not in old]
        removed = [x for x in old if x not in new]

        def few(items: list[Any]) -> str:
            text = ", ".join(str(x) for x in items[:shown])
            return text + (f" and {len(items) - shown} more" if len(items) > shown else "")

        parts = [f"+{len(added)} ({few(added)})" if added else "",
                 f"-{len(removed)} ({few(removed)})" if removed else ""]
        return f"{len(old)} -> {len(new)} items: " + " ".join(p for p in parts if p)
    return f"was {canonical_json(old)}, now {canonical_json(new)}"


# --- rendering -------------------------------------------------------------------------------------


def _when(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(plan: Plan) -> str:
    """Markdown for a change review: targets, preconditions as observed, each step's exact commands,
    predicted impact and rollback notes."""
    out = [
        f"# Plan: `{plan.runbook}` on `{plan.cluster}`",
        "",
        f"{plan.summary}",
        "",
        f"- **Targets** (in order): {', '.join(f'`{t}`' for t in plan.targets) or '-'}",
        f"- **Operator**: {plan.operator}",
        f"- **Reason**: {plan.reason or '_none given (`--reason`)_'}" + (f" (task {plan.task})" if plan.task else ""),
        f"- **Planned at**: {_when(plan.created_at)}",
        f"- **Fingerprint**: `{plan.fingerprint[:16]}`",
        f"- **Changes**: {len(plan.changes)} of {len(plan.steps)} steps "
        "(the rest are already in the wanted state)",
        "",
    ]
    if plan.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in plan.notes] + [""]
    out += ["## Preconditions (as observed)", "", "| target | step | kind | observed |", "|---|---|---|---|"]
    for s in plan.steps:
        out.append(f"| {s.target} | {s.index} | `{s.kind}` | {_md_escape(s.observed or '-')} |")
    out.append("")
    for target in plan.targets:
        out += [f"## Target `{target}`", ""]
        for s in (s for s in plan.steps if s.target == target):
            label = "gate" if s.gate else f"{s.index}."
            params = ", ".join(f"{k}={json.dumps(v)}" for k, v in s.params.items())
            out.append(f"### {label} `{s.kind}`" + (f" — {s.title}" if s.title else ""))
            out.append("")
            if params:
                out.append(f"Parameters: `{params}`")
                out.append("")
            if s.action is None:
                out.append(f"**No-op**: {s.noop_reason}")
            else:
                out.append(f"**Action**: {s.action.get('description', '')}")
                cmds = s.action.get("commands") or []
                if cmds:
                    out += ["", "```", *cmds, "```"]
                if s.action.get("impact"):
                    out += ["", f"**Impact**: {s.action['impact']}"]
                rollback = s.rollback or s.action.get("rollback")
                if rollback:
                    out += ["", f"**Rollback**: {rollback}"]
            out.append("")
    out += [
        "## Apply",
        "",
        "```",
        "kafkaops apply PLAN_FILE   # refused if any observation above has changed",
        "```",
        "",
    ]
    return "\n".join(out)
