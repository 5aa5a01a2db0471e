"""A new procedure is one YAML file: `kafkaops --runbooks DIR run NEW lab` runs it on the real lab.

The runbook below is written by the test into a directory of its own and uses only existing step kinds
(``kafka.preflight``, ``kafka.wait_healthy``): a read-only drill that asks, for every broker of the lab,
"could it be stopped now?" and then waits until the cluster is healthy. It changes nothing, so it is
safe on any lab; the journal, written by the run the CLI started, is the witness that each step ran on
each broker, controller last.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import kafkaops
from invariants import journal, only_run

from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DRILL = """\
name: stop-drill
summary: Ask of every broker whether it could be stopped now, then wait until the cluster is healthy
parameters:
  isr_headroom: {type: int, default: 0, min: 0, help: "ISR replicas required above min.insync.replicas."}
  stable_for: {type: duration, default: 3s, help: "How long the cluster must stay healthy."}
command:
  target: cluster
targets:
  order: controller_last
steps:
  - kafka.preflight: {isr_headroom: "{params.isr_headroom}"}
  - kafka.wait_healthy: {stable_for: "{params.stable_for}", timeout: 2m}
"""


@pytest.fixture
def runbooks(tmp_path: Path) -> Path:
    d = tmp_path / "runbooks"
    d.mkdir()
    (d / "stop-drill.yaml").write_text(DRILL)
    return d


def test_a_new_runbook_runs_through_kafkaops_run(lab_cluster: Cluster, runbooks: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = kafkaops(home, lab_cluster, "--runbooks", str(runbooks), "run", "stop-drill", "lab", "--yes",
                      "--reason", "drill a new runbook", "--param", "stable_for=2s", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = only_run(home)
    assert f"journal: {home / 'runs' / run_id / 'journal.jsonl'}" in result.stderr
    records = journal(home, run_id)
    started = records[0]
    assert started["type"] == "run_started" and started["reason"] == "drill a new runbook"
    assert started["runbook"]["name"] == "stop-drill" and started["runbook"]["params"] == {
        "isr_headroom": 0, "stable_for": 2.0}
    assert records[-1]["type"] == "finished"
    order = [r["target"] for r in records if r["type"] == "target_started"]
    assert sorted(order) == sorted(h.name for h in lab_cluster.hosts)
    controller = KafkaAdmin(lab_cluster.kafka).controller()
    assert order[-1] == next(h.name for h in lab_cluster.hosts if h.broker_id == controller)  # controller last
    done = {(r["target"], r["kind"]) for r in records if r["type"] in ("step_verified", "step_skipped")}
    assert done == {(h, kind) for h in order for kind in ("kafka.preflight", "kafka.wait_healthy")}, records


def test_the_new_runbook_is_also_a_command_with_its_flags(lab_cluster: Cluster, runbooks: Path,
                                                          tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = kafkaops(home, lab_cluster, "--runbooks", str(runbooks), "stop-drill", "lab", "--stable-for", "1s",
                      "--isr-headroom", "0", "--dry-run", "-o", "json", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    assert plan["runbook"] == "stop-drill" and plan["bound"]["params"] == {"isr_headroom": 0, "stable_for": 1.0}
    assert len(plan["targets"]) == len(lab_cluster.hosts)
    assert any("goes last" in n for n in plan["notes"]), plan["notes"]
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())  # a dry-run journals nothing
