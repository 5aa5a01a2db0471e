"""The step contract and the registry of step kinds.

A runbook is an ordered list of steps; every step follows the same four-phase contract so that the
runner can make it safe, idempotent and resumable without knowing anything about Kafka:

* ``observe(ctx)`` is read-only. It is the only source of truth the engine trusts about the world:
  the journal says what *was* done, ``observe`` says what *holds now*.
* ``plan(obs)`` is pure. It returns an :class:`Action` that closes the gap between the observed and the
  wanted state (with the exact command or API call, for the reviewable plan) or a :class:`Noop` with the
  reason the effect already holds. A dry-run calls ``observe`` + ``plan`` for real.
* ``apply(ctx, action)`` is the only phase with side effects. The runner journals (and fsyncs) an
  intent record before calling it, so a crash inside ``apply`` is detectable.
* ``verify(ctx)`` checks the post-condition and raises :class:`~kafkaops.errors.CheckFailed`
  (retryable by default) when it does not hold yet.
* ``effects(obs, action)`` is pure too: the facts ``apply`` leaves behind (a depool leaves the pool
  state ``no``, a stop leaves the broker unregistered). The planner feeds them to the ``observe`` of
  every later step of a dry-run (``ctx.projected``), so the plan shows what each step will find —
  steps never ask whether they run in a dry-run.
* ``precondition(ctx, action)`` — declared by every *disruptive* kind (``register_step(...,
  effect="disruptive")``: a depool, a stop, a restart, a reboot, a deploy, a delete, a rewrite of offsets,
  configuration or storage) — re-reads, from the live systems, the one fact that makes the action safe (a
  majority of the quorum stays caught up, no partition drops below min ISR, another host still serves)
  and raises :class:`~kafkaops.errors.SafetyRefusal` when it does not hold. The runner calls it right
  before every ``apply`` of such a step: on the first run, on a retry, on a resume and in a rollback. A
  separate gate step earlier in the runbook is not enough: minutes (or a paused run's days) may pass
  between the gate and the act, and a resume never re-runs a gate it journaled as verified.

What a kind may do is declared once, at registration (:data:`Effect`), and the runner derives every
guarantee from it — no kind opts in to safety:

* ``"read-only"``: waits, gates, checks. Not fenced, and its ``apply`` runs with every adapter write
  refused (:func:`read_only_scope`): a kind that says it changes nothing cannot change anything.
* ``"change"`` (the default): anything else that applies — a pool, a start, a silence. Fenced: the
  runner re-reads the cluster lock right before its ``apply`` and pauses a run that no longer holds it.
* ``"disruptive"``: takes something out of service, stops, restarts, deletes or rewrites. Fenced, and
  its ``precondition`` is re-read right before every ``apply`` (a kind without one does not register).

``observe``, ``plan``, ``verify`` and ``precondition`` run read-only whatever the kind.

Step kinds declare their parameters (name, type, required/default) so that a runbook with a typo fails
at load time with the step index and the fix, rather than half-way through a multi-hour roll. A kind
may declare a :class:`Compensation`: the step kind that undoes it (``depool`` -> ``repool``), which
``kafkaops runs abort --rollback`` runs for the steps this run actually changed and nothing more.

This module imports no client library and nothing from ``kafkaops.systems`` or ``kafkaops.steps``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from kafkaops.errors import ConfigError

Effect = Literal["read-only", "change", "disruptive"]
EFFECTS: tuple[str, ...] = ("read-only", "change", "disruptive")

ParamType = Literal["str", "int", "float", "bool", "duration", "list", "map", "any"]
PARAM_TYPES: tuple[str, ...] = ("str", "int", "float", "bool", "duration", "list", "map", "any")

_MISSING: Any = object()


@dataclass(frozen=True)
class Param:
    """One parameter a step kind accepts.

    Attributes:
        name: Parameter name as written in the runbook YAML.
        type: One of ``str``, ``int``, ``float``, ``bool``, ``duration`` (``10s``, ``5m``, ``1h30m``,
            ``250ms`` or a number of seconds; bound to float seconds), ``list``, ``map`` or ``any``.
        required: Whether the runbook must give it (only when there is no default).
        default: Value used when the runbook omits it.
        help: One line for the generated docs.
        min: Smallest accepted value (``int``, ``float``, ``duration``: seconds).
        max: Largest accepted value: a wait of "1000d" is a typo, and it would hold a host depooled.
    """

    name: str
    type: ParamType = "str"
    required: bool = False
    default: Any = None
    help: str = ""
    min: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name!r}: unknown type {self.type!r} (one of {PARAM_TYPES})")


@dataclass(frozen=True)
class Compensation:
    """How to undo a step kind: run another step kind (itself idempotent) for the same target.

    Attributes:
        kind: The compensating step kind, e.g. ``conftool.repool`` for ``conftool.depool``.
        params: Parameters for it; ``None`` passes the original step's bound parameters unchanged.
        note: Rollback note shown in plans and docs.
        verify: A step kind run once at the end of a rollback that used this compensation, to prove
            the whole is back as it was (e.g. every broker registered, no URP, preferred leaders).
    """

    kind: str
    params: Mapping[str, Any] | None = None
    verify: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Observation:
    """What ``observe`` saw. ``data`` must be JSON-serialisable.

    Attributes:
        data: The observed facts (pool state, broker registered, leaders...).
        summary: One human line for plans and progress output.
    """

    data: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""

    def fingerprint_data(self) -> Any:
        """What a saved plan fingerprints: by default all of ``data``. Override to drop noise."""
        return dict(self.data)


@dataclass(frozen=True)
class Action:
    """What ``apply`` will do, described exactly enough for a change review.

    Attributes:
        description: One line: what changes.
        commands: The exact commands or API calls, in order.
        impact: Predicted impact (traffic moved, leaders that move, partitions losing a replica). Start it
            with ``read-only`` for waits and checks: they are then left out of "what this run changed".
        rollback: How to undo it by hand, if the runbook declares no compensation.
        data: Anything ``apply`` needs from ``plan`` (JSON-serialisable; journaled).
        idempotent: ``False`` when applying twice would change the world twice (counters, elections);
            the runner never re-applies without re-observing first either way.
    """

    description: str
    commands: tuple[str, ...] = ()
    impact: str = ""
    rollback: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "commands": list(self.commands),
            "impact": self.impact,
            "rollback": self.rollback,
            "data": dict(self.data),
            "idempotent": self.idempotent,
        }


@dataclass(frozen=True)
class Noop:
    """The step's effect already holds; ``reason`` says why (shown in plans and journaled)."""

    reason: str


@runtime_checkable
class Step(Protocol):
    """The contract every step kind implements (see the module docstring)."""

    kind: str
    params: Mapping[str, Any]

    def observe(self, ctx: Any) -> Observation:
        """Read the current state. Must not change anything."""
        ...

    def plan(self, obs: Observation) -> Action | Noop:
        """Decide, purely from ``obs``, what would change."""
        ...

    def apply(self, ctx: Any, action: Action) -> None:
        """Make the change. The only phase allowed side effects."""
        ...

    def verify(self, ctx: Any) -> None:
        """Check the post-condition; raise ``CheckFailed`` if it does not hold (yet)."""
        ...

    def effects(self, obs: Observation, action: Action) -> Mapping[str, Any]:
        """The facts ``apply`` will leave, for the dry-run's projection (pure; ``{}``: none)."""
        ...


@runtime_checkable
class DisruptiveStep(Step, Protocol):
    """A step whose ``apply`` can cost availability: it declares the safety precondition of its action."""

    def precondition(self, ctx: Any, action: Action) -> str:
        """Re-read the fact that makes ``action`` safe, now; return what was found (one line, journaled).

        Raises:
            SafetyRefusal: It does not hold: the runner stops before ``apply``, nothing was changed.
        """
        ...


@runtime_checkable
class LeaseStep(Step, Protocol):
    """A step whose effect expires by itself (a silence): it can make sure the effect still lasts."""

    def renew(self, ctx: Any, at: int) -> str:
        """Re-read the effect now and extend it (or make it again) so it lasts past the steps from index
        ``at`` on to the one that ends it; return what was found and done (one line, journaled).

        Raises:
            KafkaOpsError: It cannot be made to last (the system is unreachable): the runner does not
                apply the change it was about to make.
        """
        ...


class StepBase:
    """Convenience base class: stores bound parameters; ``verify`` defaults to a no-op.

    Subclasses set ``kind`` (the registry sets it too) and implement ``observe``, ``plan``, ``apply``.
    """

    kind: str = ""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params: Mapping[str, Any] = dict(params)

    def observe(self, ctx: Any) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError

    def plan(self, obs: Observation) -> Action | Noop:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, ctx: Any, action: Action) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def verify(self, ctx: Any) -> None:
        """Default post-condition: nothing beyond what ``observe`` + ``plan`` establish."""
        return None

    def effects(self, obs: Observation, action: Action) -> Mapping[str, Any]:
        """Default: the step changes nothing a later step observes (waits, checks)."""
        return {}


@dataclass(frozen=True)
class StepKind:
    """A registered step kind: its factory, parameters, summary and optional compensation."""

    kind: str
    factory: Callable[[Mapping[str, Any]], Step]
    params: tuple[Param, ...] = ()
    summary: str = ""
    compensate: Compensation | None = None
    irreversible: str = ""
    check: Callable[[Mapping[str, Any]], str | None] | None = None
    #: What its ``apply`` may do (see the module docstring): ``read-only`` (never fenced, writes refused),
    #: ``change`` (fenced) or ``disruptive`` (fenced, its ``precondition`` re-read before every apply).
    effect: Effect = "change"
    #: The kind whose verified step on the same target ends this kind's effect (``alerts.unsilence`` for
    #: ``alerts.silence``): the effect expires by itself, so until then the runner has it renewed
    #: (:class:`LeaseStep`) before every change of the target and during its waits.
    lease_until: str | None = None
    #: The roles of target host it applies to (``broker``, ``controller``); empty: every target. A bound
    #: runbook leaves a step out for a target of another role (a broker's ISR wait on a KRaft controller).
    roles: tuple[str, ...] = ()

    @property
    def read_only(self) -> bool:
        return self.effect == "read-only"

    @property
    def disruptive(self) -> bool:
        return self.effect == "disruptive"

    def applies_to(self, role: str | None) -> bool:
        return not self.roles or role is None or role in self.roles

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def create(self, params: Mapping[str, Any]) -> Step:
        """Instantiate the step with already-bound parameters."""
        step = self.factory(params)
        if not getattr(step, "kind", ""):
            with contextlib.suppress(AttributeError):  # frozen objects keep their own
                step.kind = self.kind
        return step


_REGISTRY: dict[str, StepKind] = {}
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


def register_step(
    kind: str,
    cls: Callable[[Mapping[str, Any]], Step],
    params: Sequence[Param] = (),
    *,
    summary: str | None = None,
    compensate: Compensation | None = None,
    irreversible: str = "",
    check: Callable[[Mapping[str, Any]], str | None] | None = None,
    replace: bool = False,
    roles: Sequence[str] = (),
    effect: Effect = "change",
    lease_until: str | None = None,
) -> StepKind:
    """Register a step kind so runbooks can use it.

    Args:
        kind: Dotted lower-case name, e.g. ``conftool.depool``.
        cls: A class (or factory) called with the bound parameter mapping.
        params: The parameters the kind accepts.
        summary: One line for docs; defaults to the first line of ``cls.__doc__``.
        compensate: How ``runs abort --rollback`` undoes this step.
        irreversible: For a kind that changes something and cannot be undone: what a rollback leaves
            and the manual action, if any (shown in plans and in the abort message).
        check: Validates the bound parameters together (``window`` shorter than ``timeout``); returns
            what is wrong, or None. Called when the runbook is bound, before anything runs.
        replace: Allow re-registering an existing kind (tests, plugins overriding a built-in).
        roles: The target roles the kind applies to (``broker``, ``controller``); empty: all.
        effect: What its ``apply`` may do: ``read-only`` (a wait, a gate, a check: not fenced, every
            adapter write refused while it applies), ``change`` (the default: fenced) or ``disruptive``
            (takes something out of service, stops, restarts, deletes or rewrites: fenced, and ``cls``
            must define ``precondition(ctx, action)``, which the runner calls right before every apply).
        lease_until: The kind that ends this kind's expiring effect on the same target; ``cls`` must then
            define ``renew(ctx, at)`` (:class:`LeaseStep`).

    Returns:
        The registered :class:`StepKind`.

    Raises:
        ValueError: On a malformed kind name, duplicate parameter or duplicate kind, or a destructive
            kind without a ``precondition``, or an unknown effect.
    """
    if not _KIND_RE.match(kind):
        raise ValueError(f"step kind {kind!r}: use dotted lower-case names such as 'conftool.depool'")
    names = [p.name for p in params]
    if len(names) != len(set(names)):
        raise ValueError(f"step kind {kind!r}: duplicate parameter names {names}")
    if kind in _REGISTRY and not replace:
        raise ValueError(f"step kind {kind!r} is already registered")
    if effect not in EFFECTS:
        raise ValueError(f"step kind {kind!r}: unknown effect {effect!r} (one of {', '.join(EFFECTS)})")
    if lease_until is not None and not callable(getattr(cls, "renew", None)):
        raise ValueError(f"step kind {kind!r} leaves an effect that expires (lease_until={lease_until!r}): it must "
                         "define renew(ctx, at), which the runner calls before every change while it lasts")
    if effect == "disruptive" and not callable(getattr(cls, "precondition", None)):
        raise ValueError(f"step kind {kind!r} is disruptive: it must define precondition(ctx, action), the "
                         "safety check the runner makes right before every apply")
    if summary is None:
        doc = (getattr(cls, "__doc__", None) or "").strip()
        summary = doc.splitlines()[0] if doc else ""
    entry = StepKind(kind=kind, factory=cls, params=tuple(params), summary=summary, compensate=compensate,
                     irreversible=irreversible, check=check, effect=effect, roles=tuple(roles),
                     lease_until=lease_until)
    _REGISTRY[kind] = entry
    return entry


def step_kind(
    kind: str, params: Sequence[Param] = (), *, compensate: Compensation | None = None, replace: bool = False,
    effect: Effect = "change",
) -> Callable[[type], type]:
    """Class decorator form of :func:`register_step`."""

    def deco(cls: type) -> type:
        cls.kind = kind  # type: ignore[attr-defined]
        register_step(kind, cls, params, compensate=compensate, replace=replace, effect=effect)
        return cls

    return deco


def unregister_step(kind: str) -> None:
    """Remove a kind (tests)."""
    _REGISTRY.pop(kind, None)


def get_step_kind(kind: str) -> StepKind | None:
    """The registered kind, or ``None``."""
    return _REGISTRY.get(kind)


def step_kinds() -> dict[str, StepKind]:
    """A copy of the registry, by kind name."""
    return dict(_REGISTRY)


@contextmanager
def isolated_registry() -> Iterator[None]:
    """Run a block with the registry saved and restored afterwards (tests register throwaway kinds)."""
    saved = dict(_REGISTRY)
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved)


# --- parameter coercion ---------------------------------------------------------------------------

_DURATION_RE = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*(ms|s|m|h|d))+\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """Parse ``10s``, ``5m``, ``1h30m``, ``250ms``, ``2d`` or a plain number of seconds.

    Raises:
        ValueError: With the accepted forms, for anything else (``5x``, ``-3s``, ``""``).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            return float(text)
        if _DURATION_RE.match(text):
            return sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
    raise ValueError(f"{value!r} is not a duration (use e.g. 30s, 5m, 1h30m, 250ms or a number of seconds)")


def format_duration(seconds: float) -> str:
    """Render seconds the way runbooks write them (``90`` -> ``1m30s``)."""
    if seconds < 1 and seconds > 0:
        return f"{round(seconds * 1000)}ms"
    total = round(seconds)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s or not (h or m) else ""]
    return "".join(parts)


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce_param(spec: Param, value: Any) -> Any:
    """Convert ``value`` to the declared type of ``spec`` and check its bounds.

    Raises:
        ValueError: With a message that says what was expected.
    """
    out = _coerce(spec, value)
    if spec.type in ("int", "float", "duration") and (spec.min is not None or spec.max is not None):
        shown = format_duration if spec.type == "duration" else (lambda v: f"{v:g}")
        if spec.min is not None and out < spec.min:
            raise ValueError(f"{value!r} is below the minimum {shown(spec.min)}")
        if spec.max is not None and out > spec.max:
            raise ValueError(f"{value!r} is above the maximum {shown(spec.max)}")
    return out


def _coerce(spec: Param, value: Any) -> Any:
    t = spec.type
    if t == "any":
        return value
    if t == "duration":
        return parse_duration(value)
    if t == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"{value!r} is not a boolean (use true or false)")
    if t == "int":
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            return int(value)
        raise ValueError(f"{value!r} is not an integer")
    if t == "float":
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
    if t == "list":
        if isinstance(value, (list, tuple)):
            return list(value)
        raise ValueError(f"{value!r} is not a list (write [a, b] or a YAML list)")
    if t == "map":
        if isinstance(value, Mapping):
            return dict(value)
        raise ValueError(f"{value!r} is not a mapping")
    # str
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{value!r} is not a string")


def require_kind(kind: str, where: str) -> StepKind:
    """The registered kind or a ``ConfigError`` that suggests the closest known kind."""
    entry = get_step_kind(kind)
    if entry is not None:
        return entry
    import difflib

    known = sorted(_REGISTRY)
    close = difflib.get_close_matches(kind, known, n=1)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else "known kinds: " + (", ".join(known) or "(none registered)")
    )
    raise ConfigError(f"{where}: unknown step kind {kind!r}", hint=hint)
