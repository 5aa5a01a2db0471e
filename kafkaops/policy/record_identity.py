"""Where a consumer group's position lies on the other site, found by the records themselves (pure: no I/O).

The timestamp rule (:mod:`kafkaops.policy.translation`) never loses a record, but it sends the group back
``margin`` seconds of traffic on every partition at every switchover: a minute of duplicates, by design.
It can do better because MirrorMaker 2 copies each record's CreateTime, key and value and keeps each
partition's order: the last records the group read on the source are on the target too, in the same
order, and the group's position there is the offset right after them.

**The identity.** A record is known by ``(CreateTime, digest of key, digest of value)``; a position by
the last :data:`TAIL` records before it (the *tail*: the one the group read last and the ones before it).
One record alone could repeat (the same event produced twice, equal timestamps and keys); a run of
several in the same order is what pins a position.

**The search.** On the target, from the first offset whose timestamp is at or after the tail's oldest
timestamp minus the margin (where the tail's copy cannot be earlier), the records are scanned in order,
at most a bounded number, for the tail as a consecutive run.

**Why no loss, whatever the scan finds.** The tail's true copy lies at or after the scan's start (its
timestamps are at least that) — *if the target still has it*. The *earliest* run found is then at or
before the true copy: resuming after it resumes at or before the group's true position. Found **once** →
exact: 0 duplicates, 0 lost — but only when the scan provably covers every candidate: it reached the
partition's end and the target still holds every record from the scan's start (:func:`scan_gap`). Where the
group's own copy may be gone (the target's head deleted, compaction), a run found once may be a later
identical one (a replayed event), and resuming after it would lose what lies between (issue 42).
Found **twice or more** (a mirror that delivered a batch again, identical events) → which copy is the
group's is not known: the margin rule decides. **Not found** (the tail deleted by retention, compaction or
DeleteRecords; a mirror lagging behind it or rewriting records; past the scan bound) → the margin rule.
Each partition says which method it got, and why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

#: Records before the position that identify it.
TAIL = 3
#: Records of the target partition scanned at most, per partition: a minute of a busy partition.
SCAN_LIMIT = 50_000


@dataclass(frozen=True, order=True)
class RecordId:
    """What a record is known by on both sites: MirrorMaker 2 keeps all three."""

    timestamp: int  # CreateTime, epoch ms
    key: str  # digest ("" for a null key)
    value: str  # digest ("" for a null value: a tombstone)


def _digest(data: bytes | None) -> str:
    return "" if data is None else hashlib.blake2b(data, digest_size=12).hexdigest()


def record_id(timestamp: int, key: bytes | None, value: bytes | None) -> RecordId:
    return RecordId(int(timestamp), _digest(key), _digest(value))


@dataclass(frozen=True)
class Located:
    """The answer for one partition: the target offset right after the tail's copy, or why there is none."""

    offset: int | None  # None: not exact, the margin rule decides
    reason: str
    scanned: int  # target records looked at


def scan_start_ts(tail: Sequence[RecordId], margin_ms: int) -> int:
    """Where the target scan starts (by timestamp): no copy of the tail can be older than this."""
    return max(0, min(r.timestamp for r in tail) - margin_ms)


def scan_gap(*, begin: int, log_start: int, first_held: int | None, compacted: bool) -> str:
    """Why a target scan from offset ``begin`` may not hold the group's own copy of its tail ("" when it
    provably does), for :func:`locate`.

    The copy's timestamps are at least the scan's start timestamp, so it lies at or after ``begin`` (the first
    offset with a timestamp that recent) — if the target still has it. Retention and DeleteRecords remove a
    log's *prefix*: when the target still holds a record before ``begin`` (``first_held``, the first record
    a consumer is given at or after the log start; markers are not records), or never lost any (log start
    0), nothing at or after ``begin`` is gone. When the first record held is ``begin``'s, the copy may have
    been in what was deleted, and a later identical run (a replayed event: same CreateTime, key and value)
    would be found once in its place: resuming after it skips every record between the two. Compaction
    removes records anywhere, and keeps exactly the later of two records with one key.
    """
    if compacted:
        return "the target topic is compacted: the group's copy may be compacted away and a later identical " \
               "record kept"
    if log_start > 0 and (first_held is None or first_held >= begin):
        return (f"the target no longer holds the margin's offset (its log starts at {log_start}, its first "
                f"record at or after the scan's start {begin}): the group's copy may be deleted and a later "
                "identical run found in its place")
    return ""


def locate(tail: Sequence[RecordId], target: Sequence[tuple[int, RecordId]], *, limit: int = SCAN_LIMIT,
           complete: bool = True, gap: str = "") -> Located:
    """Find ``tail`` (oldest first) as a consecutive run in ``target`` ((offset, id), in offset order, from
    the scan's start).

    Args:
        tail: The last records the group read on the source, oldest first (at least one).
        target: The target partition's records from the scan's start, in order (gaps in the offsets, from
            compaction or transaction markers, are fine: records are matched as they follow each other).
        limit: The scan bound the caller read with (for the reason given when nothing is found).
        complete: False when the caller stopped reading at ``limit`` before the partition's end.
        gap: Why the scan may miss the group's own copy (:func:`scan_gap`); "" when it cannot.

    A single match is trusted only when the scan provably covers every candidate: it reached the end
    (``complete``) and nothing it starts at or after can be gone (no ``gap``). Otherwise the one run found may
    be a later identical one, and resuming after it would lose the records between: the margin rule decides.
    """
    if not tail:
        raise ValueError("an empty tail identifies no position")
    n = len(tail)
    ids = [rid for _, rid in target]
    first = tail[0]
    found = [i for i in range(len(ids) - n + 1) if ids[i] == first and ids[i:i + n] == list(tail)]
    if len(found) == 1 and (gap or not complete):
        why = gap or f"the scan stopped at its bound of {limit} records before the partition's end"
        return Located(None, f"its last {n} record(s) found once, at offset {target[found[0]][0]}, but not "
                             f"trusted: {why}", len(target))
    if len(found) == 1:
        last_offset = target[found[0] + n - 1][0]
        return Located(last_offset + 1, f"its last {n} record(s) found once on the target, at offset "
                                         f"{target[found[0]][0]}", len(target))
    if found:
        at = ", ".join(str(target[i][0]) for i in found[:5])
        return Located(None, f"its last {n} record(s) are on the target {len(found)} times (offsets {at}): "
                             "which copy is the group's is unknown", len(target))
    if not complete:
        return Located(None, f"its last {n} record(s) not within the {limit} records scanned on the target",
                       len(target))
    return Located(None, f"its last {n} record(s) not on the target (the mirror behind them, or records "
                         "rewritten)", len(target))
