"""What the cluster looked like while a run ran: URP, offline partitions and the produce rate, sampled.

``runs show RUN --chart FILE.png`` draws a run's timeline with the cluster's state under it (issue 18):
did the URP count rise when kafka1002 stopped and fall when it was back in sync, did the produce rate
dip during an election. The run's own steps only see the cluster at their gates; this sampler, started
for each process of a run, writes one line every :data:`INTERVAL` seconds to ``samples.jsonl`` in the
run's directory, on its own AdminClient (the run's is busy on the main thread):
``{"t", "urp", "offline", "brokers", "end_offsets"}`` — the last the sum of every partition's log end
offset, whose growth between two samples is the produce rate. On a cluster of more than
:data:`MAX_OFFSET_PARTITIONS` partitions the offsets are not summed (two requests per partition per
sample would load the cluster for a chart), and ``end_offsets`` is null.

A sample that could not be taken is written as such (``"error"``), never skipped silently: a gap in the
chart then says "Kafka did not answer", which is itself worth seeing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafkaops.model import ClusterSnapshot

INTERVAL = 2.0
MAX_OFFSET_PARTITIONS = 5000

EndOffsets = Callable[[Iterable[tuple[str, int]]], dict[tuple[str, int], tuple[int | None, int | None]]]


def sample(snapshot: ClusterSnapshot, end_offsets: EndOffsets | None) -> dict[str, Any]:
    """One sample of ``snapshot`` (and the summed log end offsets, when ``end_offsets`` is given)."""
    out: dict[str, Any] = {"urp": sum(1 for p in snapshot.partitions if p.under_replicated),
                           "offline": sum(1 for p in snapshot.partitions if p.offline),
                           "brokers": len(snapshot.brokers), "end_offsets": None}
    if end_offsets is not None and len(snapshot.partitions) <= MAX_OFFSET_PARTITIONS:
        ends = end_offsets([(p.topic, p.partition) for p in snapshot.partitions])
        out["end_offsets"] = sum(end or 0 for _start, end in ends.values())
    return out


class RunSampler:
    """Samples the cluster on a daemon thread into ``path`` (JSON lines), until :meth:`stop`."""

    def __init__(self, path: Path, snapshot: Callable[[], ClusterSnapshot], end_offsets: EndOffsets | None, *,
                 interval: float = INTERVAL) -> None:
        self.path = path
        self._snapshot = snapshot
        self._end_offsets = end_offsets
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafkaops-run-samples", daemon=True)

    def take(self) -> dict[str, Any]:
        """Take one sample now and append it (the thread's body; tests call it directly)."""
        try:
            line: dict[str, Any] = {"t": round(time.time(), 3), **sample(self._snapshot(), self._end_offsets)}
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


def read_samples(path: Path) -> list[dict[str, Any]]:
    """A run's samples, oldest first; none when the run took none (an older run, a dry-run)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # the last line of a killed process may be cut short
    return out
