"""Binding: a parsed runbook + a cluster + ordered targets -> the plain-JSON runbook a run executes.

Binding resolves templates (``{host.fqdn}``, ``{target.name}``, ``{cluster.name}``, ``{params.port}``)
against the inventory objects of each target and freezes the result into plain JSON
(:class:`BoundRunbook`). The bound form is what the journal and saved plans carry, so a resumed run or
an applied plan executes exactly the procedure that was reviewed, even if the YAML changed since.

The order of the targets is the caller's (the engine knows nothing of controllers); :func:`schedule`
says in which order a run takes the bound steps (target after target, or a batch in lockstep).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkaops.engine.runbook import TEMPLATE, Runbook, StepSpec
from kafkaops.engine.step import coerce_param, require_kind
from kafkaops.errors import ConfigError


@dataclass(frozen=True)
class Target:
    """One thing a runbook acts on (usually a broker host).

    Attributes:
        name: Short name used in the journal and output (``kafka1001``).
        host: The inventory object templates see as ``{host.…}`` (e.g. ``kafkaops.model.Host``).
        extra: Additional template roots/values (rarely needed).
    """

    name: str
    host: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BoundStep:
    """A step with its parameters resolved and typed, as journaled and saved in plans."""

    index: int
    kind: str
    params: Mapping[str, Any]
    title: str = ""
    gate: bool = False
    retry: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"gate ({self.kind})" if self.gate else f"step {self.index} ({self.kind})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "params": dict(self.params),
            "title": self.title,
            "gate": self.gate,
            "retry": dict(self.retry) if self.retry else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BoundStep:
        return cls(
            index=int(d["index"]),
            kind=str(d["kind"]),
            params=dict(d.get("params") or {}),
            title=str(d.get("title") or ""),
            gate=bool(d.get("gate", False)),
            retry=d.get("retry"),
        )


@dataclass(frozen=True)
class BoundTarget:
    name: str
    steps: tuple[BoundStep, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BoundTarget:
        return cls(name=str(d["name"]), steps=tuple(BoundStep.from_dict(s) for s in d.get("steps", [])))


@dataclass(frozen=True)
class BoundRunbook:
    """A runbook bound to a cluster and ordered targets: plain JSON-able data, ready to run."""

    name: str
    summary: str
    cluster: str
    targets: tuple[BoundTarget, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    order: str = "inventory"
    source: str = ""
    sha256: str = ""
    retry: Mapping[str, Any] | None = None
    # Targets that go together (a rolling runbook's batches), in order; empty: one target at a time.
    batches: tuple[tuple[str, ...], ...] = ()

    @property
    def target_names(self) -> list[str]:
        return [t.name for t in self.targets]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.summary,
            "cluster": self.cluster,
            "targets": [t.to_dict() for t in self.targets],
            "params": dict(self.params),
            "order": self.order,
            "source": self.source,
            "sha256": self.sha256,
            "retry": dict(self.retry) if self.retry else None,
            **({"batches": [list(b) for b in self.batches]} if self.batches else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BoundRunbook:
        return cls(
            name=str(d["name"]),
            summary=str(d.get("summary", "")),
            cluster=str(d.get("cluster", "")),
            targets=tuple(BoundTarget.from_dict(t) for t in d.get("targets", [])),
            params=dict(d.get("params") or {}),
            order=str(d.get("order", "inventory")),
            source=str(d.get("source", "")),
            sha256=str(d.get("sha256", "")),
            retry=d.get("retry"),
            batches=tuple(tuple(str(n) for n in b) for b in d.get("batches") or ()),
        )


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    return str(value)


def _lookup(path: str, ctx: Mapping[str, Any], where: str) -> Any:
    parts = path.split(".")
    if parts[0] not in ctx or ctx[parts[0]] is None:
        raise ConfigError(
            f"{where}: template {{{path}}} cannot be resolved: this run has no {parts[0]!r}",
            hint="give the runbook a host target" if parts[0] == "host" else None,
        )
    obj = ctx[parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        if isinstance(obj, Mapping) and part in obj:
            obj = obj[part]
        elif not isinstance(obj, Mapping) and hasattr(obj, part) and not part.startswith("_"):
            obj = getattr(obj, part)
        else:
            raise ConfigError(
                f"{where}: template {{{path}}}: {'.'.join(parts[:i])} has no {part!r}",
                hint="check the spelling against the inventory model (kafkaops/model.py)",
            )
    return obj


def _render(value: Any, ctx: Mapping[str, Any], where: str) -> Any:
    if isinstance(value, str):
        whole = TEMPLATE.fullmatch(value)
        if whole and whole.group(1) is not None:
            return _jsonable(_lookup(whole.group(1), ctx, where))  # keep lists/ints as they are

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "{{":
                return "{"
            if m.group(0) == "}}":
                return "}"
            return str(_jsonable(_lookup(m.group(1), ctx, where)))

        return TEMPLATE.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: _render(v, ctx, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_render(v, ctx, where) for v in value]
    return value


def bind_runbook(
    runbook: Runbook,
    *,
    cluster: Any = None,
    targets: Sequence[Target] = (),
    params: Mapping[str, Any] | None = None,
    batches: Sequence[Sequence[str]] = (),
) -> BoundRunbook:
    """Resolve templates and defaults for each target and order the targets.

    Args:
        runbook: A loaded runbook (its step kinds must be registered).
        cluster: The cluster object (``{cluster.…}``), e.g. ``kafkaops.model.Cluster``; or its name.
        targets: Targets in the order they run: the caller orders them as the runbook's
            ``targets.order`` says (the engine knows nothing of controllers). A non-rolling runbook
            takes at most one; with none, the run has a single target named after the cluster.
        params: Runbook parameter values (strings from the command line are coerced).
        batches: A rolling runbook's targets that go together (:func:`schedule`), covering every target
            once, in the order of ``targets``; the gate between targets then stands only after a batch.

    Raises:
        ConfigError: Unknown/missing runbook parameter, unresolvable template, bad value after binding,
            wrong number of targets.
    """
    cluster_name = cluster if isinstance(cluster, str) else str(getattr(cluster, "name", "") or "")
    given = dict(params or {})
    bound_params: dict[str, Any] = {}
    declared = {p.name: p for p in runbook.parameters}
    for pname in given:
        if pname not in declared:
            raise ConfigError(
                f"runbook {runbook.name}: unknown parameter {pname!r}",
                hint="accepted: " + (", ".join(sorted(declared)) or "none"),
            )
    for spec in runbook.parameters:
        if spec.name in given:
            raw = given[spec.name]
        elif spec.default is not None:
            raw = spec.default
        elif spec.required:
            raise ConfigError(
                f"runbook {runbook.name}: parameter {spec.name!r} is required",
                hint=f"pass --param {spec.name}=<{spec.type}>" + (f" ({spec.help})" if spec.help else ""),
            )
        else:
            continue
        try:
            bound_params[spec.name] = coerce_param(spec, raw)
        except ValueError as exc:
            raise ConfigError(f"runbook {runbook.name}: parameter {spec.name!r}: {exc}") from exc

    tlist = list(targets)
    if not runbook.rolling and len(tlist) > 1:
        raise ConfigError(
            f"runbook {runbook.name} is not a rolling runbook: give exactly one target",
            hint="declare `targets: {order: controller_last}` in the runbook to roll several",
        )
    if not tlist:
        tlist = [Target(name=cluster_name or "cluster")]
    order = runbook.targets.order if runbook.targets else "inventory"

    groups = [tuple(b) for b in batches if b]
    if groups:
        names_in = [n for b in groups for n in b]
        if names_in != [t.name for t in tlist]:
            raise ConfigError(f"runbook {runbook.name}: batches {groups} do not cover the targets "
                              f"{[t.name for t in tlist]} once each, in order")
    batch_ends = {b[-1] for b in groups}
    bound_targets = []
    for ti, target in enumerate(tlist):
        ctx: dict[str, Any] = {
            "host": target.host,
            "target": target,
            "cluster": cluster,
            "params": bound_params,
        }
        if isinstance(cluster, str) or cluster is None:
            ctx["cluster"] = {"name": cluster_name}
        ctx.update(target.extra)
        # A step of another role is left out for this target (a broker's ISR wait on a KRaft controller
        # node, a quorum gate on a broker): its index stays, so journals and lockstep batches line up.
        role = getattr(target.host, "role", None)
        steps = [_bind_step(s, ctx, runbook, target) for s in runbook.steps
                 if require_kind(s.kind, runbook.source or runbook.name).applies_to(role)]
        gate = runbook.targets.gate if runbook.targets else None
        if gate is not None and ti < len(tlist) - 1 and (not groups or target.name in batch_ends):
            g = _bind_step(gate, ctx, runbook, target)
            steps.append(
                BoundStep(
                    len(runbook.steps) + 1, g.kind, g.params, g.title or "gate before next target", True, g.retry
                )
            )
        bound_targets.append(BoundTarget(name=target.name, steps=tuple(steps)))
    return BoundRunbook(
        name=runbook.name,
        summary=runbook.summary,
        cluster=cluster_name,
        targets=tuple(bound_targets),
        params=bound_params,
        order=order,
        source=runbook.source,
        sha256=runbook.sha256,
        retry=runbook.retry,
        batches=tuple(groups) if any(len(b) > 1 for b in groups) else (),
    )


def schedule(bound: BoundRunbook) -> list[tuple[BoundTarget, BoundStep]]:
    """The order a run takes its steps in: target after target; with batches, the targets of a batch in
    lockstep — step 1 of each, then step 2 of each, ... — so that a batch's hosts are all depooled, then
    all stopped, then all started, before any is repooled, while every (target, step) keeps its own
    journal records (a resume continues each broker where it stopped, and never stops one twice)."""
    if not bound.batches:
        return [(t, s) for t in bound.targets for s in t.steps]
    by_name = {t.name: t for t in bound.targets}
    out: list[tuple[BoundTarget, BoundStep]] = []
    for batch in bound.batches:
        members = [by_name[n] for n in batch]
        for index in sorted({s.index for t in members for s in t.steps}):
            out += [(t, s) for t in members for s in t.steps if s.index == index]
    return out


def _bind_step(spec: StepSpec, ctx: Mapping[str, Any], runbook: Runbook, target: Target) -> BoundStep:
    label = "targets.gate" if spec.index == 0 else f"step {spec.index}"
    where = f"{runbook.source or runbook.name}: {label} ({spec.kind}) for {target.name}"
    entry = require_kind(spec.kind, where)
    values = _render(dict(spec.params), ctx, where)
    out: dict[str, Any] = {}
    for p in entry.params:
        if p.name in values:
            try:
                out[p.name] = coerce_param(p, values[p.name])
            except ValueError as exc:
                raise ConfigError(f"{where}: parameter {p.name!r}: {exc}") from exc
        elif p.default is not None:
            out[p.name] = coerce_param(p, p.default)
        elif p.required:  # pragma: no cover - load-time validation catches it
            raise ConfigError(f"{where}: missing required parameter {p.name!r}")
    if entry.check is not None:
        problem = entry.check(out)
        if problem:
            raise ConfigError(f"{where}: {problem}")
    return BoundStep(
        index=spec.index, kind=spec.kind, params=_jsonable(out), title=spec.title, retry=spec.retry
    )
