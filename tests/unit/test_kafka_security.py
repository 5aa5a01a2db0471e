"""Kafka client security (issue 43): the inventory's ``kafka.security`` is validated where it is written,
reaches every kind of client, and its password never leaves the client configuration.

The brokers' side (a real SASL_SSL listener refusing a wrong password, an unknown CA, a plaintext client)
is tested on the secured lab: tests/lab/test_secured_lab.py.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.model import KafkaEndpoint, KafkaSecurity, Secret
from kafkaops.systems import command_config
from kafkaops.systems.kafka_auth import check_files, java_properties, librdkafka_config, properties_text

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventory" / "lab.yaml"
PASSWORD = 'p"a\\ss wörd=1'


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    d = tmp_path / "secrets"
    d.mkdir(mode=0o700)
    pw = d / "kafkaops.password"
    pw.write_text(PASSWORD + "\n")
    pw.chmod(0o600)
    (d / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    return d


def _inventory(tmp_path: Path, security: str) -> Path:
    text = LAB.read_text()
    start = text.index("  security:\n")
    end = text.index("\nconftool:")
    path = tmp_path / "secured.yaml"
    path.write_text(text[:start] + security.rstrip("\n") + "\n" + text[end:])
    return path


def _sasl_ssl(d: Path, sasl: str = "") -> str:
    sasl = sasl or f"""      mechanism: SCRAM-SHA-512
      username: kafkaops
      password_file: {d}/kafkaops.password
"""
    return f"""  security:
    protocol: SASL_SSL
    ca_file: {d}/ca.pem
    sasl:
{sasl}"""


def test_the_secured_lab_inventory_names_its_secrets_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", "/srv/labdir")
    sec = load_inventory(LAB).kafka_security
    assert (sec.protocol, sec.sasl_mechanism, sec.username) == ("SASL_SSL", "SCRAM-SHA-512", "kafkaops")
    assert sec.ca_file == "/srv/labdir/tls/ca.pem"
    assert sec.password == Secret(file="/srv/labdir/secrets/kafkaops.password")


def test_a_loaded_cluster_holds_no_password(tmp_path: Path, secrets_dir: Path) -> None:
    cluster = load_inventory(_inventory(tmp_path, _sasl_ssl(secrets_dir)))
    assert PASSWORD not in repr(cluster)
    assert cluster.kafka_security.password is not None
    assert cluster.kafka_security.password.reveal() == PASSWORD  # read when a client is built, not at load


@pytest.mark.parametrize(("security", "expected"), [
    ("  security:\n    protocol: TLS\n", r"kafka\.security\.protocol: unknown protocol 'TLS' \(known: PLAINTEXT, SSL"),
    ("  security:\n    protocol: SASL_SSL\n", r"kafka\.security\.protocol: SASL_SSL needs a sasl: section"),
    ("  security:\n    protocol: SSL\n    sasl: {mechanism: PLAIN}\n", r"kafka\.security\.sasl: SSL takes no sasl"),
    ("  security:\n    protocol: PLAINTEXT\n    ca_file: /etc/ca.pem\n",
     r"kafka\.security\.ca_file: a PLAINTEXT connection uses no TLS files"),
    ("  security:\n    protocol: SSL\n    cert_file: /etc/c.pem\n",
     r"kafka\.security\.key_file: mutual TLS needs both"),
    ("  security:\n    protocol: SSL\n    ca_file: ca.pem\n", r"kafka\.security\.ca_file: expected an absolute path"),
])
def test_malformed_security_is_refused_at_load(tmp_path: Path, security: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_inventory(tmp_path, security))


@pytest.mark.parametrize(("sasl", "expected"), [
    ("      mechanism: GSSAPI\n      username: k\n      password_env: PW\n",
     r"unknown SASL mechanism 'GSSAPI' \(known: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512\) \(GSSAPI/Kerberos: the "
     r"confluent-kafka wheels are built without Cyrus SASL"),
    ("      mechanism: SCRAM-SHA-512\n      username: k\n      password: hunter2\n",
     r"sasl\.password: a password is never written in an inventory"),
    ("      mechanism: SCRAM-SHA-512\n      username: k\n",
     r"name the password by exactly one of password_file or password_env"),
    ("      mechanism: SCRAM-SHA-512\n      username: k\n      password_env: 'not a name'\n",
     r"'not a name' is not an environment variable name"),
])
def test_malformed_sasl_is_refused_at_load(tmp_path: Path, secrets_dir: Path, sasl: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_inventory(tmp_path, _sasl_ssl(secrets_dir, sasl)))


def test_an_inline_password_never_appears_in_the_error(tmp_path: Path, secrets_dir: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load_inventory(_inventory(tmp_path, _sasl_ssl(
            secrets_dir, "      mechanism: SCRAM-SHA-512\n      username: k\n      password: hunter2\n")))
    assert "hunter2" not in str(refused.value)


def test_plain_over_an_unencrypted_connection_is_refused(tmp_path: Path) -> None:
    security = ("  security:\n    protocol: SASL_PLAINTEXT\n    sasl:\n      mechanism: PLAIN\n      username: k\n"
                "      password_env: PW\n")
    with pytest.raises(ConfigError, match=r"PLAIN over SASL_PLAINTEXT sends the password in clear text"):
        load_inventory(_inventory(tmp_path, security))


def test_a_password_file_others_can_read_is_refused_with_the_fix(tmp_path: Path, secrets_dir: Path) -> None:
    pw = secrets_dir / "kafkaops.password"
    pw.chmod(0o644)
    with pytest.raises(ConfigError, match=rf"password_file: {re.escape(str(pw))} may be read by other users "
                                          rf"\(mode 0644\): chmod 600 {re.escape(str(pw))}"):
        load_inventory(_inventory(tmp_path, _sasl_ssl(secrets_dir)))


def _endpoint(d: Path, **changes: object) -> KafkaEndpoint:
    sec = KafkaSecurity(protocol="SASL_SSL", ca_file=str(d / "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                        username="kafkaops", password=Secret(file=str(d / "kafkaops.password")))
    return KafkaEndpoint("b1:9092,b2:9092", replace(sec, **changes), "main")  # type: ignore[arg-type]


def test_a_missing_or_exposed_file_is_refused_before_any_client_is_built(secrets_dir: Path) -> None:
    missing = _endpoint(secrets_dir, ca_file=str(secrets_dir / "nope.pem"))
    with pytest.raises(ConfigError, match=r"cluster main: kafka\.security\.ca_file .*nope\.pem: No such file"):
        librdkafka_config(missing)
    with pytest.raises(ConfigError, match=r"kafka\.security\.ca_file"):
        java_properties(missing)
    (secrets_dir / "kafkaops.password").chmod(0o640)
    with pytest.raises(ConfigError, match=r"sasl\.password_file .* may be read by other users \(mode 0640\)"):
        check_files(_endpoint(secrets_dir))


def test_an_unset_password_variable_is_named_not_guessed(secrets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKAOPS_TEST_PW", raising=False)
    with pytest.raises(ConfigError, match=r"cluster main: the Kafka password variable \$KAFKAOPS_TEST_PW is not set"):
        librdkafka_config(_endpoint(secrets_dir, password=Secret(env="KAFKAOPS_TEST_PW")))
    monkeypatch.setenv("KAFKAOPS_TEST_PW", "from-env")
    assert librdkafka_config(_endpoint(secrets_dir, password=Secret(env="KAFKAOPS_TEST_PW")))["sasl.password"] == \
        "from-env"


def test_librdkafka_gets_every_setting(secrets_dir: Path) -> None:
    conf = librdkafka_config(_endpoint(secrets_dir))
    assert conf == {"bootstrap.servers": "b1:9092,b2:9092", "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(secrets_dir / "ca.pem"), "sasl.mechanisms": "SCRAM-SHA-512",
                    "sasl.username": "kafkaops", "sasl.password": PASSWORD}
    assert librdkafka_config(KafkaEndpoint("b1:9092")) == {"bootstrap.servers": "b1:9092"}


def test_java_tools_get_a_pem_truststore_and_a_quoted_jaas_line(secrets_dir: Path) -> None:
    props = java_properties(_endpoint(secrets_dir))
    assert props["ssl.truststore.type"] == "PEM" and props["ssl.truststore.location"] == str(secrets_dir / "ca.pem")
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    # JAAS quoting: the password's " and \ escaped, so the JVM reads back exactly the password
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="kafkaops" password="p\\"a\\\\ss wörd=1";')


def _java_properties_load(text: str) -> dict[str, str]:
    """``java.util.Properties.load``'s rules for the escapes :func:`properties_text` writes."""
    out = {}
    for line in text.splitlines():
        key, _, value = re.split(r"(?<!\\)(=)", line, maxsplit=1)

        def unescape(s: str) -> str:
            return re.sub(r"\\(u[0-9a-f]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                          and len(m.group(1)) == 5 else {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(
                              m.group(1), m.group(1)), s)
        def utf16(s: str) -> str:  # Java strings are UTF-16: a \\uD83D\\uDE00 pair is one character
            return s.encode("utf-16", "surrogatepass").decode("utf-16")

        out[utf16(unescape(key))] = utf16(unescape(value))
    return out


@pytest.mark.parametrize("value", ["plain", "back\\slash", "new\nline", " leading space", "#hash", "snow☃",
                                   "emoji😀", "a=b:c"])
def test_properties_text_survives_javas_escapes(value: str) -> None:
    text = properties_text({"sasl.jaas.config": value, "odd key=:": "v"})
    assert text.count("\n") == 2  # one line per property, whatever the value holds
    assert _java_properties_load(text) == {"sasl.jaas.config": value, "odd key=:": "v"}


def test_a_tool_gets_its_settings_in_a_private_file_that_is_gone_after(secrets_dir: Path, tmp_path: Path) -> None:
    """The wrapped command run by a real shell: the tool (a script) sees ``--command-config FILE`` holding
    the settings, in a 0700 directory, its standard input intact after them; no argv holds the password;
    the file is removed when the tool ends."""
    tool = tmp_path / "tool"
    seen = tmp_path / "seen"
    tool.write_text(f"""#!/bin/sh
config="$2"
{{ echo "argv: $*"; stat -c %a "$(dirname "$config")"; cat "$config"; echo "stdin:"; cat; echo "$config"; }} > {seen}
""")
    tool.chmod(0o755)
    endpoint = _endpoint(secrets_dir)
    command, stdin = command_config.wrap(endpoint, str(tool), b'{"version":1}\n')
    assert PASSWORD not in command and "--command-config" in command
    subprocess.run(["sh", "-c", command], input=stdin, check=True, timeout=30)
    out = seen.read_text().splitlines()
    assert out[0].startswith("argv: --command-config ") and PASSWORD not in out[0]
    assert out[1] == "700"
    assert any("sasl.jaas.config=" in line for line in out)
    assert out[out.index("stdin:") + 1] == '{"version":1}'
    assert not os.path.exists(out[-1]) and not os.path.exists(os.path.dirname(out[-1]))
    assert command_config.shown(endpoint, "kafka-reassign-partitions --list") == \
        "kafka-reassign-partitions --list --command-config <private file>"


def test_a_plaintext_cluster_runs_the_tool_as_it_is() -> None:
    assert command_config.wrap(KafkaEndpoint("b:9092"), "kafka-reassign-partitions --list", b"x") == \
        ("kafka-reassign-partitions --list", b"x")


def test_a_ca_file_that_is_not_pem_is_one_line_not_a_traceback(secrets_dir: Path) -> None:
    """librdkafka refuses the configuration itself when it builds the client: said as exit 3, naming the
    cluster (it was an internal error, exit 1, before)."""
    from kafkaops.systems.kafka import KafkaAdmin

    (secrets_dir / "ca.pem").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"cluster main: the Kafka client refused kafka\.security: .*ca\.location"):
        KafkaAdmin(_endpoint(secrets_dir), timeout=1, attempts=1)


def test_a_missing_acl_is_a_refusal_naming_the_principal_not_an_outage(secrets_dir: Path) -> None:
    """A request refused by the brokers' authorizer (CLUSTER_AUTHORIZATION_FAILED on an election, say) is
    exit 14 naming the principal to grant; a timeout stays an outage (None: the caller says "did not answer")."""
    from types import SimpleNamespace

    from kafkaops.systems.kafka_auth import classify

    def kafka_error(name: str, text: str) -> Exception:
        return Exception(SimpleNamespace(name=lambda: name, str=lambda: text))

    endpoint = _endpoint(secrets_dir)
    refused = classify(endpoint, "elect_leaders",
                       kafka_error("CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed"))
    assert refused is not None and refused.exit_code == 14
    assert str(refused).startswith("cluster main: Kafka (SASL_SSL, as User:kafkaops) refused elect_leaders: "
                                   "not authorized on the cluster")
    assert "grant User:kafkaops the ACL named above" in str(refused)
    assert classify(endpoint, "ListOffsets", kafka_error("_TIMED_OUT", "Local: Timed out")) is None


def test_a_refusal_by_the_authorizer_names_the_acl_the_request_lacked(secrets_dir: Path) -> None:
    """The request says what it needs; the error says which resource the authorizer refused: the message
    names the one ACL to grant (a group's, not the topic's, when the group was refused)."""
    from types import SimpleNamespace

    from kafkaops.policy import kafka_acls as acls
    from kafkaops.systems.kafka_auth import classify

    def kafka_error(name: str) -> Exception:
        return Exception(SimpleNamespace(name=lambda: name, str=lambda: name.replace("_", " ").lower()))

    endpoint = _endpoint(secrets_dir)
    needs = [acls.group("READ", "eventbus-consumers"), acls.topic("READ")]
    group = classify(endpoint, "OffsetCommit(eventbus-consumers)", kafka_error("GROUP_AUTHORIZATION_FAILED"), needs)
    assert group is not None and group.exit_code == 14
    assert str(group).startswith("cluster main: Kafka (SASL_SSL, as User:kafkaops) refused "
                                 "OffsetCommit(eventbus-consumers): not authorized on a consumer group: ")
    assert "(it needs READ on Group:eventbus-consumers)" in str(group)
    assert "grant User:kafkaops READ on Group:eventbus-consumers (`kafkaops docs security`" in str(group)
    topic = classify(endpoint, "OffsetCommit(eventbus-consumers)", kafka_error("TOPIC_AUTHORIZATION_FAILED"), needs)
    assert topic is not None and "(it needs READ on Topic:*)" in str(topic)
    elect = classify(endpoint, "elect_leaders", kafka_error("CLUSTER_AUTHORIZATION_FAILED"), [acls.cluster("ALTER")])
    assert elect is not None and "(it needs ALTER on Cluster:kafka-cluster)" in str(elect)


def test_a_subcommand_follows_the_command_config(secrets_dir: Path, tmp_path: Path) -> None:
    """argparse4j tools (``kafka-features``, ``kafka-metadata-quorum``) refuse ``--command-config`` after
    their subcommand ("unrecognized arguments", found on the secured migration lab): it goes before it."""
    tool = tmp_path / "tool"
    seen = tmp_path / "seen"
    tool.write_text(f'#!/bin/sh\necho "$*" > {seen}\n')
    tool.chmod(0o755)
    command, stdin = command_config.wrap(_endpoint(secrets_dir), f"{tool} --bootstrap-controller c:9093",
                                         subcommand="upgrade --metadata 4.1")
    subprocess.run(["sh", "-c", command], input=stdin, check=True, timeout=30)
    words = seen.read_text().split()
    assert words[:2] == ["--bootstrap-controller", "c:9093"] and words[2] == "--command-config"
    assert words[4:] == ["upgrade", "--metadata", "4.1"]
    assert command_config.wrap(KafkaEndpoint("b:9092"), "kafka-features", subcommand="describe") == \
        ("kafka-features describe", None)
