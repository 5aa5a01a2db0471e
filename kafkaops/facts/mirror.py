"""How far MirrorMaker 2 has mirrored each source partition, parsed from its Connect offsets topic.

MirrorMaker 2 in dedicated mode runs one Connect herder per flow (``eqiad->codfw``) on the *target*
cluster, and its source connector commits, every ``offset.flush.interval.ms``, the offset of the last
record it mirrored from each source partition to ``mm2-offsets.<source>.internal`` on the target:

    key   ["MirrorSourceConnector", {"cluster": "eqiad", "partition": 0, "topic": "eqiad.test.event"}]
    value {"offset": 41}

The topic is compacted, so the newest record per key wins; a ``null`` value is a tombstone. Records of
other connectors (checkpoints, heartbeats) share the topic and are skipped. Anything else is a
:class:`~kafkaops.errors.MalformedAnswer`: the value decides when a switchover may cut over, so a
record we do not understand must stop it rather than be read as "caught up".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

SOURCE_CONNECTOR = "MirrorSourceConnector"


def offsets_topic(source: str) -> str:
    """The Connect offsets topic of the ``source->*`` flow, on the target cluster."""
    return f"mm2-offsets.{source}.internal"


@dataclass(frozen=True)
class MirroredPosition:
    """The last source offset MirrorMaker committed as mirrored for one source partition."""

    topic: str
    partition: int
    last_offset: int

    @property
    def next_offset(self) -> int:
        """The first source offset not yet known to be mirrored."""
        return self.last_offset + 1


def _bad(where: str, expected: str, raw: bytes | None) -> MalformedAnswer:
    return MalformedAnswer(expected, (raw or b"").decode(errors="replace"), command=f"read {where}")


def parse_offsets_records(records: Iterable[tuple[bytes | None, bytes | None]], source: str
                          ) -> dict[tuple[str, int], MirroredPosition]:
    """Fold ``(key, value)`` records of :func:`offsets_topic` (in offset order) into the newest mirrored
    position per source partition of cluster alias ``source``."""
    where = offsets_topic(source)
    out: dict[tuple[str, int], MirroredPosition] = {}
    for key_raw, value_raw in records:
        if key_raw is None:
            raise _bad(where, "a record with a key", key_raw)
        try:
            key = json.loads(key_raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _bad(where, "a JSON key", key_raw) from exc
        if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str) and isinstance(key[1], dict)):
            raise _bad(where, "a key [connector, {cluster, topic, partition}]", key_raw)
        if key[0] != SOURCE_CONNECTOR:
            continue  # checkpoint or heartbeat connector
        part = key[1]
        if part.get("cluster") != source:
            continue
        topic, partition = part.get("topic"), part.get("partition")
        if not isinstance(topic, str) or isinstance(partition, bool) or not isinstance(partition, int):
            raise _bad(where, "a key naming a topic and a partition number", key_raw)
        if value_raw is None:
            out.pop((topic, partition), None)  # tombstone: the connector forgot it
            continue
        try:
            value = json.loads(value_raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _bad(where, "a JSON value", value_raw) from exc
        offset = value.get("offset") if isinstance(value, dict) else None
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
            raise _bad(where, f"a value {{\"offset\": N}} for {topic}-{partition}", value_raw)
        out[(topic, partition)] = MirroredPosition(topic, partition, offset)
    return out


@dataclass(frozen=True)
class PartitionLag:
    """One mirrored partition: its source log end and how many records MirrorMaker has yet to mirror."""

    topic: str
    partition: int
    source_end: int
    mirrored_to: int  # first source offset not known mirrored
    lag: int


def lag_of(source_offsets: dict[tuple[str, int], tuple[int | None, int | None]],
           mirrored: dict[tuple[str, int], MirroredPosition]) -> list[PartitionLag]:
    """Per source partition: log end minus the mirrored position (never below the log start: records
    deleted at the source before MirrorMaker read them are not lag, they are gone)."""
    out = []
    for (topic, partition), (start, end) in sorted(source_offsets.items()):
        if start is None or end is None:
            raise MalformedAnswer("log start and end offsets", "none", command=f"ListOffsets {topic}-{partition}")
        pos = mirrored.get((topic, partition))
        done = max(start, pos.next_offset if pos else start)
        out.append(PartitionLag(topic, partition, end, done, max(0, end - done)))
    return out
