"""Tell retention from loss: did anything but retention move a partition's log start during the run?

Retention removes whole segments from the start of a partition: those whose newest record is older
than ``retention.ms`` (time), or the oldest ones while the partition is larger than
``retention.bytes`` (size). Anything else that moves the log start — ``DeleteRecords``, a wiped or
replaced log directory, a retention lowered to purge a topic — removes records retention would have
kept, and is loss, whatever its size.

Kafka keeps no trace of the removed records, so the baseline keeps what the judgement needs, read
with ``ListOffsets`` in three batched requests (:class:`LogProbe`): the first record with a
timestamp, the *edge* — the first record younger than ``retention.ms`` at the baseline — and the
record with the largest timestamp. The check reads the edge again for the partitions whose log start moved. With
the cutoff ``C = check time - retention.ms`` (a record time retention removed before the check is
older than ``C``):

* **retention** (quiet): every removed record the baseline held was older than ``C`` — they were all
  below the baseline's edge, or the baseline's newest timestamp is older than ``C``; records appended
  during the run can only have been removed if the run outlasted ``retention.ms``. When the removal
  went past the edge (records that aged out during the run), the records left tell: the first one
  left is older than the cutoff, or younger by no more than a production gap (one hour, or ten times
  the partition's average interval between records).
* **loss** (critical, a proof): a removed record is known to be younger than ``C`` (the first, the
  edge or the newest record of the baseline), records appended during a run shorter than
  ``retention.ms`` are gone, the topic is compact-only (retention removes nothing there) or keeps
  everything (``retention.ms`` and ``retention.bytes`` both ``-1``), or ``retention.bytes`` cannot
  have done it (the partition holds less than that).
* **unexplained** (warning): retention explains the removal only if the partition received nothing for
  longer than a production gap right at the cutoff, or (``retention.bytes``) the records left weigh
  half of ``retention.bytes`` or less at the baseline's bytes per record.
* **unjudged** (info): removed records without a timestamp (Kafka ages them by their segment file,
  which it does not expose), or ``retention.bytes`` may have removed them but the partition's size
  is unknown.

Everything here is pure: the facts come in, a :class:`Verdict` goes out (``metadata`` turns it into a
finding). Timestamps are epoch milliseconds; ``-1`` (a record without a timestamp) never appears in a
probe (Kafka's search skips such records).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["LogProbe", "RetentionConfig", "Verdict", "edge_target", "judge_log_start"]

Kind = Literal["retention", "loss", "unexplained", "unjudged"]
_RANK: dict[str, int] = {"loss": 0, "unexplained": 1, "unjudged": 2, "retention": 3}

#: The broker's clock against ours: a record is only "younger than retention" beyond this.
CLOCK_TOLERANCE_MS = 60_000
#: A production gap at the cutoff shorter than this (or than ten average intervals) is not suspicious.
GAP_TOLERANCE_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """A topic's retention settings (effective values: the topic's override or the broker's default).

    Attributes:
        retention_ms: ``retention.ms``; ``-1``: no time limit.
        retention_bytes: ``retention.bytes`` per partition; ``-1``: no size limit.
        timestamp_type: ``message.timestamp.type`` (``CreateTime`` or ``LogAppendTime``).
    """

    retention_ms: int
    retention_bytes: int = -1
    timestamp_type: str = "CreateTime"

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> RetentionConfig | None:
        """From ``describe_configs`` values; ``None`` when ``retention.ms`` is missing or malformed."""
        try:
            return cls(int(settings["retention.ms"]), int(settings.get("retention.bytes", "-1")),
                       str(settings.get("message.timestamp.type", "CreateTime")))
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class LogProbe:
    """The timestamps around a partition's log start at one snapshot (``ListOffsets`` by timestamp).

    Attributes:
        first: ``(offset, timestamp)`` of the first record that has a timestamp; ``None`` when none
            has (an empty log, or only records without timestamps). Records before ``offset`` have
            none.
        edge_ms: The time the edge was searched for (snapshot time - ``retention.ms``); ``None``
            when the topic has no time limit.
        edge: ``(offset, timestamp)`` of the first record with a timestamp >= ``edge_ms``: records
            before it were already older than the retention at the snapshot; ``None`` when no record
            is that young.
        newest: ``(offset, timestamp)`` of the record with the largest timestamp (``None``: an empty
            log, no timestamps, or not readable).
        size_bytes: The partition's size on its leader (``DescribeLogDirs``), read when the topic has a
            ``retention.bytes``; ``None`` when not read.
    """

    first: tuple[int, int] | None = None
    edge_ms: int | None = None
    edge: tuple[int, int] | None = None
    newest: tuple[int, int] | None = None
    size_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "first": list(self.first) if self.first else None,
            "edge_ms": self.edge_ms,
            "edge": list(self.edge) if self.edge else None,
            "newest": list(self.newest) if self.newest else None,
        }
        if self.size_bytes is not None:
            d["size_bytes"] = self.size_bytes
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogProbe:
        def pair(v: Any) -> tuple[int, int] | None:
            return None if v is None else (int(v[0]), int(v[1]))

        def opt(v: Any) -> int | None:
            return None if v is None else int(v)

        return cls(pair(d.get("first")), opt(d.get("edge_ms")), pair(d.get("edge")), pair(d.get("newest")),
                   opt(d.get("size_bytes")))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What moved a log start: ``retention`` (quiet), ``loss`` (critical: proven), ``unexplained``
    (warning: retention explains it only under an unlikely assumption), ``unjudged`` (info)."""

    kind: Kind
    reason: str


def edge_target(taken_at_ms: int, retention_ms: int) -> int | None:
    """The timestamp to probe the edge at (``None`` without a time limit); never negative (negative
    ``ListOffsets`` timestamps are special queries)."""
    if retention_ms < 0:
        return None
    return max(0, taken_at_ms - retention_ms)


def _dur(ms: float) -> str:
    s = abs(ms) / 1000
    if s >= 2 * 86400:
        return f"{s / 86400:.1f} d"
    if s >= 2 * 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _worst(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=lambda v: _RANK[v.kind])


def judge_log_start(
    *,
    before_start: int,
    before_end: int,
    before_ms: int,
    before_probe: LogProbe,
    now_start: int,
    now_end: int,
    now_ms: int,
    now_probe: LogProbe | None,
    cleanup_policy: str,
    config: RetentionConfig,
    config_now: RetentionConfig | None = None,
    clock_tolerance_ms: int = CLOCK_TOLERANCE_MS,
    gap_tolerance_ms: int = GAP_TOLERANCE_MS,
) -> Verdict:
    """Why did the log start move from ``before_start`` to ``now_start`` (> ``before_start``)?

    Args:
        before_start: Log start at the baseline.
        before_end: Log end at the baseline (records from it on were appended during the run).
        before_ms: Baseline time.
        before_probe: The baseline's :class:`LogProbe` (edge searched with ``config``).
        now_start: Log start now.
        now_end: Log end now.
        now_ms: Check time.
        now_probe: The check's probe of this partition (edge at ``now_ms - retention.ms``, and the
            size when ``retention.bytes`` is set); ``None`` if it could not be read.
        cleanup_policy: The topic's ``cleanup.policy``.
        config: Retention settings the run started with (the baseline's).
        config_now: The settings now, when known: a change is named in the reason.
        clock_tolerance_ms: Slack for the brokers' clocks against ours.
        gap_tolerance_ms: Longest production gap at the cutoff taken as normal (see the module doc).

    Returns:
        The verdict; its reason names offsets and times.
    """
    changed = ""
    if config_now is not None and (config_now.retention_ms, config_now.retention_bytes) != (
            config.retention_ms, config.retention_bytes):
        changed = (f" (retention.ms={config.retention_ms}, retention.bytes={config.retention_bytes} at the "
                   f"baseline; {config_now.retention_ms}, {config_now.retention_bytes} now)")
    policies = {p.strip() for p in cleanup_policy.split(",")}
    if "delete" not in policies:
        return Verdict("loss", f"cleanup.policy={cleanup_policy}: retention removes nothing from a compact-only "
                               "topic" + changed)
    r_ms, r_bytes = config.retention_ms, config.retention_bytes
    if r_ms < 0 and r_bytes < 0:
        return Verdict("loss", "retention is unlimited (retention.ms=-1, retention.bytes=-1)" + changed)
    if r_ms >= 0:
        by_time = _by_time(before_start, before_end, before_ms, before_probe, now_start, now_end, now_ms,
                           now_probe, r_ms, clock_tolerance_ms, gap_tolerance_ms)
    else:
        by_time = Verdict("loss", "retention.ms=-1 (no time limit)")
    if by_time.kind == "retention" or r_bytes < 0:
        return Verdict(by_time.kind, by_time.reason + changed)
    return Verdict(*_by_size(by_time, before_start, before_end, before_probe, now_start, now_end, now_probe,
                             r_bytes, changed))


def _by_size(by_time: Verdict, b_start: int, b_end: int, bp: LogProbe, n_start: int, n_end: int,
             np_: LogProbe | None, r_bytes: int, changed: str) -> tuple[Kind, str]:
    """Size retention leaves at least ``retention.bytes``: a partition holding less now was not cut by it.

    The size Kafka reports counts segments already below the log start until a retention pass deletes
    them, so right after a ``DeleteRecords`` it is still the old size: the records left are also
    weighed at the baseline's bytes per record, and half of ``retention.bytes`` or less is suspicious.
    """
    size = np_.size_bytes if np_ is not None else None
    if size is not None and size < r_bytes:
        return "loss", (f"{by_time.reason}; and retention.bytes={r_bytes} did not remove them either: the "
                        f"partition holds {size} bytes, and size retention never leaves less{changed}")
    held = b_end - b_start
    if bp.size_bytes is not None and held > 0 and bp.size_bytes > 0:
        left = max(0, n_end - n_start) * bp.size_bytes / held
        if left <= r_bytes / 2:
            return "unexplained", (f"{by_time.reason}; retention.bytes={r_bytes} leaves at least that much, and the "
                                   f"{max(0, n_end - n_start)} records left weigh about {left:.0f} bytes (at the "
                                   f"baseline's {bp.size_bytes / held:.0f} bytes per record){changed}")
    if size is None:
        return "unjudged", (f"{by_time.reason}; retention.bytes={r_bytes} may have removed them, but the "
                            f"partition's size is not known{changed}")
    return "retention", f"retention.bytes={r_bytes}: the partition still holds {size} bytes" + changed


def _by_time(b_start: int, b_end: int, t0: int, bp: LogProbe, n_start: int, n_end: int, t1: int,
             np_: LogProbe | None, r_ms: int, tol: int, gap_tol: int) -> Verdict:
    """The time-retention half of :func:`judge_log_start`."""
    cutoff = t1 - r_ms + tol  # a record time retention removed before the check is older than this
    verdicts: list[Verdict] = []
    held_hi = min(n_start, b_end)  # removed records the baseline held: [b_start, held_hi)
    if held_hi > b_start:
        known = (bp.first, bp.edge, bp.newest)
        young = [p for p in known if p is not None and b_start <= p[0] < held_hi and p[1] >= cutoff]
        if young:
            off, ts = min(young)
            return Verdict("loss", f"the record at offset {off} ({_when(ts)}) was removed, and retention.ms={r_ms} "
                                   f"keeps records for {_dur(r_ms)}: it was {_dur(t1 - ts)} old at the check")
        untimed_hi = b_end if bp.first is None else min(bp.first[0], b_end)
        if untimed_hi > b_start:
            verdicts.append(Verdict("unjudged", f"records {b_start}..{min(untimed_hi, held_hi) - 1} have no timestamp: "
                                                "Kafka ages them by their segment file, which it does not expose"))
        below_edge = bp.edge_ms is not None and bp.edge_ms <= cutoff and (bp.edge is None or bp.edge[0] >= held_hi)
        all_old = bp.newest is not None and bp.newest[1] < cutoff
        if not (below_edge or all_old):
            verdicts.append(_records_left(b_start, b_end, n_start, n_end, t1, np_, r_ms, tol, gap_tol))
    if n_start > b_end and t0 >= cutoff:
        left_old = (np_ is not None and np_.edge_ms is not None and n_start < n_end
                    and (np_.edge is None or np_.edge[0] > n_start))
        if not left_old:
            verdicts.append(Verdict("loss", f"records {b_end}..{n_start - 1} were appended during the run "
                                            f"({_dur(t1 - t0)} ago at most), and retention.ms={r_ms} keeps records "
                                            f"for {_dur(r_ms)}"))
    return _worst(verdicts) if verdicts else Verdict("retention", f"older than retention.ms={r_ms}")


def _records_left(b_start: int, b_end: int, n_start: int, n_end: int, t1: int, np_: LogProbe | None, r_ms: int,
                  tol: int, gap_tol: int) -> Verdict:
    """Removed records that aged out during the run, or were younger: the first record left decides."""
    if np_ is None or np_.edge_ms is None:
        return Verdict("unexplained", f"records up to offset {n_start - 1} that were younger than retention.ms="
                                      f"{r_ms} at the baseline were removed, and the records left could not be read")
    if n_start >= n_end:
        return Verdict("unexplained", f"records up to offset {n_start - 1}, some younger than retention.ms={r_ms} "
                                      "at the baseline, were removed, and no record is left to tell retention from "
                                      "a deletion")
    if np_.edge is None or np_.edge[0] > n_start:
        return Verdict("retention", "the first record left is older than the retention cutoff")
    ts = np_.edge[1]
    gap = ts - (t1 - r_ms)
    allowed = max(gap_tol, 10 * r_ms // max(b_end - b_start, 1))
    if gap <= allowed + tol:
        return Verdict("retention", "the first record left is about as old as the retention cutoff")
    return Verdict("unexplained", f"the first record left (offset {np_.edge[0]}, {_when(ts)}) is {_dur(gap)} younger "
                                  f"than the retention cutoff: retention.ms={r_ms} removed offsets up to {n_start - 1} "
                                  f"only if the partition received nothing for {_dur(gap)} before it")
