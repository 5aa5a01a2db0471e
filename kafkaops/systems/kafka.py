"""Kafka through the confluent-kafka AdminClient: snapshots, topics, preferred-leader election.

Works for ZooKeeper-mode and KRaft clusters alike (it only speaks the Kafka protocol). Every call is
bounded: the AdminClient's futures are waited on with a timeout, because an operator's tool that hangs
on a half-dead cluster is worse than one that says "Kafka did not answer".

Known sharp edge: confluent-kafka 2.16 ``elect_leaders(...)`` raises SystemError when given
``request_timeout``/``operation_timeout``; we call it without them and bound ``future.result``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int = 3
    config: tuple[tuple[str, str], ...] = ()


class KafkaAdmin:
    """A bounded, typed facade over ``confluent_kafka.admin.AdminClient``."""

    def __init__(self, bootstrap_servers: str, *, timeout: float = 10.0, cluster: str = "",
                 attempts: int = 3) -> None:
        """``attempts`` metadata requests of ``timeout`` seconds each before Kafka counts as unreachable:
        a run rides through a broker bounce; an interactive look (``status``) fails fast."""
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap_servers
        self.timeout = timeout
        self.attempts = attempts
        self.cluster = cluster
        self._admin = AdminClient({
            "bootstrap.servers": bootstrap_servers,
            "socket.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": int(min(timeout, 5) * 1000),
            # librdkafka 2.x drops its bootstrap connections as soon as the first (brokers-only)
            # metadata answer arrives, which kills an in-flight topic-metadata request; the retry then
            # waits out the "sparse connect" pause of reconnect.backoff.ms / 2 (50 ms by default).
            # 20 ms makes that pause its 11 ms floor: `kafkaops status` answers ~40 ms sooner.
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 1000,
            "log_level": 2,  # errors only: a stopped broker is expected during maintenance
        })

    def _unreachable(self, what: str, exc: BaseException) -> UnreachableError:
        return UnreachableError(f"Kafka at {self.bootstrap} did not answer {what}: {str(exc) or type(exc).__name__}",
                                hint="check the brokers are up and bootstrap_servers in the inventory")

    def _result(self, future: Any, what: str, timeout: float | None = None) -> Any:
        try:
            return future.result(timeout=timeout or self.timeout)
        except KafkaOpsError:
            raise
        except Exception as exc:
            raise self._unreachable(what, exc) from exc

    def metadata(self, attempts: int | None = None) -> Any:
        """Cluster metadata (brokers, controller id, topics); retried briefly, since a broker bounce
        or a controller election makes single requests time out while the cluster is fine."""
        tries = attempts or self.attempts
        for attempt in range(tries):
            try:
                return self._admin.list_topics(timeout=self.timeout)
            except Exception as exc:
                if attempt == tries - 1:
                    raise self._unreachable("a metadata request", exc) from exc
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def controller(self, attempts: int | None = None) -> int | None:
        controller = self.metadata(attempts).controller_id
        return int(controller) if controller >= 0 else None

    def topic_configs(self, topics: Iterable[str], replication: dict[str, int] | None = None) -> dict[str, TopicConfig]:
        """min.insync.replicas (and cleanup.policy) per topic, in one batched request."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        names = sorted(topics)
        if not names:
            return {}
        if replication is None:
            md = self.metadata()
            replication = {t: len(next(iter(md.topics[t].partitions.values())).replicas)
                           for t in names if t in md.topics and md.topics[t].partitions}
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        futures = self._admin.describe_configs(resources, request_timeout=self.timeout)
        out: dict[str, TopicConfig] = {}
        for res, fut in futures.items():
            entries = self._result(fut, f"describe_configs({res.name})")
            out[res.name] = TopicConfig(
                name=res.name,
                min_insync_replicas=int(entries["min.insync.replicas"].value),
                replication_factor=replication.get(res.name, 0),
                cleanup_policy=str(entries["cleanup.policy"].value),
            )
        return out

    def snapshot(self, *, include_internal: bool = True, with_configs: bool = True) -> ClusterSnapshot:
        """Brokers, controller, every partition's leader/replicas/ISR, topic min ISR — one instant."""
        md = self.metadata()
        controller = md.controller_id if md.controller_id >= 0 else None
        partitions = []
        for name, topic in md.topics.items():
            if not include_internal and name.startswith("__"):
                continue
            if topic.error is not None:
                continue
            for pid, p in topic.partitions.items():
                partitions.append(PartitionState(
                    topic=name, partition=pid, leader=p.leader if p.leader >= 0 else None,
                    replicas=tuple(p.replicas), isr=tuple(p.isrs),
                ))
        partitions.sort(key=lambda p: (p.topic, p.partition))
        snap = ClusterSnapshot(
            cluster=self.cluster, taken_at=time.time(), brokers=tuple(sorted(md.brokers)),
            controller=controller, partitions=tuple(partitions), topics={},
        )
        return self.with_configs(snap) if with_configs else snap

    def with_configs(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        """``snap`` with its topics' configs (min ISR), read in one batched request."""
        replication: dict[str, int] = {}
        for p in snap.partitions:
            replication.setdefault(p.topic, len(p.replicas))
        return replace(snap, topics=self.topic_configs(replication, replication))

    def create_topics(self, specs: Sequence[TopicSpec]) -> list[str]:
        """Create the topics that do not exist yet (idempotent); return the names created."""
        from confluent_kafka.admin import NewTopic

        existing = set(self.metadata().topics)
        todo = [s for s in specs if s.name not in existing]
        if not todo:
            return []
        futures = self._admin.create_topics(
            [NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor,
                      config=dict(s.config)) for s in todo],
            request_timeout=self.timeout, operation_timeout=self.timeout,
        )
        for name, fut in futures.items():
            self._result(fut, f"create_topics({name})")
        return [s.name for s in todo]

    def elect_preferred_leaders(self, partitions: Sequence[tuple[str, int]] | None = None) -> dict[str, str]:
        """Run a preferred-replica election; return {"topic-partition": error} for the ones that failed.

        ``ELECTION_NOT_NEEDED`` is success (the preferred replica already leads). ``partitions=None``
        means every partition, like ``kafka preferred-replica-election``.
        """
        from confluent_kafka import ElectionType, TopicPartition

        tps = [TopicPartition(t, p) for t, p in partitions] if partitions is not None else None
        try:
            future = self._admin.elect_leaders(ElectionType.PREFERRED, tps)
        except Exception as exc:
            raise self._unreachable("elect_leaders", exc) from exc
        result = self._result(future, "elect_leaders", timeout=max(self.timeout, 30.0))
        failed = {}
        for tp, err in (result or {}).items():
            if err is None:
                continue
            code = err.name() if hasattr(err, "name") else str(err)
            if code != "ELECTION_NOT_NEEDED":
                failed[f"{tp.topic}-{tp.partition}"] = err.str() if hasattr(err, "str") else str(err)
        return failed
