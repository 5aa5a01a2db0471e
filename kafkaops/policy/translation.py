"""Consumer offsets from one site to the other, by timestamp: the margin rule, and the fallback of the exact
translation by record identity (:mod:`kafkaops.policy.record_identity`, :func:`refine`). Pure: no I/O.

Offsets mean nothing across clusters: MirrorMaker 2 copies records, not offsets, and the two copies of a
topic were not born together (``eventstreams-multi-dc.txt``: clients whose offsets were reset after a
switch back). What does carry over is the record's CreateTime, set by the producer (equal to
``meta.dt``) and kept by MirrorMaker. So, per partition the group has a position on:

1. on the source, the timestamp ``T`` of the first record the group has not read (of the last one it
   read, when it is at the end);
2. on the target, the first offset whose timestamp is >= ``T - margin``: the group resumes there.

**Zero loss**: MirrorMaker keeps a partition's records in order, so the record at the group's position
is on the target with timestamp ``T``, and the first record there at or after ``T - margin`` is at or
before that copy: every record the group has not read comes after the translated offset — once the
mirror has caught up, whatever the margin. The margin is for what reaches the target in another order
than at the source (events are not ordered by time, ``eventstreams-consumer-tips.txt``: a record copied
by another path, a late event): such a record is kept when it is at most ``margin`` older than ``T``.
The price is **duplicates**: the records on the source in ``[first offset with timestamp >= T - margin,
position)`` are read again, counted here on the source, and on the target (what follows the translated
offset there beyond the records still unread): the source alone misses records it has deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from kafkaops.policy.record_identity import Located

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class SourcePosition:
    """A group's position on one source partition, with the partition's bounds."""

    topic: str
    partition: int
    committed: int
    start: int  # log start offset
    end: int  # log end offset (high watermark)

    @property
    def anchor(self) -> int | None:
        """The record whose timestamp anchors the translation: the first unread one, or the last read one
        when the group is at the end; None for an empty partition."""
        if self.end <= self.start:
            return None
        return min(max(self.committed, self.start), self.end - 1)

    @property
    def caught_up(self) -> bool:
        return self.committed >= self.end


@dataclass(frozen=True)
class PartitionMove:
    """Where the group resumes on one target partition, and why."""

    topic: str
    partition: int
    source_committed: int
    source_end: int
    anchor_ts: int | None  # epoch ms; None: an empty source partition
    seek_ts: int | None  # anchor_ts - margin
    target_offset: int
    duplicates: int  # records the group will read twice on this partition
    note: str
    method: str = "margin"  # margin (this module) or exact (kafkaops.policy.record_identity)
    why: str = ""  # why that method: where the records were found, or why they were not
    checkpoint: int | None = None  # MirrorMaker 2's own answer (its checkpoints), for comparison only

    def to_dict(self) -> dict[str, object]:
        return {"topic": self.topic, "partition": self.partition, "source_committed": self.source_committed,
                "source_end": self.source_end, "anchor_ts": self.anchor_ts, "seek_ts": self.seek_ts,
                "target_offset": self.target_offset, "duplicates": self.duplicates, "note": self.note,
                "method": self.method, "why": self.why, "checkpoint": self.checkpoint}


def seek_times(positions: list[SourcePosition], anchor_ts: Mapping[TopicPartitionKey, int | None],
               margin_ms: int) -> dict[TopicPartitionKey, int]:
    """The timestamp to look up on both sites for each partition that has an anchor."""
    out = {}
    for p in positions:
        key = (p.topic, p.partition)
        ts = anchor_ts.get(key)
        if p.anchor is not None and ts is not None:
            out[key] = max(0, ts - margin_ms)
    return out


def translate(positions: list[SourcePosition], anchor_ts: Mapping[TopicPartitionKey, int | None], margin_ms: int, *,
              target_at: Mapping[TopicPartitionKey, int | None],
              source_at: Mapping[TopicPartitionKey, int | None],
              target_end: Mapping[TopicPartitionKey, int | None]) -> list[PartitionMove]:
    """The move of every position.

    Args:
        positions: The group's committed positions on the source.
        anchor_ts: Timestamp of each position's :attr:`~SourcePosition.anchor` record; None where the
            partition has offsets but no record a consumer is given (only transaction markers and aborted
            records): it resumes at the target's log end, like an empty one.
        margin_ms: How far out of timestamp order a record may be and still not be lost.
        target_at / source_at: First offset with timestamp >= the partition's :func:`seek_times` value on
            the target / the source (the log end where no record is that recent).
        target_end: Log end offsets on the target (where an empty source partition resumes; with the
            others, the duplicates are also counted there).

    Raises:
        ValueError: A partition's answer is missing (the caller read it from the clusters: unreadable).
    """
    moves = []
    for p in sorted(positions, key=lambda x: (x.topic, x.partition)):
        key = (p.topic, p.partition)
        if key not in anchor_ts and p.anchor is not None:
            raise ValueError(f"no timestamp of {p.topic}-{p.partition}@{p.anchor} on the source")
        anchor = anchor_ts.get(key)
        if anchor is None:
            end = target_end.get(key)
            if end is None:
                raise ValueError(f"no log end offset of {p.topic}-{p.partition} on the target")
            what = "empty" if p.anchor is None else "no record, only transaction markers or aborted records,"
            moves.append(PartitionMove(p.topic, p.partition, p.committed, p.end, None, None, end, 0,
                                       f"{what} at the source: resumes at the target's log end"))
            continue
        seek = max(0, anchor - margin_ms)
        target, source = target_at.get(key), source_at.get(key)
        if target is None or source is None:
            raise ValueError(f"no offset for timestamp {seek} of {p.topic}-{p.partition}")
        position = max(p.committed, p.start)
        duplicates = max(0, position - source)
        # Counted on the source, records it no longer has (retention, DeleteRecords below the position) are
        # missed; counted on the target, what follows the offset beyond the records still unread is read
        # again too (once the mirror has caught up). The larger of the two is the bound.
        end = target_end.get(key)
        if end is not None:
            duplicates = max(duplicates, end - target - (p.end - position))
        note = ("at the end of the source: resumes with what arrives after its last record" if p.caught_up
                else f"{p.end - position} record(s) not yet read on the source")
        moves.append(PartitionMove(p.topic, p.partition, p.committed, p.end, anchor, seek, target,
                                   duplicates, note))
    return moves


def refine(moves: list[PartitionMove], located: Mapping[TopicPartitionKey, Located]) -> list[PartitionMove]:
    """Each move made exact where its records were found once on the target
    (:func:`kafkaops.policy.record_identity.locate`); the margin rule's move, with the reason, elsewhere.

    A copy found *before* the margin rule's offset cannot be the group's (its true copy is at or after that
    offset, module docstring): it is not trusted, and the margin rule stays.
    """
    out = []
    for m in moves:
        found = located.get((m.topic, m.partition))
        if found is None:
            out.append(m)
        elif found.offset is None:
            out.append(replace(m, why=found.reason))
        elif found.offset < m.target_offset:
            out.append(replace(m, why=f"{found.reason}, before the margin rule's offset {m.target_offset}: not "
                                      "the group's copy"))
        else:
            out.append(replace(m, target_offset=found.offset, duplicates=0, method="exact", why=found.reason))
    return out


def guarantee(group: str, source: str, target: str, margin_ms: int, moves: list[PartitionMove]) -> str:
    """What the plan promises, in words (shown in the plan and the journal)."""
    dup = sum(m.duplicates for m in moves)
    exact = sum(m.method == "exact" for m in moves)
    how = (f"{exact} of {len(moves)} partition(s) exact (the last records {group} read found once on {target}: "
           f"it resumes right after them), the others by the {margin_ms / 1000:g}s margin" if exact else
           f"every partition by the {margin_ms / 1000:g}s margin")
    return (f"zero loss: every record of {group}'s {len(moves)} partition(s) not yet read on {source} is at or "
            f"after the translated offset on {target} (the mirror caught up and keeping each partition's order; a "
            f"record reaching {target} in another order is kept when at most {margin_ms / 1000:g}s older); "
            f"{how}; duplicates: at most {dup} record(s) read again (counted on {source})")
