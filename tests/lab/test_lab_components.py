"""The lab is made of the real things, wired together (issue: foundation)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from kafkaops.errors import HostKeyError, LabError
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.ssh import SshClient
from kafkaops.systems.traffic import count_syns
from kafkaops.systems.zookeeper import ZooKeeper
from kafkaops_lab import lab
from kafkaops_lab.dirs import kafka_jars
from kafkaops_lab.host import LabHost

pytestmark = pytest.mark.lab


def test_zookeeper_sees_three_brokers_and_a_controller(lab_cluster: Cluster) -> None:
    assert lab_cluster.zookeeper
    with ZooKeeper.for_cluster(lab_cluster) as zk:
        assert zk.registered_brokers() == [1001, 1002, 1003]
        assert zk.controller() in (1001, 1002, 1003)
        reg = zk.broker_registration(1002)
        # a broker with no PLAINTEXT listener registers no legacy "host": its endpoints say where it is
        assert reg is not None and reg["endpoints"] == ["SASL_SSL://127.0.10.2:9092"] and reg["rack"] == "B"


def test_admin_client_sees_brokers_and_full_isr(lab_cluster: Cluster) -> None:
    snap = KafkaAdmin(lab_cluster.kafka).snapshot()
    assert snap.brokers == (1001, 1002, 1003)
    parts = [p for p in snap.partitions if p.topic == "eqiad.mediawiki.revision-create"]
    assert len(parts) == 6
    assert all(len(p.replicas) == 3 and set(p.isr) == set(p.replicas) for p in parts)
    assert snap.topics["eqiad.mediawiki.revision-create"].min_insync_replicas == 2


def test_real_kafka_cli_agrees(lab_cluster: Cluster, tmp_path: Path) -> None:
    """An independent check: Kafka's own kafka-topics tool, from the same jars, with the client settings
    kafkaops gives Kafka's tools (a --command-config file) on the secured lab."""
    from kafkaops.systems.kafka_auth import java_properties, properties_text

    config = tmp_path / "client.properties"
    config.write_text(properties_text(java_properties(lab_cluster.kafka)))
    config.chmod(0o600)
    out = subprocess.run(
        ["java", "-Dlog4j.configuration=file:/dev/null", "-cp", f"{kafka_jars()}/*",
         "org.apache.kafka.tools.TopicCommand", "--command-config", str(config),
         "--bootstrap-server", lab_cluster.bootstrap_servers.split(",")[0], "--describe",
         "--topic", "eqiad.mediawiki.page-delete"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "PartitionCount: 3" in out and "ReplicationFactor: 3" in out
    assert "min.insync.replicas=2" in out


def _confctl(cluster: Cluster, *args: str) -> str:
    assert cluster.conftool_config
    return subprocess.run(["confctl", "--config", cluster.conftool_config, *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_depool_with_confctl_stops_new_connections(lab_cluster: Cluster) -> None:
    target, other = lab_cluster.host("kafka1001"), lab_cluster.host("kafka1002")
    assert target and other
    assert '"pooled": "yes"' in _confctl(lab_cluster, "select", f"name={target.fqdn}", "get")
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            try:
                requests.post("http://127.0.10.100:8085/v1/events", json={"meta": {"stream": "test.event"}},
                              timeout=5, headers={"Connection": "close"})
            except requests.RequestException:
                pass
            time.sleep(0.02)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        _confctl(lab_cluster, "select", f"name={target.fqdn}", "set/pooled=no")
        assert '"pooled": "no"' in _confctl(lab_cluster, "select", f"name={target.fqdn}", "get")
        time.sleep(1.5)  # the balancer re-reads pools twice a second
        vip = target.services[0].vip  # the balancer connects from it: only its SYNs are clients
        quiet = count_syns(SshClient(target.ssh, name=target.name), target, target.commands["syn_capture"],
                           8085, 3, vip=vip)
        busy = count_syns(SshClient(other.ssh, name=other.name), other, other.commands["syn_capture"], 8085, 3,
                          vip=vip)
    finally:
        _confctl(lab_cluster, "select", f"name={target.fqdn}", "set/pooled=yes")
        stop.set()
        thread.join()
    assert quiet.syns == 0, f"depooled host still got {quiet.syns} SYNs from {quiet.sources}"
    assert busy.syns > 0, "the capture saw nothing on a pooled host: the SYN counter itself is broken"


def test_ssh_checks_host_keys(lab_cluster: Cluster, tmp_path: Path) -> None:
    """The lab's hosts are trusted through the lab's host CA alone (no host key is recorded): each is let
    in by its certificate. A host holding another host's key, or a CA nobody trusts, is an impersonation."""
    for host in lab_cluster.hosts:
        result = SshClient(host.ssh, name=host.name).run("echo $KAFKAOPS_LAB_HOST; hostctl boot-id")
        name, boot_id = result.stdout.split()
        assert name == host.name and boot_id == LabHost.named(host.name).boot_id()
    h1, h2 = lab_cluster.hosts[0], lab_cluster.hosts[1]
    assert h1.ssh.known_hosts
    lines = Path(h1.ssh.known_hosts).read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("@cert-authority ")
    from dataclasses import replace

    from kafkaops_lab.dirs import host_dirs

    # kafka1001's line, but holding kafka1002's key: an impersonation, whatever CA signed the key it shows.
    key_of_2 = " ".join((host_dirs(h2.name).etc / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{h1.address}]:{h1.ssh.port} {key_of_2}\n")
    with pytest.raises(HostKeyError, match="does not match"):
        SshClient(replace(h1.ssh, known_hosts=str(wrong)), name=h1.name).run("true")
    # The lab's line, with another CA's key: the host's certificate proves nothing.
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other_ca")], check=True)
    other_ca = " ".join((tmp_path / "other_ca.pub").read_text().split()[:2])
    wrong.write_text(" ".join(lines[0].split()[:2]) + f" {other_ca}\n")
    with pytest.raises(HostKeyError, match=r"and its certificate 'kafka1001\S*' is signed by SHA256:\S+, which no "
                                           r"@cert-authority line for this host names") as refused:
        SshClient(replace(h1.ssh, known_hosts=str(wrong)), name=h1.name).run("true")
    assert refused.value.exit_code == 5
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError, match="not in"):
        SshClient(replace(h1.ssh, known_hosts=str(empty)), name=h1.name).run("true")


def _wait_rejoined(cluster: Cluster, broker: int, why: str) -> None:
    """Until ``broker`` is registered and in every ISR it belongs to; then restore preferred leaders."""
    admin = KafkaAdmin(cluster.kafka)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        snap = admin.snapshot(with_configs=False)
        hosted = [p for p in snap.partitions if broker in p.replicas]
        if broker in snap.brokers and hosted and all(broker in p.isr for p in hosted):
            break
        time.sleep(1)
    else:
        pytest.fail(f"broker {broker} did not rejoin every ISR within 120s of its {why}")
    admin.elect_preferred_leaders()


def test_reboot_changes_boot_id_and_broker_rejoins_isr(lab_cluster: Cluster) -> None:
    host = LabHost.named("kafka1003")
    before = host.boot_id()
    host.reboot()
    assert host.boot_id() != before
    _wait_rejoined(lab_cluster, 1003, "reboot")


def test_boot_right_after_a_crash_restarts_the_broker_until_zookeeper_lets_it_in(lab_cluster: Cluster) -> None:
    """A crashed broker's ZooKeeper session outlives it; started at once, Kafka exits with NodeExists.
    The lab's unit manager starts it again, as systemd's Restart=on-failure does on a real host."""
    host = LabHost.named("kafka1003")
    host.power_off(clean=False)
    host.power_on()
    assert host.is_active("kafka")
    _wait_rejoined(lab_cluster, 1003, "crash and boot")


def test_quiet_load_loses_nothing(lab_cluster: Cluster) -> None:
    from kafkaops_lab.load import run_load

    report = run_load(lab_cluster, 4, rate=100, http_rate=5)
    assert report.produced_acked >= 300
    assert report.lost == 0 and report.duplicated == 0
    assert report.http_sent > 0 and report.http_failed == 0


def test_status_lists_every_component_healthy(lab_cluster: Cluster) -> None:
    components = lab.status()
    names = {c.name for c in components}
    assert {"zookeeper", "etcd", "balancer", "kafka1001/kafka", "kafka1002/sshd", "kafka1003/eventbus"} <= names
    assert all(c.healthy for c in components), [c.to_dict() for c in components if not c.healthy]


def test_up_refuses_when_already_up_and_changes_nothing(lab_cluster: Cluster) -> None:
    pids = sorted(c.pid for c in lab.status() if c.pid)
    with pytest.raises(LabError, match="already up"):
        lab.up(lab_cluster)
    assert sorted(c.pid for c in lab.status() if c.pid) == pids


def test_ssh_through_a_proxy_jump(lab_cluster: Cluster) -> None:
    """A bastion in the middle (ProxyJump): kafka1001 forwards to kafka1002, host keys checked on both."""
    from dataclasses import replace

    jump, target = lab_cluster.hosts[0], lab_cluster.hosts[1]
    via = replace(target.ssh, proxy_jump=f"{jump.ssh.address}:{jump.ssh.port}")
    client = SshClient(via, name=target.name)
    try:
        assert client.run("echo $KAFKAOPS_LAB_HOST").stdout.strip() == target.name
        # the session really rode on a channel of the jump host's connection
        assert client._jump is not None and client._jump.connect().get_transport().is_active()
        assert client.connect().get_transport().sock.__class__.__name__ == "Channel"
    finally:
        client.close()


def _status(inventory: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "-i", inventory, "status", "lab", "-o", "json"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KAFKAOPS_HOME": str(tmp_path / "home")})


def test_status_reads_kafka_and_pools_together(lab_cluster: Cluster, tmp_path: Path) -> None:
    import json

    result = _status(lab_cluster.source, tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["healthy"] and data["controller"] in (1001, 1002, 1003) and data["pool_error"] == ""
    assert [(b["broker_id"], b["registered"], b["pooled"]) for b in data["brokers"]] == [
        (1001, True, "yes"), (1002, True, "yes"), (1003, True, "yes")]
    assert sum(b["leaders"] for b in data["brokers"]) == data["partitions"]


def test_status_answers_when_etcd_does_not(lab_cluster: Cluster, tmp_path: Path) -> None:
    """Pool state is one column of status: an unreachable etcd blanks it and says why, it does not
    hide the Kafka half an operator needs most."""
    import json

    import yaml

    assert lab_cluster.conftool_config
    cfg = yaml.safe_load(Path(lab_cluster.conftool_config).read_text())
    cfg["hosts"] = ["http://127.0.0.1:9"]  # discard port: nothing listens there
    (tmp_path / "conftool.yaml").write_text(yaml.safe_dump(cfg))
    inventory = Path(lab_cluster.source).read_text()
    inventory = inventory.replace(
        "config: ${KAFKAOPS_LAB_DIR:-~/.local/state/kafkaops/lab}/conftool/config.yaml",
        f"config: {tmp_path / 'conftool.yaml'}")
    assert str(tmp_path / "conftool.yaml") in inventory
    (tmp_path / "lab.yaml").write_text(inventory)

    result = _status(str(tmp_path / "lab.yaml"), tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["healthy"] and "127.0.0.1:9" in data["pool_error"]
    assert {b["pooled"] for b in data["brokers"]} == {"unknown"}


# A long scenario (bench/long_scenarios.py): it starts a KRaft lab of its own only to stop it.
@pytest.mark.long
def test_plain_lab_down_stops_the_kraft_lab_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: after `lab up --mode kraft`, a plain `kafkaops lab down` left its six JVMs running (it only
    knew the default lab). The KRaft lab runs here under a HOME of its own, so the `lab down` below sees it
    and nothing of any other lab up on this machine (this module's own default lab)."""
    import os
    import sys

    from kafkaops.inventory import load_inventory
    from kafkaops_lab import dirs, procs

    cache = dirs.cache_dir()  # the jars, found before HOME moves
    for key in [k for k in os.environ if k.startswith("KAFKAOPS_LAB_DIR")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("KAFKAOPS_CACHE", str(cache))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    kraft = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-kraft.yaml")
    base = dirs.lab_dir(kraft.name)
    assert base == tmp_path / "home" / ".local" / "state" / "kafkaops" / "lab-kraft"
    lab.up(kraft)
    try:
        components = lab.status(base)
        assert all(c.healthy for c in components), [c.to_dict() for c in components if not c.healthy]
        pids = sorted({c.pid for c in components if c.pid} | set(procs.marked_pids(base)))
        assert len([c for c in components if c.kind.startswith("kafka")]) == 6

        result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "lab", "down"], capture_output=True,
                                text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        assert [p for p in pids if procs.is_alive(p)] == [], result.stdout
        assert result.stdout.startswith("lab lab-kraft down ("), result.stdout
        assert procs.marked_pids(base) == [] and not lab.is_up(base)
        assert [h.name for h in (*kraft.hosts, *kraft.controllers)
                if not procs.port_free(h.address, 9092 if h in kraft.hosts else 9093)] == []
    finally:
        lab.down(base)
