"""The inventory's ``monitoring:`` block: every lab inventory has one; each bad input is one line naming
file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.model import MetricGate, Monitoring

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventory" / "lab.yaml"


def test_the_lab_inventory_has_its_monitoring() -> None:
    cluster = load_inventory(LAB)
    m = cluster.monitoring
    assert m is not None
    assert m.prometheus == "http://127.0.10.30:9090" and m.alertmanager == "http://127.0.10.31:9093"
    assert m.host_matchers == (("instance", "{host.fqdn}:.*"),)
    assert m.scope == (("cluster", "{cluster.name}"),)
    assert [(g.name, g.max, g.max_ratio) for g in m.gates] == [("produce_p99_ms", 1000.0, None),
                                                              ("under_min_isr", 0.0, None)]
    # One host's silence: its fqdn regex-escaped, so kafka1001.lab.local does not also match kafka1001xlab...
    assert m.host_regexes(cluster.hosts[0], cluster.name) == (("instance", r"kafka1001\.lab\.local:.*"),)
    assert m.scope_labels(cluster.name) == (("cluster", "lab"),)
    assert m.gates[1].promql("lab") == 'sum(kafka_server_replicamanager_underminisrpartitioncount{cluster="lab"})'


@pytest.mark.parametrize("name", ["lab-kraft.yaml", "lab-stretch.yaml", "lab-eqiad.yaml", "lab-codfw.yaml"])
def test_every_lab_inventory_points_at_its_own_labs_monitoring(name: str) -> None:
    cluster = load_inventory(REPO / "inventory" / name)
    assert cluster.monitoring is not None and cluster.etcd is not None
    subnet = cluster.etcd.removeprefix("http://").rsplit(".", 1)[0]  # the lab's /24 (lab/kafkaops_lab/spec.py)
    assert cluster.monitoring.alertmanager == f"http://{subnet}.31:9093"
    assert cluster.monitoring.prometheus == f"http://{subnet}.30:9090"


def test_an_inventory_without_the_block_has_no_monitoring() -> None:
    assert load_inventory(REPO / "inventory" / "eqiad-main.example.yaml").monitoring is None


def test_a_block_with_only_an_alertmanager_is_accepted(tmp_path: Path) -> None:
    text = LAB.read_text()
    start, end = text.index("monitoring:\n"), text.index("\nssh:\n")
    path = tmp_path / "inv.yaml"
    path.write_text(text[:start] + "monitoring:\n  alertmanager: https://alerts.example.org/\n" + text[end:])
    assert load_inventory(path).monitoring == Monitoring(alertmanager="https://alerts.example.org")


def test_a_gate_query_names_the_cluster_literally() -> None:
    gate = MetricGate("g", 'up{cluster="{cluster.name}"} == 0', max=0)
    assert gate.promql("main-eqiad") == 'up{cluster="main-eqiad"} == 0'


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = LAB.read_text()
    assert old in text, old
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("  prometheus: http://127.0.10.30:9090", "  prometheus: 127.0.10.30:9090",
         r"monitoring\.prometheus: expected an http\(s\) URL"),
        ("  alertmanager: http://127.0.10.31:9093", "  alertmanager: ftp://127.0.10.31",
         r"monitoring\.alertmanager: expected an http\(s\) URL"),
        ("  alertmanager: http://127.0.10.31:9093", "  alertmanager: http://",
         r"monitoring\.alertmanager: expected an http\(s\) URL"),
        ("  scope: {cluster:", "  colour: red\n  scope: {cluster:", r"monitoring\.colour: unknown key"),
        ("{instance: '{host.fqdn}:.*'}", "{instance: '{host.serial}:.*'}",
         r"monitoring\.host_matchers\.instance: unknown placeholder \{host\.serial\}"),
        ("{instance: '{host.fqdn}:.*'}", "{instance: '.*'}",
         r"monitoring\.host_matchers\.instance: '\.\*' names no host field"),
        ("{instance: '{host.fqdn}:.*'}", "{instance: '{host.fqdn}:(.*'}",
         r"monitoring\.host_matchers\.instance: bad regex"),
        ("{instance: '{host.fqdn}:.*'}", "{instance: '{host.fqdn:.*'}",
         r"monitoring\.host_matchers\.instance: bad template"),
        ("{instance: '{host.fqdn}:.*'}", "{in-stance: '{host.fqdn}:.*'}",
         r"monitoring\.host_matchers\.in-stance: 'in-stance' is not a Prometheus label name"),
        ("scope: {cluster: '{cluster.name}'}", "scope: {cluster: '{host.name}'}",
         r"monitoring\.scope\.cluster: unknown placeholder \{host\.name\} \(allowed: \{cluster\.name\}\)"),
        ("      max: 1000 ", "      max_ratio: 0 ", r"monitoring\.gates\[0\]\.max_ratio: expected a positive ratio"),
        ("      max: 1000 ", "      max_ratio: much ", r"monitoring\.gates\[0\]\.max_ratio: expected a number"),
        ("      max: 1000 ", "      # ",
         r"monitoring\.gates\[0\]\.name: gate 'produce_p99_ms' has no threshold"),
        ("    - name: under_min_isr", "    - name: produce_p99_ms",
         r"monitoring\.gates\[1\]\.name: gate 'produce_p99_ms' defined twice"),
        ("    - name: under_min_isr", "    - name: Under-ISR",
         r"monitoring\.gates\[1\]\.name: 'Under-ISR' is not a gate name"),
        ("      max: 0\n", "      max: 0\n      min: 0\n", r"monitoring\.gates\[1\]\.min: unknown key"),
    ],
)
def test_bad_monitoring_is_one_line_naming_file_line_and_key(tmp_path: Path, old: str, new: str,
                                                              expected: str) -> None:
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+: " + expected) as exc:
        load_inventory(_broken(tmp_path, old, new))
    assert "\n" not in str(exc.value)


def test_gates_must_be_a_list(tmp_path: Path) -> None:
    text = LAB.read_text()
    start, end = text.index("  gates:"), text.index("\nssh:\n")
    path = tmp_path / "broken.yaml"
    path.write_text(text[:start] + "  gates: {produce_p99_ms: 1.5}\n" + text[end:])
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+: monitoring\.gates: expected a list"):
        load_inventory(path)
