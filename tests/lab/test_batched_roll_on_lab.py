"""Issue 19 on the labs: `--batch auto` computes the batches from the live placement.

* Stretch lab (four brokers over eqiad and codfw), every topic laid out RF 4 with two replicas per DC by
  ``placement apply``, min ISR 2: two batches, one per DC, the controller's batch last. The roll runs
  under continuous acks=all load, is SIGKILLed right after the first broker of the first batch stopped,
  and ``resume`` finishes it: 0 acked messages lost or duplicated, each broker stopped exactly once
  (counted from the lab hosts' own logs), and within a batch no broker restarts before every broker of the
  batch is down.
* Default lab (three brokers, RF 3, min ISR 2): one broker per batch, and the plan says why.

The stretch roll is a long scenario (``@pytest.mark.long``, run by bench/long_scenarios.py); the suite
has its short version: the plan of the laid-out stretch lab.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import kill_after_step, live_journal

from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _lay_out(stretch: Cluster, home: Path, tmp_path: Path) -> None:
    plan = tmp_path / "layout.plan.json"
    planned = kafkaops(home, stretch, "placement", "plan", stretch.name, "--topics", ".*", "--throttle", "100MB/s",
                       "--batch-size", "50", "--sample", "0", "--no-compare", "--save-plan", str(plan),
                       "--reason", "issue 19: the stretch layout first")
    assert planned.returncode == 0, planned.stderr
    if plan.exists():
        applied = kafkaops(home, stretch, "placement", "apply", str(plan))
        assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr
    checked = kafkaops(home, stretch, "placement", "check", stretch.name, "--topics", ".*", "-o", "json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout[-2000:]


def _batches(stretch: Cluster, home: Path) -> list[list[str]]:
    """``--batch auto``'s plan on the laid-out stretch lab, checked: two batches, one DC each, the
    controller's last."""
    from kafkaops.systems.kafka import KafkaAdmin

    dc = {h.name: h.dc for h in stretch.hosts}
    controller = KafkaAdmin(stretch.kafka).controller()
    planned = kafkaops(home, stretch, "rolling-restart", stretch.name, "--batch", "auto", "--dry-run", "-o",
                       "json", "--no-scan")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    batches: list[list[str]] = plan["bound"]["batches"]
    assert len(batches) == 2 and all(len({dc[h] for h in b}) == 1 for b in batches), batches
    assert any(h.broker_id == controller and h.name in batches[-1] for h in stretch.hosts), (controller, batches)
    return batches


def test_batch_auto_plans_the_stretch_lab_one_dc_at_a_time(stretch: Cluster, tmp_path: Path) -> None:
    """The suite's short version of the roll below (a long scenario, bench/long_scenarios.py): the plan of
    the laid-out stretch lab. A batch's lockstep is unit-tested (tests/unit/engine/test_runbook.py)."""
    _lay_out(stretch, tmp_path / "layout", tmp_path)
    batches = _batches(stretch, tmp_path / "home")
    assert sorted(h for b in batches for h in b) == sorted(h.name for h in stretch.hosts), batches


@pytest.mark.long
def test_batch_auto_rolls_the_stretch_lab_one_dc_at_a_time_killed_and_resumed(stretch: Cluster,
                                                                               tmp_path: Path) -> None:
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost
    from kafkaops_lab.spec import LabSpec

    with Load(stretch, rate=150, http_rate=0) as load:
        # Under load from the start: the load's consumer group creates __consumer_offsets (RF 3, Kafka's
        # placement), which the layout then covers too.
        _lay_out(stretch, tmp_path / "layout", tmp_path)
        home = tmp_path / "home"
        batches = _batches(stretch, home)

        spec = LabSpec.load(lab_dir(stretch.name))
        hosts = {h.name: LabHost.named(h.name, spec) for h in stretch.hosts}
        stops = {n: len(h.events("kafka-stop")) for n, h in hosts.items()}
        proc = spawn(home, stretch, "rolling-restart", stretch.name, "--batch", "auto", "--yes", "--no-scan",
                     "--stable-for", "2s", "--reason", "issue 19 batched roll")
        run_id = kill_after_step(home, proc, "kafka.stop_broker", batches[0][0])
        assert "--batch auto: 2 batch(es)" in output(proc), output(proc)[:3000]
        resumed = kafkaops(home, stretch, "resume", run_id)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr + output(proc)[-2000:]
    report = load.report
    assert report is not None and report.produced_acked > 0
    assert report.lost == 0 and report.duplicated == 0, report
    assert {n: len(h.events("kafka-stop")) - stops[n] for n, h in hosts.items()} == dict.fromkeys(hosts, 1)

    # Lockstep: inside a batch, every broker is stopped before any is started again.
    records = live_journal(home)
    for batch in batches:
        stopped = max(r["seq"] for r in records if r.get("type") == "step_verified"
                      and r.get("kind") == "kafka.stop_broker" and r.get("target") in batch)
        started = min(r["seq"] for r in records if r.get("type") == "step_applying"
                      and r.get("kind") == "kafka.start_broker" and r.get("target") in batch)
        assert stopped < started, batch


def test_batch_auto_on_the_default_lab_is_one_at_a_time_and_says_why(lab_cluster: Cluster, home: Path) -> None:
    planned = kafkaops(home, lab_cluster, "rolling-restart", lab_cluster.name, "--batch", "auto", "--dry-run",
                       "-o", "json", "--no-scan")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert not plan["bound"].get("batches")  # every batch a single broker: the roll is the classic one
    notes = " ".join(plan["notes"])
    assert "3 batch(es)" in notes and "cannot go with" in notes and "must keep 2 of them" in notes, notes
