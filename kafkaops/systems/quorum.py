"""Kafka's ``kafka-metadata-quorum``, run over SSH on a KRaft controller node: the quorum's own view.

confluent-kafka 2.16 has no DescribeQuorum; the tool does, and it is what an operator would run. Its
invocation is the inventory's ``kafka_metadata_quorum`` template (``kafka-metadata-quorum
--bootstrap-controller {host.address}:9093`` in the KRaft lab), to which only literal flags are
appended. It is asked of the controller nodes in inventory order, skipping one that does not answer
(the voter being restarted, a host that is down): the quorum is asked, not a particular member.
Read-only: allowed in a dry-run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaops.errors import CheckFailed, KafkaOpsError
from kafkaops.facts.quorum import QuorumReplica, QuorumStatus, parse_replication, parse_status

if TYPE_CHECKING:
    from kafkaops.environment import Environment
    from kafkaops.model import Host

#: Seconds one invocation may take: a JVM start plus one request round trip.
TOOL_TIMEOUT = 60.0


class MetadataQuorum:
    """The quorum of a KRaft cluster, asked through ``kafka-metadata-quorum`` on its controller nodes."""

    def __init__(self, env: Environment, nodes: Sequence[Host]) -> None:
        self.env = env
        self.nodes = list(nodes)
        self.asked: str = ""  # the node that answered last (shown in plans and status)

    def _ask(self, flag: str) -> str:
        failures = []
        for node in self.nodes:
            command = f"{self.env.command(node, 'kafka_metadata_quorum')} describe {flag}"
            try:
                result = self.env.run(node, command, timeout=TOOL_TIMEOUT, check=False)
            except KafkaOpsError as exc:  # the node is down or unreachable: ask the next one
                failures.append(f"{node.name}: {exc.message}")
                continue
            if result.exit_code == 0:
                self.asked = node.name
                return result.stdout
            failures.append(f"{node.name}: exit {result.exit_code}")
        raise CheckFailed(f"no controller node answered kafka-metadata-quorum describe {flag}: "
                          + "; ".join(failures),
                          hint="check the controllers are up and the inventory's kafka_metadata_quorum template")

    def status(self) -> QuorumStatus:
        return parse_status(self._ask("--status"))

    def replication(self) -> tuple[QuorumReplica, ...]:
        return parse_replication(self._ask("--replication"))
