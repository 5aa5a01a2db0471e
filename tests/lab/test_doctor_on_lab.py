"""``kafkaops doctor`` against the secured lab (issue 45): each network check speaks its system's protocol with
the inventory's security, so a wrong credential or an untrusted host fails the check that a TCP connect
would have passed.

The default lab is secured as production is (docs/lab.md): Kafka on SASL_SSL with SCRAM, ZooKeeper on TLS
with kafkaops' digest identity, etcd on https with client certificates, Alertmanager behind basic auth, SSH
hosts trusted through a host CA (``@cert-authority``). Three doctor runs, a few seconds each (the probes run
at once, each bounded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.model import Cluster

pytestmark = pytest.mark.lab

NETWORK = ("kafka lab", "zookeeper lab", "etcd lab", "alertmanager lab", "ssh host key lab")


def _doctor(home: Path, cluster: Cluster, inventory: Path) -> tuple[int, dict[str, dict[str, object]]]:
    result = kafkaops(home, cluster, "-i", str(inventory), "doctor", "-o", "json", timeout=120)
    report = json.loads(result.stdout)
    return result.returncode, {str(c["check"]): c for c in report["checks"]}


def _inventory_with(tmp_path: Path, cluster: Cluster, old: str, new: str) -> Path:
    text = Path(cluster.source).read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "lab.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_every_system_of_the_secured_lab_answers_the_doctor_in_its_protocol(lab_cluster: Cluster, home: Path) -> None:
    _, checks = _doctor(home, lab_cluster, Path(lab_cluster.source))
    failed = {name: checks[name]["detail"] for name in NETWORK if checks[name]["level"] != "ok"}
    assert failed == {}
    assert f"{len(lab_cluster.hosts)} brokers, controller " in str(checks["kafka lab"]["detail"])
    assert "SASL_SSL" in str(checks["kafka lab"]["detail"])
    assert "TLS, digest as kafkaops" in str(checks["zookeeper lab"]["detail"])
    assert "healthy" in str(checks["etcd lab"]["detail"])
    assert "/-/ready answers (as kafkaops)" in str(checks["alertmanager lab"]["detail"])
    assert "certificate signed by host CA" in str(checks["ssh host key lab"]["detail"])


def test_a_wrong_kafka_password_fails_the_kafka_check_in_one_plain_line(lab_cluster: Cluster, home: Path,
                                                                         tmp_path: Path) -> None:
    secret = lab_cluster.kafka_security.password
    assert secret is not None and secret.file is not None
    wrong = tmp_path / "kafkaops.password"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)
    text = Path(lab_cluster.source).read_text()
    raw = "${KAFKAOPS_LAB_DIR:-~/.local/state/kafkaops/lab}/secrets/kafkaops.password"
    assert f"password_file: {raw}" in text
    inventory = _inventory_with(tmp_path, lab_cluster, f"password_file: {raw}", f"password_file: {wrong}")
    code, checks = _doctor(home, lab_cluster, inventory)
    assert code == 9
    kafka = checks["kafka lab"]
    detail = str(kafka["detail"])
    assert kafka["level"] == "fail" and "\n" not in detail and "KafkaError{" not in detail
    assert "authentication failed" in detail and f"password in file {wrong}" in detail, detail
    assert "not-the-password" not in detail
    assert checks["zookeeper lab"]["level"] == "ok"  # only the broken one fails


def test_a_known_hosts_trusting_another_ca_fails_the_ssh_host_key_check(lab_cluster: Cluster, home: Path,
                                                                          tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    other_ca = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"@cert-authority * {other_ca.decode()}\n")
    raw = "${KAFKAOPS_LAB_DIR:-~/.local/state/kafkaops/lab}/ssh/known_hosts"
    inventory = _inventory_with(tmp_path, lab_cluster, f"known_hosts: {raw}", f"known_hosts: {known_hosts}")
    code, checks = _doctor(home, lab_cluster, inventory)
    assert code == 9
    ssh = checks["ssh host key lab"]
    assert ssh["level"] == "fail" and "\n" not in str(ssh["detail"])
    assert "which no @cert-authority line for this host names: possible impersonation" in str(ssh["detail"]), \
        ssh["detail"]
    assert checks["known hosts lab"]["level"] == "ok"  # the file names a CA for every host: only a handshake tells
