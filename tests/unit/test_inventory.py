"""Inventory loading: both shipped inventories validate; errors name file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import ConfigError, UnknownHostError
from kafkaops.inventory import load_inventory, resolve_host

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventory" / "lab.yaml"


def test_lab_inventory_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", "/srv/labdir")
    cluster = load_inventory(LAB)
    assert cluster.name == "lab"
    assert [h.broker_id for h in cluster.hosts] == [1001, 1002, 1003]
    assert [h.rack for h in cluster.hosts] == ["A", "B", "C"]
    h = cluster.hosts[1]
    assert h.fqdn == "kafka1002.lab.local" and h.address == "127.0.10.2"
    assert h.ssh.port == 2222 and h.ssh.key_file == "/srv/labdir/ssh/id_ed25519"
    assert h.conftool_tags == {"dc": "eqiad", "cluster": "kafka_main", "service": "eventbus"}
    assert h.commands["kafka_stop"] == "hostctl stop kafka"
    svc = h.service("eventbus")
    assert svc is not None and svc.port == 8085 and svc.vip == "127.0.10.100"


def test_production_example_loads() -> None:
    cluster = load_inventory(REPO / "inventory" / "eqiad-main.example.yaml")
    assert cluster.name == "main-eqiad"
    assert [h.fqdn for h in cluster.hosts] == [f"kafka100{i}.eqiad.wmnet" for i in (1, 2)]
    assert cluster.commands["kafka_stop"].startswith("sudo -n systemctl")
    assert "scap deploy -l {host.fqdn}" in cluster.commands["deploy"]
    assert cluster.deploy_host is not None and cluster.deploy_host.name == "deploy1002"


def test_resolve_host_by_short_name_or_fqdn() -> None:
    cluster = load_inventory(LAB)
    assert resolve_host(cluster, "kafka1003").broker_id == 1003
    assert resolve_host(cluster, "kafka1003.lab.local").broker_id == 1003
    with pytest.raises(UnknownHostError, match=r"unknown host 'kafka9999'.*known hosts: kafka1001, kafka1002"):
        resolve_host(cluster, "kafka9999")


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = LAB.read_text()
    assert old in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("broker_id: 1002", "broker_id: two", r"broken\.yaml:\d+: hosts\.kafka1002\.broker_id: expected an integer"),
        ("broker_id: 1003", "broker_id: 1001",
         r"hosts\.kafka1003\.broker_id: broker id 1001 already used by kafka1001"),
        ("    rack: B\n", "    rack: B\n    colour: red\n", r"hosts\.kafka1002\.colour: unknown key"),
        ("  kafka_stop: hostctl stop kafka\n", "", r"commands: missing command template\(s\): kafka_stop"),
        ("services: [eventbus]", "services: [evenbus]", r"unknown service 'evenbus'"),
        ("cluster: lab", "cluster: [lab", r"broken\.yaml:\d+: invalid YAML"),
        ("cluster: lab\n", "", r"cluster: missing required key"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, old: str, new: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_broken(tmp_path, old, new))


def test_error_line_number_points_at_the_key(tmp_path: Path) -> None:
    path = _broken(tmp_path, "broker_id: 1002", "broker_id: two")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "broker_id: two" in text)
    with pytest.raises(ConfigError, match=rf"broken\.yaml:{line}: "):
        load_inventory(path)


def test_missing_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read inventory.*--inventory"):
        load_inventory(tmp_path / "nope.yaml")


def test_unset_variable_without_default_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKAOPS_NOPE", raising=False)
    path = _broken(tmp_path, "  port: 2222\n", "  port: 2222\n  user: ${KAFKAOPS_NOPE}\n")
    with pytest.raises(ConfigError, match=r"ssh\.user: environment variable KAFKAOPS_NOPE is not set"):
        load_inventory(path)


def test_kraft_inventory_keeps_controller_nodes_apart_from_brokers() -> None:
    cluster = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-kraft.yaml")
    assert cluster.kraft and cluster.zookeeper is None
    assert [h.role for h in cluster.hosts] == ["broker"] * 3  # every broker procedure iterates these
    assert [(c.name, c.broker_id, c.role) for c in cluster.controllers] == [
        ("kafka-ctrl3001", 3001, "controller"), ("kafka-ctrl3002", 3002, "controller"),
        ("kafka-ctrl3003", 3003, "controller")]
    assert resolve_host(cluster, "kafka-ctrl3002.lab.local").role == "controller"
    assert all(not c.services and not c.conftool_tags for c in cluster.controllers)
    assert "kafka_metadata_quorum" in cluster.controllers[0].commands
