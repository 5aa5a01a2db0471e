"""May the roll take the next host down, judged on what monitoring sees (``metrics.gate``)?

Kafka's metadata says whether a partition is under-replicated; it does not say that producers already
wait a second for an ack, or that a request queue is filling. Operators watch those in Grafana while
they roll, and Cruise Control's executor throttles itself on them. A gate is a PromQL query from the
inventory with a ceiling: ``max`` (absolute: under-min-ISR partitions ``max: 0``) and/or ``max_ratio``
(relative to the value the run measured at its start: produce p99 at most 1.5 x the baseline). This
module decides, from numbers alone, whether one gate holds and says why in one line — the same line in
the plan, the journal, the chart and the error that stops the roll.

The edge cases are decided here, once:

* **Several series** (one per broker): the gate judges the worst, the largest value, and names it.
* **No series, or NaN** (the query matched nothing: the exporter is down or no longer scraped, a label
  changed; Kafka's summary has no requests yet): the gate does **not** hold, whatever its ceiling:
  monitoring cannot see the figure, and a roll must not take a host down blind. The line names the gate
  and its query, so the operator knows what to look at. A query must therefore never *make up* a value
  for missing series (``... or vector(0)`` reads a dead exporter as an idle one and lets the gate pass
  blind); where "no traffic" has an honest value, take it from a series the exporter always has while it
  is up — ``... or (0 * sum(rate(x_count[30s])))``: 0 when idle, empty when the exporter is gone
  (docs/monitoring.md).
* **A zero, negative, NaN or absent baseline with ``max_ratio``**: a ratio of zero is no ceiling one can
  act on (any rise from an idle cluster would stop the roll; 1.5 x nothing is nothing), and there is no
  division anywhere: the ratio is *not applied*, the plan says so, and ``max`` alone decides. A gate
  left with no ceiling at all holds when it has a value, and says it has no ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class GateReading:
    """One gate judged now.

    Attributes:
        name: The gate's name (inventory ``monitoring.gates[].name``).
        value: The worst value now; None when the query answered no usable series.
        baseline: The value at the run's start (None: none taken, or no usable series then).
        limit: The ceiling that applies (the lower of ``max`` and ``max_ratio`` x baseline); None: none.
        ok: Whether the gate holds.
        detail: How the ceiling was made, or why a part of it does not apply.
        series: The labels of the worst series (which broker), for the line.
        query: The PromQL asked (this cluster's), named when it saw nothing.
    """

    name: str
    value: float | None
    baseline: float | None
    limit: float | None
    ok: bool
    detail: str = ""
    series: str = ""
    query: str = ""

    def line(self) -> str:
        """``produce_p99_ms 45 > 15 (1.5 x baseline 10) on instance=kafka1002...``: for plans and errors."""
        if self.value is None:
            asked = f"query {self.query}" if self.query else "the query"
            now = f"no data: {asked} returned no series (or only NaN) — is the exporter up?"
        else:
            op = "≤" if self.ok else ">"
            now = f"{_num(self.value)} {op} {_num(self.limit)}" if self.limit is not None else _num(self.value)
        where = f" at {self.series}" if self.series and self.value is not None else ""
        return f"{self.name} {now}{where} ({self.detail})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


def _usable(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def worst(values: Sequence[tuple[Mapping[str, str], float]]) -> tuple[float | None, str]:
    """The largest usable value of a query's series and the labels that name it (``instance=...``)."""
    usable = [(v, labels) for labels, v in values if _usable(v)]
    if not usable:
        return None, ""
    value, labels = max(usable, key=lambda pair: pair[0])
    shown = ",".join(f"{k}={labels[k]}" for k in ("instance", "host") if k in labels)
    return value, shown if len(usable) > 1 or shown else ""


def judge(name: str, value: float | None, baseline: float | None, *, high: float | None,
          ratio: float | None, series: str = "", query: str = "") -> GateReading:
    """Does gate ``name`` hold with ``value`` now, against ``baseline``? ``high`` is the gate's ``max``,
    ``ratio`` its ``max_ratio``, ``query`` the PromQL asked (see the module docstring). A ``value`` of
    None or NaN (no usable series) never holds."""
    limits: list[tuple[float, str]] = []
    notes: list[str] = []
    if high is not None:
        limits.append((high, f"max {_num(high)}"))
    if ratio is not None:
        if not _usable(baseline):
            notes.append(f"max_ratio {ratio:g} not applied: no baseline")
        elif baseline is not None and baseline <= 0:
            notes.append(f"max_ratio {ratio:g} not applied: baseline {_num(baseline)}")
        elif baseline is not None:
            limits.append((ratio * baseline, f"{ratio:g} x baseline {_num(baseline)}"))
    limit, how = min(limits) if limits else (None, "no ceiling applies")
    detail = "; ".join([how, *notes])
    if not _usable(value):
        return GateReading(name, None, baseline if _usable(baseline) else None, limit, False, detail, series, query)
    assert value is not None
    ok = limit is None or value <= limit
    return GateReading(name, value, baseline if _usable(baseline) else None, limit, ok, detail, series, query)


def summary(readings: Sequence[GateReading]) -> str:
    """Every gate's line, ``; ``-joined (the plan's and the journal's text)."""
    return "; ".join(r.line() for r in readings)
