"""``kafkaops run RUNBOOK TARGET`` and the procedure commands generated from the runbooks.

A procedure is data: its runbook YAML declares the steps *and* the command line — each parameter's
type, default, choices, help and flag, what TARGET names (a host or a cluster), positional arguments,
and the named hooks (:mod:`kafkaops.queries.selectors`) that pick the targets and fill parameters the
operator did not give. From that declaration this module builds, at start-up and only for the command
being run:

* ``kafkaops run RUNBOOK TARGET [--param NAME=VALUE ...]``, for every runbook (``kafkaops run RUNBOOK
  --help`` lists its parameters);
* ``kafkaops RUNBOOK ...`` with the declared flags (``kafkaops reboot HOST --force``), for every runbook
  with a ``command:`` block: ``reboot``, ``restart``, ``rolling-reboot``, ``rolling-restart``,
  ``restart-service``, ``rolling-restart-service``, ``rolling-deploy`` are such aliases.

Both parse the command line, then call the product (:func:`kafkaops.procedure.plan`: the runbook checked
against the step kinds, the targets resolved and selected, ordered, bound and planned in a dry-run
environment), show the plan, ask (``--yes`` to skip, ``--dry-run`` to stop at the plan) and start the run
(:func:`kafkaops.procedure.start`). Command-line mistakes (an unknown ``--param``, a bad value,
contradicting flags, no ``--reason``) are usage errors (exit 2) found before anything is asked of any
system; this module spells them with the command's own flags.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from typer import BadParameter, Context
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from kafkaops.cli import complete
from kafkaops.cli.common import (
    USAGE_ERROR,
    CommandLineError,
    Output,
    PlanOutput,
    check_writable,
    console,
    err_console,
    live_status,
    waiting,
)
from kafkaops.errors import ConfigError, Declined

if TYPE_CHECKING:
    from kafkaops.engine.runbook import ParamDecl, Runbook
    from kafkaops.engine.step import Param
    from kafkaops.procedure import Planned

#: Options every procedure command has; a runbook parameter may not take one of these names.
COMMON_FLAGS = ("--inventory", "-i", "--reason", "-r", "--task", "--yes", "-y", "--dry-run", "--output", "-o",
                "--save-plan", "--help", "--param", "--confirmed")
TARGET_HELP = {"host": ("HOST", "Host (short name or FQDN)."),
               "cluster": ("CLUSTER", "Cluster name from the inventory.")}
_TYPE_NAMES = {"str": "text", "int": "integer", "float": "float", "duration": "duration", "bool": "boolean",
               "list": "list", "map": "json", "any": "value"}


def _echo(line: str) -> None:
    err_console.print(line, highlight=False, markup=False, soft_wrap=True)


# --- values ------------------------------------------------------------------------------------------


def _text(param: Param, value: Any) -> str:
    from kafkaops.engine.step import format_duration

    if param.type == "duration" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_duration(float(value))
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def parse_value(param: Param, decl: ParamDecl, value: Any) -> Any:
    """A command-line value as the parameter's type (a list is ``a,b`` or JSON, a map JSON), checked
    against its choices.

    Raises:
        ValueError: Saying what was expected.
    """
    from kafkaops.engine.step import coerce_param

    if isinstance(value, str) and param.type in ("list", "map"):
        text = value.strip()
        if text.startswith(("[", "{")):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{value!r} is not valid JSON ({exc.msg})") from None
        elif param.type == "list":
            value = [v.strip() for v in text.split(",") if v.strip()]
    typed = coerce_param(param, value)
    if decl.choices and typed not in decl.choices:
        raise ValueError(f"{value!r} is not one of " + ", ".join(_text(param, c) for c in decl.choices))
    return typed


def _converter(param: Param, decl: ParamDecl) -> Callable[[Any], Any]:
    """The click type of a runbook parameter: a function that converts and checks like ``--param`` does.

    click makes any callable a parameter type (named by the function: the help's metavar); a mistake is
    raised as a usage error, and click names the option it came from (exit 2)."""

    def convert(value: Any) -> Any:
        try:
            return parse_value(param, decl, value)
        except ValueError as exc:
            raise BadParameter(str(exc)) from None

    convert.__name__ = _TYPE_NAMES.get(param.type, "value")
    return convert


def _metavar(param: Param, decl: ParamDecl) -> str | None:
    if decl.choices:
        return "[" + "|".join(_text(param, c) for c in decl.choices) + "]"
    return {"list": "A,B,...", "map": "JSON"}.get(param.type)


def _choice(choices: list[str]) -> dict[str, Any]:
    """A parameter's ``type``, ``metavar`` and completion for one of ``choices``."""

    def one_of(value: Any) -> str:
        if value not in choices:
            raise BadParameter(f"{value!r} is not one of {', '.join(map(repr, choices))}.")
        return str(value)

    return {"type": one_of, "metavar": "[" + "|".join(choices) + "]",
            "shell_complete": lambda ctx, param, incomplete: [c for c in choices if c.startswith(incomplete)]}


def parse_params(rb: Runbook, items: list[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` items as typed values. Every mistake is a one-line usage error (exit 2)."""
    out: dict[str, Any] = {}
    declared = {p.name: p for p in rb.parameters}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise CommandLineError(f"--param {item!r}: expected NAME=VALUE (e.g. --param syn_window=30s)")
        if name not in declared:
            close = difflib.get_close_matches(name, sorted(declared), n=1)
            raise CommandLineError(f"--param {name}: runbook {rb.name} has no parameter {name!r} ("
                             + (f"did you mean {close[0]!r}? " if close else "")
                             + f"its parameters: {', '.join(declared) or 'none'})")
        if name in out:
            raise CommandLineError(f"--param {name} is given twice")
        try:
            out[name] = parse_value(declared[name], rb.declaration(name), text)
        except ValueError as exc:
            raise CommandLineError(f"--param {name}={text}: {exc}") from None
    return out


# --- building the commands -------------------------------------------------------------------------


def _common_options() -> list[TyperOption]:
    return [
        TyperOption(param_decls=["--inventory", "-i", "inventory"], metavar="PATH",
                    help="Inventory file (only this one is searched; default: $KAFKAOPS_INVENTORY, else the first "
                         "of ~/.config/kafkaops/inventory/ and /etc/kafkaops/inventory/ holding any)."),
        TyperOption(param_decls=["--reason", "-r", "reason"],
                    help="Why (required unless --dry-run; goes to the audit log)."),
        TyperOption(param_decls=["--task", "task"], help="Task or ticket id, e.g. T123456."),
        TyperOption(param_decls=["--yes", "-y", "yes"], is_flag=True, default=False,
                    help="Do not ask for confirmation after showing the plan."),
        TyperOption(param_decls=["--dry-run", "dry_run"], is_flag=True, default=False,
                    help="Observe and plan for real, show the plan, change nothing."),
        TyperOption(param_decls=["--output", "-o", "output"], **_choice([o.value for o in PlanOutput]),
                    default=PlanOutput.auto.value, show_default=True,
                    help="Plan format: auto (a table on a terminal of 120+ columns, else plain), table, plain "
                         "(one block per step, a roll's steps once: for narrow terminals and logs), "
                         "markdown (change review), json."),
        TyperOption(param_decls=["--save-plan", "save_plan"], metavar="PATH",
                    help="Write the plan (with its fingerprint) for `kafkaops apply`."),
        TyperOption(param_decls=["--confirmed", "confirmed"], multiple=True, metavar="NAME",
                    help="A manual checkpoint of the inventory that holds (e.g. changeprop: the Services team "
                         "was told); repeatable. --yes does not confirm one; without it a terminal asks."),
    ]


def _key(name: str) -> str:
    return f"p_{name}"


def _check_flags(rb: Runbook) -> None:
    for p in rb.parameters:
        decl = rb.declaration(p.name)
        for flag in decl.flags:
            if flag in COMMON_FLAGS:
                where = f"{rb.source}:{decl.line}" if decl.line else rb.source
                raise ConfigError(f"{where}: parameters.{p.name}: {flag} is an option of every procedure command",
                                  hint="give the parameter another flag (common: " + ", ".join(COMMON_FLAGS) + ")")


def _resolved(rb: Runbook) -> set[str]:
    return {name for name, _ in rb.command.resolve}


def _alias_params(rb: Runbook) -> list[Any]:  # click Parameters: TyperArgument, TyperOption
    """Positional arguments, TARGET, the common options, then every flagged parameter in YAML order."""
    params: list[TyperArgument | TyperOption] = []
    resolved = _resolved(rb)
    for name in rb.command.arguments:  # always given: an optional one would take TARGET's place
        p = rb.param(name)
        assert p is not None
        params.append(TyperArgument(param_decls=[_key(name)], metavar=name.upper(), required=True,
                                    type=_converter(p, rb.declaration(name)), help=p.help))
    metavar, target_help = TARGET_HELP[rb.command.target]
    params.append(TyperArgument(param_decls=["target"], metavar=metavar, required=True, help=target_help,
                                shell_complete=complete.for_target(rb.command.target)))
    params += _common_options()
    for p in rb.parameters:
        decl = rb.declaration(p.name)
        if not decl.flags:
            continue
        if p.type == "bool":  # a switch: sets the opposite of the default (--force, --no-election)
            params.append(TyperOption(param_decls=[*decl.flags, _key(p.name)], is_flag=True, default=False,
                                      help=decl.flag_help or p.help))
            continue
        required = p.required and p.default is None and p.name not in resolved
        params.append(TyperOption(param_decls=[*decl.flags, _key(p.name)], type=_converter(p, decl),
                                  metavar=_metavar(p, decl), required=required, default=p.default,
                                  show_default=p.default is not None, help=decl.flag_help or p.help))
    return params


class _RunCommand(TyperCommand):
    """``kafkaops run RUNBOOK``: its help ends with the runbook's parameters (name, type, default, choices)."""

    runbook: Runbook

    def format_options(self, ctx: Any, formatter: Any) -> None:  # click's Context and HelpFormatter
        from kafkaops.cli.runbook_text import bounds_text

        super().format_options(ctx, formatter)
        rb = self.runbook
        resolved = dict(rb.command.resolve)
        rows = []
        for p in rb.parameters:
            decl = rb.declaration(p.name)
            what: list[str] = [p.type + (f" {bounds_text(p)}" if bounds_text(p) else "")]
            if decl.choices:
                what.append("one of " + "|".join(_text(p, c) for c in decl.choices))
            if p.name in resolved:
                what.append(f"default: resolved by {resolved[p.name].name}")
            elif p.default is not None:
                what.append(f"default: {_text(p, p.default)}")
            elif p.required:
                what.append("required")
            rows.append((p.name, f"{p.help}  [{'; '.join(what)}]" if p.help else f"[{'; '.join(what)}]"))
        if rows:
            with formatter.section("Parameters (--param NAME=VALUE)"):
                formatter.write_dl(rows)


#: The keyword under which :class:`_AliasCommand` tells its callback which parameters the operator typed.
_TYPED = "_typed_on_the_command_line"


class _AliasCommand(TyperCommand):
    """``kafkaops NAME``: a parameter the operator typed (or set in the environment) is bound to the run; one
    left at its default is not, so the runbook's own default (or its resolver) decides. The callback is told
    which were typed: click knows each value's source only while the command is being invoked."""

    def invoke(self, ctx: Any) -> Any:
        typed = frozenset(k for k in ctx.params if _typed(ctx, k))
        assert self.callback is not None
        return ctx.invoke(self.callback, **ctx.params, **{_TYPED: typed})


def _typed(ctx: Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)  # click's ParameterSource, compared by name (typer keeps click's)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def build_command(rb: Runbook, *, alias: bool) -> TyperCommand:
    """The click command of ``rb``: the alias ``kafkaops NAME`` or ``kafkaops run NAME``."""
    _check_flags(rb)
    name = rb.name
    metavar = TARGET_HELP[rb.command.target][0]
    if alias:
        def alias_callback(**kw: Any) -> None:
            typed: frozenset[str] = kw.pop(_TYPED)
            given = {p.name: (not p.default) if p.type == "bool" else kw[_key(p.name)]
                     for p in rb.parameters if _key(p.name) in typed}
            run_procedure(rb, kw["target"], given, alias=True, **_common(kw))

        return _AliasCommand(name, callback=alias_callback, params=_alias_params(rb), rich_markup_mode=None,
                             help=rb.command.help or rb.summary,
                             epilog=f"Runbook {Path(rb.source).name}: `kafkaops run {name} --help` lists its "
                                    "parameters.")

    def run_callback(**kw: Any) -> None:
        run_procedure(rb, kw["target"], parse_params(rb, list(kw.get("param") or ())), alias=False, **_common(kw))

    what = "a host (short name or FQDN)" if rb.command.target == "host" else "a cluster of the inventory"
    cmd = _RunCommand(name, callback=run_callback, rich_markup_mode=None, params=[
        TyperArgument(param_decls=["target"], metavar=metavar, required=True, help=TARGET_HELP[rb.command.target][1],
                      shell_complete=complete.for_target(rb.command.target)),
        *_common_options(),
        TyperOption(param_decls=["--param", "-p", "param"], multiple=True, metavar="NAME=VALUE",
                    help="A runbook parameter (repeatable); listed below."),
    ], help=f"{rb.summary.rstrip('.')}.\n\n{metavar} is {what}.")
    cmd.runbook = rb
    return cmd


def _common(kw: Mapping[str, Any]) -> dict[str, Any]:
    return {"inventory": Path(kw["inventory"]) if kw.get("inventory") else None, "reason": kw.get("reason"),
            "task": kw.get("task"), "yes": bool(kw.get("yes")), "dry_run": bool(kw.get("dry_run")),
            "output": PlanOutput(kw.get("output") or PlanOutput.auto.value),
            "save_plan": Path(kw["save_plan"]) if kw.get("save_plan") else None,
            "confirmed": tuple(kw.get("confirmed") or ())}


def _invalid(name: str, error: ConfigError) -> TyperCommand:
    """A command standing for a runbook that does not load: running it says why (exit 3)."""

    def callback(**_: Any) -> None:
        raise error

    return TyperCommand(name, callback=callback, rich_markup_mode=None, add_help_option=False,
                        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
                        help=f"(invalid runbook: {error.message})")


def _load(path: str) -> Runbook | ConfigError:
    from kafkaops.catalog import parsed

    return parsed(path)


def _dirs() -> list[Path]:
    from kafkaops.catalog import runbook_dirs

    return runbook_dirs()


def alias_names() -> list[str]:
    """The runbooks that declare a command (``command:``), by name: the generated commands."""
    from kafkaops.catalog import runbook_files

    out = []
    for name, path in runbook_files(_dirs()).items():
        rb = _load(str(path))
        if not isinstance(rb, ConfigError) and rb.command.alias:
            out.append(name)
    return sorted(out)


def alias_command(name: str) -> TyperCommand | None:
    """``kafkaops NAME``: the generated command of runbook NAME, if it declares one (its file alone is
    read: ``kafkaops reboot`` parses reboot.yaml and nothing else)."""
    from kafkaops.catalog import runbook_file

    path = runbook_file(name, _dirs())
    if path is None:
        return None
    rb = _load(str(path))
    if isinstance(rb, ConfigError):
        return _invalid(name, rb)
    if not rb.command.alias:
        return None
    try:
        return build_command(rb, alias=True)
    except ConfigError as exc:
        return _invalid(name, exc)


def is_runbook(name: str) -> bool:
    from kafkaops.catalog import runbook_file

    return runbook_file(name, _dirs()) is not None


class RunGroup(TyperGroup):
    """``kafkaops run``: one subcommand per runbook, built when named (or listed by ``--help``)."""

    def list_commands(self, ctx: Any) -> list[str]:
        from kafkaops.catalog import runbook_files

        return sorted(runbook_files(_dirs()))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        from kafkaops.catalog import runbook_file

        path = runbook_file(cmd_name, _dirs())
        if path is None:
            return None
        rb = _load(str(path))
        if isinstance(rb, ConfigError):
            return _invalid(cmd_name, rb)
        try:
            return build_command(rb, alias=False)
        except ConfigError as exc:
            return _invalid(cmd_name, exc)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except USAGE_ERROR as error:
            exc = cast(Any, error)
            known = self.list_commands(ctx)
            close = difflib.get_close_matches(args[0], known, n=1) if args else []
            exc.message = (f"no runbook named {args[0]!r}" if args else exc.message) + (
                f"; did you mean {close[0]!r}?" if close else "") + " (`kafkaops run --help` lists them)"
            raise


# --- running -----------------------------------------------------------------------------------------


def _confirm(yes: bool) -> Any:
    """The operator's answer to a step's question (go on after the canary?): yes with --yes, asked on a
    terminal, else nobody to ask (None: the run pauses there and ``kafkaops resume`` is the answer)."""
    if yes:
        return lambda _question: True
    if sys.stdin.isatty():
        return lambda question: bool(typer.confirm(question, default=False))
    return None


def _spell(rb: Runbook, name: str, value: Any, alias: bool) -> str:
    from kafkaops.cli.runbook_text import spell

    return spell(rb, name, value, alias=alias)


def _hint(rb: Runbook, name: str, alias: bool) -> str:
    decl = rb.declaration(name)
    if alias and name in rb.command.arguments:
        return name.upper()
    return decl.flags[0] if alias and decl.flags else f"--param {name}"


def _check_command_line(rb: Runbook, given: Mapping[str, Any], alias: bool) -> None:
    """Contradicting values and missing parameters: usage errors, before anything else."""
    from kafkaops.engine.step import coerce_param

    def value(name: str) -> Any:
        if name in given:
            return given[name]
        p = rb.param(name)
        return coerce_param(p, p.default) if p is not None and p.default is not None else None

    for combo in rb.command.conflicts:
        if all(value(n) == v for n, v in combo.items()):
            spelled = [_spell(rb, n, v, alias) for n, v in combo.items()]
            raise BadParameter(f"{', '.join(spelled[:-1])} and {spelled[-1]} contradict each other",
                               param_hint=_hint(rb, list(combo)[-1], alias))
    resolved = _resolved(rb)
    for p in rb.parameters:
        if p.required and p.default is None and p.name not in given and p.name not in resolved:
            raise CommandLineError(f"runbook {rb.name} needs {_hint(rb, p.name, alias)}"
                             + ("" if alias and rb.declaration(p.name).flags else f"=<{p.type}>")
                             + (f" ({p.help})" if p.help else ""))


def require_reason(reason: str | None, dry_run: bool) -> None:
    if not dry_run and not (reason or "").strip():  # a blank reason (--reason "$EMPTY") is none
        raise BadParameter("--reason is required for anything that changes state (or use --dry-run)",
                           param_hint="--reason")


def given_options(rb: Runbook, given: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """``given`` plus each of a command's own ``options`` that the runbook declares as a parameter, parsed as
    the runbook types it (``--syn-window 2s``: a duration); an option the runbook does not take is left out
    (a controllers-only stage has no SYN window)."""
    out = dict(given)
    for name, value in options.items():
        param = rb.param(name)
        if param is None:
            continue
        try:
            out[name] = parse_value(param, rb.declaration(name), value) if isinstance(value, str) else value
        except ValueError as exc:
            raise BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None
    return out


def run_procedure(rb: Runbook, target: str, given: Mapping[str, Any], *, inventory: Path | None,
                  reason: str | None, task: str | None, yes: bool, dry_run: bool, output: Output | PlanOutput,
                  save_plan: Path | None, alias: bool = False, confirmed: tuple[str, ...] = ()) -> None:
    """Invoke ``rb`` on TARGET with the parameters ``given`` on the command line (typed).

    Command-line mistakes first (no reason, contradicting values, a missing parameter), then the product's
    :func:`kafkaops.procedure.plan` (the runbook checked against the step kinds and hooks, the inventory
    lookup, the runbook's hooks, the plan), then the plan shown, confirmed and run (:func:`_show_and_run`).
    """
    from kafkaops import procedure
    from kafkaops.queries.selectors import InvalidParameter, NothingToDo
    from kafkaops.templates import check_values

    require_reason(reason, dry_run)
    _check_command_line(rb, given, alias)
    check_values(given)  # a revision, a repository: refused (exit 3) before any system is asked
    if save_plan is not None:  # before the dry-run asks anything: its plan must not be lost at the end
        check_writable(save_plan, "the plan", "--save-plan PATH", parents=True)
    request = procedure.Request(rb, target, given, inventory=inventory, reason=reason or "", task=task,
                                confirm=_confirm(yes), say=_echo, status=live_status())
    try:
        with waiting(f"planning {rb.name} {target}: asking the cluster"):
            planned = procedure.plan(request)
    except InvalidParameter as exc:
        raise BadParameter(exc.message, param_hint=_hint(rb, exc.param, alias)) from None
    except NothingToDo as exc:
        from kafkaops.cli.render import nothing_to_do

        nothing_to_do(str(exc), output)
        return
    except procedure.BadBatch as exc:
        raise BadParameter(str(exc), param_hint="--batch") from None
    _show_and_run(planned, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan, confirmed=confirmed)


def run_runbook(runbook: Runbook | str, cluster: Any, hosts: list[Any], params: dict[str, Any], *,
                reason: str | None, task: str | None, yes: bool, dry_run: bool, output: Output | PlanOutput,
                save_plan: Path | None, confirm: Callable[[str], bool] | None = None, env: Any = None,
                confirmed: tuple[str, ...] = (), show: bool = True) -> None:
    """Plan, show, confirm, run: the shape of every state-changing command that picks its targets itself.

    The plan is always made in a dry-run environment (its adapters refuse every write; ``env`` when the
    caller already built one); the run gets a fresh environment of the same inventory. ``confirm``: how a
    step asks the operator a question (e.g. after a canary). ``confirmed``: the ``--confirmed NAME``
    checkpoints; every checkpoint the plan asks for must be confirmed (there, or at a terminal prompt)
    before the run starts, or nothing starts (exit 13). ``show``: print the plan (a command whose own JSON
    is its output saves the plan without printing it).
    """
    from kafkaops import procedure
    from kafkaops.catalog import find_runbook, load_plugins

    require_reason(reason, dry_run)
    load_plugins()
    rb = find_runbook(runbook) if isinstance(runbook, str) else runbook
    try:
        with waiting(f"planning {rb.name}: asking the cluster"):
            planned = procedure.plan_run(rb, cluster, hosts, params, reason=reason or "", task=task, say=_echo,
                                         status=live_status(), confirm=confirm, env=env)
    except procedure.BadBatch as exc:
        raise BadParameter(str(exc), param_hint="--batch") from None
    _show_and_run(planned, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan, confirmed=confirmed,
                  show=show)


def _show_and_run(planned: Planned, *, yes: bool, dry_run: bool, output: Output | PlanOutput,
                  save_plan: Path | None, confirmed: tuple[str, ...], show: bool = True) -> None:
    """Show the plan (and save it), then — unless ``--dry-run`` — confirm its checkpoints, ask, and run it.
    The plan's environment is closed on every way out (the run takes its connections over)."""
    try:
        _show_then_run(planned, yes=yes, dry_run=dry_run, output=output, save_plan=save_plan, confirmed=confirmed,
                       show=show)
    finally:
        planned.close()


def _show_then_run(planned: Planned, *, yes: bool, dry_run: bool, output: Output | PlanOutput,
                   save_plan: Path | None, confirmed: tuple[str, ...], show: bool) -> None:
    from kafkaops import procedure
    from kafkaops.cli.common import checkpoint_prompt, confirm_checkpoints
    from kafkaops.cli.plan_render import render_plan, render_plan_text, wants_table
    from kafkaops.engine.plan import save_plan as write_plan

    plan = planned.plan
    if not show:
        pass
    elif output == Output.json:
        sys.stdout.write(plan.to_json())
    elif output == Output.markdown:
        sys.stdout.write(plan.to_markdown())
    elif output == PlanOutput.table or (output != PlanOutput.plain and wants_table(console.is_terminal,
                                                                                     console.width)):
        console.print(render_plan(plan))
    else:
        sys.stdout.write(render_plan_text(plan, width=console.width))
        sys.stdout.flush()
    if save_plan is not None:
        write_plan(plan, save_plan)
        err_console.print(f"plan saved to {save_plan}; run it with `kafkaops apply {save_plan}`")
    if dry_run:
        return
    checkpoints = confirm_checkpoints(planned.checkpoints(), confirmed)  # before any lock or change
    ask = checkpoint_prompt()
    if not yes:
        if not sys.stdin.isatty():
            raise BadParameter("not confirmed: no terminal to ask on; pass --yes after reviewing the plan",
                               param_hint="--yes")
        targets = ", ".join(h.name for h in planned.hosts) or planned.bound.cluster
        if not typer.confirm(f"Run {planned.runbook.name} on {targets}?", default=False):
            raise Declined(f"{planned.runbook.name} on {targets} not started: declined at the prompt; nothing "
                           "was changed and no run exists", hint="run the command again when the plan is right")
    result = procedure.start(planned, confirmed=checkpoints, ask=ask)
    err_console.print(f"journal: {result.journal}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``kafkaops run`` (the generated aliases come from the root group, see :mod:`kafkaops.cli.main`)."""
    sub = typer.Typer(
        cls=RunGroup, rich_markup_mode=None, no_args_is_help=True,
        help="Run a runbook on TARGET: `kafkaops run RUNBOOK TARGET [--param NAME=VALUE ...]`. "
             "`kafkaops run RUNBOOK --help` lists its parameters.",
    )
    app.add_typer(sub, name="run")
