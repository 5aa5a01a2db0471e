"""The run owns its environment (issue 10), end to end on the lab.

- The inventory named on the subcommand alone (no ``$KAFKAOPS_INVENTORY``, another working directory)
  decides the lock: the ZooKeeper znode is held for the whole run, read from ZooKeeper by the test.
- A resumed run acts on the inventory it started with: a changed bootstrap address is refused and named;
  accepted explicitly, it resumes and the journal records what was accepted.
- A dry-run of a rolling reboot shows, for the second and third host, the state the first host's steps
  leave (projected), and changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import kafkaops, spawn
from invariants import journal, live_journal, only_run

from kafkaops.health.status import collect
from kafkaops.model import Cluster
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAST = ["--syn-window", "2s", "--no-scan"]


def _bare_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKAOPS_INVENTORY"}
    env["KAFKAOPS_HOME"] = str(home)
    return env


def test_inventory_on_the_subcommand_decides_the_lock_held_for_the_whole_run(
        pooled_lab: Cluster, home: Path, tmp_path: Path) -> None:
    from kazoo.exceptions import NoNodeError

    from kafkaops.systems.zookeeper import ZooKeeper

    cluster = pooled_lab
    assert cluster.zookeeper
    inventory = str(Path(cluster.source).resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    session = ZooKeeper.for_cluster(cluster, timeout=15).open()  # the inventory's TLS and identity
    zk = session.client
    try:
        log = open(tmp_path / "run.log", "w")  # noqa: SIM115 - a file, never an unread pipe
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkaops.cli.main", "restart", "kafka1002", "-i", inventory, "--yes",
             "--reason", "lock test", *FAST],
            cwd=elsewhere, env=_bare_env(home), stdout=log, stderr=subprocess.STDOUT, text=True)
        samples, missing, holders = 0, [], set()
        while proc.poll() is None:
            records = live_journal(home)
            if records and records[-1]["type"] not in ("finished",):
                started = zk.exists("/kafkaops/locks/lab")
                samples += 1
                if started is None:
                    missing.append(records[-1]["type"])
                else:
                    try:
                        holders.add(json.loads(zk.get("/kafkaops/locks/lab")[0])["run_id"])
                    except NoNodeError:  # released between the two reads: the run is finishing
                        pass
            time.sleep(0.1)
        log.close()
        assert proc.returncode == 0, (tmp_path / "run.log").read_text()
        run_id = only_run(home)
        assert samples >= 20, samples
        assert not missing, f"the ZooKeeper lock was absent while the run was at {missing}"
        assert holders == {run_id}
        assert zk.exists("/kafkaops/locks/lab") is None  # released at the end
        started = journal(home, run_id)[0]
        assert started["environment"]["inventory"] == inventory
        assert started["environment"]["lock"].startswith(f"ZooKeeper {cluster.zookeeper}")
        assert not (Path.home() / ".local" / "state" / "kafkaops" / "locks" / "lab.lock").exists()
    finally:
        session.close()


def test_resume_refuses_a_changed_bootstrap_and_accepts_it_explicitly(
        pooled_lab: Cluster, home: Path, tmp_path: Path) -> None:
    cluster = pooled_lab
    inventory = tmp_path / "lab.yaml"
    shutil.copy(cluster.source, inventory)
    proc = spawn(home, cluster, "restart", "kafka1003", "-i", str(inventory), "--yes", "--reason", "env test",
                 *FAST)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(r["type"] == "step_verified" and r["kind"] == "conftool.depool" for r in live_journal(home)):
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(30)
    run_id = only_run(home)
    before = journal(home, run_id)
    assert before[-1]["type"] != "finished", "the run finished before the kill"

    text = inventory.read_text()
    old = "bootstrap_servers: 127.0.10.1:9092,127.0.10.2:9092,127.0.10.3:9092"
    assert old in text
    inventory.write_text(text.replace(old, "bootstrap_servers: 127.0.10.2:9092,127.0.10.1:9092,127.0.10.3:9092"))

    refused = kafkaops(home, cluster, "resume", run_id)
    assert refused.returncode == 8, refused.stdout + refused.stderr
    assert "bootstrap_servers" in refused.stderr and "127.0.10.2:9092,127.0.10.1:9092" in refused.stderr
    assert "--accept-inventory-change" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert journal(home, run_id) == before  # nothing happened

    accepted = kafkaops(home, cluster, "resume", run_id, "--accept-inventory-change")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    records = journal(home, run_id)
    changed = [r for r in records if r["type"] == "environment_changed"]
    assert len(changed) == 1 and "bootstrap_servers" in changed[0]["accepted"][0]
    assert records[-1]["type"] == "finished"


def test_dry_run_of_a_roll_shows_the_state_earlier_hosts_leave(pooled_lab: Cluster, home: Path) -> None:
    cluster = pooled_lab
    boots = {h.name: LabHost.named(h.name).boot_id() for h in cluster.hosts}
    result = kafkaops(home, cluster, "rolling-reboot", "lab", "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    order = plan["targets"]
    steps = {(s["target"], s["kind"]): s for s in plan["steps"]}
    first, second, third = order
    number = {s["kind"]: s["index"] for s in plan["steps"] if s["target"] == first}
    # Each host's own steps see what its earlier steps leave: after the stop, the wait for "leads
    # nothing" has nothing to wait for; after the reboot the broker is back but out of sync.
    for host in order:
        stopped = steps[(host, "kafka.verify_not_leader")]
        assert f"{host} step {number['kafka.stop_broker']} (kafka.stop_broker)" in stopped["observed"], stopped
        assert stopped["noop_reason"] and "leads nothing" in stopped["noop_reason"]
        sync = steps[(host, "kafka.wait_in_sync")]
        assert sync["action"] is not None and f"{host} step {number['host.reboot']} (host.reboot)" in sync["observed"]
        repool = steps[(host, "conftool.repool")]
        assert repool["action"] is not None and "pooled=no" in repool["observed"]
    # The second and third hosts see the first host's steps: its repool and its election.
    for host, earlier in ((second, first), (third, second)):
        depool = steps[(host, "conftool.depool")]
        assert f"{earlier} step {number['conftool.repool']} (conftool.repool)" in depool["observed"], depool
        preflight = steps[(host, "kafka.preflight")]
        elected = f"{earlier} step {number['kafka.preferred_election']} (kafka.preferred_election)"
        assert elected in preflight["observed"], preflight
    # Nothing changed.
    assert {h.name: LabHost.named(h.name).boot_id() for h in cluster.hosts} == boots
    data = collect(cluster)
    assert all(b["pooled"] == "yes" and b["registered"] for b in data["brokers"])
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
