"""``MetadataQuorum``: Kafka's tool asked of the controller nodes in turn, the one that answered first next
time, its client settings on stdin (a fake SSH here: this is the adapter's own logic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafkaops.errors import CheckFailed, KafkaOpsError
from kafkaops.model import KafkaEndpoint, KafkaSecurity, Secret
from kafkaops.systems.quorum import CLIENT_CONFIG, MetadataQuorum
from kafkaops.systems.ssh import CommandResult

from test_quorum_facts import ALL_CAUGHT_UP  # isort: skip


@dataclass
class Node:
    name: str


@dataclass
class FakeSsh:
    answers: dict[str, Any]
    calls: list[tuple[str, str, bytes | None]] = field(default_factory=list)
    node: str = ""

    def run(self, command: str, *, timeout: float, check: bool, stdin: bytes | None = None) -> CommandResult:
        self.calls.append((self.node, command, stdin))
        answer = self.answers[self.node]
        if isinstance(answer, Exception):
            raise answer
        return CommandResult(command=command, exit_code=answer[0], stdout=answer[1], stderr="", seconds=0.1)


def quorum_of(ssh: FakeSsh, nodes: list[Node], endpoint: KafkaEndpoint = KafkaEndpoint("c1:9092")) -> MetadataQuorum:
    """The adapter over the fake SSH, with the lab's template rendered for each node."""

    def connect(node: Node) -> FakeSsh:
        ssh.node = node.name
        return ssh

    return MetadataQuorum(nodes, ssh=connect,  # type: ignore[arg-type]
                          command=lambda node: f"kafka-metadata-quorum --bootstrap-controller {node.name}:9093",
                          endpoint=endpoint)


def test_a_node_that_does_not_answer_is_skipped_and_the_one_that_did_is_asked_first() -> None:
    ssh = FakeSsh({"c1": (1, ""), "c2": (0, ALL_CAUGHT_UP), "c3": (0, ALL_CAUGHT_UP)})
    quorum = quorum_of(ssh, [Node("c1"), Node("c2"), Node("c3")])
    assert [r.node_id for r in quorum.replication()][:3] == [3001, 3002, 3003]
    assert [c[0] for c in ssh.calls] == ["c1", "c2"] and quorum.asked == "c2"
    quorum.replication()
    assert [c[0] for c in ssh.calls] == ["c1", "c2", "c2"]
    _, command, stdin = ssh.calls[-1]
    assert command == "kafka-metadata-quorum --bootstrap-controller c2:9093 --command-config /dev/stdin " \
                      "describe --replication"
    assert stdin == CLIENT_CONFIG and b"default.api.timeout.ms=5000" in stdin


def test_no_node_answering_is_a_failed_check_naming_each() -> None:
    ssh = FakeSsh({"c1": KafkaOpsError("connection refused"), "c2": (1, "")})
    quorum = quorum_of(ssh, [Node("c1"), Node("c2")])
    with pytest.raises(CheckFailed, match=r"c1: connection refused; c2: exit 1"):
        quorum.status()


def test_a_secured_clusters_settings_join_the_timeouts_on_stdin(tmp_path: Path) -> None:
    """On a secured cluster the tool's client settings (TLS, SASL) reach it on its standard input with the
    timeouts: the password in no argv and on no disk of the node."""
    password = tmp_path / "pw"
    password.write_text("quorum-secret\n")
    password.chmod(0o600)
    (tmp_path / "ca.pem").write_text("pem")
    sec = KafkaSecurity(protocol="SASL_SSL", ca_file=str(tmp_path / "ca.pem"), sasl_mechanism="SCRAM-SHA-256",
                        username="kafkaops", password=Secret(file=str(password)))
    ssh = FakeSsh({"c1": (0, ALL_CAUGHT_UP)})
    quorum_of(ssh, [Node("c1")], KafkaEndpoint("c1:9092", sec, "k")).replication()
    _, command, stdin = ssh.calls[-1]
    assert "quorum-secret" not in command
    assert stdin is not None and stdin.startswith(CLIENT_CONFIG)
    assert b"security.protocol=SASL_SSL\n" in stdin and b'password=\\"quorum-secret\\";' not in stdin
    assert b'password="quorum-secret";' in stdin
