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
    """``text`` wrapped between words only (a long token — a path, a command word — stays whole, even
    past ``width``), continuation lines indented further."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width=max(width, len(indent) + 20), initial_indent=indent,
                             subsequent_indent=indent + more, break_long_words=False, break_on_hyphens=False,
                             drop_whitespace=True) or [indent.rstrip()]
    return out


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


def render_plan_text(plan: Plan, width: int = 80) -> str:
    """The compact plan: a header, then per target one block per step, then the notes; ``width`` columns
    (a line goes past it only for a single token longer than the width)."""
    lines = _wrap(f"Plan {plan.runbook} on {plan.cluster or '-'}: {len(plan.changes)} change(s) in "
                  f"{len(plan.steps)} steps, fingerprint {plan.fingerprint[:12]}", width, "")
    lines += _wrap(f"targets: {', '.join(plan.targets)}", width, "")
    lines += _wrap(f"reason: {plan.reason}" + (f"  task: {plan.task}" if plan.task else ""), width, "")
    target = None
    for s in plan.steps:
        if s.target != target:
            target = s.target
            lines += ["", target]
        lines += _step_lines(s, width)
    if plan.notes:
        lines.append("")
    for n in plan.notes:
        lines += _wrap(f"note: {n}", width, "")
    return "\n".join(lines) + "\n"


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
