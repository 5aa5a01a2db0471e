"""How a runbook reads to an operator: its generated Markdown page, and how its parameters are spelled on
the command line (``--no-election``, ``--canary 2``, ``SERVICE``, ``--param name=value``).

The engine parses and validates a runbook's ``command:`` declarations but does not know how a flag is
written in a usage line or a doc page: that is the CLI's, here. ``kafkaops runbooks docs`` renders one
Markdown page per runbook from the YAML with :func:`render_markdown`, so the docs cannot drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkaops.engine.runbook import HookRef, Runbook, StepSpec
from kafkaops.engine.step import Param, format_duration, get_step_kind


def _fmt_value(p: Param | None, v: Any) -> str:
    if p is not None and p.type == "duration" and not isinstance(v, str):
        return format_duration(float(v))
    if isinstance(v, str):
        return v
    return json.dumps(v)


def render_markdown(runbook: Runbook) -> str:
    """One Markdown page for a runbook, generated from its YAML (``kafkaops runbooks docs``)."""
    out = [
        f"# Runbook `{runbook.name}`",
        "",
        f"> Generated from `{Path(runbook.source).name}` by `kafkaops runbooks docs`: "
        "edit the YAML, not this page.",
        "",
        runbook.summary,
        "",
    ]
    if runbook.description:
        out += [runbook.description, ""]
    out += _command_markdown(runbook)
    if runbook.parameters:
        out += ["## Parameters", "", "| name | type | default | command line | description |", "|---|---|---|---|---|"]
        resolved = dict(runbook.command.resolve)
        for p in runbook.parameters:
            decl = runbook.declaration(p.name)
            if p.name in resolved:
                default = f"*resolved by `{resolved[p.name].name}`*"
            elif p.required and p.default is None:
                default = "*(required)*"
            else:
                default = f"`{_fmt_value(p, p.default)}`"
            kind = p.type + (" (" + " \\| ".join(f"`{_fmt_value(p, c)}`" for c in decl.choices) + ")"
                             if decl.choices else "") + (f" ({bounds_text(p)})" if bounds_text(p) else "")
            out.append(f"| `{p.name}` | {kind} | {default} | {_option_text(runbook, p)} | {p.help} |")
        out.append("")
    if runbook.targets:
        t = runbook.targets
        order = "the current controller last" if t.order == "controller_last" else "inventory order"
        out += ["## Targets", "", f"Rolling: one target at a time, in {order}."]
        if t.gate:
            out.append(f"Between targets it runs the gate `{t.gate.kind}` {_params_text(t.gate)}.")
        out.append("")
    out += ["## Steps", ""]
    for s in runbook.steps:
        entry = get_step_kind(s.kind)
        title = s.title or (entry.summary if entry else "")
        out.append(f"{s.index}. **`{s.kind}`** {_params_text(s)}" + (f" — {title}" if title else ""))
        if entry and entry.compensate:
            note = f": {entry.compensate.note}" if entry.compensate.note else ""
            out.append(f"   - rollback: `{entry.compensate.kind}`{note}")
    out.append("")
    kinds = sorted(
        {s.kind for s in runbook.steps}
        | ({runbook.targets.gate.kind} if runbook.targets and runbook.targets.gate else set())
    )
    out += ["## Step kinds used", ""]
    for k in kinds:
        entry = get_step_kind(k)
        if entry is None:
            out.append(f"- `{k}`: *(not registered)*")
            continue
        out.append(f"- `{k}`: {entry.summary}")
        for p in entry.params:
            req = "required" if p.required else f"default `{_fmt_value(p, p.default)}`"
            out.append(f"  - `{p.name}` ({p.type}, {req}){': ' + p.help if p.help else ''}")
    out += [
        "",
        "## Resume and rollback",
        "",
        "Interrupted or failed runs continue with `kafkaops resume RUN_ID`; "
        "`kafkaops runs abort RUN_ID --rollback --reason ...` undoes only what the run changed.",
        "",
    ]
    return "\n".join(out)


def bounds_text(p: Param) -> str:
    """``≥ 0``, ``≤ 1h``, ``1s..1h``: a parameter's declared bounds, in its own notation ("" without)."""
    def shown(v: float) -> str:
        return format_duration(v) if p.type == "duration" else f"{v:g}"

    if p.min is not None and p.max is not None:
        return f"{shown(p.min)}..{shown(p.max)}"
    if p.min is not None:
        return f"≥ {shown(p.min)}"
    return f"≤ {shown(p.max)}" if p.max is not None else ""


def spell(runbook: Runbook, name: str, value: Any, *, alias: bool = True) -> str:
    """How ``name=value`` is written on the command line: ``--no-election`` (a switch), ``--canary 2``,
    ``SERVICE`` (a positional argument), or ``--param name=value`` (``kafkaops run``, or no flag)."""
    param = runbook.param(name)
    decl = runbook.declaration(name)
    text = _fmt_value(param, value) if not isinstance(value, bool) else str(value).lower()
    if alias and runbook.command.alias and param is not None:
        if name in runbook.command.arguments:
            return name.upper()
        if decl.flags:
            return decl.flags[0] if param.type == "bool" else f"{decl.flags[0]} {text}"
    return f"--param {name}={text}"


def _option_text(runbook: Runbook, p: Param) -> str:
    if not runbook.command.alias:
        return f"`--param {p.name}=…`"
    if p.name in runbook.command.arguments:
        return f"argument `{p.name.upper()}`"
    flags = runbook.declaration(p.name).flags
    return ", ".join(f"`{f}`" for f in flags) if flags else f"`--param {p.name}=…` only"


def usage(runbook: Runbook) -> str:
    """``kafkaops NAME [SERVICE] TARGET`` (the alias), or ``kafkaops run NAME TARGET`` without one."""
    target = runbook.command.target.upper()
    if not runbook.command.alias:
        return f"kafkaops run {runbook.name} {target} [--param NAME=VALUE ...]"
    args = " ".join(a.upper() for a in runbook.command.arguments)
    required = [
        f"{d.flags[0]} {p.name.upper()}" for p in runbook.parameters
        if (d := runbook.declaration(p.name)).flags and p.required and p.default is None and p.type != "bool"
        and p.name not in dict(runbook.command.resolve)
    ]
    return " ".join(["kafkaops", runbook.name, *([args] if args else []), target, *required, "[OPTIONS]"])


def _command_markdown(runbook: Runbook) -> list[str]:
    c = runbook.command
    what = "a host (short name or FQDN)" if c.target == "host" else "a cluster of the inventory"
    out = ["## Command line", "", f"`{usage(runbook)}`" + (
        f" — or `kafkaops run {runbook.name} {c.target.upper()} --param NAME=VALUE ...`" if c.alias else ""), ""]
    out.append(f"{c.target.upper()} is {what}" + (
        ", whose hosts are the targets" if c.target == "cluster" and runbook.rolling else "") + ".")

    def hook(ref: HookRef) -> str:
        args = ", ".join(f"{k}={v}" for k, v in ref.args.items())
        return f"`{ref.name}`" + (f" ({args})" if args else "")

    if c.checks:
        out.append("Checked first: " + ", ".join(hook(h) for h in c.checks) + ".")
    if c.select:
        out.append("Targets selected by " + ", then ".join(hook(h) for h in c.select) + ".")
    if c.resolve:
        out.append("Resolved when not given: " + ", ".join(f"`{n}` by {hook(h)}" for n, h in c.resolve) + ".")
    for combo in c.conflicts:
        out.append("Refused together: " + " with ".join(f"`{spell(runbook, n, v)}`" for n, v in combo.items())
                   + ".")
    out.append("")
    return out


def _params_text(s: StepSpec) -> str:
    if not s.params:
        return ""
    return "(" + ", ".join(f"{k}=`{_fmt_value(None, v)}`" for k, v in s.params.items()) + ")"
