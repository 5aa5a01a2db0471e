"""The topic-health post-check: snapshot now, compare with the baseline, scan the data on Spark.

This is what ends every maintenance runbook (``health.post_check``) and what ``kafkaops check`` runs:
a maintenance run is only done when the cluster is demonstrably as healthy as before — no partition
offline or under-replicated, leadership back on the preferred replicas, no acknowledged record lost,
and the data written during the run readable, ordered and well-formed. The metadata checks run on
the driver first (cheap, and they explain most failures); the Spark scan then reads exactly the
records produced since the baseline (plus some context before it for the produce-rate comparison).

Callable from a runbook step: :func:`run_post_check` takes the baseline the run saved before it
changed anything and returns a :class:`CheckResult`; ``result.raise_if_unhealthy()`` turns it into
the retryable :class:`~kafkaops.errors.CheckFailed` the runner understands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaops.engine.step import parse_duration
from kafkaops.errors import CheckFailed, ConfigError, KafkaOpsError
from kafkaops.health.data import (
    RateWindow,
    ScanRange,
    ScanResult,
    Thresholds,
    data_findings,
    event_topic_regex,
    parity_findings,
    rate_findings,
)
from kafkaops.health.metadata import (
    SEVERITY_RANK,
    Finding,
    OffsetsSnapshot,
    PartitionOffsets,
    healthy,
    metadata_findings,
    worst_severity,
)
from kafkaops.health.retention import LogProbe, RetentionConfig, edge_target
from kafkaops.health.scan_jar import check_reader
from kafkaops.health.spark_job import ScanSpec, run_scan
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.run_samples import read_samples

if TYPE_CHECKING:
    from kafkaops.systems.kafka import KafkaAdmin

__all__ = ["CheckResult", "filter_topics", "parse_since", "plan_ranges", "run_post_check", "take_snapshot"]

#: The longest ``--since``: "1000d" is a typo, and a scan reaching past every retention reads nothing more.
MAX_SINCE = 30 * 86400.0


def parse_since(text: str) -> float:
    """``--since``: how far back the check looks without a baseline (``90s``, ``15m``, ``1h30m``, ``2d``;
    a bare number is seconds; at most 30 days), parsed like every duration of kafkaops (runbooks included).

    Raises:
        ConfigError: Not a duration, not a positive one (a window of nothing checks nothing), or longer
            than :data:`MAX_SINCE`.
    """
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ConfigError(f"invalid --since {text!r}: {exc}", hint="use e.g. 90s, 15m, 1h30m, 2d") from None
    if seconds <= 0:
        raise ConfigError(f"invalid --since {text!r}: must be more than 0", hint="use e.g. 90s, 15m, 1h30m, 2d")
    if seconds > MAX_SINCE:
        raise ConfigError(f"invalid --since {text!r}: at most 30d", hint="use e.g. 90s, 15m, 1h30m, 2d")
    return seconds


@dataclass(frozen=True)
class CheckResult:
    """What the post-check found, with what it compared.

    Attributes:
        cluster: Cluster name.
        findings: Every finding, most severe first (metadata, data, rate, parity).
        now: The snapshot taken by the check.
        baseline: The baseline compared against (``None`` with ``--since``: offsets came from a time).
        window: ``(start, end)`` of the run, unix seconds.
        scan: The Spark scan's figures (``None`` when the scan was skipped).
        ranges: The offset ranges scanned.
        urp_series: ``[(unix seconds, under-replicated partitions)]``: baseline, samples, now.
        topics_regex: The topic filter, if any.
    """

    cluster: str
    findings: tuple[Finding, ...]
    now: OffsetsSnapshot
    baseline: OffsetsSnapshot | None
    window: tuple[float, float]
    scan: ScanResult | None = None
    ranges: tuple[ScanRange, ...] = ()
    urp_series: tuple[tuple[float, int], ...] = ()
    topics_regex: str | None = None
    rate_window: RateWindow | None = None

    @property
    def healthy(self) -> bool:
        """True when no finding is a warning or critical."""
        return healthy(self.findings)

    @property
    def exit_code(self) -> int:
        """0 when healthy, :attr:`CheckFailed.exit_code` (9) otherwise."""
        return 0 if self.healthy else CheckFailed.exit_code

    @property
    def failing(self) -> list[Finding]:
        """The findings that fail the check (critical and warning)."""
        return [f for f in self.findings if f.severity != "info"]

    def summary(self) -> str:
        """One line: verdict and counts per severity."""
        counts = {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITY_RANK}
        verdict = "healthy" if self.healthy else f"UNHEALTHY ({worst_severity(self.findings)})"
        parts = [f"{n} {s}" for s, n in counts.items() if n]
        return f"{self.cluster}: {verdict}" + (f" — {', '.join(parts)}" if parts else "")

    def raise_if_unhealthy(self) -> None:
        """Raise the runner's retryable :class:`CheckFailed` naming the first failing findings."""
        if self.healthy:
            return
        bad = self.failing
        named = "; ".join(f"{_where(f)} {f.check}: {f.message}" for f in bad[:3])
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise CheckFailed(f"post-check failed: {named}{more}", hint="`kafkaops check` shows the full report")

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form of ``kafkaops check --output json``."""
        return {
            "cluster": self.cluster,
            "healthy": self.healthy,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "window": {"start": self.window[0], "end": self.window[1]},
            "topics_regex": self.topics_regex,
            "baseline_taken_at": self.baseline.taken_at if self.baseline else None,
            "now_taken_at": self.now.taken_at,
            "findings": [f.to_dict() for f in self.findings],
            "scan": self.scan.to_dict() if self.scan else None,
            "urp_series": [{"t": t, "urp": n} for t, n in self.urp_series],
        }


def _where(f: Finding) -> str:
    if f.topic is None:
        return "cluster"
    return f.topic if f.partition is None else f"{f.topic}-{f.partition}"


def filter_topics(snap: OffsetsSnapshot, pattern: re.Pattern[str] | None) -> OffsetsSnapshot:
    """The snapshot restricted to topics matching ``pattern`` (``re.search``); brokers untouched."""
    if pattern is None:
        return snap
    return replace(
        snap,
        partitions=tuple(p for p in snap.partitions if pattern.search(p.topic)),
        topics={t: c for t, c in snap.topics.items() if pattern.search(t)},
    )


def plan_ranges(now: OffsetsSnapshot, baseline_ends: Mapping[tuple[str, int], int | None],
                context_starts: Mapping[tuple[str, int], int | None], *,
                include_internal: bool = False) -> tuple[ScanRange, ...]:
    """The offset range to scan per partition.

    ``check_from`` is the baseline's log end (0 for a partition created since), moved up to the
    current log start when records were deleted (the metadata check reports that deletion; the gap
    check must not report it twice) and down to the current end after a truncation. ``start`` goes
    back to the context offset (the first record of the pre-run context) when it is known.

    Args:
        now: The snapshot taken by the check.
        baseline_ends: Log end offset per partition at the baseline.
        context_starts: First offset of the pre-run context per partition (``None``: no context).
        include_internal: Scan ``__``-prefixed internal topics too.

    Returns:
        One range per partition with known offsets.
    """
    out = []
    for p in now.partitions:
        if p.log_end_offset is None or p.log_start_offset is None:
            continue
        if p.topic.startswith("__") and not include_internal:
            continue
        key = (p.topic, p.partition)
        end, log_start = p.log_end_offset, p.log_start_offset
        base = baseline_ends.get(key)
        check_from = min(max(base if base is not None else 0, log_start), end)
        ctx = context_starts.get(key)
        start = check_from if ctx is None else min(max(ctx, log_start), check_from)
        out.append(ScanRange(p.topic, p.partition, start, end, check_from))
    return tuple(out)


def read_urp_samples(run_dir: Path) -> list[tuple[float, int]]:
    """The URP counts the run whose directory is ``run_dir`` (beside its ``baseline.json``) sampled while
    it worked (:mod:`kafkaops.systems.run_samples`); none when it has no samples.

    The run's sampler takes one every 2 s for as long as the run's process lives, so the chart shows
    what the cluster went through during the run, not only before and after. A sample Kafka did not
    answer, and a torn last line (a run killed while writing), are skipped.
    """

    return [(float(s["t"]), int(s["urp"])) for s in read_samples(run_dir) if "urp" in s]


def _admin(cluster: Cluster, timeout: float) -> KafkaAdmin:

    # One metadata try: `kafkaops check`/`snapshot` report a dead cluster in one timeout, not three;
    # inside a run (baseline, post-check) the runner's retry policy is the patience.
    return KafkaAdmin.look(cluster, timeout=timeout)


#: The topic configs that tell retention from loss (:mod:`kafkaops.health.retention`).
RETENTION_SETTINGS = ("retention.ms", "retention.bytes", "message.timestamp.type")


def _retention(admin: KafkaAdmin, topics: Sequence[str]) -> dict[str, RetentionConfig]:
    settings = admin.topic_settings(topics, RETENTION_SETTINGS)
    out = {}
    for t, values in settings.items():
        cfg = RetentionConfig.from_settings(values)
        if cfg is not None:
            out[t] = cfg
    return out


def read_probes(admin: KafkaAdmin, snap: OffsetsSnapshot, keys: Sequence[tuple[str, int]],
                edge_retention: Mapping[str, RetentionConfig], *, full: bool = True) -> OffsetsSnapshot:
    """``snap`` with a :class:`~kafkaops.health.retention.LogProbe` for the partitions ``keys``.

    ``full`` (a baseline): the first record with a timestamp, the edge (first record younger than
    ``retention.ms`` of ``edge_retention`` at the snapshot's time) and the newest record, three batched
    ``ListOffsets``. Otherwise (the check, for the partitions whose log start moved) only the edge.
    A partition whose answers are incomplete gets no probe (it is then judged by the former rule).
    """
    wanted = set(keys)
    parts = [p for p in snap.partitions if (p.topic, p.partition) in wanted and p.log_start_offset is not None
             and p.log_end_offset is not None]
    taken_ms = int(snap.taken_at * 1000)

    def target(p: PartitionOffsets) -> int | None:
        cfg = edge_retention.get(p.topic)
        return edge_target(taken_ms, cfg.retention_ms) if cfg is not None else None

    with_records = [p for p in parts if (p.log_end_offset or 0) > (p.log_start_offset or 0)]
    nonempty = {(p.topic, p.partition) for p in with_records}
    first = admin.offset_timestamps({(p.topic, p.partition): 0 for p in with_records}) if full else {}
    edges = admin.offset_timestamps({(p.topic, p.partition): t for p in with_records
                                     if (t := target(p)) is not None})
    newest = admin.offset_timestamps({(p.topic, p.partition): "max" for p in with_records}) if full else {}
    probes: dict[tuple[str, int], LogProbe] = {}
    for p in parts:
        key, edge_ms = (p.topic, p.partition), target(p)
        if p.topic not in edge_retention:
            continue
        if key in nonempty and ((full and key not in first) or (edge_ms is not None and key not in edges)):
            continue  # not read: no probe rather than a wrong one
        probes[key] = LogProbe(first=first.get(key), edge_ms=edge_ms, edge=edges.get(key), newest=newest.get(key))
    return replace(snap, partitions=tuple(replace(p, probe=probes[(p.topic, p.partition)])
                                          if (p.topic, p.partition) in probes else p for p in snap.partitions))


def take_snapshot(cluster: Cluster, *, timeout: float = 15.0, topics: Sequence[str] | None = None,
                  admin: KafkaAdmin | None = None, probes: bool = True) -> OffsetsSnapshot:
    """An :class:`~kafkaops.health.metadata.OffsetsSnapshot` of ``cluster`` now: the baseline a run takes
    before it changes anything (``kafkaops snapshot``), and the "now" the post-check compares with it.

    Args:
        cluster: The inventory's cluster (bootstrap servers, broker DCs).
        timeout: Seconds per request (when ``admin`` is not given).
        topics: Restrict offsets (not metadata) to these topics; ``None`` for all.
        admin: The Kafka adapter to use (a run's); default: one built for ``cluster``.
        probes: Also read each topic's retention settings and the timestamps around each partition's
            log start (:func:`read_probes`, one DescribeConfigs and three ListOffsets more; and the
            sizes of the partitions whose topic has a ``retention.bytes``), so a later check can tell
            retention from loss. A baseline wants them; the check's own "now"
            reads what it needs itself. Failing to read them leaves them out (never fails the snapshot).

    Returns:
        Replica state from metadata, log start/end offsets per partition, topic configs, broker DCs.

    Raises:
        UnreachableError: Kafka did not answer the metadata request (one try: callers retry).
    """
    admin = admin or _admin(cluster, timeout)
    snap = admin.snapshot(attempts=1)
    wanted = set(topics) if topics is not None else None
    keys = [(p.topic, p.partition) for p in snap.partitions if wanted is None or p.topic in wanted]
    broker_dc = {h.broker_id: h.dc for h in cluster.hosts}
    out = OffsetsSnapshot.from_cluster_snapshot(snap, admin.list_offsets(keys), broker_dc)
    if probes and keys:
        try:
            retention = _retention(admin, sorted({t for t, _ in keys}))
            out = read_probes(admin, replace(out, retention=retention), keys, retention)
        except KafkaOpsError:
            return out
        out = _with_sizes(admin, out, [k for k in keys if k[0] in retention and retention[k[0]].retention_bytes >= 0])
    return out


def _with_sizes(admin: KafkaAdmin, snap: OffsetsSnapshot, keys: Sequence[tuple[str, int]]) -> OffsetsSnapshot:
    """``snap`` with the size of each probed partition of ``keys`` (best effort: ``DescribeLogDirs``)."""
    try:
        sizes = admin.partition_sizes(keys) if keys else {}
    except KafkaOpsError:
        sizes = {}
    if not sizes:
        return snap
    return replace(snap, partitions=tuple(
        replace(p, probe=replace(p.probe, size_bytes=sizes[(p.topic, p.partition)]))
        if p.probe is not None and (p.topic, p.partition) in sizes else p for p in snap.partitions))


def probe_removals(admin: Callable[[], KafkaAdmin], before: OffsetsSnapshot, now: OffsetsSnapshot) -> OffsetsSnapshot:
    """``now`` with what the check needs to judge each log start that moved since ``before``: the
    topics' retention settings now, each such partition's edge (at the baseline's ``retention.ms``)
    and, when ``retention.bytes`` is set, its size. Failing to read them leaves them out (the judgement
    then says it could not tell). ``admin`` builds the adapter, only when a log start moved."""
    now_by_key = {(p.topic, p.partition): p for p in now.partitions}
    moved = []
    for b in before.partitions:
        n = now_by_key.get((b.topic, b.partition))
        if (b.probe is not None and n is not None and n.probe is None and b.log_start_offset is not None
                and n.log_start_offset is not None and n.log_start_offset > b.log_start_offset):
            moved.append((b.topic, b.partition))
    if not moved:
        return now
    topics = sorted({t for t, _ in moved})
    try:
        kafka = admin()
        current = _retention(kafka, topics)
        cfg = {t: c for t in topics if (c := before.retention.get(t) or current.get(t)) is not None}
        probed = read_probes(kafka, replace(now, retention={**now.retention, **current}), moved, cfg, full=False)
        # retention.bytes is judged by the partition's size now (best effort: DescribeLogDirs).
        by_size = [k for k in moved if k[0] in cfg and (cfg[k[0]].retention_bytes >= 0 or (
            k[0] in current and current[k[0]].retention_bytes >= 0))]
    except KafkaOpsError:
        return now
    return _with_sizes(kafka, probed, by_size)


def _urp(snap: OffsetsSnapshot) -> int:
    return sum(1 for p in snap.partitions if len(p.isr) < len(p.replicas))


def _sort(findings: list[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], f.check, f.topic or "",
                                                 -1 if f.partition is None else f.partition)))


def run_post_check(
    cluster: Cluster,
    baseline: OffsetsSnapshot | None,
    *,
    topics_regex: str | None = None,
    spark_master: str = "local[2]",
    window: tuple[float, float] | None = None,
    since: float | None = None,
    thresholds: Thresholds = Thresholds(),
    scan: bool = True,
    spark_conf: Mapping[str, str] | None = None,
    urp_samples: Sequence[tuple[float, int]] = (),
    timeout: float = 15.0,
    snapshot_now: Callable[[], OffsetsSnapshot] | None = None,
    admin: KafkaAdmin | None = None,
    reader: str = "fast",
    notify: Callable[[str], None] | None = None,
) -> CheckResult:
    """Run the whole post-check against ``cluster``.

    Args:
        cluster: The inventory's cluster.
        baseline: The snapshot taken before the run changed anything. ``None``: offsets are derived
            from ``since`` (the first offset of each partition at ``now - since``) and only the
            current state is checked on the metadata side.
        topics_regex: Only topics matching this (``re.search``); ``None`` for all.
        spark_master: Where the scan runs (``local[2]``, ``spark://h:7077``, ``yarn``).
        window: ``(start, end)`` of the run in unix seconds; defaults to (baseline time, now).
        since: Seconds back from now when ``baseline`` is ``None`` (default 10 minutes).
        thresholds: Data-check tolerances.
        scan: Set False to skip the Spark scan (metadata checks only).
        spark_conf: Extra Spark settings (e.g. ``spark.executor.instances`` on YARN).
        urp_samples: URP counts sampled during the run, for the chart.
        timeout: Seconds per Kafka request.
        snapshot_now: Override how "now" is snapshotted (tests).
        admin: The Kafka adapter (a run's); default: one built for ``cluster`` on first use.
        reader: The scan's Kafka reader: ``fast`` (our columnar source) or ``builtin`` (Spark's
            ``kafka`` source); both give the same report. ``fast`` falls back to ``builtin`` when it is
            not built, with a one-line notice (see ``notify``).
        notify: Where that notice goes (a runbook step: its progress line); default: stderr.

    Returns:
        The result; ``result.exit_code`` is 0 when healthy, 9 when not.

    Raises:
        ConfigError: Bad regex, unknown reader, no reader installed, or the baseline is of another
            cluster.
        UnreachableError: Kafka or the Spark job failed.
    """
    kafka: KafkaAdmin | None = admin

    def kafka_admin() -> KafkaAdmin:
        nonlocal kafka
        if kafka is None:
            kafka = _admin(cluster, timeout)
        return kafka


    check_reader(reader)
    pattern = None
    if topics_regex:
        try:
            pattern = re.compile(topics_regex)
        except re.error as exc:
            raise ConfigError(f"invalid --topics regex {topics_regex!r}: {exc}") from None
    if baseline is not None and baseline.cluster and cluster.name and baseline.cluster != cluster.name:
        raise ConfigError(f"the baseline is of cluster {baseline.cluster!r}, not {cluster.name!r}")
    now_full = snapshot_now() if snapshot_now else take_snapshot(cluster, admin=kafka_admin(), probes=False)
    now = filter_topics(now_full, pattern)
    before = filter_topics(baseline, pattern) if baseline is not None else None
    if before is not None:
        now = probe_removals(kafka_admin, before, now)
    keys = [(p.topic, p.partition) for p in now.partitions if p.log_end_offset is not None]
    now_ends = {(p.topic, p.partition): p.log_end_offset for p in now.partitions}

    if before is not None:
        start_t = before.taken_at
        baseline_ends = {(p.topic, p.partition): p.log_end_offset for p in before.partitions}
    else:
        start_t = now.taken_at - (since if since is not None else 600.0)
        found = kafka_admin().offsets_for_times(keys, int(start_t * 1000), log_ends=now_ends) if keys else {}
        # A partition whose offset for that time could not be read is not scanned (rather than
        # scanned from its very first record).
        baseline_ends = {k: (v if v is not None else now_ends.get(k)) for k, v in found.items()}
    win = window or (start_t, now.taken_at)

    findings: list[Finding] = list(metadata_findings(before, now))
    scan_result: ScanResult | None = None
    ranges: tuple[ScanRange, ...] = ()
    rate_window = RateWindow(win[0] - thresholds.context_s, win[0], win[1], now.taken_at)
    if scan:
        context = kafka_admin().offsets_for_times(keys, int(rate_window.scan_from * 1000),
                                                  log_ends=now_ends) if keys else {}
        ranges = plan_ranges(now, baseline_ends, context)
        events = event_topic_regex(h.dc for h in cluster.hosts)

        spec = ScanSpec(
            bootstrap=cluster.bootstrap_servers,
            security=cluster.kafka_security,
            ranges=ranges,
            event_topics=frozenset(r.topic for r in ranges if events.match(r.topic)),
            thresholds=thresholds,
            scan_time_ms=int(now.taken_at * 1000),
            reader=reader,
        )
        scan_result = run_scan(spec, master=spark_master, conf=spark_conf, notify=notify)
        compacted = [t for t, c in now.topics.items() if "compact" in c.cleanup_policy]
        stats = list(scan_result.partitions.values())
        findings += data_findings(stats, compacted=compacted, thresholds=thresholds)
        findings += rate_findings(scan_result.minutes, rate_window, thresholds)
        findings += parity_findings(stats, thresholds)

    urp: list[tuple[float, int]] = []
    if before is not None:
        urp.append((before.taken_at, _urp(before)))
    urp += sorted(urp_samples)
    urp.append((now.taken_at, _urp(now)))
    return CheckResult(
        cluster=cluster.name,
        findings=_sort(findings),
        now=now,
        baseline=before,
        window=win,
        scan=scan_result,
        ranges=ranges,
        urp_series=tuple(urp),
        topics_regex=topics_regex,
        rate_window=rate_window,
    )

