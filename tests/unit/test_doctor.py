"""``kafkaops doctor`` on a new admin host (issue 29): one line per check, exit 0/9, ``-o json``.

The cluster's Kafka here is a real TCP listener on loopback that accepts and never answers (a firewall is
open, no Kafka behind it: the protocol check must fail where a TCP connect passed), its ZooKeeper a closed
port, its etcd and SSH keys are paths that do not exist: the doctor must say which is which. The checks
against a real secured cluster are tests/lab/test_doctor_on_lab.py's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), KAFKAOPS_SYSCONFDIR=str(tmp_path / "etc"),
               KAFKAOPS_HOME=str(tmp_path / "state"), KAFKAOPS_LAB_DIR=str(tmp_path / "lab"), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "doctor", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_each_check_is_one_line_and_a_failure_exits_9(tmp_path: Path, listener: int) -> None:
    inventories = tmp_path / "config" / "kafkaops" / "inventory"
    inventories.mkdir(parents=True)
    text = (REPO / "inventory" / "lab.yaml").read_text()
    text = text.replace("127.0.10.1:9092,127.0.10.2:9092,127.0.10.3:9092", f"127.0.0.1:{listener}")
    text = text.replace("zookeeper: 127.0.10.10:2182", "zookeeper: 127.0.0.1:9")  # discard: refused
    (inventories / "site.yaml").write_text(text)
    (inventories / "eqiad.example.yaml").write_text(text)  # an example left with its suffix: never read
    table = _doctor(tmp_path)
    assert table.returncode == 9, table.stderr
    lines = table.stdout.splitlines()
    by_check = {line[5:].split(":", 1)[0]: line for line in lines}
    assert by_check["kafka lab"].startswith("FAIL") and \
        f"127.0.0.1:{listener}: accepts TCP but did not answer ApiVersions" in by_check["kafka lab"]
    assert by_check["zookeeper lab"].startswith("FAIL") and "127.0.0.1:9" in by_check["zookeeper lab"]
    assert by_check["known hosts lab"].startswith("FAIL")  # no known_hosts file at all
    assert by_check["ssh host key lab"].startswith("FAIL") and "no known_hosts file" in by_check["ssh host key lab"]
    assert by_check["alertmanager lab"].startswith("FAIL")  # its password file is not there either
    assert f"in use: {inventories}" in by_check["inventories"] and str(tmp_path / "etc" / "inventory") in \
        by_check["inventories"]
    assert by_check["inventory site.yaml"].startswith("ok ") and by_check["inventory site.yaml"].endswith("lab")
    assert {"version", "state", "cache", "locks", "java", "spark", "reader"} <= set(by_check)
    assert by_check["example inventories"].startswith("warn") and "skipped eqiad.example.yaml" in \
        by_check["example inventories"]
    assert "inventory eqiad.example.yaml" not in by_check

    report = json.loads(_doctor(tmp_path, "-o", "json").stdout)
    assert report["ok"] is False
    assert [c["check"] for c in report["checks"]] == list(by_check)
    levels = {c["check"]: c["level"] for c in report["checks"]}
    assert levels["zookeeper lab"] == "fail" and levels["kafka lab"] == "fail" and levels["version"] == "ok"
    assert levels["example inventories"] == "warn"
    assert all("\n" not in c["detail"] and "KafkaError{" not in c["detail"] for c in report["checks"])


def test_no_inventory_is_a_failed_check_naming_the_places(tmp_path: Path) -> None:
    result = _doctor(tmp_path, "-o", "json")
    assert result.returncode == 9
    checks = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["inventories"]["ok"] is False
    assert str(tmp_path / "config" / "kafkaops" / "inventory") in checks["inventories"]["detail"]


def test_spark_missing_on_a_plan_only_host_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from kafkaops.cli import doctor

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "pyspark":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    spark = next(c for c in doctor._runtime_checks() if c.__name__ == "spark")()
    assert (spark.ok, spark.level) == (True, "warn")
    assert "pip install 'kafkaops[spark]'" in spark.detail and "--no-scan" in spark.detail


def test_warnings_fail_nothing_and_their_hints_print_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 0 with warnings only; a hint's square brackets are text, not console markup (rich ate
    ``[spark]`` from ``pip install 'kafkaops[spark]'``)."""
    from typer.testing import CliRunner

    from kafkaops.cli import doctor
    from kafkaops.cli.main import register

    hint = "pyspark is not installed (pip install 'kafkaops[spark]')"
    monkeypatch.setattr(doctor, "_inventory_checks", lambda: ([], []))
    monkeypatch.setattr(doctor, "_places_checks", lambda: [lambda: doctor.Result("version", True, "kafkaops x")])
    monkeypatch.setattr(doctor, "_lock_check", lambda clusters: lambda: doctor.Result("locks", True, "file"))
    monkeypatch.setattr(doctor, "_ssh_checks", lambda clusters: [])
    monkeypatch.setattr(doctor, "_reach_checks", lambda clusters: [])
    monkeypatch.setattr(doctor, "_runtime_checks", lambda: [lambda: doctor.Result("spark", True, hint, warn=True)])
    result = CliRunner().invoke(register(), ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["ok   version: kafkaops x", "ok   locks: file", f"warn spark: {hint}"]
    monkeypatch.setattr(doctor, "_runtime_checks", lambda: [lambda: doctor.Result("java", False, "broken")])
    assert CliRunner().invoke(register(), ["doctor"]).exit_code == 9


def test_a_host_behind_a_bastion_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    """Its key cannot be checked without logging in to the bastion: doctor says so (warn, exit unchanged);
    nothing is connected to."""
    from dataclasses import replace

    from kafkaops.cli.doctor import _probe
    from kafkaops.model import Cluster, Host, SshEndpoint
    from kafkaops.systems import probes

    host = Host(name="kafka1001", fqdn="kafka1001.example", address="127.0.0.1", broker_id=1001, dc="eqiad",
                rack="A1", ssh=SshEndpoint(address="127.0.0.1", port=1, known_hosts=str(tmp_path / "known_hosts"),
                                           proxy_jump="bastion.example"))
    (tmp_path / "known_hosts").write_text("")
    cluster = Cluster(name="main", bootstrap_servers="127.0.0.1:1", hosts=(host,))
    result = _probe("ssh host key main", probes.ssh_host_key, cluster)
    assert result.level == "warn" and "ProxyJump bastion.example" in result.detail, result
    direct = replace(cluster, hosts=(replace(host, ssh=replace(host.ssh, proxy_jump=None)),))
    assert _probe("ssh host key main", probes.ssh_host_key, direct).level == "fail"  # port 1 refuses
