"""What a step sees when it runs: the run's metadata, its environment, and — while planning — the
state earlier steps will have left (the projection).

The engine never builds adapters itself (it must not import ``kafkaops.systems``): whoever starts a run
passes its *environment*, an object the steps know how to use (kafkaops' is
:class:`kafkaops.environment.Environment`), and the engine hands it through in a :class:`RunContext`.
Everything the engine asks of it is declared in :class:`RunEnvironment`: the cluster's lock (and its name,
for the plan), an identity to journal so that a resumed run can prove it acts on the same world, and a
sampler of the cluster for the run's chart. The run's facts (:mod:`kafkaops.engine.run_facts`) are the
engine's own: the runner hands each step the store of its run as ``ctx.facts``.

Steps never ask "is this a dry-run?". A dry-run observes the live systems, and a step whose apply
changes something declares the facts it leaves (``effects``); the planner collects them in a
:class:`Projection` and hands it to every later step's ``observe``, which reads the projected value in
place of the live one. That is how a dry-run of a rolling reboot shows what the third host's steps will
find after the first two hosts were rebooted, without any step knowing its position in the runbook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkaops.engine.run_facts import RunFacts, in_memory

if TYPE_CHECKING:
    from kafkaops.engine.binding import BoundStep
    from kafkaops.engine.lock import LockBackend


def _never() -> bool:
    return False


def _nothing() -> None:
    return None


def _discard(_: str) -> None:
    return None


def _discard_status(_text: str | None) -> None:
    return None


def _ignore(event: str, **fields: Any) -> None:
    return None


class Projection(Mapping[str, Any]):
    """Facts that steps planned earlier in a dry-run will have changed, with the step that changes each.

    Keys and values are the steps' business (``pool/<fqdn>/<service>`` -> ``"no"``, ``broker/1001`` ->
    ``"stopped"``); the engine only records them in order. Empty in a real run: there, every ``observe``
    sees the world itself.
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._sources: dict[str, str] = {}
        self._history: list[tuple[str, Any]] = []

    def set(self, key: str, value: Any, source: str) -> None:
        self._values[key] = value
        self._sources[key] = source
        self._history.append((key, value))

    def history(self) -> list[tuple[str, Any]]:
        """Every fact in the order the planned steps set it, a key set twice listed twice: what changed
        in between (a reorder, then an election, then another reorder) is seen in its order."""
        return list(self._history)

    def source(self, key: str) -> str | None:
        """Which step leaves ``key`` as projected (``kafka1001 step 3 (conftool.depool)``)."""
        return self._sources.get(key)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def copy(self) -> Projection:
        out = Projection()
        out._values, out._sources, out._history = dict(self._values), dict(self._sources), list(self._history)
        return out


NO_PROJECTION = Projection()


class Sampler(Protocol):
    """A background sampler of the cluster for the run's chart: started when a process starts driving a
    run, stopped when it stops (a crash loses it; the resumed run's process starts its own)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class RunEnvironment(Protocol):
    """Everything the engine needs from the caller's environment object (and nothing more: the steps
    use the rest of it, opaque to the engine)."""

    @property
    def lock(self) -> LockBackend:
        """The lock that guards the run's cluster (never a silent fallback)."""
        ...

    @property
    def lock_label(self) -> str:
        """Which lock that is, in words, for the plan (``""``: say nothing)."""
        ...

    def identity(self) -> Mapping[str, Any]:
        """JSON-able record of what the run acts on (journaled at ``run_started``, carried by a plan)."""
        ...

    def run_sampler(self, run_dir: Path) -> Sampler | None:
        """A sampler writing into the run's directory ``run_dir`` (it names its own file), or None: nothing
        to sample (a dry-run)."""
        ...


@dataclass
class RunContext:
    """Passed to ``observe``, ``apply`` and ``verify``.

    Attributes:
        run_id: The run's id (``""`` in a dry-run that has not started a run).
        operator: ``user@host`` of the operator.
        reason: Why the run happens (required for anything that changes state).
        task: Optional task/ticket id.
        target: Name of the target this step acts on (``kafka1001``).
        params: The step's bound parameters.
        env: The caller's environment: its adapters (opaque to the engine).
        facts: The run's facts store (:mod:`kafkaops.engine.run_facts`); in memory in a dry-run.
        projected: While planning, the facts earlier steps will have changed (empty in a real run).
        cluster: Cluster name.
        step_index: 1-based index of the step in the runbook.
        kind: The step kind.
        pause_requested: True once the operator pressed Ctrl-C; long waits pass it to ``wait_until``.
        progress: Print one progress line (wait status, log recovery...): a change of state, for logs.
        status: Show (or, with None, clear) the live status of a wait — what it waits for, the value,
            elapsed/timeout — redrawn in place on a terminal; a no-op without one (logs get ``progress``).
        targets: Every target of the run, in execution order (a step can tell the last one of a roll).
        record: Journal an event of this step (``record("reboot_sent", outcome=...)``): what a step did
            that the runner cannot see, such as a command sent whose effect shows only later. Discarded
            while planning.
        confirmed: The manual checkpoints the operator confirmed for this invocation, each with how
            (``--confirmed`` on the command line, or at the terminal prompt). ``--yes`` never adds one.
        ask: Asks the operator a checkpoint's question on a terminal; ``None`` when there is nobody to
            ask (no TTY): a checkpoint not in ``confirmed`` then stops the run.
        steps: This target's bound steps, in order: a step may read the others' parameters (an
            Alertmanager silence lasts as long as the timeouts of the steps it covers add up to).
        keep_alive: Called by long waits at every poll: the runner renews, throttled, the target's effects
            that expire (a silence) so a run held by a gate never lets them lapse. A no-op while planning.
    """

    run_id: str
    operator: str
    reason: str
    task: str | None
    target: str
    params: Mapping[str, Any]
    env: Any
    projected: Projection = field(default_factory=Projection)
    cluster: str = ""
    step_index: int = 0
    kind: str = ""
    pause_requested: Callable[[], bool] = field(default=_never, repr=False)
    progress: Callable[[str], None] = field(default=_discard, repr=False)
    status: Callable[[str | None], None] = field(default=_discard_status, repr=False)
    targets: tuple[str, ...] = ()
    batch: tuple[str, ...] = ()  # the targets that go together with this one (a batched roll), itself included
    record: Callable[..., None] = field(default=_ignore, repr=False)
    confirmed: Mapping[str, str] = field(default_factory=dict)
    ask: Callable[[str], bool] | None = field(default=None, repr=False)
    facts: RunFacts = field(default_factory=in_memory, repr=False)
    steps: tuple[BoundStep, ...] = field(default=(), repr=False)
    keep_alive: Callable[[], None] = field(default=_nothing, repr=False)
