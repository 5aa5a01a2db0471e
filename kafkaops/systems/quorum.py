"""Kafka's ``kafka-metadata-quorum``, run over SSH on a KRaft controller node: the quorum's own view.

confluent-kafka 2.16 has no DescribeQuorum; the tool does, and it is what an operator would run. Its
invocation is the inventory's ``kafka_metadata_quorum`` template (``kafka-metadata-quorum
--bootstrap-controller {host.address}:9093`` in the KRaft lab), to which only literal flags are
appended. It is asked of the controller nodes in inventory order, skipping one that does not answer
(the voter being restarted, a host that is down): the quorum is asked, not a particular member.
``describe`` is read-only (allowed in a dry-run); ``remove-controller`` is a change (refused in one).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kafkaops.errors import CheckFailed, KafkaOpsError
from kafkaops.facts.quorum import DIRECTORY_ID, QuorumReplica, QuorumStatus, parse_replication, parse_status
from kafkaops.model import KafkaEndpoint
from kafkaops.systems.kafka_auth import java_properties, properties_text

if TYPE_CHECKING:
    from kafkaops.model import Host
    from kafkaops.systems.ssh import SshClient

#: Seconds one invocation may take: a JVM start plus one request round trip.
TOOL_TIMEOUT = 60.0
#: The tool's client settings, on its standard input (``--command-config /dev/stdin``): a controller
#: that is down (the one being restarted) must fail the ask in seconds, not after the AdminClient's
#: default minute of retries, so the next node is asked while the roll still waits.
CLIENT_CONFIG = (b"default.api.timeout.ms=5000\nrequest.timeout.ms=4000\nsocket.connection.setup.timeout.ms=2000\n"
                 b"socket.connection.setup.timeout.max.ms=2000\n")


class MetadataQuorum:
    """The quorum of a KRaft cluster, asked through ``kafka-metadata-quorum`` on its controller nodes.

    Args:
        nodes: The nodes to ask, in order.
        ssh: The run's SSH connection to a node.
        command: A node's ``kafka_metadata_quorum`` invocation (its inventory template, rendered); asked
            per question, so a node without the template fails only when the quorum is asked.
    """

    def __init__(self, nodes: Sequence[Host], *, ssh: Callable[[Host], SshClient],
                 command: Callable[[Host], str], endpoint: KafkaEndpoint) -> None:
        self.nodes = list(nodes)
        self._ssh = ssh
        self._command = command
        # The cluster's client security joins the timeouts on the tool's standard input: on a secured
        # cluster the password reaches the JVM without touching the node's disk or any argv.
        self._config = CLIENT_CONFIG + properties_text(java_properties(endpoint)).encode()
        self.asked: str = ""  # the node that answered last (shown in plans and status)

    def _ask(self, flag: str) -> str:
        return self._tool(f"describe {flag}")

    def _tool(self, subcommand: str, *, change: bool = False) -> str:
        failures = []
        # The node that answered last first: while one controller is down, every poll of a wait would
        # otherwise spend its first seconds on it.
        nodes = sorted(self.nodes, key=lambda n: n.name != self.asked)
        for node in nodes:
            command = f"{self._command(node)} --command-config /dev/stdin {subcommand}"
            ssh = self._ssh(node)
            try:
                result = (ssh.change if change else ssh.run)(command, timeout=TOOL_TIMEOUT, check=False,
                                                             stdin=self._config)
            except KafkaOpsError as exc:  # the node is down or unreachable: ask the next one
                failures.append(f"{node.name}: {exc.message}")
                continue
            if result.exit_code == 0:
                self.asked = node.name
                return result.stdout
            failures.append(f"{node.name}: exit {result.exit_code} {(result.stderr or result.stdout).strip()[-200:]}")
            if change:  # the quorum answered "no": another node would answer the same, or apply it twice
                break
        raise CheckFailed(f"no controller node answered kafka-metadata-quorum {subcommand}: " + "; ".join(failures),
                          hint="check the controllers are up and the inventory's kafka_metadata_quorum template")

    def remove_controller(self, node_id: int, directory_id: str) -> str:
        """``remove-controller``: voter ``node_id`` (its metadata directory ``directory_id``, as the quorum
        reported it) leaves the voters. A change: refused in a dry-run (the SSH client's ``change``). Sent to
        the controllers in turn; the quorum forwards it to its leader."""
        if not DIRECTORY_ID.match(directory_id) or not 0 <= node_id < 2**31:
            raise CheckFailed(f"controller {node_id}'s directory id {directory_id!r} is not one Kafka printed")
        return self._tool(f"remove-controller --controller-id {int(node_id)} --controller-directory-id "
                          f"{shlex.quote(directory_id)}", change=True)

    def status(self) -> QuorumStatus:
        return parse_status(self._ask("--status"))

    def replication(self) -> tuple[QuorumReplica, ...]:
        return parse_replication(self._ask("--replication"))
