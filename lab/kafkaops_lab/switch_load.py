"""Clients of a multi-site service for the two-site lab: they follow the discovery records, as production
clients follow DNS discovery.

* The **producer** posts numbered events (``{"id": n}``) to the eventbus of the site its discovery record
  names, resolved every :data:`TTL` seconds (the record's TTL). While no site is pooled it waits, and
  an event that was not accepted (HTTP error, refused connection) is posted again: every id it counts
  as produced was acknowledged by Kafka at some site.
* The **consumer** reads both sites' streams (``eqiad.test.event``, ``codfw.test.event``) in one group at
  the active site, committing after each batch. When its site is depooled it commits and leaves the
  group; it joins again where the record points next, from the group's committed offsets there —
  which only a translation put there. On secured sites it reads as the lab's ``load`` user, which may
  read the service's topics and commit in its group, nothing more (:func:`kafkaops_lab.security.grants`).

The report says what a switchover cost them: ids lost (produced, never consumed), read twice, and
records that were none of the producer's (the mirror copies' own history: read only when a group
starts from the wrong place).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafkaops.errors import KafkaOpsError
from kafkaops.model import Cluster
from kafkaops.systems.conftool import read_discovery
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops_lab.security import user_endpoint

TTL = 0.5  # seconds a discovery answer is cached (the lab records' TTL)
STREAM = "test.event"


@dataclass
class SwitchReport:
    produced: int = 0  # ids acknowledged
    consumed: int = 0  # records with an id read (duplicates included)
    lost: list[int] = field(default_factory=list)
    duplicates: int = 0  # reads beyond the first of an id
    foreign: int = 0  # records that are no load's (the lab's start-up markers and the mirror copies' history)
    history: dict[str, int] = field(default_factory=dict)  # site -> mirror-copy history records read there
    earlier: dict[str, int] = field(default_factory=dict)  # site -> events of an earlier load read there
    retries: int = 0  # posts that were not accepted and were retried
    waited: float = 0.0  # seconds the producer waited with no site active
    sites: list[str] = field(default_factory=list)  # where the consumer read, in order

    def to_dict(self) -> dict[str, Any]:
        return {"produced": self.produced, "consumed": self.consumed, "lost": len(self.lost),
                "lost_ids": self.lost[:20], "duplicates": self.duplicates, "foreign": self.foreign,
                "history": self.history, "earlier": self.earlier, "retries": self.retries,
                "waited_s": round(self.waited, 1), "consumer_sites": self.sites}


class SwitchLoad:
    """Producer and consumer threads for ``with`` blocks; :meth:`report` after the block."""

    def __init__(self, sites: Cluster, *, service: str = "eventbus", rate: float = 40.0) -> None:
        self.sites, self.rate, self.service = sites, rate, service
        self.record = sites.switched[service].discovery
        self.group = sites.switched[service].consumer_groups[0]
        self.stop = threading.Event()  # ends the consumer
        self.stop_producing = threading.Event()
        self._produced: list[int] = []
        self._consumed: list[int] = []
        self._foreign = 0
        self._earlier: dict[str, int] = {}
        self._history: dict[str, int] = {}
        self.token = uuid.uuid4().hex[:8]  # this load's events (ids restart at 0 for every load)
        self._retries = 0
        self._waited = 0.0
        self._sites: list[str] = []
        self._cache: tuple[float, str | None] = (0.0, None)
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self._threads = [threading.Thread(target=self._guard(self._produce), daemon=True),
                         threading.Thread(target=self._guard(self._consume), daemon=True)]

    def _guard(self, fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # a dead client thread must fail the test, not vanish
                self.errors.append(f"{fn.__name__}: {exc!r}")
        return run

    def active(self) -> str | None:
        """The site the discovery record sends clients to (one pooled site), cached for :data:`TTL`."""

        with self._lock:
            at, site = self._cache
            if time.monotonic() - at < TTL:
                return site
            assert self.sites.conftool_config is not None
            try:
                pooled = [dc for dc, p in read_discovery(self.sites.conftool_config, self.record).items() if p]
            except KafkaOpsError:
                pooled = []
            site = pooled[0] if len(pooled) == 1 else None
            self._cache = (time.monotonic(), site)
            return site

    def _produce(self) -> None:
        import requests

        n = 0
        session = requests.Session()
        while not self.stop_producing.is_set():
            site = self.active()
            if site is None:
                self._waited += 0.05
                time.sleep(0.05)
                continue
            svc = next(s for h in self.sites.site(site).hosts for s in h.services if s.name == self.service)
            event = {"meta": {"stream": STREAM, "dt": datetime.now(UTC).isoformat()}, "id": n, "load": self.token,
                     "via": site}
            try:
                r = session.post(f"http://{svc.vip}:{svc.port}{svc.events_path}", json=event, timeout=10)
                ok = r.status_code in (200, 201, 202)
            except requests.RequestException:
                ok = False
            if ok:
                self._produced.append(n)
                n += 1
                time.sleep(1 / self.rate)
            else:
                self._retries += 1
                time.sleep(0.1)

    def _consume(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer: Any = None
        at: str | None = None
        topics = [f"{dc}.{STREAM}" for dc in self.sites.sites]
        while True:
            site = self.active()
            if consumer is not None and (site != at or self.stop.is_set()):
                consumer.close()  # leaves the group: its commits are all in (committed after each batch)
                consumer, at = None, None
            if self.stop.is_set():
                return
            if consumer is None:
                if site is None:
                    time.sleep(0.05)
                    continue
                consumer = Consumer({**librdkafka_config(user_endpoint(self.sites.site(site), "load")),
                                     "group.id": self.group, "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                     "log_level": 2})
                consumer.subscribe(topics)
                at = site
                self._sites.append(site)
            batch = consumer.consume(200, timeout=0.2)
            done: dict[tuple[str, int], int] = {}
            for msg in batch:
                if msg.error():
                    continue
                done[(msg.topic(), msg.partition())] = msg.offset() + 1
                try:
                    value = json.loads(msg.value())
                except ValueError:
                    value = None
                if not isinstance(value, dict) or "id" not in value:
                    self._foreign += 1
                    if isinstance(value, dict) and "history" in value:
                        self._history[str(at)] = self._history.get(str(at), 0) + 1
                elif value.get("load") != self.token:
                    self._earlier[str(at)] = self._earlier.get(str(at), 0) + 1  # read again from where the group stood
                elif isinstance(value["id"], int):
                    self._consumed.append(value["id"])
            if done:  # exactly what was read: the next offset of each partition
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in done.items()], asynchronous=False)

    def __enter__(self) -> SwitchLoad:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def finish(self, drain: float = 30.0) -> None:
        """Stop producing, give the consumer ``drain`` seconds to read the last ids, then stop it."""
        producer, consumer = self._threads
        self.stop_producing.set()
        producer.join(15)
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline and set(self._produced) - set(self._consumed):
            time.sleep(0.2)
        self.stop.set()
        consumer.join(15)

    def report(self) -> SwitchReport:
        consumed = set(self._consumed)
        return SwitchReport(
            produced=len(self._produced), consumed=len(self._consumed),
            lost=sorted(set(self._produced) - consumed), duplicates=len(self._consumed) - len(consumed),
            foreign=self._foreign, history=dict(self._history), earlier=dict(self._earlier), retries=self._retries,
            waited=self._waited, sites=list(self._sites))
