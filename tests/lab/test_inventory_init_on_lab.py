"""An operator's first hour (issue 45), as a new user lives it: the wheel installed with ``pipx`` into a fresh
home, no checkout, no ``PYTHONPATH``, only what a login shell has. ``--help`` has no ``lab``; ``doctor``
says there is no inventory and how to draft one; ``inventory init`` drafts one from the lab as if it were
a cluster kafkaops had never seen (asked through one broker over SASL_SSL, with the security section an
operator copies from their team's files); ``inventory check`` names exactly what Kafka cannot know;
filled in, ``doctor`` passes and a dry-run plan of a reboot is made. Then ``pipx inject`` of the lab's own
wheel adds ``kafkaops lab``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kafkaops.inventory import expand
from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]


class Operator:
    """A login shell on a new admin host: its own ``$HOME``, kafkaops from ``pipx`` on its ``PATH``."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.home.mkdir()
        self.pipx = {"PIPX_HOME": str(root / "pipx"), "PIPX_BIN_DIR": str(root / "bin"),
                     "PIPX_MAN_DIR": str(root / "man")}
        self.env = {"HOME": str(self.home), "PATH": f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                    "LANG": "C.UTF-8", "COLUMNS": "200",
                    # where the lab keeps its CA, password files and SSH trust: the inventory names them
                    "KAFKAOPS_LAB_DIR": os.environ.get("KAFKAOPS_LAB_DIR",
                                                       str(Path("~/.local/state/kafkaops/lab").expanduser()))}

    def install(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | self.pipx
        done = subprocess.run([sys.executable, "-m", "pipx", *args], capture_output=True, text=True, env=env,
                              timeout=600, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stdout + done.stderr

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kafkaops", *args], capture_output=True, text=True, env=self.env, timeout=300,
                              cwd=self.home, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def operator(built_dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Operator:
    op = Operator(tmp_path_factory.mktemp("admin-host"))
    op.install("install", str(built_dist["wheel"]))
    return op


def _fill_in(data: dict, lab_cluster: Cluster) -> None:
    """What the operator writes that Kafka could not know — here, from the lab's own inventory."""
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


def test_from_pipx_install_to_a_reviewed_plan(operator: Operator, built_dist: dict[str, Path],
                                              lab_cluster: Cluster) -> None:
    run = operator
    helped = run("--help")
    assert helped.returncode == 0, helped.stderr
    assert not re.search(r"^\s*│?\s*lab\s", helped.stdout, re.M), helped.stdout  # the lab is not installed

    first = run("doctor")
    assert first.returncode == 9, first.stdout
    assert "FAIL inventories: none found" in first.stdout and "kafkaops inventory init" in first.stdout
    assert str(operator.home) in first.stdout  # this host's config directory, not the checkout's
    assert "site-packages/kafkaops" in first.stdout and "pipx" in first.stdout  # the pipx venv's copy runs

    # The team's security section, as the operator has it (secrets named by file, never inline)
    security = operator.home / "eventbus-security.yaml"
    lab_kafka = yaml.safe_load(Path(lab_cluster.source).read_text())["kafka"]
    security.write_text(yaml.safe_dump({"kafka": {"security": lab_kafka["security"]}}))
    draft = operator.home / ".config" / "kafkaops" / "inventory" / "drafted.yaml"
    draft.parent.mkdir(parents=True)
    bootstrap = lab_cluster.bootstrap_servers.split(",")[0]
    made = run("inventory", "init", "drafted", "--bootstrap", bootstrap, "--security-from", str(security),
               "--out", str(draft))
    assert made.returncode == 0, made.stderr
    assert run("inventory", "init", "drafted", "--bootstrap", "x:1", "--out", str(draft)).returncode == 3
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

    checked = run("inventory", "check", str(draft))
    assert checked.returncode == 3
    problems = [line.split(": ", 1)[1] for line in checked.stdout.splitlines() if line.startswith(str(draft))]
    assert sorted(problems) == sorted(["commands: missing command template(s): kafka_stop, kafka_start, "
                                       "kafka_status, reboot, boot_id",
                                       *(f"hosts.{n}.dc: missing required key" for n in data["hosts"])]), problems

    _fill_in(data, lab_cluster)
    draft.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run("inventory", "check", str(draft)).returncode == 0

    ready = run("doctor", "-o", "json")
    checks = {c["check"]: c for c in json.loads(ready.stdout)["checks"]}
    assert ready.returncode == 0, json.dumps(checks, indent=1)
    for name in ("kafka drafted", "zookeeper drafted", "etcd drafted", "ssh host key drafted"):
        assert checks[name]["level"] == "ok", checks[name]
    assert checks["spark"]["level"] == "warn"  # a plan-only host: no pyspark in the pipx venv

    target = next(n for n, h in data["hosts"].items() if h["broker_id"] == lab_cluster.hosts[0].broker_id)
    plan = run("reboot", target, "--dry-run", "--reason", "first hour", "--no-scan", "-o", "json")
    assert plan.returncode == 0, plan.stderr
    steps = json.loads(plan.stdout)["steps"]
    assert any(s["kind"] == "kafka.stop_broker" and s["target"] == target for s in steps)

    operator.install("inject", "kafkaops", str(built_dist["lab_wheel"]))  # the lab: its own wheel
    assert re.search(r"^\s*│?\s*lab\s", run("--help").stdout, re.M)
