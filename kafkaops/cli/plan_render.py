"""The terminal rendering of a plan (``--dry-run`` without ``-o``): one rich table, step by step.

It lives in the CLI because the engine imports no presentation library; the engine renders the plan
as Markdown (change review) and JSON (tools) itself. Everything a plan holds came from an inventory, a
runbook or the live systems, so every cell is a :class:`rich.text.Text` — shown as typed, never
interpreted as console markup (a topic or a command output containing ``[red]`` stays literal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkaops.engine.plan import Plan

__all__ = ["render_plan"]


def render_plan(plan: Plan) -> Any:
    """A rich renderable of ``plan``: header (runbook, cluster, changes, fingerprint, targets, reason),
    a table of every step (observed, action with its commands and impact, or the no-op reason), notes."""
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
