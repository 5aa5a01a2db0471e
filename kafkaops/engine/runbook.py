"""Runbooks are data: the runbook model, and loading and validating a runbook file.

A runbook replaces a wiki page, so it must read like one and fail like a linter: every mistake (unknown
step kind, missing or unknown parameter, a duration such as ``5x``, a template naming something that
does not exist) is a :class:`~kafkaops.errors.ConfigError` naming the file, the line, the step index and
the fix, raised when the runbook is *loaded*, not forty minutes into a roll.

Loading is two checks: :func:`load_runbook` parses and validates the document (its shape, parameters,
templates, ``command:``), which needs no step kind; :func:`check_step_kinds` then validates the steps of
the parsed runbook against the registered step kinds. A procedure command parses its runbook once to
build its command line (no step kind imported at start-up) and checks the kinds of that same object
when the run starts.

Rolling runbooks declare ``targets: {order: controller_last|inventory, one_at_a_time: true, gate: ...}``.
The order is data for the caller, which knows the cluster (kafkaops orders the controller last,
because a controller election per broker bounce caused outages: WMF T399005, Yelp #150); the gate
(a step run between targets, typically "wait until in sync") replaces the fixed
sleeps that were either wasteful or unsafe.

A runbook also *declares its command line* (``command:`` and the ``flag``/``choices`` of each parameter);
the engine only validates and carries the declarations (:class:`ParamDecl`, :class:`CommandSpec`,
:class:`HookRef`). What a target *is*, and what the named hooks of ``select``/``resolve``/``checks`` do,
belongs to the layers that know the systems; how a parameter is spelled in usage text and docs, to the
CLI (:mod:`kafkaops.cli.runbook_text`). Binding a runbook to targets is :mod:`kafkaops.engine.binding`;
finding runbook files by name is :mod:`kafkaops.catalog`.

The YAML format is documented in ``runbooks/README.md``.

Over 700 lines on purpose: it is one job, the runbook format's validator, and most of it is the one-line
error (file:line, the key, the fix) of each key of that format; split by key, the format would have no
single place to read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.engine.step import (
    PARAM_TYPES,
    Param,
    coerce_param,
    parse_duration,
    require_kind,
)
from kafkaops.errors import ConfigError

TEMPLATE_ROOTS = ("host", "target", "cluster", "params")
ORDERS = ("inventory", "controller_last")
TARGET_KINDS = ("host", "cluster")
_TOP_KEYS = {"name", "summary", "description", "parameters", "command", "targets", "steps", "retry"}
_PARAM_KEYS = ("type", "default", "required", "help", "choices", "min", "max", "flag", "flag_help")
_COMMAND_KEYS = ("alias", "help", "target", "arguments", "checks", "select", "resolve", "conflicts")
_PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_HOOK_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_LONG_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
_SHORT_FLAG = re.compile(r"^-[A-Za-z]$")
_TARGET_KEYS = {"order", "one_at_a_time", "gate"}
_LONG_STEP_KEYS = {"step", "params", "title", "retry"}
TEMPLATE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class StepSpec:
    """One step as written in the YAML (parameters unbound: templates still in place)."""

    index: int  # 1-based, as operators count
    kind: str
    params: Mapping[str, Any]
    title: str = ""
    retry: Mapping[str, Any] | None = None
    line: int = 0


@dataclass(frozen=True)
class TargetsSpec:
    """How a rolling runbook walks its targets."""

    order: str = "inventory"
    one_at_a_time: bool = True
    gate: StepSpec | None = None


@dataclass(frozen=True)
class ParamDecl:
    """How a runbook parameter is given on the command line (beyond its :class:`Param`).

    Attributes:
        name: The parameter.
        flags: The alias's option names (``--force``, ``-s``), long first; empty when the parameter is
            positional (``command.arguments``) or declared ``flag: false`` (then only
            ``kafkaops run NAME --param NAME=VALUE`` sets it). A ``bool`` flag is a switch that sets the
            opposite of the default (``--no-election`` for a default-true ``election``).
        choices: The values allowed (coerced to the parameter's type); empty: any value of the type.
        flag_help: The flag's help when it should read differently from the parameter's (a switch
            that turns a default-true parameter off: "Skip the preferred-replica election.").
        line: Where it is declared (1-based; 0 unknown), for errors found later (by the CLI).
    """

    name: str
    flags: tuple[str, ...] = ()
    choices: tuple[Any, ...] = ()
    flag_help: str = ""
    line: int = 0


@dataclass(frozen=True)
class HookRef:
    """A named hook of ``command.select``/``resolve``/``checks``.

    The engine does not know the hooks (they live with the step kinds, which know the systems); it checks
    the shape and that every argument names a declared parameter. An argument maps one of the hook's
    roles to the parameter that plays it: ``{hosts_running_service: {service: svc}}``.
    """

    name: str
    args: Mapping[str, str] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class CommandSpec:
    """How the procedure is invoked: ``kafkaops run NAME TARGET`` and, with ``alias``, ``kafkaops NAME``.

    Attributes:
        alias: ``kafkaops NAME`` is a command of its own (the runbook has a ``command:`` block).
        help: The alias's help text (default: the summary).
        target: What TARGET names: ``host`` (short name or FQDN) or ``cluster``.
        arguments: Parameters the alias takes as positional arguments, before TARGET.
        checks: Hooks run first, before targets are selected (e.g. "Kafka answers").
        select: Hooks that narrow the targets, in order (e.g. the hosts running the service).
        resolve: ``(parameter, hook)``: fills the parameter when the command line does not give it.
        conflicts: Parameter values that may not be given together (``{election: false,
            election_at_end: true}``), coerced to the parameters' types.
        line: Where ``command:`` is (0: no block, or unknown).
    """

    alias: bool = False
    help: str = ""
    target: str = "host"
    arguments: tuple[str, ...] = ()
    checks: tuple[HookRef, ...] = ()
    select: tuple[HookRef, ...] = ()
    resolve: tuple[tuple[str, HookRef], ...] = ()
    conflicts: tuple[Mapping[str, Any], ...] = ()
    line: int = 0


@dataclass(frozen=True)
class Runbook:
    """A validated runbook."""

    name: str
    summary: str
    steps: tuple[StepSpec, ...]
    description: str = ""
    parameters: tuple[Param, ...] = ()
    targets: TargetsSpec | None = None
    retry: Mapping[str, Any] | None = None
    source: str = ""
    sha256: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)
    declarations: Mapping[str, ParamDecl] = field(default_factory=dict)
    command: CommandSpec = field(default_factory=CommandSpec)

    @property
    def rolling(self) -> bool:
        return self.targets is not None

    def param(self, name: str) -> Param | None:
        """The declared parameter ``name``, or None."""
        return next((p for p in self.parameters if p.name == name), None)

    def declaration(self, name: str) -> ParamDecl:
        """How parameter ``name`` is given on the command line."""
        return self.declarations.get(name) or ParamDecl(name)


# --- loading ----------------------------------------------------------------------------------------


def _line_map(text: str) -> dict[str, Any]:
    """Line numbers (1-based) from the YAML node tree: of each step, of the gate, and (``paths``) of every
    key and list item under ``parameters`` and ``command``, by key path (``("command", "resolve", "rev")``)."""
    import yaml

    out: dict[str, Any] = {"steps": [], "gate": 0, "paths": {}}
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return out
    if not isinstance(root, yaml.MappingNode):
        return out
    for key, value in root.value:
        if key.value == "steps" and isinstance(value, yaml.SequenceNode):
            out["steps"] = [item.start_mark.line + 1 for item in value.value]
        if key.value == "targets" and isinstance(value, yaml.MappingNode):
            for k2, v2 in value.value:
                if k2.value == "gate":
                    out["gate"] = v2.start_mark.line + 1
        if key.value in ("parameters", "command"):
            _node_lines(value, (key.value,), key.start_mark.line + 1, out["paths"])
    return out


def _node_lines(node: Any, path: tuple[Any, ...], line: int, out: dict[tuple[Any, ...], int]) -> None:
    import yaml

    out[path] = line
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _node_lines(v, (*path, k.value), k.start_mark.line + 1, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, (*path, i), item.start_mark.line + 1, out)


class _Where:
    """``file:line`` of a key path of the document (``file`` alone when the line is unknown)."""

    def __init__(self, source: str, paths: Mapping[tuple[Any, ...], int]) -> None:
        self.source, self.paths = source, paths

    def line(self, *path: Any) -> int:
        while path and path not in self.paths:
            path = path[:-1]
        return self.paths.get(path, 0) if path else 0

    def __call__(self, *path: Any) -> str:
        line = self.line(*path)
        return f"{self.source}:{line}" if line else self.source


def load_runbook(path: str | Path, *, check_kinds: bool = True) -> Runbook:
    """Load and validate one runbook file.

    Args:
        path: The YAML file.
        check_kinds: Validate step kinds and their parameters against the registry (needs the step
            kinds registered); ``False`` only parses (fast listing).

    Raises:
        ConfigError: Naming the file, line, step index and the fix.
    """
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read runbook: {exc.strerror}") from exc
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    return parse_runbook(doc, source=str(p), text=text, check_kinds=check_kinds)


def parse_runbook(
    doc: Any, *, source: str = "<runbook>", text: str | None = None, check_kinds: bool = True
) -> Runbook:
    """Validate an already-parsed runbook document (see :func:`load_runbook`)."""
    if text is None:
        text = json.dumps(doc, sort_keys=True, default=str)
    lines: dict[str, Any] = _line_map(text) if not text.lstrip().startswith("{") else {"steps": [], "gate": 0}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: a runbook is a YAML mapping with name, summary and steps")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}",
            hint="allowed: " + ", ".join(sorted(_TOP_KEYS)),
        )
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: missing 'name'", hint="add `name: <runbook name>` at the top")
    stem = Path(source).stem
    if source.endswith((".yaml", ".yml")) and stem != name:
        raise ConfigError(f"{source}: name {name!r} does not match the file name", hint=f"use name: {stem}")
    summary = doc.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise ConfigError(f"{source}: missing 'summary'", hint="add a one-line `summary:` for list and docs")

    where = _Where(source, lines.get("paths", {}))
    parameters, declarations = _parse_parameters(doc.get("parameters") or {}, where)
    param_names = {p.name for p in parameters}

    raw_steps = doc.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ConfigError(
            f"{source}: 'steps' must be a non-empty list", hint="e.g. steps: [{kind: {param: v}}]"
        )
    step_lines: list[int] = list(lines["steps"])
    steps = tuple(
        _parse_step(
            raw,
            i + 1,
            source,
            step_lines[i] if i < len(step_lines) else 0,
            check_kinds,
            param_names,
        )
        for i, raw in enumerate(raw_steps)
    )

    targets = None
    raw_targets = doc.get("targets")
    if raw_targets is not None:
        if not isinstance(raw_targets, Mapping):
            raise ConfigError(
                f"{source}: 'targets' must be a mapping", hint="targets: {order: controller_last}"
            )
        bad = sorted(set(raw_targets) - _TARGET_KEYS)
        if bad:
            raise ConfigError(
                f"{source}: targets: unknown key(s) {', '.join(map(repr, bad))}",
                hint="allowed: " + ", ".join(sorted(_TARGET_KEYS)),
            )
        order = raw_targets.get("order", "inventory")
        if order not in ORDERS:
            raise ConfigError(
                f"{source}: targets.order {order!r} is unknown", hint="use one of " + ", ".join(ORDERS)
            )
        one = raw_targets.get("one_at_a_time", True)
        if one is not True:
            raise ConfigError(
                f"{source}: targets.one_at_a_time must be true",
                hint="kafkaops rolls one target at a time; parallel rolls are not supported",
            )
        gate = None
        if raw_targets.get("gate") is not None:
            gate = _parse_step(
                raw_targets["gate"],
                0,
                source,
                int(lines["gate"]),
                check_kinds,
                param_names,
                label="targets.gate",
            )
        targets = TargetsSpec(order=order, one_at_a_time=True, gate=gate)

    retry = doc.get("retry")
    if retry is not None:
        _check_retry(retry, f"{source}: retry")

    command, declarations = _parse_command(doc, parameters, declarations, where, rolling=targets is not None)

    return Runbook(
        name=name,
        summary=summary.strip(),
        description=str(doc.get("description") or "").strip(),
        steps=steps,
        parameters=parameters,
        targets=targets,
        retry=retry,
        source=source,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        document=doc,
        declarations=declarations,
        command=command,
    )


def _default_flag(param: Param) -> str:
    """The option a parameter gets when it declares no ``flag`` (the YAML format's rule, applied at load so
    that two parameters claiming one option are refused in the file): ``--NAME`` (``_`` -> ``-``); for a
    bool whose default is true, the switch that turns it off, ``--no-NAME``."""
    dashed = param.name.replace("_", "-")
    return f"--no-{dashed}" if param.type == "bool" and param.default is True else f"--{dashed}"


def _parse_parameters(raw: Any, where: _Where) -> tuple[tuple[Param, ...], dict[str, ParamDecl]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where('parameters')}: 'parameters' must be a mapping of name -> {{type, default, help}}")
    out = []
    decls: dict[str, ParamDecl] = {}
    owner: dict[str, str] = {}  # flag -> parameter, to refuse duplicates
    for pname, spec in raw.items():
        loc = f"{where('parameters', pname)}: parameters.{pname}"
        if not isinstance(pname, str) or not _PARAM_NAME.match(pname):
            raise ConfigError(f"{loc}: bad parameter name {pname!r}",
                              hint="use lower-case letters, digits and _ (it becomes {params.NAME} and --NAME)")
        if not isinstance(spec, Mapping):
            spec = {"default": spec, "type": _infer_type(spec)}
        bad = sorted(set(spec) - set(_PARAM_KEYS))
        if bad:
            raise ConfigError(f"{loc}: unknown key(s) {bad}", hint="allowed: " + ", ".join(_PARAM_KEYS))
        try:
            param = Param(
                name=pname,
                type=spec.get("type", "str"),
                required=bool(spec.get("required", "default" not in spec)),
                default=spec.get("default"),
                help=str(spec.get("help", "")),
            )
        except ValueError as exc:
            raise ConfigError(f"{loc}: {exc}", hint="types: " + ", ".join(PARAM_TYPES)) from exc
        param = _with_bounds(param, spec, where, pname)
        default = None
        if param.default is not None:
            try:
                default = coerce_param(param, param.default)
            except ValueError as exc:
                raise ConfigError(f"{where('parameters', pname, 'default')}: parameters.{pname}: bad default: "
                                  f"{exc}") from exc
        choices = _parse_choices(param, spec.get("choices"), default, where, pname)
        flags = _parse_flags(param, spec, where, pname, owner)
        flag_help = spec.get("flag_help", "")
        if not isinstance(flag_help, str) or (flag_help and not flags):
            raise ConfigError(f"{where('parameters', pname, 'flag_help')}: parameters.{pname}.flag_help: "
                              + ("expected text" if not isinstance(flag_help, str) else "the parameter has no flag"))
        out.append(param)
        decls[pname] = ParamDecl(pname, flags=flags, choices=choices, flag_help=flag_help,
                                 line=where.line("parameters", pname))
    return tuple(out), decls


def _with_bounds(param: Param, spec: Mapping[str, Any], where: _Where, pname: str) -> Param:
    """``min``/``max`` of an int, float or duration parameter (a duration's in its own notation)."""
    import dataclasses

    bounds: dict[str, float] = {}
    for key in ("min", "max"):
        if key not in spec:
            continue
        loc = f"{where('parameters', pname, key)}: parameters.{pname}.{key}"
        if param.type not in ("int", "float", "duration"):
            raise ConfigError(f"{loc}: a {param.type} parameter has no {key}",
                              hint="bounds are for int, float and duration parameters")
        try:
            bounds[key] = float(coerce_param(dataclasses.replace(param, type="float" if param.type == "int"
                                                                 else param.type), spec[key]))
        except ValueError as exc:
            raise ConfigError(f"{loc}: {exc}") from exc
    if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
        raise ConfigError(f"{where('parameters', pname)}: parameters.{pname}: min is above max")
    return dataclasses.replace(param, min=bounds.get("min"), max=bounds.get("max")) if bounds else param


def _parse_choices(param: Param, raw: Any, default: Any, where: _Where, pname: str) -> tuple[Any, ...]:
    if raw is None:
        return ()
    loc = f"{where('parameters', pname, 'choices')}: parameters.{pname}.choices"
    if param.type in ("bool", "list", "map", "any"):
        raise ConfigError(f"{loc}: a {param.type} parameter cannot have choices",
                          hint="choices are for str, int, float and duration parameters")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{loc}: expected a non-empty list", hint="e.g. choices: [fast, safe]")
    choices: list[Any] = []
    for value in raw:
        try:
            coerced = coerce_param(param, value)
        except ValueError as exc:
            raise ConfigError(f"{loc}: {exc}", hint=f"every choice must be a {param.type}") from exc
        if coerced in choices:
            raise ConfigError(f"{loc}: {value!r} is listed twice")
        choices.append(coerced)
    if default is not None and default not in choices:
        raise ConfigError(f"{where('parameters', pname, 'default')}: parameters.{pname}: the default "
                          f"{param.default!r} is not one of the choices",
                          hint="add it to choices, or choose a default among " + ", ".join(map(str, raw)))
    return tuple(choices)


def _parse_flags(param: Param, spec: Mapping[str, Any], where: _Where, pname: str,
                 owner: dict[str, str]) -> tuple[str, ...]:
    loc = f"{where('parameters', pname, 'flag')}: parameters.{pname}.flag"
    raw = spec.get("flag", None) if "flag" in spec else _default_flag(param)
    if raw is False or raw is None:
        return ()
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{loc}: expected an option name or a list of them, got {raw!r}",
                          hint="e.g. flag: --force, or flag: [--service, -s]; flag: false for none")
    for name in names:
        if not (_LONG_FLAG.match(name) or _SHORT_FLAG.match(name)):
            raise ConfigError(f"{loc}: {name!r} is not an option name",
                              hint="write --lower-case-words, or - and one letter for a short alias")
        if name in owner:
            raise ConfigError(f"{loc}: {name} is already the flag of parameter {owner[name]!r}",
                              hint="give each parameter its own flag")
        owner[name] = pname
    if len(set(names)) != len(names):
        raise ConfigError(f"{loc}: an option name is listed twice")
    longs = [n for n in names if n.startswith("--")]
    if not longs:
        raise ConfigError(f"{loc}: needs a long option name besides {names[0]}",
                          hint=f"e.g. flag: [{_default_flag(param)}, {names[0]}]")
    return tuple(longs + [n for n in names if not n.startswith("--")])


def _hook_ref(raw: Any, loc: str, params: set[str], line: int) -> HookRef:
    """``NAME`` or ``{NAME: {ROLE: PARAMETER, ...}}``."""
    args: Any = {}
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((name, args),) = raw.items()
        args = args if args is not None else {}
    else:
        name = raw
    if not isinstance(name, str) or not _HOOK_NAME.match(name):
        raise ConfigError(f"{loc}: expected a hook name, or {{hook: {{role: parameter}}}}, got {raw!r}",
                          hint="hook names are lower_case_words; `kafkaops runbooks hooks` lists them")
    if not isinstance(args, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in args.items()):
        raise ConfigError(f"{loc}: {name}: arguments map a role to a parameter name, got {args!r}",
                          hint=f"e.g. {{{name}: {{service: service}}}}")
    for role, pname in args.items():
        if pname not in params:
            raise ConfigError(f"{loc}: {name}: {role}: {pname!r} names no parameter",
                              hint="declared: " + (", ".join(sorted(params)) or "none"))
    return HookRef(name=name, args=dict(args), line=line)


def _parse_command(doc: Mapping[str, Any], parameters: tuple[Param, ...], declarations: dict[str, ParamDecl],
                   where: _Where, *, rolling: bool) -> tuple[CommandSpec, dict[str, ParamDecl]]:
    """Validate ``command:`` (see :class:`CommandSpec`); positional parameters lose their flags."""
    raw = doc.get("command")
    default_target = "cluster" if rolling else "host"
    if raw is None:
        return CommandSpec(target=default_target), declarations
    loc = f"{where('command')}: command"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{loc}: expected a mapping", hint="e.g. command: {target: host}")
    bad = sorted(set(raw) - set(_COMMAND_KEYS))
    if bad:
        raise ConfigError(f"{loc}: unknown key(s) {bad}", hint="allowed: " + ", ".join(_COMMAND_KEYS))
    by_name = {p.name: p for p in parameters}
    names = set(by_name)

    def at(*path: Any) -> str:
        return f"{where('command', *path)}: command." + ".".join(str(p) for p in path)

    alias = raw.get("alias", True)
    if not isinstance(alias, bool):
        raise ConfigError(f"{at('alias')}: expected true or false")
    help_text = raw.get("help", "")
    if not isinstance(help_text, str):
        raise ConfigError(f"{at('help')}: expected text")
    target = raw.get("target", default_target)
    if target not in TARGET_KINDS:
        raise ConfigError(f"{at('target')}: {target!r} is not a target kind",
                          hint="TARGET names a host (short name or FQDN) or a cluster: " + ", ".join(TARGET_KINDS))

    arguments = raw.get("arguments") or []
    if not isinstance(arguments, list) or not all(isinstance(a, str) for a in arguments):
        raise ConfigError(f"{at('arguments')}: expected a list of parameter names", hint="e.g. arguments: [service]")
    if len(set(arguments)) != len(arguments):
        raise ConfigError(f"{at('arguments')}: a parameter is listed twice")
    decls = dict(declarations)
    for i, name in enumerate(arguments):
        if name not in names:
            raise ConfigError(f"{at('arguments', i)}: {name!r} names no parameter",
                              hint="declared: " + (", ".join(sorted(names)) or "none"))
        spec = doc["parameters"][name]
        if isinstance(spec, Mapping) and "flag" in spec:
            raise ConfigError(f"{where('parameters', name, 'flag')}: parameters.{name}: a positional argument "
                              "(command.arguments) has no flag", hint="remove its `flag:`")
        if by_name[name].type in ("bool", "list", "map"):
            raise ConfigError(f"{at('arguments', i)}: {name!r} is a {by_name[name].type}; positional arguments "
                              "are str, int, float or duration")
        if decls[name].flag_help:
            raise ConfigError(f"{where('parameters', name, 'flag_help')}: parameters.{name}: a positional argument "
                              "(command.arguments) has no flag_help", hint="remove it; `help` is shown")
        decls[name] = ParamDecl(name, flags=(), choices=decls[name].choices, line=decls[name].line)

    def hooks(key: str) -> tuple[HookRef, ...]:
        value = raw.get(key) or []
        items = value if isinstance(value, list) else [value]
        return tuple(_hook_ref(item, at(key, i) if isinstance(value, list) else at(key), names,
                               where.line("command", key, i) if isinstance(value, list) else where.line("command", key))
                     for i, item in enumerate(items))

    checks, select = hooks("checks"), hooks("select")
    raw_resolve = raw.get("resolve") or {}
    if not isinstance(raw_resolve, Mapping):
        raise ConfigError(f"{at('resolve')}: expected a mapping of parameter -> hook",
                          hint="e.g. resolve: {rev: deploy_host_checkout}")
    resolve = []
    for pname, ref in raw_resolve.items():
        if pname not in names:
            raise ConfigError(f"{at('resolve', pname)}: {pname!r} names no parameter",
                              hint="declared: " + (", ".join(sorted(names)) or "none"))
        resolve.append((pname, _hook_ref(ref, at("resolve", pname), names, where.line("command", "resolve", pname))))

    conflicts = []
    raw_conflicts = raw.get("conflicts") or []
    if not isinstance(raw_conflicts, list):
        raise ConfigError(f"{at('conflicts')}: expected a list of {{parameter: value, ...}}",
                          hint="e.g. conflicts: [{election: false, election_at_end: true}]")
    for i, combo in enumerate(raw_conflicts):
        if not isinstance(combo, Mapping) or len(combo) < 2:
            raise ConfigError(f"{at('conflicts', i)}: expected two or more {{parameter: value}}",
                              hint="e.g. {election: false, election_at_end: true}")
        values = {}
        for pname, value in combo.items():
            if pname not in names:
                raise ConfigError(f"{at('conflicts', i)}: {pname!r} names no parameter",
                                  hint="declared: " + (", ".join(sorted(names)) or "none"))
            try:
                values[pname] = coerce_param(by_name[pname], value)
            except ValueError as exc:
                raise ConfigError(f"{at('conflicts', i)}: {pname}: {exc}") from exc
        conflicts.append(values)

    resolved = {p for p, _ in resolve}
    if alias:
        for p in parameters:
            if p.required and p.default is None and not decls[p.name].flags and p.name not in arguments \
                    and p.name not in resolved:
                raise ConfigError(
                    f"{where('parameters', p.name)}: parameters.{p.name}: required, but the alias cannot set it "
                    "(no flag, not in command.arguments, no resolve hook)",
                    hint="give it a flag, a default, or a resolve hook")
    spec = CommandSpec(alias=alias, help=help_text.strip(), target=target, arguments=tuple(arguments),
                       checks=checks, select=select, resolve=tuple(resolve), conflicts=tuple(conflicts),
                       line=where.line("command"))
    return spec, decls


def _infer_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list):
        return "list"
    return "str"


def _check_retry(raw: Any, where: str) -> None:
    if not isinstance(raw, Mapping) or set(raw) - {"attempts", "backoff", "max_backoff", "multiplier"}:
        raise ConfigError(
            f"{where}: expected {{attempts: N, backoff: 5s}}", hint="keys: attempts, backoff, max_backoff"
        )
    for key in ("backoff", "max_backoff"):
        if key in raw:
            try:
                parse_duration(raw[key])
            except ValueError as exc:
                raise ConfigError(f"{where}.{key}: {exc}") from exc
    if "attempts" in raw and (not isinstance(raw["attempts"], int) or raw["attempts"] < 1):
        raise ConfigError(f"{where}.attempts: must be an integer >= 1")


def _templates_in(value: Any) -> list[str]:
    """Template paths used in a (possibly nested) parameter value."""
    if isinstance(value, str):
        return [m.group(1) for m in TEMPLATE.finditer(value) if m.group(1) is not None]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _templates_in(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _templates_in(v)]
    return []


def _parse_step(
    raw: Any,
    index: int,
    source: str,
    line: int,
    check_kinds: bool,
    runbook_params: set[str],
    label: str | None = None,
) -> StepSpec:
    loc = f"{source}:{line}" if line else source
    label = label or f"step {index}"
    title = ""
    retry = None
    kind: Any
    params: Any
    if isinstance(raw, str):
        kind, params = raw, {}
    elif isinstance(raw, Mapping) and "step" in raw:
        bad = sorted(set(raw) - _LONG_STEP_KEYS)
        if bad:
            raise ConfigError(
                f"{loc}: {label}: unknown key(s) {bad}", hint="allowed: step, params, title, retry"
            )
        kind, params = raw["step"], raw.get("params") or {}
        title, retry = str(raw.get("title") or ""), raw.get("retry")
    elif isinstance(raw, Mapping) and len(raw) == 1:
        ((kind, params),) = raw.items()
        params = params if params is not None else {}
    else:
        raise ConfigError(
            f"{loc}: {label}: expected `- kind: {{param: value}}`",
            hint="one step kind per list item, e.g. `- kafka.stop_broker: {}`",
        )
    if not isinstance(kind, str):
        raise ConfigError(f"{loc}: {label}: step kind must be a string, got {kind!r}")
    if not isinstance(params, Mapping):
        raise ConfigError(
            f"{loc}: {label} ({kind}): parameters must be a mapping, got {params!r}",
            hint=f"write `- {kind}: {{name: value}}` (or `{{}}` for none)",
        )
    where = f"{loc}: {label} ({kind})"
    if retry is not None:
        _check_retry(retry, f"{where}: retry")
    for tpl in _templates_in(params):
        root = tpl.split(".", 1)[0]
        if not _PATH.match(tpl) or root not in TEMPLATE_ROOTS:
            raise ConfigError(
                f"{where}: unknown template {{{tpl}}}",
                hint="templates start with one of "
                + ", ".join(f"{{{r}.…}}" for r in TEMPLATE_ROOTS)
                + "; write {{ and }} for literal braces",
            )
        if root == "params" and tpl.split(".")[1] not in runbook_params:
            raise ConfigError(
                f"{where}: template {{{tpl}}} names no runbook parameter",
                hint="declare it under `parameters:` or fix the name ("
                + (", ".join(sorted(runbook_params)) or "none declared")
                + ")",
            )
    if check_kinds:
        _check_kind(kind, params, loc, label)
    return StepSpec(index=index, kind=kind, params=dict(params), title=title, retry=retry, line=line)


def check_step_kinds(runbook: Runbook) -> None:
    """Validate the steps (and the gate) of a parsed runbook against the registered step kinds: each kind
    exists, its parameters are known, the required ones given, the literal values of its type.

    The same errors, in the same order, as :func:`load_runbook` with ``check_kinds=True``: a runbook is
    parsed once (to build its command line, before any step kind is imported) and checked here when the
    step kinds are loaded, instead of being parsed again.

    Raises:
        ConfigError: Naming the file, line, step index and the fix.
    """
    source = runbook.source or "<runbook>"
    for step in runbook.steps:
        _check_kind(step.kind, step.params, f"{source}:{step.line}" if step.line else source, f"step {step.index}")
    gate = runbook.targets.gate if runbook.targets else None
    if gate is not None:
        _check_kind(gate.kind, gate.params, f"{source}:{gate.line}" if gate.line else source, "targets.gate")


def _check_kind(kind: str, params: Mapping[str, Any], loc: str, label: str) -> None:
    where = f"{loc}: {label} ({kind})"
    entry = require_kind(kind, f"{loc}: {label}")
    known = {p.name for p in entry.params}
    for pname in params:
        if pname not in known:
            import difflib

            close = difflib.get_close_matches(str(pname), sorted(known), n=1)
            raise ConfigError(
                f"{where}: unknown parameter {pname!r}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "accepted: "
                + (", ".join(sorted(known)) or "none"),
            )
    for spec in entry.params:
        if spec.required and spec.name not in params:
            raise ConfigError(
                f"{where}: missing required parameter {spec.name!r}",
                hint=f"add `{spec.name}: <{spec.type}>`" + (f" ({spec.help})" if spec.help else ""),
            )
        if spec.name in params and not _templates_in(params[spec.name]):
            try:
                coerce_param(spec, params[spec.name])
            except ValueError as exc:
                raise ConfigError(f"{where}: parameter {spec.name!r}: {exc}") from exc
