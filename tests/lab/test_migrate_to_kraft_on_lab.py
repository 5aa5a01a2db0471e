"""``kafkaops migrate-to-kraft`` on the migration lab (issue 33): Kafka's ZooKeeper -> KRaft migration as
four runs of the engine, each one planned, locked, journaled and resumed.

The suite's test provisions the controllers (stage 1) and checks what the next plan says; the long
scenario walks all four stages under the acks=all load and HTTP through the VIP, with kafkaops SIGKILLed in
each stage and resumed, compares the cluster's metadata before and after with Kafka's own tools, and
stops ZooKeeper at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Load, kafkaops, output, pristine_migration_lab, spawn
from invariants import live_journal, only_run

from kafkaops.lab.host import LabHost
from kafkaops.lab.spec import LabSpec
from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

STAGE_ARGS = ("--yes", "--no-scan", "--syn-window", "2s", "--output", "plain")


def _stage(home: Path, cluster: Cluster, *extra: str) -> subprocess.CompletedProcess[str]:
    return kafkaops(home, cluster, "migrate-to-kraft", cluster.name, *STAGE_ARGS, *extra,
                    "--reason", "issue 33 lab", timeout=900)


def test_migrate_to_kraft_provisions_the_controllers_then_plans_the_broker_roll(migration: Cluster,
                                                                                  tmp_path: Path) -> None:
    """Stage 1 on the lab: the plan names the stage and the point of no return, the run provisions the three
    controllers into a quorum, and the next plan is stage 2's; a stage the cluster is not ready for refuses."""
    spec = pristine_migration_lab(migration)
    home = tmp_path / "home"
    planned = kafkaops(home, migration, "migrate-to-kraft", migration.name, "--dry-run", "--output", "json")
    assert planned.returncode == 0, planned.stderr[-2000:]
    plan = json.loads(planned.stdout)
    assert plan["runbook"] == "migration-controllers"
    assert plan["targets"] == [c.name for c in spec.controllers]
    assert "stage 1 of 4, controllers" in planned.stderr
    gate = next(s for s in plan["steps"] if s["kind"] == "migration.phase_gate")
    assert "| no way back from here | finalizing" in gate["noop_reason"]

    early = kafkaops(home, migration, "run", "migration-finalize", migration.name, "--dry-run")
    assert early.returncode != 0 and "but the cluster is in phase zookeeper" in early.stderr, early.stderr[-2000:]

    done = _stage(home, migration)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    for c in spec.controllers:
        assert LabHost(spec, c).provisioned, c.name
    nxt = kafkaops(tmp_path / "home2", migration, "migrate-to-kraft", migration.name, "--dry-run", "--output", "json")
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    assert json.loads(nxt.stdout)["runbook"] == "migration-brokers"
    assert "migration phase controllers; this run: stage 2 of 4, brokers-migration" in nxt.stderr


# --- the long scenario: every stage, killed and resumed, under load ------------------------------------------


def _tool(spec: LabSpec, main: str, *args: str) -> str:
    """One of Kafka's own command-line tools (the lab's 3.9 jars), its output."""
    done = subprocess.run(["java", "-Xmx256m", "-Dlog4j.configuration=file:/dev/null", "-cp",
                           f"{spec.kafka_jars}/*", main, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _metadata(spec: LabSpec, cluster: Cluster) -> dict[str, Any]:
    """What the migration must keep, as Kafka's tools show it: each topic's id, partitions, replication
    factor, configs and every partition's replicas (leaders and ISRs move in a roll: left out), and each
    topic's dynamic configs. The load's own consumer offsets topic is left out (created while it runs)."""
    server = cluster.bootstrap_servers.split(",")[0]
    topics: dict[str, Any] = {}
    for line in _tool(spec, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server,
                      "--describe", "--exclude-internal").splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Topic" not in fields:
            continue
        entry = topics.setdefault(fields["Topic"], {"partitions": {}})
        if "Partition" in fields:
            entry["partitions"][fields["Partition"]] = fields["Replicas"]
        else:
            entry.update({k: fields.get(k) for k in ("TopicId", "PartitionCount", "ReplicationFactor", "Configs")})
    configs: dict[str, list[str]] = {}
    topic = ""
    for line in _tool(spec, "kafka.admin.ConfigCommand", "--bootstrap-server", server, "--describe",
                      "--entity-type", "topics").splitlines():
        if line.startswith("Dynamic configs for topic "):
            topic = line.removeprefix("Dynamic configs for topic ").removesuffix(" are:")
        if not topic.startswith("__"):  # internal topics: created by the load's own consumer group meanwhile
            configs.setdefault(topic, []).append(line.strip())
    return {"topics": topics, "dynamic_configs": configs}


def _kill_at(home: Path, cluster: Cluster, point: tuple[str, int, str], *extra: str) -> str:
    """Start the next stage, SIGKILL kafkaops as it starts applying ``point`` (the nth target's step kind),
    resume the run to its end; the run id."""
    kind, nth, event = point
    proc = spawn(home, cluster, "migrate-to-kraft", cluster.name, *STAGE_ARGS, *extra, "--reason", "issue 33")
    deadline = time.monotonic() + 600
    try:
        while True:
            records = live_journal(home)
            targets = [r["target"] for r in records if r.get("type") == "target_started"]
            hit = len(targets) >= nth and any(r.get("type") == event and r.get("kind") == kind
                                              and r.get("target") == targets[nth - 1] for r in records)
            if hit:
                break
            assert proc.poll() is None, f"the stage ended before {point}: {output(proc)[-3000:]}"
            assert time.monotonic() < deadline, f"{point} not reached: {output(proc)[-3000:]}"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    run_id = only_run(home)
    resumed = kafkaops(home, cluster, "resume", run_id, *(a for a in extra if a != "--yes"), timeout=1200)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-4000:]
    return run_id


@pytest.mark.long
def test_migrate_to_kraft_killed_in_each_stage_resumes_to_the_end_under_load(migration: Cluster,
                                                                            tmp_path: Path) -> None:
    spec = pristine_migration_lab(migration)
    before = _metadata(spec, migration)
    # where kafkaops dies in each stage: mid-provisioning, between a broker's new configuration and its
    # start, mid-roll into KRaft mode, and in the finalize with one controller already without ZooKeeper
    kills = [(("migration.format", 2, "step_applying"), ()),
             (("kafka.start_broker", 2, "step_applying"), ()),
             (("kafka.stop_broker", 3, "step_applied"), ()),
             (("kraft.start_controller", 2, "step_applying"), ("--confirmed", "finalize-migration"))]
    timings = {}
    with Load(migration, rate=100, http_rate=4) as load:
        for n, (point, extra) in enumerate(kills, start=1):
            t = time.monotonic()
            run_id = _kill_at(tmp_path / f"stage{n}", migration, point, *extra)
            timings[run_id.split("-", 2)[2].rsplit("-", 1)[0] + f" (stage {n})"] = time.monotonic() - t
        done = kafkaops(tmp_path / "after", migration, "migrate-to-kraft", migration.name, "--dry-run")
        assert done.returncode == 0 and "the migration to KRaft is finalized" in done.stderr, done.stderr[-2000:]
        from kafkaops.lab import procs

        zk_pid = procs.live_pid(Path(spec.lab_dir) / "run" / "zookeeper.pid")
        assert zk_pid is not None
        os.kill(zk_pid, signal.SIGTERM)
        time.sleep(10)  # the cluster goes on without it, under the load
    report = load.report
    print("stages (each killed once and resumed): " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))
    print(f"load: {report}")
    assert report is not None and report.produced_acked > 1000
    assert report.lost == 0 and report.duplicated == 0, report
    after = _metadata(spec, migration)
    assert after == before
