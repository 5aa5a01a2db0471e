"""A PromQL gate whose threshold is crossed holds a rolling reboot before the stop, the report shows the
values, and once the gate is relaxed the roll finishes (issue 31).

Under the lab load, the lab's real Prometheus scrapes every broker's JMX exporter; the test's copy of the
inventory has one gate on the cluster's produce rate (``messagesin``, which the load moves) with a
ceiling far under what the load produces. The roll must hold at ``metrics.gate``, before any broker
is stopped, and say the value, its limit and the baseline; the operator pauses it (Ctrl-C), relaxes the
gate in the inventory, and ``resume --accept-inventory-change`` finishes the roll.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml
from harness import Load, kafkaops, output, spawn
from invariants import journal, live_journal, only_run

from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAST = ["--syn-window", "2s", "--no-scan", "--stable-for", "0s"]
GATE = "messages_in_per_s"
QUERY = 'sum(rate(kafka_server_brokertopicmetrics_messagesinpersec_total{cluster="{cluster.name}"}[20s]))'


def _inventory(source: str, path: Path, ceiling: float) -> None:
    doc = yaml.safe_load(Path(source).read_text())
    doc["monitoring"]["gates"] = [{"name": GATE, "query": QUERY, "max": ceiling}]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_crossed_gate_holds_the_roll_and_a_relaxed_one_lets_it_finish(
        pooled_lab: Cluster, home: Path, tmp_path: Path) -> None:
    cluster = pooled_lab
    inventory = tmp_path / "lab.yaml"
    shutil.copy(cluster.source, inventory)
    _inventory(cluster.source, inventory, ceiling=1.0)  # the load produces ~100 messages/s

    with Load(cluster, rate=100):
        proc = spawn(home, cluster, "rolling-reboot", "lab", "-i", str(inventory), "--yes", "--reason",
                     "metric gate test", *FAST)
        held: dict | None = None
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None and held is None:
            held = next((r for r in live_journal(home) if r["type"] == "event" and r.get("event") == "metric_gate"
                         and not r.get("held")), None)
            time.sleep(0.2)
        assert held is not None, f"the gate never held the roll:\n{output(proc)[-3000:]}"
        time.sleep(3)  # still holding a few seconds later: the gate waits, it does not give up
        assert proc.poll() is None, output(proc)[-3000:]
        os.killpg(proc.pid, signal.SIGINT)  # the operator pauses the held roll
        proc.wait(60)

        run_id = only_run(home)
        records = journal(home, run_id)
        assert records[-1]["type"] == "paused", output(proc)[-3000:]
        first = held["target"]
        # nothing was stopped: the hold came before the first broker stop
        assert not [r for r in records if r.get("kind") in ("kafka.stop_broker", "host.reboot")
                    and r["type"] == "step_applying"]
        (reading,) = held["readings"]
        assert reading["name"] == GATE and reading["value"] > 1.0 and reading["limit"] == 1.0
        assert reading["ok"] is False and reading["detail"].startswith("max 1")
        baseline = [r for r in records if r["type"] == "event" and r.get("event") == "metric_baseline"]
        assert len(baseline) == 1 and baseline[0]["values"][GATE] > 1.0  # taken once, at the run's start

        # the report shows the values: runs show's JSON events and its markdown
        shown = kafkaops(home, cluster, "runs", "show", run_id, "-o", "json")
        assert shown.returncode == 0, shown.stderr
        events = [e for e in json.loads(shown.stdout)["events"] if e["event"] == "metric_gate"]
        assert events and events[0]["readings"][0]["name"] == GATE
        chart = tmp_path / "run.png"
        drawn = kafkaops(home, cluster, "runs", "show", run_id, "--chart", str(chart))
        assert drawn.returncode == 0 and chart.stat().st_size > 0, drawn.stderr

        # the operator relaxes the gate; the run's recorded inventory differs, so the resume asks for it
        _inventory(cluster.source, inventory, ceiling=1e9)
        refused = kafkaops(home, cluster, "resume", run_id)
        assert refused.returncode == 8 and "monitoring" in refused.stderr, refused.stdout + refused.stderr
        done = kafkaops(home, cluster, "resume", run_id, "--accept-inventory-change", timeout=400)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    records = journal(home, run_id)
    assert records[-1]["type"] == "finished"
    passed = [r for r in records if r["type"] == "event" and r.get("event") == "metric_gate" and r.get("held")]
    assert {r["target"] for r in passed} == {h.name for h in cluster.hosts}  # every host's stop was gated
    assert any(r["target"] == first for r in passed)
    # the baseline stayed the run's: the resume did not take a second one
    assert len([r for r in records if r["type"] == "event" and r.get("event") == "metric_baseline"]) == 1
