"""The values a run's parts hand each other: what every record of a run carries (:class:`RunMeta`), the
outcome a caller gets (:class:`RunResult`), and a step's parameters bound for a compensation or a check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.engine.step import (
    StepKind,
    coerce_param,
)


@dataclass
class RunResult:
    """Outcome of ``start``/``resume``/``abort``/``apply_plan``."""

    run_id: str
    status: str
    applied: int = 0
    skipped: int = 0
    compensated: int = 0
    journal: Path | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunMeta:
    """Who runs what, where and why: carried by every audit record and every step's context."""

    run_id: str
    cluster: str
    operator: str
    reason: str
    task: str | None
    runbook: str
    targets: tuple[str, ...]
    batches: tuple[tuple[str, ...], ...] = ()


def bind_params(entry: StepKind, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` coerced to ``entry``'s parameters, with their defaults (a compensation or a rollback check
    is bound here, not from a runbook)."""
    out: dict[str, Any] = {}
    for p in entry.params:
        if p.name in raw:
            out[p.name] = coerce_param(p, raw[p.name])
        elif p.default is not None:
            out[p.name] = coerce_param(p, p.default)
    return out
