"""Is a bench's throughput what the service is known to do? The measured rate against the inventory's baseline.

The seed's one figure (4425 req/s for main-codfw in 2016) was measured once, on some hardware and load:
a rate far below the recorded baseline (``services.<name>.baseline``) is a question for the operator
(fewer processes, a slow broker, a depooled host), not a failure by itself. So the verdict is said in
words and the exit code of ``kafkaops service bench`` stays about failed requests. The rate itself comes
from ``ab``'s report (:mod:`kafkaops.facts.ab`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Comparison:
    """Measured throughput against the inventory's recorded baseline."""

    measured: float
    baseline: float | None
    note: str | None = None

    @property
    def ratio(self) -> float | None:
        return self.measured / self.baseline if self.baseline else None

    def verdict(self) -> str:
        """One line for the operator. The baseline is a figure measured once, on some hardware and
        load: far below it is a question to ask (fewer processes, a slow broker, a depooled host), not a
        failure by itself — so it is said in words and the exit code stays about failed requests."""
        if self.baseline is None:
            return "no baseline recorded for this service (inventory: services.<name>.baseline)"
        pct = 100 * (self.ratio or 0.0)
        where = f" ({self.note})" if self.note else ""
        if pct >= 90:
            return f"{pct:.0f}% of the baseline {self.baseline:g} req/s{where}"
        return f"{pct:.0f}% of the baseline {self.baseline:g} req/s{where}: below it, find out why"

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured, "baseline": self.baseline, "note": self.note,
                "ratio": round(self.ratio, 4) if self.ratio is not None else None, "verdict": self.verdict()}
