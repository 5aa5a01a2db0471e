"""Kafka's own ``kafka-reassign-partitions``, run over SSH on a broker: the one way kafkaops moves replicas.

confluent-kafka 2.16's AdminClient has no AlterPartitionReassignments / ListPartitionReassignments, and
a reimplementation of those requests would be a second, untested Kafka client. The seed runs Kafka's
tools on a broker (``kafka topics --describe``); so does this adapter. The tool's invocation is the
inventory's ``kafka_reassign`` template (``kafka-reassign-partitions --bootstrap-server
{host.address}:9092`` in the lab; a site wrapper such as ``kafka reassign-partitions`` in production),
to which the adapter appends only its own literal flags and numbers. Documents reach the tool on its
standard input (``--reassignment-json-file /dev/stdin``): nothing is left on the host, and nothing an
operator typed becomes part of the command line.

Throttles are not the tool's business here: ``--execute`` is never given ``--throttle`` and ``--verify``
always ``--preserve-throttles``, because the run sets and clears the replication
throttles itself through the AdminClient (:mod:`kafkaops.steps.placement`), where it can verify them.
``execute`` and ``cancel`` change the cluster and are refused in a dry-run; ``list``, ``verify`` and
``generate`` only read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kafkaops.facts.reassign import (
    Reassigning,
    TopicPartition,
    assignment_json,
    parse_execute,
    parse_generate,
    parse_list,
    parse_verify,
)
from kafkaops.model import KafkaEndpoint
from kafkaops.systems import command_config
from kafkaops.systems.guard import write

if TYPE_CHECKING:
    from kafkaops.systems.ssh import SshClient

Replicas = tuple[int, ...]
#: Seconds one invocation may take: a JVM start plus one admin request round trip.
TOOL_TIMEOUT = 120.0


class Reassigner:
    """``kafka-reassign-partitions`` on one broker host.

    Args:
        ssh: The SSH connection to the host that runs the tool.
        tool: The rendered ``kafka_reassign`` template (the tool and its connection options).
        endpoint: The cluster's brokers and security: a secured cluster's settings reach the tool through
            a private ``--command-config`` file.
        dry_run: Refuse ``execute`` and ``cancel``.
    """

    def __init__(self, ssh: SshClient, tool: str, endpoint: KafkaEndpoint, *, dry_run: bool = False) -> None:
        self.ssh = ssh
        self.tool = tool
        self.endpoint = endpoint
        self.dry_run = dry_run

    def command(self, *flags: str) -> str:
        """The whole command line as plans show it: the template, literal flags, and on a secured cluster
        ``--command-config <private file>`` (:mod:`kafkaops.systems.command_config`)."""
        return command_config.shown(self.endpoint, " ".join((self.tool, *flags)))

    def _run(self, *flags: str, stdin: bytes | None = None, change: bool = False) -> str:
        """Run the tool with ``flags``; its standard output."""
        cmd, data = command_config.wrap(self.endpoint, " ".join((self.tool, *flags)), stdin)
        send = self.ssh.change if change else self.ssh.run
        return send(cmd, timeout=TOOL_TIMEOUT, stdin=data).stdout

    def list(self) -> dict[TopicPartition, Reassigning]:
        """The reassignments in progress in the whole cluster (``--list``)."""
        return parse_list(self._run("--list"))

    def verify(self, assignment: Mapping[TopicPartition, tuple[int, ...]]) -> dict[TopicPartition, str]:
        """Each partition's state against ``assignment`` (``--verify --preserve-throttles``: read-only)."""
        return parse_verify(self._run("--reassignment-json-file", "/dev/stdin", "--verify", "--preserve-throttles",
                                      stdin=assignment_json(dict(assignment)).encode()))

    def generate(self, topics: Iterable[str], brokers: Iterable[int]
                 ) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, tuple[int, ...]]]:
        """What Kafka's own ``--generate`` proposes for ``topics`` over ``brokers`` (its rack-aware
        assignment from scratch): (current, proposed). Read-only; the comparison in ``placement plan``."""
        import json

        ids = ",".join(str(int(b)) for b in sorted(set(brokers)))
        doc = json.dumps({"version": 1, "topics": [{"topic": t} for t in sorted(set(topics))]})
        return parse_generate(self._run("--topics-to-move-json-file", "/dev/stdin", "--broker-list", ids, "--generate",
                                        stdin=doc.encode()))

    @write
    def execute(self, assignment: Mapping[TopicPartition, tuple[int, ...]]) -> str:
        """Submit ``assignment`` (``--execute``, no throttle: the run sets its own). Returns the command."""
        flags = ("--reassignment-json-file", "/dev/stdin", "--execute")
        parse_execute(self._run(*flags, stdin=assignment_json(dict(assignment)).encode(), change=True))
        return self.command(*flags)

    @write
    def cancel(self, partitions: Iterable[TopicPartition],
               originals: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> dict[TopicPartition, Replicas]:
        """Stop the reassignments of ``partitions`` still in progress, putting each back on the replicas it
        had: a new reassignment to those replicas (``--execute --additional``), which Kafka applies by
        cancelling the one in flight (KIP-455) and completes at once, those replicas being in sync.

        Not ``--cancel``: Kafka 3.9's tool skips every reassignment that only *adds* replicas (the check
        ``!adding.isEmpty() || !removing.isEmpty()`` lost a negation in its Java port: it reads
        ``adding.isEmpty() || !removing.isEmpty()``), and answers "None of the specified partition
        reassignments are active" for exactly the moves a replication-factor increase makes (seen on the
        stretch lab).

        ``originals``: each partition's replica list before the move, in its order (its preferred leader
        first); without it, the list Kafka shows less the replicas being added — the right brokers, but in
        the target's order. Returns what each partition was put back on.
        """
        wanted = set(partitions)
        back: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, r in self.list().items():
            if tp in wanted:
                kept = tuple(b for b in r.replicas if b not in r.adding)
                before = (originals or {}).get(tp)
                back[tp] = before if before is not None and set(before) == set(kept) else kept
        if back:
            parse_execute(self._run("--reassignment-json-file", "/dev/stdin", "--execute", "--additional",
                                    stdin=assignment_json(back).encode(), change=True))
        return back
