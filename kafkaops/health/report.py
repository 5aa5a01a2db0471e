"""Render a post-check result: a terminal table, Markdown for the change review, JSON for tools, a PNG.

The report is what the operator (and the change reviewer after them) reads to decide whether the
maintenance is done, so every failing finding is one line naming the topic, the partition, the check
and how bad it is; the verdict and the exit code come from the same function
(:func:`exit_code_for`) the CLI and the runbook step use. The chart shows produce rate and URP count
across the run window, which is the first thing a reviewer asks about ("did producers notice?").

matplotlib is imported lazily with the Agg backend (no display on servers).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from kafkaops.errors import CheckFailed
from kafkaops.health.check import CheckResult
from kafkaops.health.data import minute_series, total_minutes
from kafkaops.health.metadata import Finding, healthy

__all__ = ["exit_code_for", "finding_rows", "render_chart", "render_markdown", "render_table", "to_json"]

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "dim"}


def exit_code_for(findings: Iterable[Finding]) -> int:
    """0 when no finding is critical or warning, else :attr:`CheckFailed.exit_code` (9)."""
    return 0 if healthy(findings) else CheckFailed.exit_code


def _fmt_value(v: float | int | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return f"{int(v):,}"


def finding_rows(findings: Sequence[Finding], *, include_info: bool = True) -> list[list[str]]:
    """``[severity, check, topic, partition, value, message]`` per finding (shared by all renderers)."""
    return [
        [f.severity, f.check, f.topic or "-", "-" if f.partition is None else str(f.partition),
         _fmt_value(f.value), f.message]
        for f in findings if include_info or f.severity != "info"
    ]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _scan_line(result: CheckResult) -> str:
    if result.scan is None:
        return "data scan: skipped"
    s = result.scan
    return (f"data scan: {s.records:,} records of {len(result.ranges)} partitions on {s.master} "
            f"({s.reader} reader) in {s.seconds:.1f} s")


def render_markdown(result: CheckResult) -> str:
    """A Markdown report for a change review (verdict, window, scan, findings table)."""
    lines = [
        f"## Topic health post-check: {result.cluster}",
        "",
        f"**{result.summary()}** (exit code {result.exit_code})",
        "",
        f"- run window: {_when(result.window[0])} → {_when(result.window[1])}",
        f"- baseline: {_when(result.baseline.taken_at) if result.baseline else 'derived from --since'}",
        f"- topics: `{result.topics_regex or 'all'}`; {len(result.now.partitions)} partitions",
        f"- {_scan_line(result)}",
        "",
    ]
    rows = finding_rows(result.findings)
    if not rows:
        lines.append("No findings.")
        return "\n".join(lines) + "\n"
    lines += ["| Severity | Check | Topic | Partition | Value | Finding |", "|---|---|---|---|---|---|"]
    for r in rows:
        cells = [c.replace("|", "\\|") for c in r]
        cells[1] = f"`{cells[1]}`"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_json(result: CheckResult) -> dict[str, Any]:
    """The JSON document of ``--output json`` (stable keys, see docs/health-check.md)."""
    return result.to_dict()


def render_table(result: CheckResult, console: Any) -> None:
    """Print the report as a rich table on ``console``."""
    from rich.table import Table

    style = "bold green" if result.healthy else "bold red"
    console.print(f"[{style}]{result.summary()}[/]", highlight=False)
    console.print(f"run window {_when(result.window[0])} → {_when(result.window[1])}; {_scan_line(result)}",
                  highlight=False)
    if not result.findings:
        return
    table = Table(show_lines=False, expand=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("topic", overflow="fold")
    table.add_column("part.", justify="right", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("finding", overflow="fold", ratio=1)
    for row in finding_rows(result.findings):
        table.add_row(*row, style=_STYLE.get(row[0]))
    console.print(table)


def chart_series(result: CheckResult) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """``(produce rate per minute, URP count)`` as ``[(unix seconds, value)]`` for the chart."""
    rate: list[tuple[float, int]] = []
    if result.scan is not None and result.rate_window is not None and result.scan.minutes:
        w = result.rate_window
        first = int(w.scan_from // 60)
        last = int(w.scan_to // 60)
        rate = [(m * 60.0, c) for m, c in minute_series(total_minutes(result.scan.minutes), first, last)]
    return rate, list(result.urp_series)


def render_chart(result: CheckResult, path: str | Path) -> Path:
    """Write a PNG of produce rate (records/min) and URP count across the run window.

    Args:
        result: The post-check result.
        path: Where to write the PNG.

    Returns:
        The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from datetime import datetime

    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    rate, urp = chart_series(result)

    def dt(t: float) -> float:
        return float(mdates.date2num(datetime.fromtimestamp(t, tz=UTC)))

    fig, ax = plt.subplots(figsize=(10, 4), dpi=100)
    try:
        if rate:
            ax.plot([dt(t) for t, _ in rate], [c for _, c in rate], color="tab:blue", marker=".",
                    label="produce rate (records/min)")
        ax.set_ylabel("records / min", color="tab:blue")
        ax2 = ax.twinx()
        if urp:
            ax2.step([dt(t) for t, _ in urp], [n for _, n in urp], where="post", color="tab:red", marker="o",
                     label="under-replicated partitions")
        ax2.set_ylabel("URP", color="tab:red")
        ax2.set_ylim(bottom=0, top=max([n for _, n in urp] + [1]) * 1.2)
        ax.axvspan(dt(result.window[0]), dt(result.window[1]), color="grey", alpha=0.15, label="run window")
        ax.xaxis_date(tz=UTC)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
        ax.set_xlabel("UTC")
        verdict = "healthy" if result.healthy else "UNHEALTHY"
        ax.set_title(f"{result.cluster}: produce rate and URP across the run ({verdict})")
        handles = ax.get_legend_handles_labels()
        handles2 = ax2.get_legend_handles_labels()
        ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], loc="upper left", fontsize="small")
        fig.autofmt_xdate()
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png")
    finally:
        plt.close(fig)
    return out
