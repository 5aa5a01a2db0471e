"""What a placement change costs: data to copy, its time at a throttle, and the cross-DC traffic after.

**Data to move.** Each replica the target adds is a copy of the partition's log, fetched from its leader
(replication always fetches from the leader; follower fetching is for consumers). So a move is counted
``leader -> new broker`` with the partition's size, and crosses DCs when their DCs differ.

**Time at a throttle.** Kafka's replication throttle caps each broker's throttled replication traffic,
``leader.replication.throttled.rate`` out of a leader and ``follower.replication.throttled.rate`` into a
follower, both in bytes/s. A broker sending ``out`` bytes and receiving ``in`` bytes needs at least
``max(out, in) / rate`` seconds; the whole move needs at least the worst broker's. That is a lower bound
(batches, the produce traffic replicated meanwhile, and catch-up add to it), printed as such.

**Cross-DC traffic in steady state** (the seed's model, generalised). Let ``N`` be a partition's
produce rate. Its followers in DCs other than the leader's each fetch ``N`` across the DC boundary; the
produce itself crosses when the producer is in another DC than the leader. With producers spread evenly
over ``D`` DCs (or, as the seed assumes, in one DC with leaders spread evenly), a share ``(D - 1) / D``
of ``N`` crosses. So a partition costs ``N * ((D - 1) / D + remote replicas)``: for RF 4 with two
replicas per DC, ``N * (1/2 + 2) = 2.5 N``, the seed's figure; for RF 3 laid out ``[A, B, A]`` it is
``1.5 N``. Consumers read locally with follower fetching (``client.rack``) and add nothing; MirrorMaker
between two clusters costs ``1 N`` for comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkaops.placement.layout import Assignment, TopicPartition, dcs_of


@dataclass(frozen=True)
class MoveEstimate:
    """The data a target assignment copies."""

    replicas: int  # replicas added
    bytes_total: int
    bytes_cross_dc: int
    by_pair: Mapping[tuple[int, int], int]  # (leader, new replica) -> bytes
    out_of: Mapping[int, int]  # broker -> bytes it sends
    into: Mapping[int, int]  # broker -> bytes it receives
    unknown_size: int  # moved partitions whose size could not be read (counted as 0 bytes)

    def seconds_at(self, rate: float) -> float:
        """The least time the moves take with every broker throttled to ``rate`` bytes/s."""
        worst = max([*self.out_of.values(), *self.into.values(), 0])
        return worst / rate if rate > 0 else float("inf")

    def to_dict(self, rate: float | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "replicas": self.replicas, "bytes": self.bytes_total, "bytes_cross_dc": self.bytes_cross_dc,
            "by_pair": [{"from": a, "to": b, "bytes": n} for (a, b), n in sorted(self.by_pair.items())],
            "unknown_size": self.unknown_size}
        if rate:
            out["throttle_bytes_per_s"] = rate
            out["seconds_at_throttle"] = round(self.seconds_at(rate), 1)
        return out


def estimate_moves(current: Assignment, target: Assignment, sizes: Mapping[TopicPartition, int],
                   dc_of: Mapping[int, str], leaders: Mapping[TopicPartition, int | None] | None = None
                   ) -> MoveEstimate:
    """The bytes ``target`` copies, per (source, destination) broker and across DCs.

    Args:
        current: Today's assignment.
        target: The wanted assignment.
        sizes: Bytes of each partition (its leader's log); absent ones count 0 and are reported.
        dc_of: Broker -> DC.
        leaders: Today's leader of each partition (default: the current preferred leader).
    """
    by_pair: dict[tuple[int, int], int] = {}  # plain dicts: Counter's __missing__ is Python, per new key
    out_of: dict[int, int] = {}
    into: dict[int, int] = {}
    total = cross = added = unknown = 0
    for tp, replicas in target.items():
        now = current.get(tp, ())
        if now == replicas:
            continue
        new = [b for b in replicas if b not in now]
        if not new:
            continue
        source = leaders.get(tp) if leaders is not None else None
        if source is None or source < 0:
            source = now[0] if now else -1
        size = sizes.get(tp)
        if size is None:
            unknown += 1
            size = 0
        source_dc = dc_of.get(source)
        for b in new:
            added += 1
            total += size
            pair = (source, b)
            by_pair[pair] = by_pair.get(pair, 0) + size
            out_of[source] = out_of.get(source, 0) + size
            into[b] = into.get(b, 0) + size
            if dc_of.get(b) != source_dc:
                cross += size
    return MoveEstimate(added, total, cross, by_pair, out_of, into, unknown)


def cross_dc_factor(replicas: Sequence[int], dc_of: Mapping[int, str], dcs: int) -> float:
    """How many times one byte produced to this partition crosses a DC boundary (see the module doc)."""
    if not replicas or dcs < 2:
        return 0.0
    leader_dc = dc_of.get(replicas[0])
    remote = sum(1 for b in replicas[1:] if dc_of.get(b) != leader_dc)
    return (dcs - 1) / dcs + remote


@dataclass(frozen=True)
class Traffic:
    """Cross-DC steady-state traffic of an assignment at the measured produce rates."""

    produce_bytes_per_s: float  # N: the partitions' total produce rate
    cross_dc_bytes_per_s: float
    factor: float  # cross / N: 2.5 for the seed's RF 4 layout

    def to_dict(self) -> dict[str, float]:
        return {"produce_bytes_per_s": round(self.produce_bytes_per_s, 1),
                "cross_dc_bytes_per_s": round(self.cross_dc_bytes_per_s, 1), "factor": round(self.factor, 3)}


def cross_dc_traffic(assignment: Assignment, rates: Mapping[TopicPartition, float],
                     dc_of: Mapping[int, str]) -> Traffic:
    """The sum of N_p * factor_p over the partitions with a measured rate; the factor of the whole is the
    rate-weighted mean (the mean over partitions when nothing is being produced)."""
    d = len(dcs_of(dc_of))
    n = sum(max(0.0, rates.get(tp, 0.0)) for tp in assignment)
    cross = sum(max(0.0, rates.get(tp, 0.0)) * cross_dc_factor(r, dc_of, d) for tp, r in assignment.items())
    if n > 0:
        factor = cross / n
    else:
        factor = (sum(cross_dc_factor(r, dc_of, d) for r in assignment.values()) / len(assignment)
                  if assignment else 0.0)
    return Traffic(n, cross, factor)


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def parse_rate(text: str) -> float:
    """``10MB/s``, ``512KiB``, ``1048576`` -> bytes per second.

    Raises:
        ValueError: Anything else.
    """
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)?(?:/s)?\s*", text or "")
    if m is None:
        raise ValueError(f"{text!r} is not a rate (use e.g. 10MB/s, 512KiB/s or bytes per second)")
    unit = {"B": 1, None: 1, "KB": 1000, "KiB": 1024, "MB": 10**6, "MiB": 2**20, "GB": 10**9, "GiB": 2**30}
    value = float(m[1]) * unit[m[2]]
    if value < 1:
        raise ValueError(f"{text!r}: a throttle must be at least 1 byte/s")
    return value
