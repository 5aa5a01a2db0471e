"""Kafka's Java tools on a secured cluster: their client settings in a ``--command-config`` file that exists
only while the tool runs, in a private directory on the host that runs it.

A tool run over SSH (``kafka-reassign-partitions`` on a broker) needs the same TLS and SASL settings as
every other client, and the SASL password must not reach its command line (``ps`` shows every argv to
every user of the host) nor stay on the host. So the command kafkaops sends is wrapped:

    umask 077; d=$(mktemp -d)              # a 0700 directory only kafkaops' SSH user can enter
    trap 'rm -rf "$d"' EXIT                # removed when the tool ends, killed or not
    dd bs=1 count=N of="$d/client.properties"   # exactly the properties' N bytes, from standard input
    TOOL ... --command-config "$d/client.properties"  # the rest of standard input is the tool's

The properties come first on the tool's standard input, followed by whatever document the tool reads there
(``--reassignment-json-file /dev/stdin``); ``dd bs=1`` reads byte by byte so it never takes a byte of the
document. On a plaintext cluster the command is sent as it is.
"""

from __future__ import annotations

from kafkaops.model import KafkaEndpoint
from kafkaops.systems.kafka_auth import java_properties, properties_text

#: Where the properties are, inside the private directory (a shell word: no quoting needed).
FILE = '"$d/client.properties"'


def wrap(endpoint: KafkaEndpoint, command: str, stdin: bytes | None = None, *,
         subcommand: str = "") -> tuple[str, bytes | None]:
    """``command`` (a rendered tool invocation) and its standard input, with the cluster's client settings
    given through a private ``--command-config`` file when the cluster has any.

    ``subcommand``: the words that follow the tool's own options (``describe``, ``upgrade --metadata 4.1``).
    Tools built on argparse4j (``kafka-features``, ``kafka-metadata-quorum``) take ``--command-config``
    only before their subcommand ("unrecognized arguments" after it); joptsimple ones
    (``kafka-reassign-partitions``) anywhere."""
    props = java_properties(endpoint)
    tail = f" {subcommand}" if subcommand else ""
    if not props:
        return command + tail, stdin
    text = properties_text(props).encode()
    cleanup = """trap 'rm -rf "$d"' EXIT && trap 'rm -rf "$d"; exit 129' HUP INT TERM"""
    wrapped = (f"umask 077 && d=$(mktemp -d) && {cleanup} && "
               f"dd bs=1 count={len(text)} of={FILE} 2>/dev/null && {command} --command-config {FILE}{tail}")
    return wrapped, text + (stdin or b"")


def shown(endpoint: KafkaEndpoint, command: str) -> str:
    """``command`` as a plan shows it: with ``--command-config`` (a private file) when the cluster is secured."""
    return f"{command} --command-config <private file>" if endpoint.security.protocol != "PLAINTEXT" else command
