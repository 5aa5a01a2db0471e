"""The ``assignment`` parameter of the placement steps (``[[topic, partition, [replicas]], ...]``) and back:
what ``kafkaops placement plan`` writes and the reassignment steps read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafkaops.errors import ConfigError
from kafkaops.placement.layout import TopicPartition


def target_assignment(value: Any) -> dict[TopicPartition, tuple[int, ...]]:
    """The ``assignment`` parameter — ``[[topic, partition, [replicas]], ...]`` — as a mapping.

    Raises:
        ConfigError: Another shape (a hand-edited plan or a bad ``--param``).
    """
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for item in value or ():
        if not (isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[0], str)
                and isinstance(item[1], int) and isinstance(item[2], (list, tuple)) and item[2]
                and all(isinstance(b, int) and not isinstance(b, bool) for b in item[2])):
            raise ConfigError(f"placement assignment: malformed entry {str(item)[:80]!r}",
                              hint="entries are [topic, partition, [broker ids]]; make the plan with "
                                   "`kafkaops placement plan`")
        out[(item[0], item[1])] = tuple(item[2])
    if not out:
        raise ConfigError("placement assignment is empty", hint="make the plan with `kafkaops placement plan`")
    return out


def assignment_param(assignment: Mapping[TopicPartition, Sequence[int]]) -> list[list[Any]]:
    """The inverse of :func:`target_assignment`, sorted: what a plan carries."""
    return [[t, p, list(r)] for (t, p), r in sorted(assignment.items())]
