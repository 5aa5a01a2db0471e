"""A background witness of the cluster's health between two hosts of a roll.

A roll needs the cluster healthy for a stability window before it stops the next broker, but the next
host's depool and zero-SYN window do not touch Kafka: they can run *during* that window (issue 14). The
watch makes that safe to count: started when the previous host is done, it samples the cluster's
metadata twice a second on its own AdminClient and remembers since when every sample has been healthy
(no offline partition, none under-replicated, every broker of the inventory registered). The step that
stops the next broker then asks :meth:`StabilityWatch.stable_for` instead of waiting the window again.

A process that dies loses its watch; the resumed run has none and waits the whole window itself — the
watch only ever shortens a wait it can prove, never skips one.

**Metadata alone is not trusted** (issue 32). A broker cut off from ZooKeeper still answers clients, with
the metadata it had when it was cut: every broker alive, every ISR full. An AdminClient that happens to
ask that broker would see a healthy cluster while the controller has already declared it dead. So in
ZooKeeper mode each sample also reads the registrations (``/brokers/ids``) from ZooKeeper itself, on the
watch's own session: a broker missing there makes the sample unhealthy whatever the metadata says. The
last unhealthy sample's reason (:meth:`StabilityWatch.reason`) is what the gate names when it gives up.

**Nor is a registration** (issue 32): a broker whose host crashed a second ago stays registered and in
every ISR until its session expires. Each sample also asks every broker directly
(:mod:`kafkaops.systems.broker_probe`); one that does not answer makes the sample unhealthy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from kafkaops.model import Cluster, ClusterSnapshot
from kafkaops.systems.broker_probe import BrokerProbe, as_the_controller_sees
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.zookeeper import ZooKeeper

INTERVAL = 0.5


def healthy(snapshot: ClusterSnapshot, brokers: frozenset[int]) -> bool:
    """No offline or under-replicated partition, and every expected broker registered."""
    return not unhealthy_reason(snapshot, brokers)


def unhealthy_reason(snapshot: ClusterSnapshot, brokers: frozenset[int],
                     registered: Collection[int] | None = None, serving: Collection[int] | None = None) -> str:
    """Why the cluster is not healthy ("" when it is): brokers not registered (in the metadata, and in
    ``registered`` — ZooKeeper's own list — when given), brokers not answering when asked directly (not in
    ``serving``, when given), then offline and under-replicated partitions, each named (the first few)."""
    why: list[str] = []
    missing = sorted(brokers - set(snapshot.brokers))
    if missing:
        why.append(f"broker(s) {', '.join(map(str, missing))} not in the metadata")
    if registered is not None:
        gone = sorted(brokers - set(registered))
        if gone:
            why.append(f"broker(s) {', '.join(map(str, gone))} not registered in ZooKeeper")
    if serving is not None:
        silent = sorted((brokers & set(snapshot.brokers)) - set(serving))
        if silent:
            why.append(f"broker(s) {', '.join(map(str, silent))} not answering on its listener")
    for label, parts in (("offline", [p for p in snapshot.partitions if p.offline]),
                         ("under-replicated", [p for p in snapshot.partitions if p.under_replicated])):
        if parts:
            names = [f"{p.topic}-{p.partition}" for p in parts]
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            why.append(f"{len(names)} {label} ({', '.join(names[:3])}{more})")
    return "; ".join(why)


class StabilityWatch:
    """Samples ``snapshot()`` every ``interval`` seconds on a daemon thread (see the module docstring).

    Args:
        snapshot: A metadata read (its own client: the run's is busy on the main thread).
        brokers: The broker ids that must be registered.
        registered: The registrations read from the cluster's own store (ZooKeeper), not from a broker's
            metadata; None in KRaft mode (the metadata comes from the quorum's leader there).
        serving: The brokers of a snapshot that answer when asked directly; None: not asked.
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(self, snapshot: Callable[[], ClusterSnapshot], brokers: frozenset[int], *,
                 registered: Callable[[], Collection[int]] | None = None,
                 serving: Callable[[ClusterSnapshot], Collection[int]] | None = None,
                 interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self._snapshot = snapshot
        self._registered = registered
        self._serving = serving
        self._why = ""
        self._closers: list[Callable[[], None]] = []
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
            snap = self._snapshot()
            serving = self._serving(snap) if self._serving is not None else None
            why = unhealthy_reason(snap, self._brokers, self._registrations(), serving)
        except Exception as exc:  # an unanswered request proves nothing: the streak ends
            why = f"no answer ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
        ok = not why
        now = self._clock()
        with self._lock:
            self._why = why
            if ok and self._since is None:
                self._since = now
            elif not ok:
                self._since = None
            self._last = now

    def _registrations(self) -> Collection[int] | None:
        """ZooKeeper's registrations; None (the metadata alone) when there is no ZooKeeper or it does not
        answer from here — then the run cannot confirm its lock either, and the fencing before the next
        destructive step stops it, so holding the stability window on that would only hide the cause."""
        if self._registered is None:
            return None
        try:
            return self._registered()
        except Exception:
            return None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="kafkaops-stability-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def on_stop(self, *closers: Callable[[], None]) -> None:
        """Run ``closers`` (its clients' close) once the sampling thread has ended."""
        self._closers += closers

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for close in self._closers:
            close()

    def reason(self) -> str:
        """Why the last sample was unhealthy ("" when it was healthy, or before the first)."""
        with self._lock:
            return self._why

    def stable_for(self) -> float:
        """Seconds the cluster has been continuously healthy, as of the last sample (0: not healthy, or a
        sample is overdue — a watch that stopped sampling proves nothing about the time since)."""
        with self._lock:
            if self._since is None or self._last is None or self._clock() - self._last > 3 * self._interval + 1:
                return 0.0
            return self._last - self._since


def cluster_watch(cluster: Cluster) -> StabilityWatch:
    """A watch of ``cluster`` (every inventory broker expected registered), started, on an AdminClient of
    its own that only reads, so it never waits behind the run's requests; in ZooKeeper mode also on a
    ZooKeeper session of its own (see the module docstring), closed with the watch. During a migration to
    KRaft the registrations are not asked (a broker in KRaft mode is never in ``/brokers/ids``): the
    metadata and each broker's own answer judge then."""

    admin = KafkaAdmin.look(cluster)  # it only reads
    probe = BrokerProbe(cluster.kafka)
    registered: Callable[[], Collection[int]] | None = None
    closers: list[Callable[[], None]] = [probe.close]
    snapshot: Callable[[], ClusterSnapshot] = lambda: admin.snapshot(with_configs=False)  # noqa: E731
    if cluster.zookeeper:

        zk = ZooKeeper.for_cluster(cluster, timeout=10.0)
        if not cluster.migrating:  # a KRaft-mode broker of a migration never registers in /brokers/ids
            registered = lambda: zk.open().registered_brokers()  # noqa: E731 - reopened after a lost session
        closers.append(zk.close)
        snapshot = lambda: as_the_controller_sees(admin.snapshot(with_configs=False), zk, probe)  # noqa: E731
    watch = StabilityWatch(snapshot, frozenset(h.broker_id for h in cluster.hosts),
                        registered=registered, serving=lambda snap: probe.serving(snap.endpoints, snap.brokers))
    watch.on_stop(*closers)
    watch.start()
    return watch

