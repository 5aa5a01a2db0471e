"""Typed facts from Kafka's ``kafka-reassign-partitions`` tool (3.x, the tools module), read strictly.

confluent-kafka 2.16's AdminClient has no AlterPartitionReassignments or ListPartitionReassignments, so
kafkaops drives Kafka's own tool on a broker, the way the seed runs Kafka's tools. Its output is input
from a target host: each parser accepts only the shapes the tool prints (recorded from Kafka 3.9 in
``tests/unit/test_reassign_facts.py``) and raises :class:`~kafkaops.facts.errors.MalformedAnswer` on
anything else, never guessing.

Shapes:

* ``--generate``: ``Current partition replica assignment`` + JSON, blank line, ``Proposed partition
  reassignment configuration`` + JSON.
* ``--list``: ``Current partition reassignments:`` then one ``topic-p: replicas: 1,2,3. adding: 3.
  removing: 1.`` line per partition, or ``No partition reassignments found.``
* ``--verify``: ``Reassignment of partition topic-p is completed.`` / ``... is still in progress.`` /
  ``There is no active reassignment of partition topic-p, but replica set is ... rather than ...``
* ``--execute``: the current assignment (for a rollback), then ``Successfully started partition
  reassignment(s) for ...``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kafkaops.facts.errors import MalformedAnswer

TopicPartition = tuple[str, int]
_TP = r"(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>\d{1,9})"
_IDS = r"\d{1,10}(?:,\d{1,10})*"
_LIST_LINE = re.compile(rf"^{_TP}: replicas: (?P<replicas>{_IDS})\.(?: adding: (?P<adding>{_IDS})\.)?"
                        rf"(?: removing: (?P<removing>{_IDS})\.)?$")
_VERIFY_LINE = re.compile(rf"^(?:Reassignment of partition {_TP} is (?P<state>completed|still in progress)\.|"
                          rf"There is no active reassignment of partition (?P<topic2>[A-Za-z0-9._-]{{1,249}})-"
                          rf"(?P<partition2>\d{{1,9}}), but replica set is .* rather than .*\.)$")


@dataclass(frozen=True)
class Reassigning:
    """One partition being reassigned (``--list``)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _ids(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


def parse_list(output: str) -> dict[TopicPartition, Reassigning]:
    """``--list``: the reassignments in progress, by partition.

    Raises:
        MalformedAnswer: Output of another shape.
    """
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("log4j:")]
    if lines == ["No partition reassignments found."]:
        return {}
    if not lines or lines[0] != "Current partition reassignments:":
        raise MalformedAnswer("`Current partition reassignments:` or `No partition reassignments found.`", output)
    out: dict[TopicPartition, Reassigning] = {}
    for line in lines[1:]:
        m = _LIST_LINE.match(line)
        if m is None:
            raise MalformedAnswer("`topic-p: replicas: 1,2. adding: 2.` lines (--list)", line)
        tp = (m["topic"], int(m["partition"]))
        out[tp] = Reassigning(tp[0], tp[1], _ids(m["replicas"]), _ids(m["adding"]), _ids(m["removing"]))
    return out


def parse_verify(output: str) -> dict[TopicPartition, str]:
    """``--verify``: each partition's state, ``completed``, ``in progress`` or ``not active`` (no
    reassignment running and the replica set is not the one asked for: cancelled, or never submitted).

    Raises:
        MalformedAnswer: Output of another shape.
    """
    out: dict[TopicPartition, str] = {}
    for raw in output.splitlines():
        line = raw.strip()
        if not line or line.startswith("log4j:") or line == "Status of partition reassignment:":
            continue
        if line.startswith(("Clearing broker-level throttles", "Clearing topic-level throttles")):
            continue
        m = _VERIFY_LINE.match(line)
        if m is None:
            raise MalformedAnswer("`Reassignment of partition topic-p is completed.` lines (--verify)", line)
        if m["topic"]:
            out[(m["topic"], int(m["partition"]))] = "completed" if m["state"] == "completed" else "in progress"
        else:
            out[(m["topic2"], int(m["partition2"]))] = "not active"
    return out


def parse_generate(output: str) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, tuple[int, ...]]]:
    """``--generate``: (current assignment, proposed assignment).

    Raises:
        MalformedAnswer: Output of another shape, or JSON that is not an assignment.
    """
    lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith("log4j:")]
    try:
        cur = lines.index("Current partition replica assignment")
        prop = lines.index("Proposed partition reassignment configuration")
    except ValueError:
        raise MalformedAnswer("the current and the proposed assignment (--generate)", output) from None
    if prop != cur + 2 or len(lines) < prop + 2:
        raise MalformedAnswer("one JSON line under each heading (--generate)", output)
    return parse_assignment_json(lines[cur + 1]), parse_assignment_json(lines[prop + 1])


def parse_assignment_json(text: str) -> dict[TopicPartition, tuple[int, ...]]:
    """A reassignment document (``{"version":1,"partitions":[{"topic","partition","replicas"}...]}``).

    Raises:
        MalformedAnswer: Not JSON, or not of that shape.
    """
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"a reassignment document (not JSON: {exc.msg})", text) from None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("partitions"), list):
        raise MalformedAnswer('a reassignment document {"version": 1, "partitions": [...]}', text)
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for item in doc["partitions"]:
        if not (isinstance(item, dict) and isinstance(item.get("topic"), str)
                and isinstance(item.get("partition"), int) and isinstance(item.get("replicas"), list)
                and all(isinstance(b, int) and not isinstance(b, bool) for b in item["replicas"])):
            raise MalformedAnswer("partition entries {topic, partition, replicas: [ids]}", str(item))
        out[(item["topic"], item["partition"])] = tuple(item["replicas"])
    return out


def assignment_json(assignment: dict[TopicPartition, tuple[int, ...]]) -> str:
    """The document ``--execute``/``--verify``/``--cancel`` read (sorted: the same plan, the same bytes)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(assignment.items())]},
        separators=(",", ":"))


def parse_execute(output: str) -> None:
    """``--execute``: succeeded only if the tool says it started the reassignment.

    Raises:
        MalformedAnswer: It did not say so (its message is kept).
    """
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("log4j:")]
    if not any(ln.startswith("Successfully started partition reassignment") for ln in lines):
        raise MalformedAnswer("`Successfully started partition reassignment` (--execute)", output)
