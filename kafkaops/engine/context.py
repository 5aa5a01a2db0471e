"""What a step sees when it runs, and the hook that builds the real services for a cluster.

The engine never builds adapters itself (it must not import ``kafkaops.systems``): whoever starts a run
passes an opaque ``services`` object that the steps know how to use, and the engine hands it through in
a :class:`RunContext` together with the run's metadata. ``kafkaops resume`` and ``kafkaops apply`` start
from nothing but a run id or a plan file, so they need a way to build those services for a cluster:
the CLI wiring registers a :class:`ContextFactory` with :func:`set_context_factory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkaops.errors import ConfigError


def _never() -> bool:
    return False


def _discard(_: str) -> None:
    return None


@dataclass
class RunContext:
    """Passed to ``observe``, ``apply`` and ``verify``.

    Attributes:
        run_id: The run's id (``""`` in a dry-run that has not started a run).
        operator: ``user@host`` of the operator.
        reason: Why the run happens (required for anything that changes state).
        task: Optional task/ticket id.
        dry_run: True while planning: steps must not change anything (only ``observe`` is called).
        target: Name of the target this step acts on (``kafka1001``).
        params: The step's bound parameters.
        services: The caller's adapters (opaque to the engine).
        cluster: Cluster name.
        step_index: 1-based index of the step in the runbook.
        kind: The step kind.
        pause_requested: True once the operator pressed Ctrl-C; long waits pass it to ``wait_until``.
        progress: Print one progress line (wait status, log recovery...).
        targets: Every target of the run, in execution order (a step can tell the last one of a roll).
    """

    run_id: str
    operator: str
    reason: str
    task: str | None
    dry_run: bool
    target: str
    params: Mapping[str, Any]
    services: Any
    cluster: str = ""
    step_index: int = 0
    kind: str = ""
    pause_requested: Callable[[], bool] = field(default=_never, repr=False)
    progress: Callable[[str], None] = field(default=_discard, repr=False)
    targets: tuple[str, ...] = ()


class ContextFactory(Protocol):
    """Builds the ``services`` object for a cluster (registered by the CLI wiring)."""

    def __call__(self, cluster: str, *, dry_run: bool = False) -> Any: ...


_factory: ContextFactory | None = None


def set_context_factory(factory: ContextFactory | None) -> None:
    """Register (or clear, with ``None``) the factory ``resume``/``apply`` use to build services."""
    global _factory
    _factory = factory


def get_context_factory() -> ContextFactory:
    """The registered factory.

    Raises:
        ConfigError: When none is registered.
    """
    if _factory is None:
        raise ConfigError(
            "no context factory registered: kafkaops cannot build the services (Kafka, ZooKeeper, "
            "conftool, SSH) this run needs",
            hint="call kafkaops.engine.set_context_factory(...) from the CLI wiring",
        )
    return _factory


def build_services(cluster: str, *, dry_run: bool = False) -> Any:
    """Build the services for ``cluster`` with the registered factory."""
    return get_context_factory()(cluster, dry_run=dry_run)
