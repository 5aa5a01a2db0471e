"""What the cluster looked like while a run ran: URP, offline partitions and the produce rate, sampled.

``runs show RUN --chart FILE.png`` draws a run's timeline with the cluster's state under it (issue 18):
did the URP count rise when kafka1002 stopped and fall when it was back in sync, did the produce rate
dip during an election. The run's own steps only see the cluster at their gates; this sampler, started
for each process of a run, writes one line every :data:`INTERVAL` seconds to :data:`SAMPLES_FILE` in the
run's directory, on its own AdminClient (the run's is busy on the main thread):
``{"t", "urp", "offline", "brokers", "end_offsets"}`` — the last the sum of every partition's log end
offset, whose growth between two samples is the produce rate. On a cluster of more than
:data:`MAX_OFFSET_PARTITIONS` partitions the offsets are not summed (two requests per partition per
sample would load the cluster for a chart), and ``end_offsets`` is null.

A sample that could not be taken is written as such (``"error"``), never skipped silently: a gap in the
chart then says "Kafka did not answer", which is itself worth seeing.

A multi-site run (a switchover) samples every site (:func:`sites_sample`): URP, offline and brokers
summed, and per site under ``"sites"`` the log end offsets of that site's *own* topics (``<dc>.*``) — the
events produced there. The chart then shows the produce rate leave one site and arrive at the other.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from kafkaops.model import Cluster, ClusterSnapshot
from kafkaops.systems.kafka import KafkaAdmin

#: The samples' file in the run's directory. Only this module names it: the runner hands the sampler the
#: run's directory, and every reader (``runs show --chart``, the post-check's chart) asks :func:`read_samples`.
SAMPLES_FILE = "samples.jsonl"
INTERVAL = 2.0
MAX_OFFSET_PARTITIONS = 5000

EndOffsets = Callable[[Iterable[tuple[str, int]]], dict[tuple[str, int], tuple[int | None, int | None]]]


def sample(snapshot: ClusterSnapshot, end_offsets: EndOffsets | None, *, own_prefix: str = "") -> dict[str, Any]:
    """One sample of ``snapshot`` (and the summed log end offsets, when ``end_offsets`` is given: of the
    topics named ``own_prefix``..., every topic by default)."""
    out: dict[str, Any] = {"urp": sum(1 for p in snapshot.partitions if p.under_replicated),
                           "offline": sum(1 for p in snapshot.partitions if p.offline),
                           "brokers": len(snapshot.brokers), "end_offsets": None}
    counted = [(p.topic, p.partition) for p in snapshot.partitions if p.topic.startswith(own_prefix)]
    if end_offsets is not None and len(counted) <= MAX_OFFSET_PARTITIONS:
        ends = end_offsets(counted) if counted else {}
        out["end_offsets"] = sum(end or 0 for _start, end in ends.values())
    return out


def sites_sample(per_site: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """One sample of a multi-site run from each site's :func:`sample` (of its own ``<dc>.`` topics).

    The counts are summed; the log end offsets are not (``end_offsets`` null): a site's topics include the
    other site's events mirrored, and a sum would count each event twice. They stay per site.
    """
    return {"urp": sum(int(s["urp"]) for s in per_site.values()),
            "offline": sum(int(s["offline"]) for s in per_site.values()),
            "brokers": sum(int(s["brokers"]) for s in per_site.values()), "end_offsets": None,
            "sites": {dc: dict(s) for dc, s in sorted(per_site.items())}}


class RunSampler:
    """Samples the cluster on a daemon thread into the run's :data:`SAMPLES_FILE` (JSON lines), until
    :meth:`stop`.

    ``measure`` takes one sample (:func:`sample` of a snapshot, or :func:`sites_sample`); an exception is
    written as a gap.
    """

    def __init__(self, run_dir: Path, measure: Callable[[], dict[str, Any]], *, interval: float = INTERVAL) -> None:
        self.path = run_dir / SAMPLES_FILE
        self._measure = measure
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafkaops-run-samples", daemon=True)

    def take(self) -> dict[str, Any]:
        """Take one sample now and append it (the thread's body; tests call it directly)."""
        try:
            line: dict[str, Any] = {"t": round(time.time(), 3), **self._measure()}
        except Exception as exc:  # an unanswered request is a gap worth showing, not a crash of the run
            line = {"t": round(time.time(), 3), "error": str(exc)[:200]}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")
        return line

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.take()
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)


def cluster_sampler(cluster: Cluster, run_dir: Path) -> RunSampler:
    """The sampler of ``cluster`` for the run whose directory is ``run_dir``, on clients of its own that only
    read (one try each: a sample Kafka does not answer in 5 s is a gap, not a wait). A multi-site inventory
    samples every site (:func:`sites_sample`)."""

    def admin(one: Cluster) -> KafkaAdmin:
        return KafkaAdmin.look(one)  # it only reads

    if cluster.multi_site:
        sites = {dc: admin(site) for dc, site in cluster.sites.items()}
        return RunSampler(run_dir, lambda: sites_sample({
            dc: sample(a.snapshot(with_configs=False), a.list_offsets, own_prefix=f"{dc}.")
            for dc, a in sites.items()}))
    only = admin(cluster)
    return RunSampler(run_dir, lambda: sample(only.snapshot(with_configs=False), only.list_offsets))


def read_samples(run_dir: Path) -> list[dict[str, Any]]:
    """The samples of the run whose directory is ``run_dir``, oldest first; none when the run took none (an
    older run, a dry-run)."""
    try:
        lines = (run_dir / SAMPLES_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # the last line of a killed process may be cut short
    return out
