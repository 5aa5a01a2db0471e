"""The read-only scope: the runner's promise that a block writes nothing, which every adapter write checks.

Its own module, with no import of its own, because every adapter consults it (through
:mod:`kafkaops.systems.guard`) and a read-only command (``kafkaops status``) should not load the engine's
step machinery to learn that nobody refuses its writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_READ_ONLY: ContextVar[str] = ContextVar("kafkaops_read_only", default="")


@contextmanager
def read_only_scope(what: str) -> Iterator[None]:
    """Run a block in which every adapter write is refused (``what`` names who promised to write nothing).

    The runner wraps every ``observe``, ``plan``, ``verify`` and ``precondition``, and the ``apply`` of a
    ``read-only`` kind: a kind that declared it changes nothing, and then calls an adapter's write, stops
    with :class:`~kafkaops.systems.guard.ReadOnlyViolation` before any byte leaves the process.
    Adapters consult :func:`writes_refused_by`; a thread a step starts itself does not inherit the scope.
    """
    token = _READ_ONLY.set(what)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


@contextmanager
def writes_allowed() -> Iterator[None]:
    """Lift :func:`read_only_scope` for a block the runner itself drives (a lease renewed during a wait)."""
    token = _READ_ONLY.set("")
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


def writes_refused_by() -> str:
    """Who refuses writes here (``"kafka.wait_in_sync apply"``), or ``""``: writes are allowed."""
    return _READ_ONLY.get()
