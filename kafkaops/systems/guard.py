"""Adapters refuse their own writes in a dry-run: the second line of defence behind the planner.

A dry-run must change nothing. The planner already never calls ``apply`` in a dry-run, but a bug in a
step's ``observe`` (or a helper that "just checks" by restarting something) would still reach the
world through an adapter. So every adapter is built knowing whether the run is a dry-run, and every
method that changes something is marked :func:`write`: called in a dry-run it raises
:class:`DryRunViolation` — a bug, never something an operator caused — before any byte leaves the
process. spicerack's ``RemoteHosts`` does the same (its adapters refuse unsafe commands in dry-run).

``tests/unit/test_adapter_guards.py`` calls every marked method of every adapter in a dry-run and
expects the error; :func:`write_methods` is how it finds them, so a new write is covered as soon as it
is marked.

The same mark enforces the step contract in a real run: inside the engine's
:func:`~kafkaops.engine.read_only.read_only_scope` (every observe, plan, verify and precondition, and the
apply of a kind registered ``read-only``) a marked method raises :class:`ReadOnlyViolation`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kafkaops.engine.read_only import writes_refused_by
from kafkaops.errors import KafkaOpsError

F = TypeVar("F", bound=Callable[..., Any])

_WRITE_MARK = "__kafkaops_write__"


class DryRunViolation(KafkaOpsError):
    """An adapter was asked to change something in a dry-run: a bug in kafkaops, exit 1."""

    exit_code = 1


class ReadOnlyViolation(KafkaOpsError):
    """An adapter was asked to change something by a step phase that promised to change nothing (any
    kind's observe, plan, verify or precondition; a ``read-only`` kind's apply): a bug, exit 1."""

    exit_code = 1


def write(method: F) -> F:
    """Mark an adapter method as one that changes the world; refuse it when ``self.dry_run`` is true."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "dry_run", False):
            raise DryRunViolation(
                f"{type(self).__name__}.{method.__name__} called in a dry-run: nothing may change in a "
                "dry-run (a bug in kafkaops: please report it with the command line)",
            )
        if who := writes_refused_by():
            raise ReadOnlyViolation(
                f"{type(self).__name__}.{method.__name__} called by {who}, which may change nothing (a bug in "
                "kafkaops: please report it with the command line)",
            )
        return method(self, *args, **kwargs)

    setattr(guarded, _WRITE_MARK, True)
    return cast(F, guarded)


def write_methods(cls: type) -> list[str]:
    """Names of the methods of ``cls`` marked with :func:`write` (inherited ones included)."""
    return sorted(name for name in dir(cls) if getattr(getattr(cls, name, None), _WRITE_MARK, False))
