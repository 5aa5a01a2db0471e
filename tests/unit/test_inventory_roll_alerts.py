"""Issue 41, item 3: what the inventory's ``monitoring:`` block may say about silences.

A host matcher that names no field of the host itself (``{cluster: '{cluster.name}'}``, ``{dc: '{host.dc}'}``)
made every host's silence cover every alert of the cluster (or of the DC) — which also blinded
``alerts.gate``. It is refused, one line naming file, line and key, like every other inventory mistake.

``monitoring.roll_alerts`` names the cluster-level alerts a roll is expected to cause on the brokers it does
not take down (Kafka's under-replicated partitions are counted on the leaders): alert names, each once, and
only with a ``scope`` that says which cluster's alerts they are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventory" / "lab.yaml"
MATCHERS = "host_matchers: {instance: '{host.fqdn}:.*'}"
ROLL = "  roll_alerts: [KafkaUnderReplicatedPartitions]"


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = LAB.read_text()
    assert old in text, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        # The issue's own example: loaded, and then each host's silence covered the whole cluster.
        ("host_matchers: {cluster: '{cluster.name}'}",
         r"monitoring\.host_matchers: no matcher names a field of the host itself \(\{host\.name\}, "
         r"\{host\.fqdn\} or \{host\.address\}\): its silence would cover every alert of the cluster"),
        # A DC or a rack is many hosts (a one-DC cluster: all of them).
        ("host_matchers: {dc: '{host.dc}', cluster: '{cluster.name}'}",
         r"monitoring\.host_matchers: no matcher names a field of the host itself"),
        ("host_matchers: {rack: 'rack-{host.rack}'}",
         r"monitoring\.host_matchers: no matcher names a field of the host itself"),
    ],
)
def test_a_host_matcher_without_a_field_of_the_host_is_refused(tmp_path: Path, new: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+: " + expected) as exc:
        load_inventory(_broken(tmp_path, MATCHERS, new))
    assert "\n" not in str(exc.value)
    assert "use e.g. instance: '{host.fqdn}:.*'" in str(exc.value)


def test_a_host_field_beside_the_cluster_name_is_accepted(tmp_path: Path) -> None:
    cluster = load_inventory(_broken(tmp_path, MATCHERS,
                                     "host_matchers: {instance: '{host.fqdn}:.*', cluster: '{cluster.name}'}"))
    assert cluster.monitoring is not None
    assert cluster.monitoring.host_regexes(cluster.hosts[0], cluster.name) == (
        ("instance", r"kafka1001\.lab\.local:.*"), ("cluster", "lab"))


def test_the_cli_refuses_it_in_one_line_with_exit_3(tmp_path: Path) -> None:
    """As tests/unit/test_bad_inputs.py runs every mistake: the real CLI, its own home, nothing left behind."""
    inventory = _broken(tmp_path, MATCHERS, "host_matchers: {cluster: '{cluster.name}'}")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(KAFKAOPS_HOME=str(work / "home"), KAFKAOPS_LOCK_DIR=str(work / "locks"),
               KAFKAOPS_LAB_DIR=str(work / "lab"), KAFKAOPS_SYSCONFDIR=str(work / "no-etc"),
               KAFKAOPS_INVENTORY=str(inventory), COLUMNS="100")
    result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "reboot", "kafka1001", "--dry-run"],
                            capture_output=True, text=True, timeout=60, env=env, cwd=work,
                            stdin=subprocess.DEVNULL)
    shown = f"exit {result.returncode}\n{result.stderr}{result.stdout[-2000:]}"
    assert result.returncode == 3, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "monitoring.host_matchers: no matcher names a field of the host itself" in lines[0], \
        shown
    assert "Traceback" not in result.stderr + result.stdout
    assert list(work.iterdir()) == []


# --- roll_alerts ---------------------------------------------------------------------------------------------


def test_the_lab_names_the_alert_its_rolls_cause_elsewhere() -> None:
    m = load_inventory(LAB).monitoring
    assert m is not None and m.roll_alerts == ("KafkaUnderReplicatedPartitions",)


def test_without_the_key_no_alert_is_a_roll_alert(tmp_path: Path) -> None:
    m = load_inventory(_broken(tmp_path, ROLL, "  #")).monitoring
    assert m is not None and m.roll_alerts == ()


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ("  roll_alerts: [Kafka-URP]",
         r"monitoring\.roll_alerts\[0\]: 'Kafka-URP' is not an alert name \(\[a-zA-Z_:\]\[a-zA-Z0-9_:\]\*\)"),
        ('  roll_alerts: [".*"]', r"monitoring\.roll_alerts\[0\]: '\.\*' is not an alert name"),
        ("  roll_alerts: [KafkaUnderReplicatedPartitions, KafkaUnderReplicatedPartitions]",
         r"monitoring\.roll_alerts\[1\]: 'KafkaUnderReplicatedPartitions' named twice"),
        ("  roll_alerts: KafkaUnderReplicatedPartitions", r"monitoring\.roll_alerts: expected a list of strings"),
    ],
)
def test_bad_roll_alerts_are_one_line_naming_file_line_and_key(tmp_path: Path, new: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+: " + expected) as exc:
        load_inventory(_broken(tmp_path, ROLL, new))
    assert "\n" not in str(exc.value)


def test_roll_alerts_need_the_clusters_scope(tmp_path: Path) -> None:
    """Without ``scope`` the roll's silence (alertname=~...) would cover those alerts of every cluster the
    Alertmanager serves."""
    path = _broken(tmp_path, "  scope: {cluster: '{cluster.name}'}", "")
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+: monitoring\.roll_alerts: needs monitoring\.scope"):
        load_inventory(path)
