"""``kafkaops runs show RUN`` as a report, and ``--chart``: from a run's journal and samples on disk (the
journal of :mod:`engine.test_timeline`, written where the command looks for runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from engine.test_timeline import _journal  # isort: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_text("".join(json.dumps({"seq": i, **r}) + "\n" for i, r in enumerate(_journal())))
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in [
        {"t": 100.0, "urp": 0, "offline": 0, "brokers": 3, "end_offsets": 1000},
        {"t": 102.0, "urp": 0, "offline": 0, "brokers": 3, "end_offsets": 1300},
        {"t": 117.0, "urp": 12, "offline": 0, "brokers": 2, "end_offsets": 5800},
        {"t": 150.0, "error": "timed out"},
        {"t": 201.0, "urp": 3, "offline": 0, "brokers": 3, "end_offsets": 30000},
    ]) + '{"t": 202.0, "urp": 0, "off\n')  # a killed process's last line, cut short
    return tmp_path


def _show(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKAOPS_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "runs", "show", "r1", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_json_report_has_times_outcomes_restarts_and_sessions(home: Path) -> None:
    shown = _show(home, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    syn = next(s for s in data["steps"] if s["kind"] == "traffic.wait_zero_syns" and s["target"] == "kafka1001")
    assert (syn["duration"], syn["outcome"], len(syn["restarts"])) == (15.0, "changed", 2)
    assert [(s["how"], s["ended_by"]) for s in data["sessions"]] == [("started", "killed"), ("resumed", "paused")]
    assert data["events"][0]["event"] == "reboot_intent" and data["duration"] == 110.0
    assert {"status", "changed", "compensated", "error"} <= set(syn)  # what tools read before stays


def test_markdown_report_for_the_change_record(home: Path) -> None:
    shown = _show(home, "-o", "markdown")
    assert shown.returncode == 0, shown.stderr
    md = shown.stdout
    assert "# Run `r1`" in md and "operator alice, reason: kernel, task T1" in md
    assert "started 1970-01-01 00:01:40Z (pid 11 on adm); killed at 1970-01-01 00:01:56Z" in md
    assert "| kafka1001 | 2 | `traffic.wait_zero_syns` | 00:01:41 | 15.0s | changed | 1 | " \
           "2 restart(s): new SYN from 127.0.0.1 (2) |" in md
    assert "| kafka1001 | 3 | `kafka.stop_broker` | 00:01:56 | 89.0s | changed | 2 | retried after: timeout; " \
           "interrupted (pause or kill); taken up again by the next session |" in md


def test_chart_is_a_png_with_lanes_and_samples(home: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "out" / "run.png"
    shown = _show(home, "--chart", str(chart))
    assert shown.returncode == 0, shown.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 20_000
    assert "chart written to" in shown.stderr


def test_produce_rate_between_samples() -> None:
    from kafkaops.health.timeline_chart import produce_rate

    rate = produce_rate([{"t": 0, "end_offsets": 0}, {"t": 2, "end_offsets": 300}, {"t": 3, "error": "x"},
                         {"t": 4, "end_offsets": 250}, {"t": 6, "end_offsets": 450}])
    assert rate == [(2.0, 150.0), (4.0, 0.0), (6.0, 100.0)]  # never negative (a log truncated, a reset)


def test_a_switchover_samples_each_site_own_topics_and_charts_a_rate_per_site() -> None:
    """Each site counts only its own ``<dc>.`` topics (the mirror copies of the other site's would count
    every event twice); the chart draws one produce rate per site, which is what a switchover moves."""
    from kafkaops.health.timeline_chart import rate_series
    from kafkaops.model import ClusterSnapshot, PartitionState
    from kafkaops.systems.run_samples import EndOffsets, sample, sites_sample

    def snapshot(*topics: str) -> ClusterSnapshot:
        parts = tuple(PartitionState(t, 0, leader=1, replicas=(1, 2), isr=(1,) if t.startswith("codfw") else (1, 2))
                      for t in topics)
        return ClusterSnapshot("c", 0.0, brokers=(1, 2), controller=1, partitions=parts)

    asked: list[list[tuple[str, int]]] = []

    def ends(per_topic: dict[str, int]) -> EndOffsets:
        def end_offsets(tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int | None, int | None]]:
            tps = list(tps)
            asked.append(tps)
            return {tp: (0, per_topic[tp[0]]) for tp in tps}
        return end_offsets

    def at(t: float, eqiad: int, codfw: int) -> dict[str, Any]:
        topics = {"eqiad.test.event": eqiad, "codfw.test.event": codfw}
        return {"t": t, **sites_sample({
            "eqiad": sample(snapshot(*topics), ends(topics), own_prefix="eqiad."),
            "codfw": sample(snapshot(*topics), ends(topics), own_prefix="codfw."),
        })}

    samples = [at(0, 0, 0), at(2, 80, 0), at(4, 80, 60), at(6, 80, 140)]
    assert samples[1]["end_offsets"] is None and samples[1]["urp"] == 2  # one URP per site, summed
    assert all(len(tps) == 1 for tps in asked), asked  # each site asked for its own topic only
    assert samples[2]["sites"]["codfw"]["end_offsets"] == 60
    assert rate_series(samples) == {"produced in codfw (codfw.*)": [(2.0, 0.0), (4.0, 30.0), (6.0, 40.0)],
                                    "produced in eqiad (eqiad.*)": [(2.0, 40.0), (4.0, 0.0), (6.0, 0.0)]}
    assert rate_series([{"t": 0, "end_offsets": 0}, {"t": 2, "end_offsets": 10}]) == {"produce rate": [(2.0, 5.0)]}
