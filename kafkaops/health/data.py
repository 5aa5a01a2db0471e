"""Pure analysis of the data scan: merge per-task segments, then turn figures into findings.

The Spark job (:mod:`kafkaops.health.spark_job`) only *measures*; everything that decides whether a
figure is a problem lives here, as pure functions over small in-memory inputs, so every threshold is
unit-tested without a JVM or a cluster.

Why each data check exists (the metadata checks are in :mod:`kafkaops.health.metadata`):

* **offset_gap** (warning): on a non-compacted topic every offset between the baseline and now must
  be readable; a hole is data lost below the high watermark (or a transactional producer's control
  records, which show up as single-offset holes). Compacted topics are skipped: holes are their job.
* **timestamp_order** (warning above a tolerance, info below): events are *not* always in timestamp
  order (producers batch, retry, and replay; EventStreams consumers see it too), so small backwards
  steps are normal. A step back larger than the tolerance means a producer with a wrong clock or a
  replay of old data into a live topic; the worst step and its offset are named.
* **invalid_json** / **missing_meta_dt** (warning, event topics ``<dc>.<stream>`` only): every
  consumer of an event topic parses JSON and partitions by ``meta.dt``; a record that fails either
  breaks them.
* **timestamp_drift** (warning): the record timestamp against ``meta.dt``. On LogAppendTime topics the
  record timestamp *is* the broker's receive time, so this is producer-to-broker delay; on CreateTime
  topics it is a producer stamping records with another clock than the event's.
* **future_timestamp** (warning): a CreateTime later than the scan itself (plus a tolerance) cannot
  be a receive time: the producer's clock is ahead of the broker's.
* **produce_rate_dip** (warning): the per-minute produce rate of a topic during or after the run fell
  below a fraction of its median before the run: the maintenance hurt producers.
* **parity_count** / **parity_newest** (warning): ``eqiad.X`` and ``codfw.X`` carry the same stream
  from two DCs; counts and newest timestamps that drift apart mean one side stopped receiving.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkaops.health.metadata import Finding

__all__ = [
    "DEFAULT_DCS",
    "PartitionStats",
    "RateWindow",
    "ScanRange",
    "ScanResult",
    "Thresholds",
    "data_findings",
    "event_topic_regex",
    "merge_segments",
    "minute_series",
    "parity_findings",
    "rate_findings",
]

#: Datacenter prefixes of event topics (``<dc>.<stream>``), Wikimedia's naming.
DEFAULT_DCS = ("eqiad", "codfw", "esams", "ulsfo", "eqsin", "drmrs", "magru")

Key = tuple[str, int]


@dataclass(frozen=True)
class Thresholds:
    """Tunables of the data checks (defaults suit Wikimedia-like event streams).

    Attributes:
        back_tolerance_s: Backwards timestamp steps up to this are normal (info), larger ones warn.
        drift_tolerance_s: ``|record timestamp - meta.dt|`` above this warns.
        future_tolerance_s: Timestamps this far after the scan time warn.
        context_s: How much data before the run window is read, for the "before" produce rate.
        dip_fraction: A minute below this fraction of the median rate before the run is a dip.
        min_rate_per_min: Topics whose median rate before the run is below this are not judged.
        parity_count_tolerance: Relative difference of eqiad/codfw counts tolerated.
        parity_newest_tolerance_s: Difference of newest timestamps tolerated.
        parity_min_records: Pairs with fewer records on both sides are not judged (too little data).
        parity_pairs: DC prefix pairs compared.
    """

    back_tolerance_s: float = 60.0
    drift_tolerance_s: float = 300.0
    future_tolerance_s: float = 60.0
    context_s: float = 600.0
    dip_fraction: float = 0.5
    min_rate_per_min: float = 60.0
    parity_count_tolerance: float = 0.1
    parity_newest_tolerance_s: float = 300.0
    parity_min_records: int = 100
    parity_pairs: tuple[tuple[str, str], ...] = (("eqiad", "codfw"),)


@dataclass(frozen=True, slots=True)
class ScanRange:
    """What to read of one partition: ``[start, end)``; every check applies from ``check_from``.

    Records in ``[start, check_from)`` are context before the run: they only feed the produce rate.
    """

    topic: str
    partition: int
    start: int
    end: int
    check_from: int

    @property
    def expected(self) -> int:
        """Records that must be readable in ``[check_from, end)`` on a non-compacted topic."""
        return max(0, self.end - self.check_from)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end,
                "check_from": self.check_from}


@dataclass(slots=True)
class PartitionStats:
    """Merged figures of one partition's checked range (see :mod:`kafkaops.health.scan_kernel`)."""

    topic: str
    partition: int
    expected: int = 0
    count: int = 0
    context_count: int = 0
    holes: int = 0
    missing: int = 0
    back_steps: int = 0
    back_steps_over: int = 0
    worst_back_ms: int = 0
    worst_back_offset: int | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    invalid_json: int = 0
    first_invalid_offset: int | None = None
    missing_dt: int = 0
    drift_max_ms: int = 0
    drift_over: int = 0
    drift_worst_offset: int | None = None
    future_ts: int = 0
    log_append_time: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass
class ScanResult:
    """What the Spark scan measured.

    Attributes:
        partitions: Merged figures per ``(topic, partition)``.
        minutes: Records per minute (epoch minute -> count) per topic, context included.
        records: Records read (context included).
        seconds: Wall time of the Spark job (session start excluded).
        master: The Spark master it ran on.
        scan_time_ms: When the scan started (the "now" of the future-timestamp check).
        reader: The reader that read the records (``fast`` or ``builtin``; the figures are the same).
        reader_notice: Why the reader is not the one asked for (the fast reader not built), if so.
    """

    partitions: dict[Key, PartitionStats] = field(default_factory=dict)
    minutes: dict[str, dict[int, int]] = field(default_factory=dict)
    records: int = 0
    seconds: float = 0.0
    master: str = ""
    scan_time_ms: int = 0
    reader: str = "fast"
    reader_notice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "reader": self.reader,
            "reader_notice": self.reader_notice,
            "records": self.records,
            "seconds": round(self.seconds, 3),
            "partitions": [s.to_dict() for _, s in sorted(self.partitions.items())],
            "minutes": {t: {str(m): c for m, c in sorted(ms.items())} for t, ms in sorted(self.minutes.items())},
        }


def event_topic_regex(dcs: Iterable[str] = ()) -> re.Pattern[str]:
    """Event topics are ``<dc>.<stream>``: the default DC prefixes plus the inventory's DCs."""
    names = sorted(set(DEFAULT_DCS) | {d for d in dcs if d})
    return re.compile(r"^(?:" + "|".join(re.escape(n) for n in names) + r")\..+")


# --------------------------------------------------------------------------------------------------
# Merging the kernel's segments
# --------------------------------------------------------------------------------------------------


def _seg_key(seg: Mapping[str, Any]) -> Key:
    return (str(seg["topic"]), int(seg["partition"]))


def merge_segments(segments: Iterable[Mapping[str, Any]], ranges: Iterable[ScanRange],
                   *, back_tolerance_ms: int) -> tuple[dict[Key, PartitionStats], dict[str, dict[int, int]]]:
    """Merge the kernel's per-task segment summaries into one :class:`PartitionStats` per partition.

    Segments of one partition are ordered by first offset; the seams between them are checked like
    any other pair of consecutive records (offset hole, backwards timestamp), and so are the edges
    of the range (records missing before the first or after the last one read).

    Args:
        segments: Kernel outputs with ``topic`` (name) instead of ``tid``.
        ranges: The scan ranges (every partition gets stats, even with no segment).
        back_tolerance_ms: For the seams: a step back larger than this counts as over tolerance.

    Returns:
        ``(stats per partition, records per minute per topic)``.
    """
    by_key: dict[Key, list[Mapping[str, Any]]] = {}
    minutes: dict[str, dict[int, int]] = {}
    for seg in segments:
        by_key.setdefault(_seg_key(seg), []).append(seg)
        topic_minutes = minutes.setdefault(str(seg["topic"]), {})
        for m, c in seg.get("minutes", {}).items():
            topic_minutes[int(m)] = topic_minutes.get(int(m), 0) + int(c)
    out: dict[Key, PartitionStats] = {}
    for r in ranges:
        key = (r.topic, r.partition)
        st = PartitionStats(r.topic, r.partition, expected=r.expected)
        segs = sorted((s for s in by_key.get(key, []) if s.get("first_offset") is not None),
                      key=lambda s: int(s["first_offset"]))
        st.context_count = sum(int(s.get("context_count", 0)) for s in by_key.get(key, []))
        prev: Mapping[str, Any] | None = None
        for s in segs:
            for name in ("count", "holes", "missing", "back_steps", "back_steps_over", "invalid_json",
                         "missing_dt", "drift_over", "future_ts", "log_append_time"):
                setattr(st, name, getattr(st, name) + int(s.get(name, 0)))
            if int(s.get("worst_back_ms", 0)) > st.worst_back_ms:
                st.worst_back_ms, st.worst_back_offset = int(s["worst_back_ms"]), s.get("worst_back_offset")
            if int(s.get("drift_max_ms", 0)) > st.drift_max_ms:
                st.drift_max_ms, st.drift_worst_offset = int(s["drift_max_ms"]), s.get("drift_worst_offset")
            if st.first_invalid_offset is None and s.get("first_invalid_offset") is not None:
                st.first_invalid_offset = int(s["first_invalid_offset"])
            for name, pick in (("min_ts", min), ("max_ts", max)):
                v = s.get(name)
                if v is not None:
                    cur = getattr(st, name)
                    setattr(st, name, int(v) if cur is None else pick(cur, int(v)))
            if prev is not None:
                step_off = int(s["first_offset"]) - int(prev["last_offset"])
                if step_off > 1:
                    st.holes += 1
                    st.missing += step_off - 1
                step_ts = int(s["first_ts"]) - int(prev["last_ts"])
                if step_ts < 0:
                    st.back_steps += 1
                    if -step_ts > back_tolerance_ms:
                        st.back_steps_over += 1
                    if -step_ts > st.worst_back_ms:
                        st.worst_back_ms, st.worst_back_offset = -step_ts, int(s["first_offset"])
            prev = s
        # The edges: records expected before the first and after the last one read.
        if segs:
            lead = int(segs[0]["first_offset"]) - r.check_from
            tail = (r.end - 1) - int(segs[-1]["last_offset"])
            for gap in (lead, tail):
                if gap > 0:
                    st.holes += 1
                    st.missing += gap
        elif r.expected > 0:
            st.holes, st.missing = 1, r.expected
        out[key] = st
    return out, minutes


# --------------------------------------------------------------------------------------------------
# Per-partition findings
# --------------------------------------------------------------------------------------------------


def _s(ms: float) -> str:
    seconds = ms / 1000
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def data_findings(stats: Iterable[PartitionStats], *, compacted: Iterable[str] = (),
                  thresholds: Thresholds = Thresholds()) -> list[Finding]:
    """Findings of the per-partition data checks (gaps, order, JSON, drift, future timestamps).

    Args:
        stats: Merged figures per partition.
        compacted: Topics whose cleanup policy includes ``compact`` (no gap check).
        thresholds: Tolerances (only ``back_tolerance_s`` and ``drift_tolerance_s`` are used here;
            the counts themselves were taken by the kernel with the same values).

    Returns:
        Findings, in partition order.
    """
    skip_gaps = set(compacted)
    out: list[Finding] = []
    add = out.append
    for st in sorted(stats, key=lambda s: (s.topic, s.partition)):
        t, p = st.topic, st.partition
        if st.missing > 0 and t not in skip_gaps:
            add(Finding("warning", "offset_gap", t, p,
                        f"{st.missing} of {st.expected} records between the baseline and now are unreadable "
                        f"({st.holes} hole{'s' if st.holes != 1 else ''} in the offsets)", st.missing))
        if st.back_steps_over > 0:
            add(Finding("warning", "timestamp_order", t, p,
                        f"{st.back_steps_over} records are older than their predecessor by more than "
                        f"{_s(thresholds.back_tolerance_s * 1000)} ({st.back_steps} steps back in all); "
                        f"worst step back {_s(st.worst_back_ms)} at offset {st.worst_back_offset}",
                        st.worst_back_ms / 1000))
        elif st.back_steps > 0:
            add(Finding("info", "timestamp_order", t, p,
                        f"{st.back_steps} small steps back in time (worst {_s(st.worst_back_ms)} at offset "
                        f"{st.worst_back_offset}), within the {_s(thresholds.back_tolerance_s * 1000)} "
                        "tolerance: normal for batched producers", st.worst_back_ms / 1000))
        if st.invalid_json > 0:
            add(Finding("warning", "invalid_json", t, p,
                        f"{st.invalid_json} of {st.count} records are not a JSON event object "
                        f"(first at offset {st.first_invalid_offset})", st.invalid_json))
        if st.missing_dt > 0:
            add(Finding("warning", "missing_meta_dt", t, p,
                        f"{st.missing_dt} of {st.count} JSON records lack a valid meta.dt", st.missing_dt))
        if st.drift_over > 0:
            kind = "LogAppendTime (broker receive delay)" if st.log_append_time else "CreateTime"
            add(Finding("warning", "timestamp_drift", t, p,
                        f"{st.drift_over} records' {kind} differs from meta.dt by more than "
                        f"{_s(thresholds.drift_tolerance_s * 1000)}; worst {_s(st.drift_max_ms)} at offset "
                        f"{st.drift_worst_offset}", st.drift_max_ms / 1000))
        if st.future_ts > 0:
            add(Finding("warning", "future_timestamp", t, p,
                        f"{st.future_ts} records are timestamped more than "
                        f"{_s(thresholds.future_tolerance_s * 1000)} after the scan: the producer's clock is "
                        "ahead of the broker's", st.future_ts))
    return out


# --------------------------------------------------------------------------------------------------
# Produce rate before / during / after
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateWindow:
    """The time frame of the produce-rate comparison (unix seconds).

    Attributes:
        scan_from: Earliest time the scan covers (run start minus the context).
        start: Run start (the baseline's time).
        end: Run end.
        scan_to: The scan's "now".
    """

    scan_from: float
    start: float
    end: float
    scan_to: float


def minute_series(minutes: Mapping[int, int], first_minute: int, last_minute: int) -> list[tuple[int, int]]:
    """``[(epoch_minute, count)]`` for every minute of ``[first, last]``, zero-filled."""
    return [(m, int(minutes.get(m, 0))) for m in range(first_minute, last_minute + 1)]


def _full_minutes(w: RateWindow) -> tuple[int, int]:
    """First and last epoch minute entirely inside the scanned time frame."""
    first = -(-int(w.scan_from * 1000) // 60000)  # ceil
    last = int(w.scan_to * 1000) // 60000 - 1
    return first, last


def _hhmm(minute: int) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(minute * 60))


def rate_findings(minutes_by_topic: Mapping[str, Mapping[int, int]], window: RateWindow,
                  thresholds: Thresholds = Thresholds()) -> list[Finding]:
    """Name every topic whose per-minute produce rate dipped during or after the run.

    Only whole minutes inside the scanned frame are compared (the edges are partial), and of the run
    only its whole minutes: the minute it started in is partly before it, and a dip there (producers that
    had not started yet) is not the run's. The reference is the median of the whole minutes before the
    run (at least two); topics whose reference is below ``min_rate_per_min`` are too quiet to judge.

    Args:
        minutes_by_topic: Epoch minute -> records, per topic.
        window: The time frame.
        thresholds: ``dip_fraction`` and ``min_rate_per_min``.

    Returns:
        One warning per topic with a dip, naming the worst minute and the phase.
    """
    first, last = _full_minutes(window)
    end_min = -(-int(window.end) // 60)
    out: list[Finding] = []
    for topic in sorted(minutes_by_topic):
        series = minute_series(minutes_by_topic[topic], first, last)
        before = [c for m, c in series if (m + 1) * 60 <= window.start]
        if len(before) < 2:
            continue
        ref = statistics.median(before)
        if ref < thresholds.min_rate_per_min:
            continue
        worst: tuple[int, int, str] | None = None
        for m, c in series:
            if m * 60 < window.start:  # the minute the run started in is partly before it: not the run's
                continue
            phase = "during" if m < end_min else "after"
            if c < thresholds.dip_fraction * ref and (worst is None or c < worst[1]):
                worst = (m, c, phase)
        if worst is not None:
            m, c, phase = worst
            drop = 1 - c / ref
            out.append(Finding("warning", "produce_rate_dip", topic, None,
                               f"produce rate dip {phase} the run: {c}/min at {_hhmm(m)} against a median of "
                               f"{ref:.0f}/min before it (-{drop * 100:.0f}%)", round(c / ref, 3)))
    return out


def total_minutes(minutes_by_topic: Mapping[str, Mapping[int, int]]) -> dict[int, int]:
    """Records per minute over all topics (the chart's produce-rate line)."""
    total: dict[int, int] = {}
    for ms in minutes_by_topic.values():
        for m, c in ms.items():
            total[m] = total.get(m, 0) + c
    return total


# --------------------------------------------------------------------------------------------------
# eqiad.X / codfw.X parity
# --------------------------------------------------------------------------------------------------


def parity_findings(stats: Iterable[PartitionStats], thresholds: Thresholds = Thresholds()) -> list[Finding]:
    """Compare the two DCs' copies of each stream: record counts and newest timestamps.

    Args:
        stats: Merged figures per partition (counts are of the checked range: the run and after).
        thresholds: ``parity_*`` tolerances and the DC pairs.

    Returns:
        Warnings for pairs out of tolerance; an ``info`` when a pair is too small to judge.
    """
    counts: dict[str, int] = {}
    newest: dict[str, int | None] = {}
    for st in stats:
        counts[st.topic] = counts.get(st.topic, 0) + st.count
        cur = newest.get(st.topic)
        if st.max_ts is not None:
            newest[st.topic] = st.max_ts if cur is None else max(cur, st.max_ts)
        else:
            newest.setdefault(st.topic, cur)
    out: list[Finding] = []
    for a_dc, b_dc in thresholds.parity_pairs:
        prefix = a_dc + "."
        for a in sorted(t for t in counts if t.startswith(prefix)):
            b = b_dc + "." + a[len(prefix):]
            if b not in counts:
                continue
            ca, cb = counts[a], counts[b]
            pair = f"{a} / {b}"
            if max(ca, cb) < thresholds.parity_min_records:
                if ca or cb:
                    out.append(Finding("info", "parity_count", a, None,
                                       f"{pair}: {ca} vs {cb} records, too few to judge parity", max(ca, cb)))
                continue
            diff = abs(ca - cb) / max(ca, cb)
            if diff > thresholds.parity_count_tolerance:
                out.append(Finding("warning", "parity_count", a, None,
                                   f"{pair}: {ca} vs {cb} records since the baseline ({diff * 100:.0f}% apart, "
                                   f"tolerance {thresholds.parity_count_tolerance * 100:.0f}%)", round(diff, 3)))
            na, nb = newest.get(a), newest.get(b)
            if na is not None and nb is not None:
                lag = abs(na - nb)
                if lag > thresholds.parity_newest_tolerance_s * 1000:
                    behind = b if nb < na else a
                    out.append(Finding("warning", "parity_newest", a, None,
                                       f"{pair}: newest records {_s(lag)} apart ({behind} is behind; tolerance "
                                       f"{_s(thresholds.parity_newest_tolerance_s * 1000)})", lag / 1000))
    return out


def segments_from_json(rows: Sequence[str], topic_names: Sequence[str]) -> list[dict[str, Any]]:
    """Decode the kernel's JSON rows, replacing the topic id with the topic name."""
    out = []
    for row in rows:
        seg = json.loads(row)
        seg["topic"] = topic_names[int(seg.pop("tid"))]
        out.append(seg)
    return out
