"""How often and how patiently the runner retries a step: a runbook's or a step's ``retry:``, as data.

A retry always starts again from ``observe`` (:mod:`kafkaops.engine.runner`): what failed may have half
happened, so the step looks before it acts again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkaops.engine.step import (
    parse_duration,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attributes:
        attempts: Total tries (1 = no retry).
        backoff: Seconds before the first retry.
        multiplier: Backoff growth per retry.
        max_backoff: Cap on a single delay.
        retry_on: Extra exception types to treat as retryable (besides ``exc.retryable``).
    """

    attempts: int = 3
    backoff: float = 5.0
    multiplier: float = 2.0
    max_backoff: float = 60.0
    retry_on: tuple[type[BaseException], ...] = ()

    def delay(self, failures: int) -> float:
        """Delay after the ``failures``-th failure (1-based)."""
        return float(min(self.backoff * self.multiplier ** max(failures - 1, 0), self.max_backoff))

    def retryable(self, exc: BaseException) -> bool:
        return bool(getattr(exc, "retryable", False)) or isinstance(exc, self.retry_on)

    def merged(self, overrides: Mapping[str, Any] | None) -> RetryPolicy:
        """A copy with a runbook's or step's ``retry:`` mapping applied."""
        if not overrides:
            return self
        return RetryPolicy(
            attempts=int(overrides.get("attempts", self.attempts)),
            backoff=parse_duration(overrides["backoff"]) if "backoff" in overrides else self.backoff,
            multiplier=float(overrides.get("multiplier", self.multiplier)),
            max_backoff=parse_duration(overrides["max_backoff"])
            if "max_backoff" in overrides
            else self.max_backoff,
            retry_on=self.retry_on,
        )
