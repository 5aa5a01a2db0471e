"""A run's timeline as a picture: ``runs show RUN --chart FILE.png``, and embedded in the post-check report.

One lane per host, a bar per step (coloured by what it acts on: traffic, Kafka, host, service, check),
a mark where a wait started again, the metric gates' verdicts with their values (``metrics.gate``),
the sessions (a kill and a resume show as a gap between two); under
it, from the samples the run took (:mod:`kafkaops.systems.run_samples`), the under-replicated and offline
partitions and the produce rate (per site for a switchover). Steps that took less than a second are
drawn a second wide, so that a no-op is still visible in its place.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from kafkaops.engine.timeline import RunReport

COLOURS = {"traffic": "#1f77b4", "kafka": "#d62728", "host": "#9467bd", "service": "#2ca02c", "check": "#7f7f7f"}


def produce_rate(samples: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(time, messages/s) between consecutive samples that both summed the log end offsets."""
    good = [s for s in samples if s.get("end_offsets") is not None and "error" not in s]
    out = []
    for a, b in itertools.pairwise(good):
        dt = float(b["t"]) - float(a["t"])
        if dt > 0:
            out.append((float(b["t"]), max(0.0, (int(b["end_offsets"]) - int(a["end_offsets"])) / dt)))
    return out


def rate_series(samples: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """The produce rates to draw, by label: the cluster's, or for a multi-site run (a switchover) each
    site's own topics' — where the events are produced, which is what a switchover moves."""
    dcs = sorted({dc for s in samples for dc in s.get("sites", {})})
    if not dcs:
        rate = produce_rate(samples)
        return {"produce rate": rate} if rate else {}
    series = {f"produced in {dc} ({dc}.*)": produce_rate([{"t": s["t"], **s["sites"][dc]} for s in samples
                                                          if dc in s.get("sites", {}) and "error" not in s])
              for dc in dcs}
    return {label: rate for label, rate in series.items() if rate}


def gate_label(event: dict[str, Any]) -> str:
    """A ``metric_gate`` event's annotation: each gate's value and ceiling (``p99 45>15``, ``isr 0≤0``)."""
    parts = []
    for r in event.get("readings") or []:
        value, limit = r.get("value"), r.get("limit")
        shown = "no data" if value is None else f"{float(value):.3g}"
        if limit is not None and value is not None:
            shown += f"{'≤' if r.get('ok') else '>'}{float(limit):.3g}"
        parts.append(f"{r.get('name')} {shown}")
    return ", ".join(parts)


def _gate_marks(ax: Any, report: RunReport, hosts: list[str], t0: float) -> None:
    """The metric gates' verdicts (``metric_gate`` events) on the host's lane: a green triangle where they
    held, a red one where they held the roll, with the values beside the red ones and the last green one of
    each host, so the chart shows what monitoring saw before each stop."""
    gates = [e for e in report.events if e.get("event") == "metric_gate" and e.get("target") in hosts]
    last_ok = {e.get("target"): id(e) for e in gates if e.get("held")}
    for e in gates:
        lane = hosts.index(str(e["target"]))
        held = bool(e.get("held"))
        ax.plot(float(e["t"]) - t0, lane - 0.42, marker="^", color="#2ca02c" if held else "#d62728", markersize=5)
        if not held or last_ok.get(e.get("target")) == id(e):
            ax.text(float(e["t"]) - t0, lane - 0.48, " " + gate_label(e), fontsize=6, va="bottom",
                    color="#2ca02c" if held else "#d62728", clip_on=True)


def draw(report: RunReport, samples: list[dict[str, Any]], path: Path) -> Path:
    """Write the chart of ``report`` (and ``samples``) to ``path`` as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    t0 = report.start or 0.0
    hosts = list(dict.fromkeys(s.target for s in report.steps))
    fig, (ax, ax_urp) = plt.subplots(2, 1, figsize=(13, 2.2 + 0.55 * len(hosts) + 2.2), sharex=True,
                                     gridspec_kw={"height_ratios": [max(len(hosts), 2), 2.2]})
    for lane, host in enumerate(hosts):
        for s in report.steps:
            if s.target != host or s.start is None or s.end is None:
                continue
            start, width = s.start - t0, max(s.end - s.start, 1.0)
            failed = s.outcome == "failed"
            ax.broken_barh([(start, width)], (lane - 0.35, 0.7), facecolors=COLOURS[s.category],
                           alpha=0.35 if s.outcome == "no-op" else 0.9, edgecolor="black" if failed else "none",
                           linewidth=1.5 if failed else 0)
            if width >= 6:
                ax.text(start + width / 2, lane, s.kind.split(".", 1)[1], ha="center", va="center", fontsize=6,
                        clip_on=True)
            for r in s.restarts:
                ax.plot(r["t"] - t0, lane + 0.42, marker="v", color="black", markersize=3)
    _gate_marks(ax, report, hosts, t0)
    for session in report.sessions[1:]:
        ax.axvline(session.start - t0, color="orange", linestyle="--", linewidth=1)
        ax.text(session.start - t0, len(hosts) - 0.4, f" {session.how}", color="orange", fontsize=7)
    for session in report.sessions:
        if session.ended_by in ("killed", "paused", "failed"):
            ax.axvline(session.end - t0, color="red", linestyle=":", linewidth=1)
            ax.text(session.end - t0, -0.9, f"{session.ended_by} ", color="red", fontsize=7, ha="right")
    ax.set_yticks(range(len(hosts)), hosts)
    ax.set_ylim(-1, len(hosts))
    ax.invert_yaxis()
    ax.set_title(f"{report.runbook} on {report.cluster} — run {report.run_id} ({report.status}, "
                 f"{(report.duration or 0):.0f} s)", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], loc="upper right", fontsize=7,
              ncols=5)
    ax.grid(axis="x", alpha=0.3)

    taken = [x for x in samples if "error" not in x]
    if taken:
        ts = [float(x["t"]) - t0 for x in taken]
        ax_urp.step(ts, [x["urp"] for x in taken], where="post", color="#d62728", label="under-replicated")
        ax_urp.step(ts, [x["offline"] for x in taken], where="post", color="black", label="offline")
        ax_urp.set_ylabel("partitions", fontsize=8)
        rates = rate_series(samples)
        if rates:
            ax_rate = ax_urp.twinx()
            for (label, rate), colour in zip(rates.items(), ("#1f77b4", "#ff7f0e", "#2ca02c"), strict=False):
                ax_rate.plot([t - t0 for t, _ in rate], [r for _, r in rate], color=colour, label=label)
            ax_rate.set_ylabel("messages/s", fontsize=8)
            ax_rate.legend(loc="upper right", fontsize=7)
        ax_urp.legend(loc="upper left", fontsize=7)
    else:
        ax_urp.text(0.5, 0.5, "no samples (a run before samples were taken, or Kafka did not answer)",
                    transform=ax_urp.transAxes, ha="center", fontsize=8)
    for gap in samples:
        if "error" in gap:
            ax_urp.axvline(float(gap["t"]) - t0, color="grey", alpha=0.3)
    ax_urp.set_xlabel("seconds since the run started", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
