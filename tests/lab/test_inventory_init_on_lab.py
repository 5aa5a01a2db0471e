"""``kafkaops inventory init`` against the lab as if it were a cluster kafkaops had never seen (issue 45):
asked through one broker, over SASL_SSL with the security section of the lab's inventory, the draft names
the lab's three brokers, their racks and its ZooKeeper; ``inventory check`` names exactly what Kafka
cannot know; filled in, it loads, and a dry-run plan of a reboot is made from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kafkaops.inventory import expand
from kafkaops.model import Cluster

pytestmark = pytest.mark.lab


def _kafkaops(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKAOPS_INVENTORY", "KAFKAOPS_RUNBOOKS")}
    env["KAFKAOPS_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=180, cwd=home, stdin=subprocess.DEVNULL)


def test_a_draft_from_the_lab_names_its_brokers_and_every_todo(lab_cluster: Cluster, tmp_path: Path) -> None:
    draft = tmp_path / "drafted.yaml"
    made = _kafkaops("inventory", "init", "drafted", "--bootstrap", lab_cluster.bootstrap_servers.split(",")[0],
                     "--security-from", lab_cluster.source, "--out", str(draft), home=tmp_path)
    assert made.returncode == 0, made.stderr
    assert _kafkaops("inventory", "init", "drafted", "--bootstrap", "x:1", "--out", str(draft),
                     home=tmp_path).returncode == 3  # never over a file
    data = yaml.safe_load(draft.read_text())
    lab = {h.broker_id: h for h in lab_cluster.hosts}
    drafted = {h["broker_id"]: h for h in data["hosts"].values()}
    assert set(drafted) == set(lab)
    assert {b: h["rack"] for b, h in drafted.items()} == {b: h.rack for b, h in lab.items()}
    assert lab_cluster.zookeeper is not None
    assert data["kafka"]["zookeeper"].split("/")[0].rsplit(":", 1)[0] == lab_cluster.zookeeper.rsplit(":", 1)[0]
    assert data["kafka"]["security"]["protocol"] == "SASL_SSL"
    secret_file = Path(expand(data["kafka"]["security"]["sasl"]["password_file"]))
    assert secret_file.read_text().strip() not in draft.read_text()  # secrets stay named by file

    checked = _kafkaops("inventory", "check", str(draft), home=tmp_path)
    assert checked.returncode == 3
    problems = [line.split(": ", 1)[1] for line in checked.stdout.splitlines() if line.startswith(str(draft))]
    assert sorted(problems) == sorted(["commands: missing command template(s): kafka_stop, kafka_start, "
                                       "kafka_status, reboot, boot_id",
                                       *(f"hosts.{n}.dc: missing required key" for n in data["hosts"])]), problems

    # The operator fills in what Kafka could not know — here, from the lab's own inventory — and plans.
    lab_text = yaml.safe_load(Path(lab_cluster.source).read_text())
    by_id = {entry["broker_id"]: entry for entry in lab_text["hosts"].values()}
    for key, value in lab_text.items():
        if key not in ("cluster", "kafka", "hosts", "controllers"):
            data.setdefault(key, value)
    for host in data["hosts"].values():
        for key, value in by_id[host["broker_id"]].items():
            host.setdefault(key, value)
        # The lab's brokers advertise their IP: the draft's fqdn is that address, and the pool knows the
        # host by its name, which the operator writes.
        host["fqdn"] = by_id[host["broker_id"]]["fqdn"]
    draft.write_text(yaml.safe_dump(data, sort_keys=False))
    assert _kafkaops("inventory", "check", str(draft), home=tmp_path).returncode == 0
    target = next(n for n, h in data["hosts"].items() if h["broker_id"] == lab_cluster.hosts[0].broker_id)
    plan = _kafkaops("-i", str(draft), "reboot", target, "--dry-run", "--reason", "draft", "--no-scan", "-o", "json",
                     home=tmp_path)
    assert plan.returncode == 0, plan.stderr
    steps = json.loads(plan.stdout)["steps"]
    assert any(s["kind"] == "kafka.stop_broker" and s["target"] == target for s in steps)
