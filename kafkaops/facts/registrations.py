"""Which brokers a KRaft cluster has registered, fenced or not, from Kafka's ``kafka-cluster list-endpoints``.

On KRaft a stopped broker is *fenced*, not gone: its registration stays in the metadata log (and in every
partition-placement decision's view of the cluster) until ``kafka-cluster unregister --id N`` removes it —
Strimzi unregisters a KRaft node it scales down for that reason. confluent-kafka's ``describe_cluster``
lists only unfenced brokers, so kafkaops asks Kafka's own tool with ``--include-fenced-brokers``. What it
prints is input from a target host: only the table Kafka 4.x prints is accepted (recorded from 4.3.1 in
``tests/unit/test_unregister.py``).

Shape: a header ``ID HOST PORT RACK STATE ENDPOINT_TYPE`` and one row per node, space-padded; ``RACK`` may be
empty; ``STATE`` ``fenced`` or ``unfenced`` (``controlled_shutdown`` while a broker shuts down).
"""

from __future__ import annotations

import re

from kafkaops.facts.errors import MalformedAnswer

_HEADER = ("ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE")
_ROW = re.compile(r"^(?P<id>\d{1,10})\s+(?P<host>\S+)\s+(?P<port>\d{1,5})\s+(?:(?P<rack>\S+)\s+)?"
                  r"(?P<state>fenced|unfenced|controlled_shutdown)\s+(?P<type>broker|controller)$")


def parse_endpoints(text: str) -> dict[int, str]:
    """Each listed broker's state (``fenced``, ``unfenced``, ``controlled_shutdown``), by broker id.

    Raises:
        MalformedAnswer: No header, or a row of another shape.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or tuple(lines[0].split()) != _HEADER:
        raise MalformedAnswer("a header 'ID HOST PORT RACK STATE ENDPOINT_TYPE'", text,
                              command="kafka-cluster list-endpoints")
    out: dict[int, str] = {}
    for line in lines[1:]:
        m = _ROW.match(line)
        if m is None:
            raise MalformedAnswer("rows 'ID HOST PORT [RACK] STATE TYPE'", line, command="kafka-cluster list-endpoints")
        if m["type"] == "broker":
            out[int(m["id"])] = m["state"]
    return out
