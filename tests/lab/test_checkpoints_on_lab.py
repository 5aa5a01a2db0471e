"""Coordination checkpoints on the lab (issue 13 point 8): the EventBus runbook's "Before starting please
sync with the Services team" as ``operator.confirm: {checkpoint: changeprop}``.

The lab's own inventory defines no checkpoint (rehearsals are not held up), so these tests run the real
CLI on a copy that does. Witnesses outside kafkaops: the eventbus process id on the host (``/_info``), the
conftool pool state, and the run directory (no journal at all for a refused run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from kafkaops.engine.journal import Journal
from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster, Host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TEXT = "The Services team knows about this maintenance and has paused ChangeProp"
FAST = ["--syn-window", "2s", "--log-window", "1s"]


@pytest.fixture
def inventory(pooled_lab: Cluster, tmp_path: Path) -> Cluster:
    """The lab's inventory with a ``checkpoints:`` map (the lab's own defines none)."""
    text = Path(pooled_lab.source).read_text()
    assert "\ncheckpoints:" not in text
    path = tmp_path / "lab-checkpoints.yaml"
    path.write_text(text + f"\ncheckpoints:\n  changeprop: {TEXT}\n")
    cluster = load_inventory(path)
    assert dict(cluster.checkpoints) == {"changeprop": TEXT}
    return cluster


def cli(home: Path, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI with no terminal to ask on (stdin is /dev/null), as in a script or CI job."""
    env = {**os.environ, "KAFKAOPS_HOME": str(home), "KAFKAOPS_INVENTORY": cluster.source}
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=600, env=env, stdin=subprocess.DEVNULL)


def info(host: Host) -> dict[str, Any]:
    r = requests.get(f"http://{host.address}:{host.services[0].port}/_info", timeout=5)
    return dict(r.json())


def pooled(cluster: Cluster, host: Host) -> str:
    from kafkaops.systems.conftool import Conftool

    assert cluster.conftool_config
    return Conftool(cluster.conftool_config).get(host.fqdn, host.conftool_tags).pooled


def test_the_plan_shows_the_checkpoint(inventory: Cluster, home: Path) -> None:
    result = cli(home, inventory, "restart-service", "eventbus", "kafka1001", "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    step = next(s for s in json.loads(result.stdout)["steps"] if s["kind"] == "operator.confirm")
    assert step["index"] == 2 and step["action"]["description"] == f"operator confirms: {TEXT}"


def test_without_confirmed_nothing_starts_yes_is_no_answer_and_confirmed_runs(inventory: Cluster,
                                                                             home: Path) -> None:
    host = inventory.hosts[0]
    before = info(host)["pid"]
    # --yes alone, no terminal: refused after the plan, before any lock, journal or change.
    refused = cli(home, inventory, "restart-service", "eventbus", host.name, "--reason", "test", "--yes", *FAST)
    assert refused.returncode == 13, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert line == (f"error: checkpoint 'changeprop' is not confirmed: {TEXT} (once it holds, pass "
                    "--confirmed changeprop (--yes does not confirm a checkpoint))")
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    assert info(host)["pid"] == before and pooled(inventory, host) == "yes"
    # Confirmed on the command line: it runs, and the journal says who confirmed what, when, how.
    done = cli(home, inventory, "restart-service", "eventbus", host.name, "--reason", "test", "--yes",
               "--confirmed", "changeprop", *FAST)
    assert done.returncode == 0, done.stderr
    [run_dir] = list((home / "runs").iterdir())
    records = Journal.open(run_dir.name, home).records()
    [ev] = [r for r in records if r["type"] == "event" and r.get("event") == "checkpoint_confirmed"]
    assert ev["checkpoint"] == "changeprop" and ev["via"] == "--confirmed" and ev["text"] == TEXT
    assert ev["operator"] == next(r for r in records if r["type"] == "run_started")["operator"]
    assert ev["at"].endswith("Z") and records[-1]["type"] == "finished"
    # The confirmation precedes every change of the run.
    first_change = min(r["seq"] for r in records if r["type"] == "step_applying" and r["kind"] != "operator.confirm")
    assert ev["seq"] < first_change
    assert info(host)["pid"] != before and pooled(inventory, host) == "yes"
