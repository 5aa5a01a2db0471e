"""The one pass over a cluster snapshot's partitions that every safety gate reads, and partition names.

Kafka's ``UnderReplicatedPartitions`` metric is counted on the *leader*, so a check that only asks the
brokers being rolled misses URPs led elsewhere (Yelp kafka-utils' ``--broker-ids`` trap). A snapshot
(:class:`~kafkaops.model.ClusterSnapshot`, built by the Kafka adapter) has every partition's leader,
replicas and ISR, so the counts here are cluster-wide and do not depend on which broker leads what.

Performance: a snapshot of 1,000 brokers / 500,000 partitions is analysed in well under two seconds.
All per-partition work happens in one pass (:func:`snapshot_scan`) cached per snapshot object — a
rolling plan asks :func:`~kafkaops.policy.preflight.preflight` once per broker against the same
snapshot; results hold references to the snapshot's own :class:`~kafkaops.model.PartitionState`
objects instead of copying them, and partition names (``topic-N``) are only formatted for what is
reported (:func:`partition_names`, :func:`summarize_partitions`).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkaops.model import ClusterSnapshot, PartitionState

#: Kafka's broker default for ``min.insync.replicas`` when a topic has no explicit setting.
DEFAULT_MIN_ISR = 1


# --------------------------------------------------------------------------------------------------
# Partition names, for messages
# --------------------------------------------------------------------------------------------------


def partition_name(p: PartitionState) -> str:
    """The ``topic-N`` name Kafka uses for a partition (e.g. ``eqiad.mediawiki.page_edit-0``)."""
    return f"{p.topic}-{p.partition}"


def summarize_names(names: Sequence[str], limit: int = 3) -> str:
    """Join names for a one-line message, truncating long lists.

    Args:
        names: What to list, in the order to show.
        limit: How many names to show before summarising the rest.

    Returns:
        ``"a, b, c"`` when everything fits, else ``"a, b and 41 more"``; ``"none"`` when empty.
    """
    if not names:
        return "none"
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def partition_names(parts: Iterable[PartitionState]) -> list[str]:
    """The ``topic-N`` names of ``parts``, in order."""
    return [f"{p.topic}-{p.partition}" for p in parts]


def summarize_partitions(parts: Sequence[PartitionState], limit: int = 3) -> str:
    """Like ``summarize_names(partition_names(parts))`` but formats only the names it shows."""
    shown = partition_names(parts[: limit + 1] if len(parts) == limit + 1 else parts[:limit])
    rest = len(parts) - len(shown)
    return summarize_names(shown, limit) + (f" and {rest} more" if rest else "")


def plural(n: int, word: str) -> str:
    """``1 partition``, ``2 partitions``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --------------------------------------------------------------------------------------------------
# The per-snapshot scan (one pass, cached)
# --------------------------------------------------------------------------------------------------


@dataclass
class Scan:
    """Everything the safety gates need, computed in one pass over the partitions."""

    min_isr: dict[str, int]
    by_broker: dict[int, list[PartitionState]]
    offline: list[PartitionState]
    under_replicated: list[PartitionState]
    under_min_isr: list[PartitionState]
    at_min_isr: list[PartitionState]
    leaders: dict[int, int]
    preferred_total: dict[int, int]  # preferred-leader broker -> partitions it should lead
    preferred_led: dict[int, int]  # preferred-leader broker -> of those, how many it leads
    preferred_ok: int
    with_replicas: int
    replica_brokers: set[int]


_SCANS: dict[int, tuple[weakref.ref[ClusterSnapshot], Scan]] = {}


def snapshot_scan(snapshot: ClusterSnapshot) -> Scan:
    """Return the cached scan of ``snapshot``, computing it on first use.

    The cache is keyed by object identity and dropped when the snapshot is garbage collected, so a
    rolling plan that asks about 1,000 brokers scans 500,000 partitions once, not 1,000 times.
    """
    key = id(snapshot)
    hit = _SCANS.get(key)
    if hit is not None and hit[0]() is snapshot:
        return hit[1]
    scan = _compute_scan(snapshot)
    _SCANS[key] = (weakref.ref(snapshot), scan)
    weakref.finalize(snapshot, _SCANS.pop, key, None)
    return scan


def _compute_scan(snapshot: ClusterSnapshot) -> Scan:
    min_isr = {name: cfg.min_insync_replicas for name, cfg in snapshot.topics.items()}
    by_broker: defaultdict[int, list[PartitionState]] = defaultdict(list)
    offline: list[PartitionState] = []
    urp: list[PartitionState] = []
    under_min: list[PartitionState] = []
    at_min: list[PartitionState] = []
    leaders: defaultdict[int, int] = defaultdict(int)
    preferred_total: defaultdict[int, int] = defaultdict(int)
    preferred_led: defaultdict[int, int] = defaultdict(int)
    preferred_ok = 0
    with_replicas = 0
    get_min = min_isr.get
    default = DEFAULT_MIN_ISR

    # The hot loop: keep it to attribute loads, len() and dict/list ops (no per-partition objects).
    for p in snapshot.partitions:
        replicas = p.replicas
        leader = p.leader
        for r in replicas:
            by_broker[r].append(p)
        if replicas:
            with_replicas += 1
            pref = replicas[0]
            preferred_total[pref] += 1
            if leader == pref:
                preferred_led[pref] += 1
                preferred_ok += 1
        if leader is None or leader < 0:
            offline.append(p)
            continue
        leaders[leader] += 1
        n_isr = len(p.isr)
        if n_isr < len(replicas):
            urp.append(p)
        m = get_min(p.topic, default)
        if n_isr < m:
            under_min.append(p)
        elif n_isr == m:
            at_min.append(p)

    return Scan(
        min_isr=min_isr,
        by_broker=dict(by_broker),
        offline=offline,
        under_replicated=urp,
        under_min_isr=under_min,
        at_min_isr=at_min,
        leaders=dict(leaders),
        preferred_total=dict(preferred_total),
        preferred_led=dict(preferred_led),
        preferred_ok=preferred_ok,
        with_replicas=with_replicas,
        replica_brokers=set(by_broker),
    )

