"""Driver-side metadata checks of the topic-health post-check, and the offsets snapshot file format.

Every maintenance run takes an :class:`OffsetsSnapshot` *before* it changes anything (``kafkaops
snapshot CLUSTER -o FILE`` writes the same file by hand); the post-check takes another one afterwards
and :func:`metadata_findings` compares the two. These checks need only metadata and two
``ListOffsets`` calls per partition, so they run on the driver in well under a second for 100,000
partitions, before (and independently of) the Spark scan of the data itself.

Why each check exists:

* **offline / under-min-ISR** (critical): producers with ``acks=all`` fail right now; nothing else
  matters until they are fixed.
* **under-replicated / at-min-ISR** (warning): one more broker loss makes a partition unwritable. A
  partition at min ISR that is *not* under-replicated (RF == ``min.insync.replicas`` by design) is
  reported as info: it is a layout choice, not a transient state, and no roll can ever keep it
  writable (Strimzi #2964).
* **preferred-leader ratio per broker and per DC** (warning below a threshold): after a roll the
  broker restarted last leads nothing unless a preferred-replica election ran (Strimzi #5564), and
  Kafka's auto rebalance only fires above a 10 % imbalance every 300 s (WMF T207768), hence the 0.9
  default. Per DC because a stretched cluster that leads everything from one DC sends all produce
  traffic across the WAN.
* **leader skew** (max / mean leaders per registered broker, warning above a threshold): the same
  imbalance seen from load rather than from the assignment.
* **truncation** (critical, "lost data"): a partition whose log end offset is *below* the baseline's
  lost acknowledged records, typically an unclean leader election or a replica that became leader
  with a shorter log.
* **log start jump / log start advanced**: the log start offset moved during the run. Retention
  removes whole segments of records older than ``retention.ms`` (or beyond ``retention.bytes``);
  anything else — ``delete_records``, a wiped log directory, a retention lowered to purge — is loss,
  whatever its size. :mod:`kafkaops.health.retention` tells them apart from the topic's retention
  settings and the record timestamps the snapshots read around the log start: retention is quiet,
  a proven loss is critical (``log_start_jump`` when it reached the baseline's end, else
  ``log_start_advanced``), a removal retention explains only under an unlikely production gap is a
  warning, one that cannot be judged (no timestamps, size unknown) is info. Baselines without those
  facts (older snapshot files) fall back to the former rule: critical past the baseline's end, a
  warning above half of what the baseline held.
* **broker missing**: a broker registered at the baseline, or named in a replica list, is not
  registered now.

Only *now* is checked for the state checks; *before* is only needed for the offset comparisons and
for brokers that disappeared. The cluster-wide counts reuse :func:`kafkaops.policy.availability.cluster_health`,
so ``kafkaops status``, the pre-flight gate and the post-check agree on what "under-replicated" means.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from kafkaops.errors import ConfigError
from kafkaops.health.retention import LogProbe, RetentionConfig, Verdict, judge_log_start
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.availability import cluster_health

__all__ = [
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "Finding",
    "OffsetsSnapshot",
    "PartitionOffsets",
    "Severity",
    "healthy",
    "metadata_findings",
    "worst_severity",
]

Severity = Literal["critical", "warning", "info"]
#: Sort order: most severe first.
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}

#: The ``format`` field of a snapshot file, and the version this code writes and reads.
SNAPSHOT_FORMAT = "kafkaops.offsets-snapshot"
SNAPSHOT_VERSION = 1


# --------------------------------------------------------------------------------------------------
# The snapshot
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """One partition at snapshot time: its replica state and its offsets.

    Attributes:
        topic: Topic name.
        partition: Partition number.
        leader: Leader broker id, ``None`` when offline.
        replicas: Assigned replicas, preferred leader first.
        isr: In-sync replicas.
        log_start_offset: First offset still stored (``ListOffsets`` EARLIEST); ``None`` if unknown
            (e.g. the partition was offline).
        log_end_offset: Next offset to be written, the high watermark (``ListOffsets`` LATEST);
            ``None`` if unknown.
        probe: Timestamps around the log start (:class:`~kafkaops.health.retention.LogProbe`), read
            for baselines to tell retention from loss; ``None`` when not read.
    """

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start_offset: int | None
    log_end_offset: int | None
    probe: LogProbe | None = None

    def to_dict(self) -> dict[str, Any]:
        """The partition's object in the snapshot file."""
        d: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
        }
        if self.probe is not None:
            d["probe"] = self.probe.to_dict()
        return d


@dataclass(frozen=True)
class OffsetsSnapshot:
    """A cluster's partitions, offsets and topic configs at one instant (``kafkaops snapshot`` file).

    File format (JSON, UTF-8; ``version`` changes only on incompatible changes)::

        {
          "format": "kafkaops.offsets-snapshot",
          "version": 1,
          "cluster": "eqiad",
          "taken_at": 1735689600.0,          # unix seconds
          "brokers": [1001, 1002, 1003],     # registered broker ids
          "controller": 1001,                # or null
          "broker_dc": {"1001": "eqiad"},    # optional, from the inventory (per-DC checks)
          "topics": {"eqiad.x": {"min_insync_replicas": 2, "replication_factor": 3,
                                 "cleanup_policy": "delete",
                                 "retention_ms": 604800000, "retention_bytes": -1,    # optional
                                 "timestamp_type": "CreateTime"}},                    # optional
          "partitions": [
            {"topic": "eqiad.x", "partition": 0, "leader": 1001, "replicas": [1001, 1002, 1003],
             "isr": [1001, 1002, 1003], "log_start_offset": 0, "log_end_offset": 4242,
             "probe": {"first": [0, 1735000000000], "edge_ms": 1735084800000,      # optional
                       "edge": [17, 1735084801234], "newest": [4241, 1735689599000]}}
          ]
        }

    ``leader`` is ``null`` for an offline partition; offsets are ``null`` when they could not be
    read. Partitions are listed in the order the cluster reported them. The retention settings and
    ``probe`` (``[offset, timestamp ms]`` pairs, see :class:`~kafkaops.health.retention.LogProbe`)
    tell retention from loss; files without them are read too (the former rule applies).
    """

    cluster: str
    taken_at: float
    brokers: tuple[int, ...]
    controller: int | None
    partitions: tuple[PartitionOffsets, ...]
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    broker_dc: Mapping[int, str] = field(default_factory=dict)
    retention: Mapping[str, RetentionConfig] = field(default_factory=dict)

    @cached_property
    def cluster_snapshot(self) -> ClusterSnapshot:
        """The replica state as a :class:`~kafkaops.model.ClusterSnapshot` (for :mod:`kafkaops.policy`)."""
        return ClusterSnapshot(
            cluster=self.cluster,
            taken_at=self.taken_at,
            brokers=self.brokers,
            controller=self.controller,
            partitions=tuple(
                PartitionState(p.topic, p.partition, p.leader, p.replicas, p.isr) for p in self.partitions
            ),
            topics=self.topics,
        )

    @classmethod
    def from_cluster_snapshot(
        cls,
        snapshot: ClusterSnapshot,
        offsets: Mapping[tuple[str, int], tuple[int | None, int | None]],
        broker_dc: Mapping[int, str] | None = None,
    ) -> OffsetsSnapshot:
        """Combine a metadata snapshot with ``(log_start, log_end)`` per ``(topic, partition)``.

        Args:
            snapshot: Brokers, controller, partitions and topic configs from the Kafka adapter.
            offsets: Log start and end offsets per partition; missing partitions get ``None``.
            broker_dc: Optional broker id -> DC mapping from the inventory.

        Returns:
            The combined snapshot.
        """
        none: tuple[int | None, int | None] = (None, None)
        parts = []
        for p in snapshot.partitions:
            start, end = offsets.get((p.topic, p.partition), none)
            parts.append(PartitionOffsets(p.topic, p.partition, p.leader, p.replicas, p.isr, start, end))
        return cls(
            cluster=snapshot.cluster,
            taken_at=snapshot.taken_at,
            brokers=snapshot.brokers,
            controller=snapshot.controller,
            partitions=tuple(parts),
            topics=dict(snapshot.topics),
            broker_dc=dict(broker_dc or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """The snapshot file's JSON object."""
        return {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "cluster": self.cluster,
            "taken_at": self.taken_at,
            "brokers": list(self.brokers),
            "controller": self.controller,
            "broker_dc": {str(b): dc for b, dc in self.broker_dc.items()},
            "topics": {name: self._topic_dict(name, cfg) for name, cfg in self.topics.items()},
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def _topic_dict(self, name: str, cfg: TopicConfig) -> dict[str, Any]:
        d: dict[str, Any] = {
            "min_insync_replicas": cfg.min_insync_replicas,
            "replication_factor": cfg.replication_factor,
            "cleanup_policy": cfg.cleanup_policy,
        }
        ret = self.retention.get(name)
        if ret is not None:
            d.update(retention_ms=ret.retention_ms, retention_bytes=ret.retention_bytes,
                     timestamp_type=ret.timestamp_type)
        return d

    def to_json(self, indent: int | None = None) -> str:
        """Serialise to the documented file format."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str, source: str = "snapshot") -> OffsetsSnapshot:
        """Parse the documented file format.

        Args:
            text: The file's content.
            source: Name used in error messages (the file path).

        Returns:
            The snapshot.

        Raises:
            ConfigError: The text is not JSON, not a kafkaops snapshot, of another version, or a field
                is missing or of the wrong type (the message says which).
        """
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != SNAPSHOT_FORMAT:
            raise ConfigError(
                f'{source}: not a kafkaops offsets snapshot (no "format": "{SNAPSHOT_FORMAT}")',
                hint="create one with `kafkaops snapshot CLUSTER -o FILE`",
            )
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ConfigError(
                f"{source}: snapshot version {doc.get('version')!r} is not supported "
                f"(this kafkaops reads version {SNAPSHOT_VERSION})",
                hint="take a new snapshot with this kafkaops version",
            )
        where = "header"
        try:
            topics = {
                name: TopicConfig(
                    name=name,
                    min_insync_replicas=int(cfg["min_insync_replicas"]),
                    replication_factor=int(cfg["replication_factor"]),
                    cleanup_policy=str(cfg.get("cleanup_policy", "delete")),
                )
                for name, cfg in doc.get("topics", {}).items()
            }
            retention = {
                name: RetentionConfig(int(cfg["retention_ms"]), int(cfg.get("retention_bytes", -1)),
                                      str(cfg.get("timestamp_type", "CreateTime")))
                for name, cfg in doc.get("topics", {}).items() if cfg.get("retention_ms") is not None
            }
            brokers = tuple(int(b) for b in doc["brokers"])
            controller = doc.get("controller")
            broker_dc = {int(b): str(dc) for b, dc in doc.get("broker_dc", {}).items()}
            cluster = str(doc["cluster"])
            taken_at = float(doc["taken_at"])
            parts = []
            for i, p in enumerate(doc["partitions"]):
                where = f"partitions[{i}]"
                topic, partition, leader = p["topic"], int(p["partition"]), p["leader"]
                parts.append(
                    PartitionOffsets(
                        topic,
                        partition,
                        None if leader is None or leader < 0 else leader,
                        tuple(p["replicas"]),
                        tuple(p["isr"]),
                        p.get("log_start_offset"),
                        p.get("log_end_offset"),
                        LogProbe.from_dict(p["probe"]) if p.get("probe") is not None else None,
                    )
                )
        except KeyError as exc:
            raise ConfigError(f"{source}: {where}: missing field {exc}") from None
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ConfigError(f"{source}: {where}: malformed: {exc}") from None
        return cls(
            cluster=cluster,
            taken_at=taken_at,
            brokers=brokers,
            controller=None if controller is None else int(controller),
            partitions=tuple(parts),
            topics=topics,
            broker_dc=broker_dc,
            retention=retention,
        )

    def write(self, path: str | Path) -> None:
        """Write the snapshot file (via a temporary file, so a crash never leaves half a baseline)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: str | Path) -> OffsetsSnapshot:
        """Read a snapshot file written by :meth:`write` (``ConfigError`` when unreadable/malformed)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read snapshot: {exc.strerror or exc}") from None
        return cls.from_json(text, source=str(path))


# --------------------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the post-check found.

    Attributes:
        severity: ``critical`` (data lost or unwritable now), ``warning`` (degraded, fix it),
            ``info`` (context, never fails a check).
        check: Stable check name (``offline``, ``under_replicated``, ``under_min_isr``,
            ``at_min_isr``, ``preferred_leader_ratio``, ``preferred_leader_ratio_broker``,
            ``preferred_leader_ratio_dc``, ``leader_skew``, ``truncation``, ``log_start_jump``,
            ``log_start_advanced``, ``partition_missing``, ``broker_missing``).
        topic: Topic concerned, ``None`` for broker / DC / cluster-wide findings.
        partition: Partition concerned, ``None`` when not about one partition.
        message: One line for a human.
        value: The measured figure (ratio, count of records lost, ISR size...), when there is one.
    """

    severity: Severity
    check: str
    topic: str | None
    partition: int | None
    message: str
    value: float | int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "severity": self.severity,
            "check": self.check,
            "topic": self.topic,
            "partition": self.partition,
            "message": self.message,
            "value": self.value,
        }


def worst_severity(findings: Iterable[Finding]) -> Severity | None:
    """The most severe severity among ``findings`` (``None`` when there are none)."""
    worst: Severity | None = None
    for f in findings:
        if worst is None or SEVERITY_RANK[f.severity] < SEVERITY_RANK[worst]:
            worst = f.severity
            if worst == "critical":
                break
    return worst


def healthy(findings: Iterable[Finding]) -> bool:
    """True when no finding is critical or a warning (info findings never fail a check)."""
    return worst_severity(findings) in (None, "info")


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def metadata_findings(
    before: OffsetsSnapshot | None,
    now: OffsetsSnapshot,
    *,
    preferred_ratio_threshold: float = 0.9,
    leader_skew_threshold: float = 1.5,
    start_advance_fraction: float = 0.5,
    broker_dc: Mapping[int, str] | None = None,
    clock_tolerance_s: float = 60.0,
    gap_tolerance_s: float = 3600.0,
) -> list[Finding]:
    """Compare a baseline snapshot with now and report every metadata problem.

    Args:
        before: The baseline taken before the run changed anything; ``None`` checks ``now`` alone
            (no truncation, log-start or missing-broker checks).
        now: The snapshot taken after the run.
        preferred_ratio_threshold: Warn when a broker or DC leads less than this fraction of the
            partitions it is the preferred leader of (and for the cluster-wide ratio).
        leader_skew_threshold: Warn when max / mean leaders per registered broker exceeds this.
            Skipped when there are fewer leaders than brokers (skew is meaningless then).
        start_advance_fraction: Without the facts to tell retention from loss (a baseline file of an
            older kafkaops), warn when a log start offset advanced by more than this fraction of the
            records the baseline held (records between its start and end offsets).
        broker_dc: Broker id -> DC mapping; defaults to ``now.broker_dc`` then ``before.broker_dc``.
        clock_tolerance_s: Retention vs loss: slack for the brokers' clocks against ours.
        gap_tolerance_s: Retention vs loss: longest production gap at the retention cutoff taken as
            normal (:mod:`kafkaops.health.retention`).

    Returns:
        Findings, most severe first, then by check, topic and partition.
    """
    findings: list[Finding] = []
    add = findings.append
    snap = now.cluster_snapshot
    dc_map = broker_dc or now.broker_dc or (before.broker_dc if before else None) or None
    h = cluster_health(snap, dc_map)
    min_isr = snap.min_isr

    # Brokers.
    missing = set(h.unregistered_replica_brokers)
    if before is not None:
        missing |= set(before.brokers) - set(now.brokers)
    for b in sorted(missing):
        add(Finding("critical", "broker_missing", None, None, f"broker {b} is not registered", b))

    # Replica state.
    for p in h.offline:
        add(Finding("critical", "offline", p.topic, p.partition, "offline: no leader", 0))
    under_min = {id(p) for p in h.under_min_isr}
    for p in h.under_min_isr:
        m = min_isr(p.topic)
        add(
            Finding(
                "critical",
                "under_min_isr",
                p.topic,
                p.partition,
                f"ISR {len(p.isr)} < min.insync.replicas {m}: acks=all producers are failing",
                len(p.isr),
            )
        )
    for p in h.under_replicated:
        if id(p) in under_min:
            continue
        add(
            Finding(
                "warning",
                "under_replicated",
                p.topic,
                p.partition,
                f"under-replicated: ISR {len(p.isr)} of {len(p.replicas)} replicas "
                f"(missing {sorted(set(p.replicas) - set(p.isr))})",
                len(p.isr),
            )
        )
    for p in h.at_min_isr:
        urp = len(p.isr) < len(p.replicas)
        m = min_isr(p.topic)
        if urp:
            add(
                Finding(
                    "warning",
                    "at_min_isr",
                    p.topic,
                    p.partition,
                    f"ISR {len(p.isr)} == min.insync.replicas {m}: one more replica lost blocks acks=all",
                    len(p.isr),
                )
            )
        else:
            add(
                Finding(
                    "info",
                    "at_min_isr",
                    p.topic,
                    p.partition,
                    f"replication factor {len(p.replicas)} <= min.insync.replicas {m}: any broker "
                    "stop blocks acks=all writes (layout, not a transient state)",
                    len(p.isr),
                )
            )

    # Leadership balance.
    if h.preferred_leader_ratio < preferred_ratio_threshold:
        add(
            Finding(
                "warning",
                "preferred_leader_ratio",
                None,
                None,
                f"{_pct(h.preferred_leader_ratio)} of partitions are led by their preferred leader "
                f"(threshold {_pct(preferred_ratio_threshold)}): run a preferred-replica election",
                h.preferred_leader_ratio,
            )
        )
    for b, ratio in h.preferred_ratio_by_broker.items():
        if ratio < preferred_ratio_threshold:
            add(
                Finding(
                    "warning",
                    "preferred_leader_ratio_broker",
                    None,
                    None,
                    f"broker {b} leads {_pct(ratio)} of the partitions it is preferred leader of "
                    f"(threshold {_pct(preferred_ratio_threshold)})",
                    ratio,
                )
            )
    for dc, ratio in h.preferred_ratio_by_dc.items():
        if ratio < preferred_ratio_threshold:
            add(
                Finding(
                    "warning",
                    "preferred_leader_ratio_dc",
                    None,
                    None,
                    f"DC {dc} leads {_pct(ratio)} of the partitions its brokers are preferred leader of "
                    f"(threshold {_pct(preferred_ratio_threshold)})",
                    ratio,
                )
            )
    total_leaders = sum(h.leaders_by_broker.values())
    if h.brokers and total_leaders >= len(h.brokers):
        skew = h.leader_skew
        if skew > leader_skew_threshold:
            busiest = max(h.brokers, key=lambda b: h.leaders_by_broker.get(b, 0))
            idle = [b for b in h.brokers if h.leaders_by_broker.get(b, 0) == 0]
            extra = f"; brokers leading nothing: {idle}" if idle else ""
            add(
                Finding(
                    "warning",
                    "leader_skew",
                    None,
                    None,
                    f"leader skew {skew:.2f} (max/mean leaders per broker, threshold "
                    f"{leader_skew_threshold:.2f}): broker {busiest} leads "
                    f"{h.leaders_by_broker.get(busiest, 0)}{extra}",
                    skew,
                )
            )

    # Offsets against the baseline.
    if before is not None:
        _offset_findings(before, now, start_advance_fraction, add, int(clock_tolerance_s * 1000),
                         int(gap_tolerance_s * 1000))

    findings.sort(
        key=lambda f: (
            SEVERITY_RANK[f.severity],
            f.check,
            f.topic or "",
            -1 if f.partition is None else f.partition,
        )
    )
    return findings


def _offset_findings(
    before: OffsetsSnapshot,
    now: OffsetsSnapshot,
    start_advance_fraction: float,
    add: Callable[[Finding], None],
    clock_tolerance_ms: int = 60_000,
    gap_tolerance_ms: int = 3_600_000,
) -> None:
    now_by_key = {(p.topic, p.partition): p for p in now.partitions}
    get = now_by_key.get
    for b in before.partitions:
        n = get((b.topic, b.partition))
        if n is None:
            add(
                Finding(
                    "warning",
                    "partition_missing",
                    b.topic,
                    b.partition,
                    "partition existed at the baseline and is gone (topic deleted?)",
                )
            )
            continue
        b_start, b_end = b.log_start_offset, b.log_end_offset
        n_start, n_end = n.log_start_offset, n.log_end_offset
        if b_end is not None and n_end is not None and n_end < b_end:
            add(
                Finding(
                    "critical",
                    "truncation",
                    b.topic,
                    b.partition,
                    f"lost data: log end offset {n_end} is below the baseline's {b_end} "
                    f"({b_end - n_end} records truncated)",
                    b_end - n_end,
                )
            )
        if b_start is None or n_start is None or n_start <= b_start:
            continue
        cfg = before.retention.get(b.topic) or now.retention.get(b.topic)
        if b.probe is not None and cfg is not None and b_end is not None and n_end is not None:
            topic_cfg = before.topics.get(b.topic) or now.topics.get(b.topic)
            verdict = judge_log_start(
                before_start=b_start, before_end=b_end, before_ms=int(before.taken_at * 1000),
                before_probe=b.probe, now_start=n_start, now_end=n_end, now_ms=int(now.taken_at * 1000),
                now_probe=n.probe, cleanup_policy=topic_cfg.cleanup_policy if topic_cfg else "delete",
                config=cfg, config_now=now.retention.get(b.topic), clock_tolerance_ms=clock_tolerance_ms,
                gap_tolerance_ms=gap_tolerance_ms)
            finding = _removal_finding(b, b_start, b_end, n_start, verdict)
            if finding is not None:
                add(finding)
            continue
        deleted = n_start - b_start
        held = (b_end - b_start) if b_end is not None else 0
        if b_end is not None and held > 0 and n_start >= b_end:
            since = n_start - b_end
            tail = f" and {since} produced since" if since else ""
            add(
                Finding(
                    "critical",
                    "log_start_jump",
                    b.topic,
                    b.partition,
                    f"unexpected deletion: log start offset moved {b_start} -> {n_start}, past the "
                    f"baseline's end {b_end}: all {held} records held at the baseline{tail} were deleted",
                    deleted,
                )
            )
        elif held > 0 and deleted > start_advance_fraction * held:
            add(
                Finding(
                    "warning",
                    "log_start_advanced",
                    b.topic,
                    b.partition,
                    f"log start offset moved {b_start} -> {n_start}: {deleted} of the {held} records "
                    f"held at the baseline ({_pct(deleted / held)}) were deleted during the run",
                    deleted,
                )
            )


def _removal_finding(p: PartitionOffsets, b_start: int, b_end: int, n_start: int, verdict: Verdict) -> Finding | None:
    """The finding for a log start that moved ``b_start -> n_start``, by what moved it (nothing for retention)."""
    if verdict.kind == "retention":
        return None
    removed = n_start - b_start
    held = b_end - b_start
    check = "log_start_jump" if n_start >= b_end else "log_start_advanced"
    what = f"records {b_start}..{n_start - 1} ({removed} record{'s' if removed != 1 else ''}"
    if check == "log_start_jump" and held > 0:
        since = n_start - b_end
        what += f": all {held} records held at the baseline" + (f" and {since} produced since" if since else "") + ")"
    elif check == "log_start_jump":
        what += ", produced during the run)"
    else:
        what += f", {_pct(removed / held)} of what the baseline held)"
    moved = f"log start offset moved {b_start} -> {n_start}: {what}"
    if verdict.kind == "loss":
        head = "unexpected deletion" if check == "log_start_jump" else "lost data"
        return Finding("critical", check, p.topic, p.partition,
                       f"{head}: {moved} removed, which retention would not have removed: {verdict.reason}", removed)
    if verdict.kind == "unexplained":
        return Finding("warning", check, p.topic, p.partition,
                       f"{moved} removed, and retention does not explain it: {verdict.reason}", removed)
    return Finding("info", check, p.topic, p.partition,
                   f"{moved} removed; retention or a deletion, cannot tell: {verdict.reason}", removed)
