"""A background witness of the cluster's health between two hosts of a roll.

A roll needs the cluster healthy for a stability window before it stops the next broker, but the next
host's depool and zero-SYN window do not touch Kafka: they can run *during* that window (issue 14). The
watch makes that safe to count: started when the previous host is done, it samples the cluster's
metadata twice a second on its own AdminClient and remembers since when every sample has been healthy
(no offline partition, none under-replicated, every broker of the inventory registered). The step that
stops the next broker then asks :meth:`HealthWatch.stable_for` instead of waiting the window again.

A process that dies loses its watch; the resumed run has none and waits the whole window itself — the
watch only ever shortens a wait it can prove, never skips one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafkaops.model import Cluster, ClusterSnapshot

INTERVAL = 0.5


def healthy(snapshot: ClusterSnapshot, brokers: frozenset[int]) -> bool:
    """No offline or under-replicated partition, and every expected broker registered."""
    if not brokers <= set(snapshot.brokers):
        return False
    return not any(p.offline or p.under_replicated for p in snapshot.partitions)


class HealthWatch:
    """Samples ``snapshot()`` every ``interval`` seconds on a daemon thread (see the module docstring).

    Args:
        snapshot: A metadata read (its own client: the run's is busy on the main thread).
        brokers: The broker ids that must be registered.
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(self, snapshot: Callable[[], ClusterSnapshot], brokers: frozenset[int], *,
                 interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self._snapshot = snapshot
        self._brokers = brokers
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # first sample of the current healthy streak
        self._last: float | None = None  # last sample taken (healthy or not)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one sample now (the thread's body; tests call it directly). A failed read is unhealthy."""
        try:
            ok = healthy(self._snapshot(), self._brokers)
        except Exception:  # an unanswered metadata request proves nothing: the streak ends
            ok = False
        now = self._clock()
        with self._lock:
            if ok and self._since is None:
                self._since = now
            elif not ok:
                self._since = None
            self._last = now

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="kafkaops-health-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def stable_for(self) -> float:
        """Seconds the cluster has been continuously healthy, as of the last sample (0: not healthy, or a
        sample is overdue — a watch that stopped sampling proves nothing about the time since)."""
        with self._lock:
            if self._since is None or self._last is None or self._clock() - self._last > 3 * self._interval + 1:
                return 0.0
            return self._last - self._since


def cluster_watch(cluster: Cluster) -> HealthWatch:
    """A watch of ``cluster`` (every inventory broker expected registered), started, on an AdminClient of
    its own that only reads, so it never waits behind the run's requests."""
    from kafkaops.systems.kafka import KafkaAdmin

    admin = KafkaAdmin.look(cluster)  # it only reads
    watch = HealthWatch(lambda: admin.snapshot(with_configs=False), frozenset(h.broker_id for h in cluster.hosts))
    watch.start()
    return watch
