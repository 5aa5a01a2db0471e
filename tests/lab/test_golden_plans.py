"""Every runbook's plan on the default lab, against golden files: what a refactor must not change.

Issue 30 reshaped the house (runbook parsing, binding and rendering split; the Environment reduced; a thin
CLI) under one promise: behaviour unchanged. A plan is the behaviour an operator reviews — its steps, their
kinds, params, titles, the commands each will run, the rollbacks, the gates — so each procedure's dry-run
on the lab is compared with a golden JSON recorded before the change.

What the live cluster decides is left out, because it differs between two lab starts without any code
change: when the plan was made, its fingerprints and signature, what each step observed (leaders, ISR,
SYN counts), the checkout's path. The rolling order *does* depend on the live cluster (controller last),
so before planning the test moves the controller to the broker the golden files were recorded with.

``KAFKAOPS_UPDATE_GOLDEN=1`` rewrites the files after an intended change; review their diff like code.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops

from kafkaops.model import Cluster

pytestmark = pytest.mark.lab

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[2]

#: The controller the golden files were recorded with (their rolling order puts its host last).
GOLDEN_CONTROLLER = 1003

#: name → the command line whose dry-run is that runbook's plan on the default lab.
PLANS: dict[str, tuple[str, ...]] = {
    "reboot": ("reboot", "kafka1001"),
    "restart": ("restart", "kafka1002"),
    "rolling-reboot": ("rolling-reboot", "lab"),
    "rolling-restart": ("rolling-restart", "lab"),
    "rolling-deploy": ("rolling-deploy", "lab", "--service", "eventbus", "--message", "golden", "--rev", "r2"),
    "restart-service": ("restart-service", "eventbus", "kafka1001"),
    "rolling-restart-service": ("rolling-restart-service", "eventbus", "lab"),
    "failed-events-replay": ("failed-events", "replay", "lab"),
}

#: Step fields that record what the live systems said, not what the procedure will do.
_OBSERVED = ("observed", "noop_reason", "fingerprint_data")


def normalize(plan: dict[str, Any], home: Path) -> dict[str, Any]:
    """The plan without what the live cluster, the clock or the checkout's location decide."""
    from kafkaops_lab.dirs import lab_dir

    text = json.dumps(plan).replace(str(home), "$HOME").replace(str(REPO), "$REPO")
    text = text.replace(str(lab_dir("lab")), "$LAB").replace(str(Path.home()), "~")  # where this machine keeps them
    text = re.sub(r"\b20\d{6}T\d{6}\b", "$WHEN", text)  # a report file named after the plan's time
    out = json.loads(text)
    for key in ("created_at", "fingerprint", "signature", "operator"):
        out.pop(key, None)
    out.pop("sections", None)  # hashes: of observations, and of the inventory by its absolute path
    if isinstance(out.get("environment"), dict):
        # A hash of `depends`, which holds the machine's paths (the lab's SSH key under $HOME): `depends`
        # itself stays compared, normalized; its hash cannot be.
        out["environment"].pop("sha256", None)
    for step in out.get("steps", []):
        for key in _OBSERVED:
            step.pop(key, None)
        _mask_leadership(step.get("action") or {})
        _mask_served_revision(step.get("action") or {})
    return out


def _mask_served_revision(action: dict[str, Any]) -> None:
    """The revision a host serves before a deploy is whatever the last deploy left (the lab starts on r1;
    the service tests deploy releases of their own): it goes from the deploy's description, data and
    rollback, which stay compared around it."""
    served = (action.get("data") or {}).get("served") if isinstance(action.get("data"), dict) else None
    if not isinstance(served, str) or not served:
        return
    for key in ("description", "rollback"):
        if isinstance(action.get(key), str):
            action[key] = re.sub(rf"\b{re.escape(served)}\b", "$SERVED", action[key])
    action["data"]["served"] = "$SERVED"


def _mask_leadership(action: dict[str, Any]) -> None:
    """Which partitions exist and who leads them is the live cluster's, not the procedure's: the lab's
    replica assignment is random (a new one each ``lab up``), and the tests and the lab's load before this
    one add topics (``__consumer_offsets`` alone is 50 partitions). So the stop's impact ("9 leader(s) move:
    5 to 1002, 4 to 1003; 27 partition(s) lose a replica (a-0, …)") and the preferred election's partitions
    go, counts included; the steps, their commands and the sentences around the counts stay compared."""
    if isinstance(action.get("impact"), str):
        impact = re.sub(r"move: [^;]*;", "move: $LEADERS;", action["impact"])
        impact = re.sub(r"\(([^()]*-\d+(, )?)+( and \d+ more)?\)", "($PARTITIONS)", impact)
        action["impact"] = re.sub(r"\b\d+ (leader|partition)\(s\)", r"$N \1(s)", impact)
    if isinstance(action.get("description"), str):
        description = re.sub(r"\b\d+ partition\(s\)", "$N partition(s)", action["description"])
        action["description"] = re.sub(r"\ball \d+ ISRs\b", "all $N ISRs", description)
    if "elect_leaders" in " ".join(action.get("commands") or []):
        action["commands"] = [re.sub(r"\[.*\]", "[$PARTITIONS]", c) for c in action["commands"]]
        if isinstance(action.get("data"), dict) and "partitions" in action["data"]:
            action["data"]["partitions"] = "$PARTITIONS"


def _controller(cluster: Cluster) -> int | None:
    from kafkaops.systems.kafka import KafkaAdmin

    return KafkaAdmin(cluster.kafka).snapshot(with_configs=False).controller


def _move_controller(cluster: Cluster, broker: int) -> None:
    """Re-run the controller election (delete ``/controller``) until ``broker`` wins: the election is a race
    between the brokers, so this takes a few tries at most."""
    from kafkaops.systems.zookeeper import ZooKeeper

    deadline = time.monotonic() + 120
    while _controller(cluster) != broker:
        assert time.monotonic() < deadline, f"could not make broker {broker} the controller"
        with ZooKeeper.for_cluster(cluster) as session:  # the inventory's TLS and identity
            if session.client.exists("/controller"):
                session.client.delete("/controller")
        time.sleep(2)


@pytest.fixture(scope="module")
def no_failed_events(lab_cluster: Cluster) -> Iterator[None]:
    """The replay's plan lists each host's failed events: the golden one was recorded with none, and the
    tests before this one (and the lab's load while a host was down) leave some. They are set aside for
    the module and put back afterwards."""
    from kafkaops_lab.host import LabHost

    logs = [LabHost.named(h.name).dirs.log / "failed_events.log" for h in lab_cluster.hosts]
    aside = [log.with_name(log.name + ".golden-aside") for log in logs]
    for log, moved in zip(logs, aside, strict=True):
        if log.exists():
            log.rename(moved)
    yield
    for log, moved in zip(logs, aside, strict=True):
        if moved.exists():
            with open(log, "a") as f:  # the lab may have appended meanwhile: keep both
                f.write(moved.read_text())
            moved.unlink()


@pytest.fixture(scope="module")
def controller_pinned(lab_cluster: Cluster, no_failed_events: None) -> Cluster:
    _move_controller(lab_cluster, GOLDEN_CONTROLLER)
    return lab_cluster


@pytest.mark.parametrize("name", sorted(PLANS))
def test_each_runbooks_plan_is_golden(name: str, controller_pinned: Cluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = kafkaops(home, controller_pinned, *PLANS[name], "--dry-run", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    plan = normalize(json.loads(done.stdout), home)
    assert plan["runbook"] == name
    path = GOLDEN / f"plan-{name}.json"
    text = json.dumps(plan, indent=1, sort_keys=True) + "\n"
    if os.environ.get("KAFKAOPS_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name}'s plan changed: diff it with {path}, then KAFKAOPS_UPDATE_GOLDEN=1"


def test_the_normalization_keeps_what_the_procedure_does(tmp_path: Path) -> None:
    """Only the live parts go: a changed command, param or step kind is still a difference."""
    plan = {"created_at": 1.0, "fingerprint": "x", "sections": {"environment": "p", "observations": "o"},
            "steps": [{"kind": "kafka.stop_broker", "observed": "up", "params": {"timeout": 60},
                       "action": {"commands": [f"{tmp_path}/x hostctl stop kafka"]}}]}
    got = normalize(plan, tmp_path)
    assert got == {"steps": [{"kind": "kafka.stop_broker", "params": {"timeout": 60},
                              "action": {"commands": ["$HOME/x hostctl stop kafka"]}}]}


def test_the_leadership_mask_keeps_the_sentences() -> None:
    """The lab's assignment and the cluster's topics go; the sentences, the step and its command stay."""
    action = {"impact": "9 leader(s) move: 5 to 1002, 4 to 1003; 27 partition(s) lose a replica (a-0, b-1 and 25 more)",
              "description": "preferred-replica election for 9 partition(s) whose preferred leader is 1001",
              "commands": ["AdminClient.elect_leaders(PREFERRED, [a-0, b-1])"],
              "data": {"partitions": [["a", 0], ["b", 1]]}}
    _mask_leadership(action)
    assert action == {"impact": "$N leader(s) move: $LEADERS; $N partition(s) lose a replica ($PARTITIONS)",
                      "description": "preferred-replica election for $N partition(s) whose preferred leader is 1001",
                      "commands": ["AdminClient.elect_leaders(PREFERRED, [$PARTITIONS])"],
                      "data": {"partitions": "$PARTITIONS"}}
