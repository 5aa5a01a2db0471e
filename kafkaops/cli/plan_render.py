"""The terminal renderings of a plan (``--dry-run``): a wide table, or a compact text for narrow
terminals and logs.

The table reads well from about 120 columns. Below that — an 80-column terminal, or output that is not
a terminal at all (a CI job, ``| tee``, a cookbook wrapper capturing it) — every cell would wrap into a
narrow column and a command split over five lines, so the plan is rendered as one block per step
instead (:func:`render_plan_text`): the step line, then its commands, impact and observation indented
under it, wrapped only between words, never inside a command's token. ``-o table`` / ``-o plain`` force
one or the other; the default picks by the terminal (:func:`wants_table`).

It lives in the CLI because the engine imports no presentation library; the engine renders the plan
as Markdown (change review) and JSON (tools) itself. Everything a plan holds came from an inventory, a
runbook or the live systems, so every table cell is a :class:`rich.text.Text` — shown as typed, never
interpreted as console markup (a topic or a command output containing ``[red]`` stays literal) — and
the compact text is written as plain text.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkaops.engine.plan import Plan, PlannedStep

__all__ = ["TABLE_MIN_WIDTH", "render_plan", "render_plan_text", "wants_table"]

#: Below this many columns the table's cells wrap into unreadable slivers: the compact text is used.
TABLE_MIN_WIDTH = 120


def wants_table(is_terminal: bool, width: int) -> bool:
    """The default rendering: the table on a terminal at least :data:`TABLE_MIN_WIDTH` wide, else text."""
    return is_terminal and width >= TABLE_MIN_WIDTH


def _wrap(text: str, width: int, indent: str, more: str = "    ") -> list[str]:
    """``text`` wrapped between words only (a long token — a URL, a PromQL selector — stays whole),
    continuation lines indented further. A token too long for its indent moves left, onto a line of its
    own, to fit the width; only a token longer than the whole width goes past it."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width=max(width, len(indent) + 20), initial_indent=indent,
                             subsequent_indent=indent + more, break_long_words=False, break_on_hyphens=False,
                             drop_whitespace=True) or [indent.rstrip()]
    return [_fit(line, width) for line in out]


def _fit(line: str, width: int) -> str:
    """A line past ``width`` that is one token after its indent: indented less, so it ends at ``width``."""
    token = line.lstrip()
    if len(line) <= width or " " in token:
        return line
    return " " * max(0, width - len(token)) + token


def _step_lines(s: PlannedStep, width: int) -> list[str]:
    label = "gate" if s.gate else str(s.index)
    if s.action is None:
        return _wrap(f"[{label}] {s.kind}: no-op: {s.noop_reason}", width, "  ")
    lines = _wrap(f"[{label}] {s.kind}: {s.action.get('description', '')}", width, "  ")
    for cmd in s.action.get("commands") or []:
        lines += _wrap(f"$ {cmd}", width, "      ")
    if s.action.get("impact"):
        lines += _wrap(f"impact: {s.action['impact']}", width, "      ")
    if s.observed:
        lines += _wrap(f"observed: {s.observed}", width, "      ")
    return lines


def _header(plan: Plan, width: int) -> list[str]:
    lines = _wrap(f"Plan {plan.runbook} on {plan.cluster or '-'}: {len(plan.changes)} change(s) in "
                  f"{len(plan.steps)} steps, fingerprint {plan.fingerprint[:12]}", width, "")
    lines += _wrap(f"targets: {', '.join(plan.targets)}", width, "")
    return lines + _wrap(f"reason: {plan.reason}" + (f"  task: {plan.task}" if plan.task else ""), width, "")


def _notes(plan: Plan, width: int) -> list[str]:
    lines = [""] if plan.notes else []
    for n in plan.notes:
        lines += _wrap(f"note: {n}", width, "")
    return lines


def render_plan_text(plan: Plan, width: int = 80) -> str:
    """The compact plan: a header, the steps, then the notes; ``width`` columns (a line goes past it only
    for a single token longer than the width).

    One target: one block per step. Several targets that run the same steps (a roll): the steps once,
    then per target only what differs (:func:`_grouped_lines`)."""
    body = _grouped_lines(plan, width)
    if body is None:
        body, target = [], None
        for s in plan.steps:
            if s.target != target:
                target = s.target
                body += ["", target]
            body += _step_lines(s, width)
    return "\n".join(_header(plan, width) + body + _notes(plan, width)) + "\n"


# --- a roll: the steps once, then what differs per target ----------------------------------------------

#: The placeholders of the shared steps: (placeholder, key of the host in the plan's environment record,
#: what the legend calls it), in the order they are substituted (the FQDN before the name it contains).
_PLACEHOLDERS = (("{fqdn}", "fqdn", "FQDN"), ("{host}", "name", "name"), ("{address}", "address", "address"),
                 ("{broker}", "broker_id", "broker id"))
#: An observation's provenance (stepkit/projection.py): which earlier steps a prediction comes from.
_PROVENANCE = re.compile(r" \(projected: after [^()]*(?:\([^()]*\)[^()]*)*\)$")

_Line = tuple[str, str]  # (what: head | $ | impact | observed, text)


def _host_values(plan: Plan, target: str) -> dict[str, str]:
    """placeholder -> value for ``target``, as far as the plan's environment record knows its host."""
    hosts = (plan.environment.get("depends") or {}).get("hosts") or []
    host = next((h for h in hosts if isinstance(h, dict) and h.get("name") == target), {"name": target})
    values = {ph: str(host.get(key, "")) for ph, key, _ in _PLACEHOLDERS}
    return {ph: v for ph, v in values.items() if v and v not in ("-1", "None")}


def _substitute(text: str, values: dict[str, str]) -> str:
    """``text`` with the target's own values (whole tokens only) replaced by their placeholders."""
    for ph, value in values.items():
        text = re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\d)", ph, text)
    return text


def _fields(s: PlannedStep) -> list[_Line]:
    """A step's lines as the compact plan shows them. An observation loses the steps it was projected
    from: in a dry-run every observation is seen through the steps before it (a note says so; the
    Markdown plan names them), and the list, different for every target, was a third of a roll's lines."""
    if s.action is None:
        return [("head", f"no-op: {s.noop_reason}")]
    lines: list[_Line] = [("head", str(s.action.get("description", "")))]
    lines += [("$", str(c)) for c in s.action.get("commands") or []]
    if s.action.get("impact"):
        lines.append(("impact", str(s.action["impact"])))
    if s.observed:
        lines.append(("observed", _PROVENANCE.sub("", s.observed)))
    return lines


def _params(s: PlannedStep) -> str:
    def value(v: Any) -> str:
        if isinstance(v, (list, tuple)):
            return ",".join(value(x) for x in v) or "[]"
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v) if isinstance(v, (str, int, float)) and not isinstance(v, bool) and v != "" else json.dumps(v)

    return " ".join(f"{k}={value(v)}" for k, v in sorted(s.params.items()))  # as a saved plan has them


def _show(line: _Line) -> str:
    what, text = line
    return text if what == "head" else f"$ {text}" if what == "$" else f"{what}: {text}"


_Key = tuple[bool, int, str]  # (gate, index, kind) of a step


def _grouped_lines(plan: Plan, width: int) -> list[str] | None:
    """A roll as a reviewer reads it: the steps once — their parameters, and what is the same for every
    target, the target's own values as placeholders (``{host}``, ``{broker}``, ...) — then per target
    only what differs: its commands (each whole: a command shown only as a template was never shown),
    the leaders that move, what it observed.

    Targets are grouped by the steps they run (a KRaft roll's controllers and brokers run different
    ones); a target alone in its group gets one block per step. ``None`` when no two targets run the
    same steps. Three hosts in full were 389 lines at 80 columns: the same nineteen steps three times."""
    steps_of: dict[str, dict[_Key, PlannedStep]] = {}
    for s in plan.steps:
        steps_of.setdefault(s.target, {})[(s.gate, s.index, s.kind)] = s
    groups: dict[tuple[_Key, ...], list[str]] = {}
    for t, steps in steps_of.items():
        groups.setdefault(tuple(k for k in steps if not k[0]), []).append(t)
    if all(len(members) < 2 for members in groups.values()):
        return None
    lines: list[str] = []
    batches = [" + ".join(b) for b in plan.bound.get("batches") or []]
    if batches:
        lines += ["", *_wrap(f"batches (a batch's targets go step by step together): {', then '.join(batches)}",
                             width, "")]
    for members in groups.values():
        if len(members) > 1:
            lines += _shared_lines(plan, {t: steps_of[t] for t in members}, width, every=len(groups) == 1)
            continue
        lines += ["", members[0]]
        for s in steps_of[members[0]].values():
            lines += _step_lines(s, width)
    return lines


def _shared_lines(plan: Plan, steps_of: dict[str, dict[_Key, PlannedStep]], width: int, every: bool) -> list[str]:
    """One group of targets that run the same steps: the steps once, then each target's own lines."""
    targets = list(steps_of)
    values = {t: _host_values(plan, t) for t in targets}
    used: set[str] = set()
    shared: list[str] = []
    own: dict[str, list[str]] = {t: [] for t in targets}
    for key in dict.fromkeys(k for steps in steps_of.values() for k in steps):
        having = [t for t in targets if key in steps_of[t]]
        first = steps_of[having[0]][key]
        raw = {t: _fields(steps_of[t][key]) for t in having}
        templ = {t: [(w, _substitute(x, values[t])) for w, x in raw[t]] for t in having}
        # Shared: a line every target has, as it is, or else with each one's values as placeholders.
        same = [ln for ln in raw[having[0]] if all(ln in raw[t] for t in having)]
        like = [tl for ln, tl in zip(raw[having[0]], templ[having[0]], strict=True)
                if ln not in same and all(tl in templ[t] for t in having)]
        used.update(ph for _, text in like for ph, _, _ in _PLACEHOLDERS if ph in text)
        common = [tl if ln not in same else ln for ln, tl in zip(raw[having[0]], templ[having[0]], strict=True)
                  if ln in same or tl in like]
        label = f"[{'gate' if first.gate else first.index}]"
        head = f"{label} {first.kind}" + (f" ({_params(first)})" if first.params else "")
        if len(having) < len(targets):
            head += f" (only {', '.join(having)})"
        heads = [_show(ln) for ln in common if ln[0] == "head"]
        shared += _wrap(f"{head}: {heads[0]}" if heads else head, width, "  ")
        for ln in common:
            if ln[0] != "head":
                shared += _wrap(_show(ln), width, "      ")
        for t in having:
            mine = [ln for ln, tl in zip(raw[t], templ[t], strict=True)
                    if ln not in same and (tl not in like or (ln[0] == "$" and tl != ln))]
            for n, ln in enumerate(mine):
                own[t] += _wrap(f"{label} {_show(ln)}", width, "  ") if n == 0 else _wrap(_show(ln), width, "      ")
    legend = "; ".join(f"{ph}: its {name}" for ph, _, name in sorted(_PLACEHOLDERS, key=lambda p: p[0] != "{host}")
                       if ph in used)
    who = "Every target runs" if every else f"{', '.join(targets)} each run"
    lines = ["", *_wrap(f"{who} these steps in turn" + (f" ({legend})" if legend else "")
                        + "; what is its own follows them.", width, "")]
    lines += shared
    for t in targets:
        facts = ", ".join(f"{name} {values[t][ph]}" for ph, _, name in _PLACEHOLDERS
                          if ph in used and ph != "{host}" and ph in values[t])
        lines += ["", t + (f" ({facts})" if facts else "")]
        lines += own[t] or ["  (nothing of its own)"]
    return lines


def render_plan(plan: Plan) -> Any:
    """A rich renderable of ``plan``: header (runbook, cluster, changes, fingerprint, targets, reason),
    a table of every step (observed, action with its commands and impact, or the no-op reason), notes.
    For terminals at least :data:`TABLE_MIN_WIDTH` wide; :func:`render_plan_text` for the rest."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text.assemble(
        ("Plan ", "bold"),
        (plan.runbook, "bold cyan"),
        " on ",
        (plan.cluster or "-", "bold"),
        f"  ({len(plan.changes)} change(s) in {len(plan.steps)} steps, "
        f"fingerprint {plan.fingerprint[:12]})\n",
        f"targets: {', '.join(plan.targets)}\nreason: {plan.reason}"
        + (f"  task: {plan.task}" if plan.task else ""),
    )
    table = Table(show_lines=False, expand=True)
    table.add_column("target", no_wrap=True)
    table.add_column("#", justify="right")
    table.add_column("step", no_wrap=True)
    table.add_column("observed")
    table.add_column("plan")
    for s in plan.steps:
        if s.action is None:
            what = Text(f"no-op: {s.noop_reason}", style="dim")
        else:
            cmds = "\n".join(s.action.get("commands") or [])
            what = Text(str(s.action.get("description", "")), style="yellow")
            if cmds:
                what.append("\n" + cmds, style="cyan")
            if s.action.get("impact"):
                what.append(f"\nimpact: {s.action['impact']}", style="magenta")
        table.add_row(Text(s.target), Text("gate" if s.gate else str(s.index)), Text(s.kind),
                      Text(s.observed or ""), what)
    parts: list[Any] = [head, table]
    for n in plan.notes:
        parts.append(Text(f"note: {n}", style="bold yellow"))
    return Group(*parts)
