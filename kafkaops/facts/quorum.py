"""Typed facts about a KRaft cluster's metadata quorum, from Kafka's ``kafka-metadata-quorum`` tool.

confluent-kafka 2.16 has ``describe_cluster`` but no DescribeQuorum, so kafkaops runs Kafka's own tool
over SSH on a node (the inventory's ``kafka_metadata_quorum`` template), as the seed runs Kafka's tools.
Its output is input from a target host: the parsers accept only the shapes Kafka 4.x prints (recorded
from 4.3.1 in ``tests/unit/test_quorum_facts.py``) and raise
:class:`~kafkaops.facts.errors.MalformedAnswer` on anything else.

Shapes:

* ``describe --status``: ``Key:<spaces>value`` lines — ``ClusterId``, ``LeaderId``, ``LeaderEpoch``,
  ``HighWatermark``, ``MaxFollowerLag``, ``MaxFollowerLagTimeMs``, ``CurrentVoters`` and
  ``CurrentObservers`` (JSON lists of ``{"id": ..., ...}``; Kafka 3.x printed bare ids ``[1,2,3]``).
* ``describe --replication``: a tab-separated table with a header row (``NodeId``, ``LogEndOffset``,
  ``Lag``, ``LastFetchTimestamp``, ``LastCaughtUpTimestamp``, ``Status``; 4.x adds ``DirectoryId``, which
  ``remove-controller`` needs), one row per voter and observer, ``Status`` one of ``Leader``, ``Follower``,
  ``Observer``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

_STATUS_LINE = re.compile(r"^(?P<key>[A-Za-z]+):\s+(?P<value>.*?)\s*$")
_STATUS_KEYS = ("ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
                "CurrentVoters", "CurrentObservers")
_REPLICATION_COLUMNS = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
_ROLES = ("Leader", "Follower", "Observer")
_NUMBER = re.compile(r"^-?\d{1,19}$")
#: A KIP-853 directory id as the tool prints it: 16 bytes, URL-safe base64 without padding (22 characters).
DIRECTORY_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


@dataclass(frozen=True)
class QuorumStatus:
    """``describe --status``: who leads the metadata quorum, and who votes."""

    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    max_follower_lag: int
    max_follower_lag_ms: int
    voters: tuple[int, ...]
    observers: tuple[int, ...]


@dataclass(frozen=True)
class QuorumReplica:
    """One row of ``describe --replication``: a voter's (or an observer's) place in the metadata log.

    ``lag`` is in records behind the leader's log end; the timestamps are the leader's epoch
    milliseconds of the last fetch and of the last time it was caught up (-1: never).
    """

    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms: int
    last_caught_up_ms: int
    status: str  # Leader | Follower | Observer
    directory_id: str = ""  # KIP-853's id of its metadata log directory (4.x); "" when the tool printed none

    @property
    def voter(self) -> bool:
        return self.status in ("Leader", "Follower")


def _int(value: str, what: str, output: str) -> int:
    if not _NUMBER.match(value):
        raise MalformedAnswer(f"{what} as a number (kafka-metadata-quorum)", output)
    return int(value)


def _ids(value: str, what: str, output: str) -> tuple[int, ...]:
    try:
        data = json.loads(value)
    except ValueError:
        raise MalformedAnswer(f"{what} as a JSON list (kafka-metadata-quorum --status)", output) from None
    if not isinstance(data, list):
        raise MalformedAnswer(f"{what} as a JSON list (kafka-metadata-quorum --status)", output)
    out = []
    for item in data:
        node = item.get("id") if isinstance(item, dict) else item
        if not isinstance(node, int) or isinstance(node, bool):
            raise MalformedAnswer(f"{what} entries with a node id (kafka-metadata-quorum --status)", output)
        out.append(node)
    return tuple(out)


def parse_status(output: str) -> QuorumStatus:
    """``describe --status``.

    Raises:
        MalformedAnswer: A line of another shape, a key missing, a value that is not a number or list.
    """
    found: dict[str, str] = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        m = _STATUS_LINE.match(line)
        if m is None:
            raise MalformedAnswer("`Key:   value` lines (kafka-metadata-quorum --status)", line)
        found[m.group("key")] = m.group("value")
    missing = [k for k in _STATUS_KEYS if k not in found]
    if missing:
        raise MalformedAnswer(f"{', '.join(missing)} (kafka-metadata-quorum --status)", output)
    return QuorumStatus(
        cluster_id=found["ClusterId"],
        leader_id=_int(found["LeaderId"], "LeaderId", output),
        leader_epoch=_int(found["LeaderEpoch"], "LeaderEpoch", output),
        high_watermark=_int(found["HighWatermark"], "HighWatermark", output),
        max_follower_lag=_int(found["MaxFollowerLag"], "MaxFollowerLag", output),
        max_follower_lag_ms=_int(found["MaxFollowerLagTimeMs"], "MaxFollowerLagTimeMs", output),
        voters=_ids(found["CurrentVoters"], "CurrentVoters", output),
        observers=_ids(found["CurrentObservers"], "CurrentObservers", output),
    )


def parse_replication(output: str) -> tuple[QuorumReplica, ...]:
    """``describe --replication``: one replica per row, in the tool's order (the leader first).

    Raises:
        MalformedAnswer: No header, a column missing, a row of another width, a field of another shape.
    """
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        raise MalformedAnswer("a header and one row per replica (kafka-metadata-quorum --replication)", output)
    header = [c.strip() for c in lines[0].split("\t") if c.strip()]
    where = {c: header.index(c) for c in _REPLICATION_COLUMNS if c in header}
    if len(where) != len(_REPLICATION_COLUMNS):
        raise MalformedAnswer("a header naming " + ", ".join(_REPLICATION_COLUMNS) + " (--replication)", lines[0])
    out = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if len(cells) != len(header):
            raise MalformedAnswer(f"rows of {len(header)} tab-separated cells (--replication)", line)
        status = cells[where["Status"]]
        if status not in _ROLES:
            raise MalformedAnswer("a status of Leader, Follower or Observer (--replication)", status)
        directory = cells[header.index("DirectoryId")] if "DirectoryId" in header else ""
        if directory and not DIRECTORY_ID.match(directory):
            raise MalformedAnswer("a DirectoryId of 22 URL-safe base64 characters (--replication)", line)
        out.append(QuorumReplica(
            node_id=_int(cells[where["NodeId"]], "NodeId", line),
            log_end_offset=_int(cells[where["LogEndOffset"]], "LogEndOffset", line),
            lag=_int(cells[where["Lag"]], "Lag", line),
            last_fetch_ms=_int(cells[where["LastFetchTimestamp"]], "LastFetchTimestamp", line),
            last_caught_up_ms=_int(cells[where["LastCaughtUpTimestamp"]], "LastCaughtUpTimestamp", line),
            status=status,
            directory_id=directory,
        ))
    if sum(r.status == "Leader" for r in out) > 1:
        raise MalformedAnswer("at most one Leader row (kafka-metadata-quorum --replication)", output)
    return tuple(out)
