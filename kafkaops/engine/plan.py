"""Reviewable plans: what a run would do, as observed on the live systems, before it does it.

A dry-run calls every step's ``observe`` and ``plan`` for real, so the plan shows the cluster as it is
(which broker is the controller, which leaders will move, which hosts are already depooled) and, per
step, the exact command or API call, the predicted impact and how to roll it back. It renders as
Markdown for a change review and JSON for tools; the terminal table is the CLI's
(:mod:`kafkaops.cli.plan_render`), since the engine imports no presentation library.

Like ``terraform plan -out``, a plan can be saved and applied later, but only as it was reviewed and
only if the world still looks the way it did:

* **Integrity.** The plan carries a ``fingerprint``: sha256 over the hashes of its *sections* — the
  procedure (the bound runbook: every step, every parameter, the runbook file's hash), the request
  (cluster, operator, reason, task), the environment (inventory path and the hash of what the run depends
  on) and the plan as shown (every observation, action, command and rollback). ``load_plan`` recomputes
  them and refuses an edited plan, naming the section that changed. A fingerprint proves nothing against
  someone who recomputes it; for plans that cross a trust boundary (written on one machine, applied from
  another) set ``KAFKAOPS_PLAN_KEY``: plans are then signed (HMAC-SHA256 of the fingerprint) and a plan
  without a valid signature is refused.
* **Staleness.** ``kafkaops apply PLAN`` re-observes and refuses a stale plan with
  :class:`~kafkaops.errors.StalePlanError`, naming each observation that changed -- approving "depool
  kafka1003" when kafka1003 has meanwhile become the controller is exactly the review that must be redone.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
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
    """A run's plan. ``bound`` is the :class:`~kafkaops.engine.binding.BoundRunbook` as a dict."""

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
    environment: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    sections: Mapping[str, str] = field(default_factory=dict)
    signature: str = ""
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.sections = section_hashes(self)
            self.fingerprint = fingerprint_of(self.sections)
            key = plan_key()
            if key:
                self.signature = sign(self.fingerprint, key)

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
            "environment": dict(self.environment),
            "fingerprint": self.fingerprint,
            "sections": dict(self.sections),
            "signature": self.signature,
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
            environment=dict(d.get("environment") or {}),
            fingerprint=str(d.get("fingerprint", "")),
            sections=dict(d.get("sections") or {}),
            signature=str(d.get("signature", "")),
            version=int(d["version"]),
        )

    # --- renderers -------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str) + "\n"

    def to_markdown(self) -> str:
        return render_markdown(self)


def _fp_entries(steps: Sequence[PlannedStep]) -> list[Any]:
    return [[s.target, s.index, s.kind, s.fingerprint_data] for s in steps]


def _sha(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def compute_fingerprint(steps: Sequence[PlannedStep]) -> str:
    """sha256 over the canonical JSON of (target, step, kind, observed data) for every step: what a
    fresh dry-run must reproduce for a saved plan not to be stale."""
    return _sha(_fp_entries(steps))


#: What each section of a plan covers, in the words an edit refusal uses.
SECTIONS = {
    "procedure": "the procedure (steps, their parameters, the runbook file's hash)",
    "request": "the request (cluster, operator, reason, task)",
    "environment": "the environment (inventory file and what the run depends on)",
    "observations": "what the steps observed",
    "shown": "the plan as shown (actions, commands, impact, rollback, notes)",
}


def section_hashes(plan: Plan) -> dict[str, str]:
    """sha256 of each section of ``plan`` (see :data:`SECTIONS`)."""
    return {
        "procedure": _sha(dict(plan.bound)),
        "request": _sha({"runbook": plan.runbook, "cluster": plan.cluster, "operator": plan.operator,
                         "reason": plan.reason, "task": plan.task, "created_at": plan.created_at,
                         "version": plan.version}),
        "environment": _sha({k: v for k, v in plan.environment.items() if k != "depends"}
                            | {"depends": _sha(plan.environment.get("depends"))}),
        "observations": compute_fingerprint(plan.steps),
        "shown": _sha({"steps": [asdict(s) for s in plan.steps], "notes": list(plan.notes),
                       "summary": plan.summary}),
    }


def fingerprint_of(sections: Mapping[str, str]) -> str:
    return _sha(dict(sections))


def plan_key() -> bytes | None:
    """The key that signs plans crossing a trust boundary (``KAFKAOPS_PLAN_KEY``), if configured."""
    key = os.environ.get("KAFKAOPS_PLAN_KEY", "")
    return key.encode() if key else None


def sign(fingerprint: str, key: bytes) -> str:
    return hmac.new(key, fingerprint.encode(), hashlib.sha256).hexdigest()


def check_integrity(plan: Plan, where: str) -> None:
    """Refuse an edited plan, naming what was edited; with ``KAFKAOPS_PLAN_KEY``, an unsigned or
    wrongly signed one.

    Raises:
        ConfigError: The plan was edited after it was saved, or its signature is missing or wrong.
    """
    now = section_hashes(plan)
    edited = [SECTIONS[name] for name in SECTIONS if plan.sections.get(name) != now[name]]
    if edited:
        raise ConfigError(f"{where}: the plan was edited after it was saved: {'; '.join(edited)} changed",
                          hint="re-create it with --dry-run --save-plan and review it again")
    if fingerprint_of(now) != plan.fingerprint:
        raise ConfigError(f"{where}: the plan's fingerprint does not match its content (edited after it was saved?)",
                          hint="re-create it with --dry-run --save-plan and review it again")
    key = plan_key()
    if key is not None and not hmac.compare_digest(plan.signature, sign(plan.fingerprint, key)):
        what = "not signed" if not plan.signature else "signed with another key"
        raise ConfigError(f"{where}: the plan is {what}",
                          hint="KAFKAOPS_PLAN_KEY is set: only plans made with the same key are applied")


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write the plan as JSON (atomically: a half-written plan must never be applied)."""
    import os

    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(plan.to_json(), encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ConfigError(f"{p}: cannot write the plan: {exc.strerror or exc}",
                          hint="pass another --save-plan PATH") from exc
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
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not a plan file (not UTF-8 text)",
                          hint="create one with --dry-run --save-plan FILE") from exc
    if not isinstance(data, dict) or "bound" not in data or "steps" not in data:
        raise ConfigError(f"{p}: not a kafkaops plan", hint="create one with --dry-run --save-plan FILE")
    try:
        plan = Plan.from_dict(data)
        check_integrity(plan, str(p))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{p}: malformed plan: {type(exc).__name__}: {exc}",
                          hint="re-create it with --dry-run --save-plan") from exc
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
