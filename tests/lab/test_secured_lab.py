"""The secured lab (issue 43): its brokers really refuse what production's refuse, kafkaops works through
TLS and SCRAM, and its Kafka password reaches no artifact of a run nor any process's command line.

The default lab's brokers listen on SASL_SSL only (lab/kafkaops_lab/security.py); every other lab test of the
default lab runs through the same listeners, so each of them also shows a client of kafkaops secured.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import ArgvWatch, holding_secrets

from kafkaops.errors import AuthError
from kafkaops.model import Cluster, KafkaEndpoint

pytestmark = pytest.mark.lab

FAST = ["--syn-window", "3s"]


def _password(cluster: Cluster) -> str:
    secret = cluster.kafka_security.password
    assert secret is not None
    value = secret.reveal()
    assert len(value) >= 16
    return value


def _inventory_with(tmp_path: Path, cluster: Cluster, old: str, new: str) -> Path:
    text = Path(cluster.source).read_text()
    assert old in text
    path = tmp_path / "lab.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_the_brokers_refuse_a_plaintext_client(lab_cluster: Cluster) -> None:
    from kafkaops.errors import UnreachableError
    from kafkaops.systems.kafka import KafkaAdmin

    with pytest.raises(UnreachableError):
        KafkaAdmin(KafkaEndpoint(lab_cluster.bootstrap_servers, cluster="lab"), timeout=3, attempts=1).metadata()
    assert KafkaAdmin.look(lab_cluster).metadata().brokers  # the same brokers, with the inventory's security


def _acl_admin(cluster: Cluster) -> object:
    from confluent_kafka.admin import AdminClient

    from kafkaops.systems.kafka_auth import librdkafka_config
    from kafkaops_lab.security import admin_endpoint

    return AdminClient({**librdkafka_config(admin_endpoint(cluster)), "log_level": 2})


def _kafkaops_acls(cluster: Cluster) -> set[tuple[str, str, str, str]]:
    """The ALLOW ACLs the brokers hold for User:kafkaops, as (operation, resource, name, pattern), read by
    kafkaops itself (DescribeAcls: DESCRIBE on the cluster, which it has)."""
    from kafkaops.systems.kafka import KafkaAdmin

    found = [a for a in KafkaAdmin.for_cluster(cluster).acls() or [] if a.principal == "User:kafkaops"]
    assert found and all(a.permission == "ALLOW" and a.host == "*" for a in found)
    return {(a.operation, a.resource, a.name, a.pattern) for a in found}


def test_the_brokers_grant_kafkaops_exactly_its_least_privilege(lab_cluster: Cluster) -> None:
    """What the brokers' authorizer holds for kafkaops is docs/security.md's table (the policy module), no
    more: every other lab test runs kafkaops under exactly these ACLs."""
    from kafkaops.policy.kafka_acls import required
    from kafkaops_lab.lab import SERVICE_PREFIXES

    expected = {(a.operation, a.resource, a.name, a.pattern) for a in required(SERVICE_PREFIXES)}
    assert _kafkaops_acls(lab_cluster) == expected


def test_the_acls_the_brokers_serve_are_the_ones_in_zookeeper(lab_cluster: Cluster) -> None:
    """The two readers the migration's ACL comparison uses, against a real AclAuthorizer: what the brokers
    answer to DescribeAcls and what kafkaops reads from ZooKeeper's ``/kafka-acl*`` are the same entries (in
    ZooKeeper mode both come from ZooKeeper; after a migration the brokers' come from KRaft)."""
    from kafkaops.policy.acl_migration import compare
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops.systems.zookeeper import ZooKeeper

    served = KafkaAdmin.for_cluster(lab_cluster).acls()
    with ZooKeeper.for_cluster(lab_cluster) as zk:
        held = zk.kafka_acls()
    assert served is not None and len(served) >= 20
    assert {a.principal for a in held} == {"User:kafkaops", "User:eventbus", "User:load"}
    assert {a.pattern for a in held} == {"LITERAL", "PREFIXED"}
    diff = compare(held, served)
    assert diff.same, diff.describe()


def test_a_missing_acl_is_refused_naming_the_acl_and_changing_nothing(lab_cluster: Cluster, home: Path) -> None:
    """Without ALTER on the cluster, the election is refused by the brokers' authorizer: exit 14 (never
    retried as an outage), naming the principal and the ACL to grant. A dry-run plan needs no ALTER."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from kafkaops.systems.kafka import KafkaAdmin

    admin = _acl_admin(lab_cluster)
    alter = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:kafkaops", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW)
    as_filter = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                 "User:kafkaops", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    before = _kafkaops_acls(lab_cluster)
    admin.delete_acls([as_filter], request_timeout=30)[as_filter].result(timeout=60)  # type: ignore[attr-defined]
    try:
        time.sleep(2)  # the other brokers learn the change from ZooKeeper
        with pytest.raises(AuthError) as refused:
            KafkaAdmin(lab_cluster.kafka, timeout=10, attempts=1).elect_preferred_leaders()
        text = str(refused.value)
        assert refused.value.exit_code == 14
        assert text.startswith("cluster lab: Kafka (SASL_SSL, as User:kafkaops) refused elect_leaders: "
                               "not authorized on the cluster"), text
        assert "(it needs ALTER on Cluster:kafka-cluster)" in text and "grant User:kafkaops ALTER on Cluster" in text
        plan = kafkaops(home, lab_cluster, "reboot", lab_cluster.hosts[0].name, "--dry-run")
        assert plan.returncode == 0, plan.stdout + plan.stderr
    finally:
        admin.create_acls([alter], request_timeout=30)[alter].result(timeout=60)  # type: ignore[attr-defined]
    assert _kafkaops_acls(lab_cluster) == before


@pytest.mark.parametrize(("what", "change", "code", "said"), [
    ("wrong password", "password_file", 14, r"refused a metadata request: authentication failed"),
    ("unknown CA", "ca_file", 14, r"refused a metadata request: TLS handshake failed"),
    ("world-readable password file", "mode", 3, r"may be read by other users \(mode 0644\)"),
    ("missing password file", "missing", 3, r"kafka\.security\.sasl\.password_file .*: No such file"),
])
def test_bad_credentials_are_one_line_naming_the_cluster_never_the_secret(
        lab_cluster: Cluster, tmp_path: Path, what: str, change: str, code: int, said: str) -> None:
    import re

    secret = lab_cluster.kafka_security.password
    assert secret is not None and secret.file is not None
    fake = tmp_path / "secret"
    fake.write_text("not-the-password\n")
    fake.chmod(0o644 if change == "mode" else 0o600)
    if change == "ca_file":
        ca = lab_cluster.kafka_security.ca_file or ""
        # kafka.security's CA (ZooKeeper's, above it, is the same file: its line is left alone)
        inventory = _inventory_with(tmp_path, lab_cluster,
                                    f"protocol: SASL_SSL\n    ca_file: {_raw(lab_cluster, 'ca_file')}",
                                    "protocol: SASL_SSL\n    ca_file: /etc/ssl/certs/ca-certificates.crt")
        assert ca
    elif change == "missing":
        inventory = _inventory_with(tmp_path, lab_cluster, f"password_file: {_raw(lab_cluster, 'password_file')}",
                                    f"password_file: {tmp_path / 'absent'}")
    else:
        inventory = _inventory_with(tmp_path, lab_cluster, f"password_file: {_raw(lab_cluster, 'password_file')}",
                                    f"password_file: {fake}")
    started = time.monotonic()
    result = kafkaops(tmp_path / "home", lab_cluster, "-i", str(inventory), "status", "lab")
    assert result.returncode == code, (what, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(said, lines[0]), (what, result.stderr)
    if code == 14:
        assert "cluster lab: Kafka (SASL_SSL, as User:kafkaops)" in lines[0]
        assert time.monotonic() - started < 30  # refused at once, not retried as an outage
    assert _password(lab_cluster) not in result.stdout + result.stderr
    assert "not-the-password" not in result.stdout + result.stderr


def _raw(cluster: Cluster, key: str) -> str:
    """The inventory's own text for ``kafka.security``'s ``key`` (with its ``${KAFKAOPS_LAB_DIR:-...}``), for
    replacing it: the Kafka CA and kafkaops' Kafka password, not ZooKeeper's or Alertmanager's."""
    import re

    text = Path(cluster.source).read_text()
    block = text[text.index("  security:\n"):text.index("\nconftool:")]
    m = re.search(rf"{key}: (\S+)", block)
    assert m
    return m.group(1)


def test_the_probe_needs_no_password_to_ask_if_a_broker_serves_but_its_metadata_does(lab_cluster: Cluster,
                                                                                     tmp_path: Path) -> None:
    from dataclasses import replace

    from kafkaops.model import Secret
    from kafkaops.systems.broker_probe import serves, view_of

    host = lab_cluster.hosts[0]
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong\n")
    wrong.chmod(0o600)
    sec = lab_cluster.kafka_security
    bad = replace(lab_cluster.kafka, security=replace(sec, password=Secret(file=str(wrong))))
    assert serves(bad, host.address, 9092)  # ApiVersions before authentication, over TLS
    view = view_of(lab_cluster.kafka, host.broker_id, host.address, 9092)
    assert view is not None and view.isr
    with pytest.raises(AuthError, match=r"refused SASL SCRAM-SHA-512 as User:kafkaops"):
        view_of(bad, host.broker_id, host.address, 9092)


def test_a_kept_probe_logs_in_once_and_asks_a_sasl_broker_again_on_that_connection(lab_cluster: Cluster) -> None:
    """A SASL listener closes a connection that sends anything but the handshake after its first ApiVersions:
    the kept probe asks on its logged-in connection, so a run's every snapshot reuses one connection per
    broker (and a wrong password is an AuthError, not "not serving")."""
    import kafkaops.systems.broker_probe as broker_probe

    host = lab_cluster.hosts[0]
    endpoint = {host.broker_id: (host.address, 9092)}
    opened: list[bool] = []
    real = broker_probe.open_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(bool(kwargs.get("authenticate")))
        return real(*args, **kwargs)

    probe = broker_probe.BrokerProbe(lab_cluster.kafka)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(broker_probe, "open_connection", counting)
            for _ in range(3):
                assert probe.serving(endpoint) == {host.broker_id}
                view = probe.view(host.broker_id, endpoint[host.broker_id])
                assert view is not None and view.isr
    finally:
        probe.close()
    assert opened == [True], f"connections opened (authenticated?): {opened}"


def test_a_reboot_with_the_post_check_under_load_leaves_the_password_nowhere(pooled_lab: Cluster,
                                                                              home: Path) -> None:
    """A real reboot with the Spark post-check, under load: it passes through TLS and SCRAM (Kafka), its
    digest identity (ZooKeeper), client certificates (etcd) and basic auth (Alertmanager), and none of the
    lab's passwords — kafkaops' Kafka, ZooKeeper and Alertmanager ones, the brokers', the load's — is in a
    journal, plan (JSON, Markdown, saved), audit record, output or log of the run, nor on any process's
    command line while it runs (sampled every 50 ms from /proc)."""
    cluster = pooled_lab
    assert _password(cluster)
    lab = Path(os.environ.get("KAFKAOPS_LAB_DIR", "~/.local/state/kafkaops/lab")).expanduser()
    passwords = [p.read_text().strip().encode() for p in sorted((lab / "secrets").glob("*.password"))]
    assert len(passwords) >= 6 and all(len(p) >= 16 for p in passwords)
    plans = home.parent / "plans"
    plans.mkdir()
    with ArgvWatch(passwords) as argv:
        for fmt in ("json", "markdown"):
            shown = kafkaops(home, cluster, "reboot", "kafka1003", "--dry-run", "-o", fmt,
                             "--save-plan", str(plans / f"plan.{fmt}"))
            assert shown.returncode == 0, shown.stdout + shown.stderr
            (plans / f"stdout.{fmt}").write_text(shown.stdout + shown.stderr)
        with Load(cluster) as load:
            proc = spawn(home, cluster, "reboot", "kafka1003", "--yes", "--reason", "secured lab", *FAST)
            proc.wait(900)
    run_output = output(proc)
    assert proc.returncode == 0, run_output
    assert "post-check" in run_output.lower()
    assert load.report is not None and load.report.lost == 0 and load.report.duplicated == 0, load.report
    assert load.report.produce_errors == 0, load.report
    assert argv.samples > 10 and not argv.seen, f"a password was on the command line of process(es) {argv.seen}"
    assert not any(p.decode() in run_output for p in passwords)
    artifacts = [p for base in (home, plans) for p in base.rglob("*") if p.is_file()]
    assert any(p.name == "journal.jsonl" for p in artifacts) and len(artifacts) >= 5, artifacts
    # the run's debug log (issue 45) holds what the client libraries said — and is searched like the rest
    debug = next(p for p in artifacts if p.name == "debug.log").read_text()
    assert "paramiko.transport" in debug, debug[-2000:]
    lab_logs = [p for p in lab.rglob("*.log") if p.is_file()]
    assert len(lab_logs) >= 10, lab_logs
    holding = holding_secrets([*artifacts, *lab_logs], passwords)
    assert not holding, f"a password is in {holding}"


def test_ssh_trusts_the_files_openssh_reads_and_the_lab_ca_that_signed_the_hosts(lab_cluster: Cluster,
                                                                               tmp_path: Path) -> None:
    """The lab's CA line only in ssh_config's GlobalKnownHostsFile (Puppet's /etc/ssh/ssh_known_hosts): the
    hosts are trusted by their certificates, as by ssh(1), and doctor names the CA. The CA @revoked: refused.
    No file at all: refused naming every file looked for."""
    from dataclasses import replace

    from kafkaops.errors import HostKeyError
    from kafkaops.systems.known_hosts import host_names, trust_files, verified_by
    from kafkaops.systems.ssh import SshClient

    host = lab_cluster.hosts[0]
    assert host.ssh.known_hosts
    line = Path(host.ssh.known_hosts).read_text().splitlines()[0]
    assert line.startswith("@cert-authority ")
    ca_key = " ".join(line.split()[2:4])
    config = tmp_path / "ssh_config"
    empty_user = tmp_path / "user_known_hosts"

    def client(global_file: Path) -> SshClient:
        config.write_text(f"Host *\n  GlobalKnownHostsFile {global_file}\n  UserKnownHostsFile {empty_user}\n")
        endpoint = replace(host.ssh, known_hosts=None)
        return SshClient(endpoint, name=host.name, ssh_config=str(config), connect_timeout=10)

    global_file = tmp_path / "ssh_known_hosts"
    global_file.write_text(line + "\n")
    assert client(global_file).run("echo ok").stdout.strip() == "ok"
    files = trust_files(None, {"globalknownhostsfile": str(global_file), "userknownhostsfile": str(empty_user)})
    assert (verified_by(files, host_names(host.address, host.ssh.port or 22)) or "").startswith(
        "host CA SHA256:")

    global_file.write_text(line + "\n" + f"@revoked * {ca_key}\n")
    with pytest.raises(HostKeyError, match=r"its CA's key is marked @revoked") as refused:
        client(global_file).run("echo ok")
    assert refused.value.exit_code == 5

    global_file.unlink()
    with pytest.raises(HostKeyError, match=rf"no known_hosts file .* \(looked for {empty_user}, {global_file}\)"):
        client(global_file).run("echo ok")
