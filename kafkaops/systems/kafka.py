"""Kafka through the confluent-kafka AdminClient: snapshots, topics, preferred-leader election, offsets.

Works for ZooKeeper-mode and KRaft clusters alike (it only speaks the Kafka protocol). Every call is
bounded: the AdminClient's futures are waited on with a timeout, because an operator's tool that hangs
on a half-dead cluster is worse than one that says "Kafka did not answer".

:class:`KafkaAdmin` is the one AdminClient of kafkaops (one configuration, below). Besides metadata it
reads partition offsets (:mod:`kafkaops.systems.kafka_offsets`, mixed in). Its writes are the ones production commands
make (preferred-leader election, dynamic configs); the lab's own — creating topics, producing test data,
deleting records to stage data loss — are the lab's (:mod:`kafkaops_lab.kafka`).

Methods that change the cluster are marked :func:`~kafkaops.systems.guard.write`: built with
``dry_run=True`` (a dry-run's adapter), they refuse before any request leaves the process.

Known sharp edge: confluent-kafka 2.16 ``elect_leaders(...)`` raises SystemError when given
``request_timeout``/``operation_timeout``; we call it without them and bound ``future.result``.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kafkaops.errors import AuthError, KafkaOpsError, UnreachableError
from kafkaops.model import Cluster, ClusterSnapshot, KafkaEndpoint, PartitionState, TopicConfig
from kafkaops.policy import kafka_acls as acls
from kafkaops.policy.kafka_acls import Acl
from kafkaops.systems.guard import write
from kafkaops.systems.kafka_auth import RefusalWatch, build, classify, librdkafka_config
from kafkaops.systems.kafka_offsets import OffsetReads, TopicPartitionKey

if TYPE_CHECKING:
    from kafkaops.policy.acl_migration import AclEntry



class KafkaAdmin(OffsetReads):
    """A bounded, typed facade over ``confluent_kafka.admin.AdminClient``."""

    def __init__(self, endpoint: KafkaEndpoint, *, timeout: float = 10.0, attempts: int = 3, dry_run: bool = False,
                 kraft: bool = False) -> None:
        """``attempts`` metadata requests of ``timeout`` seconds each before Kafka counts as unreachable:
        a run rides through a broker bounce; an interactive look (``status``) fails fast. With
        ``dry_run`` every method that changes the cluster refuses (:mod:`kafkaops.systems.guard`)."""

        self.endpoint = endpoint
        self.bootstrap = endpoint.bootstrap_servers
        self._names_checked = False  # _resolvable: the bootstrap names are looked up once
        self.timeout = timeout
        self.attempts = attempts
        self.cluster = endpoint.cluster
        self.dry_run = dry_run
        # On KRaft no broker is the controller: the metadata answer names a random live broker (KIP-590),
        # which a stop impact must not call "the controller" (the quorum's leader is, kafkaops.policy.quorum).
        self.kraft = kraft
        self._refusals = RefusalWatch()
        self._admin = self._new_admin()

    @classmethod
    def for_cluster(cls, cluster: Cluster, *, timeout: float = 10.0, attempts: int = 3,
                    dry_run: bool = False) -> KafkaAdmin:
        """The adapter of an inventory's cluster: its brokers and their security, its name (stamped on
        snapshots) and whether it runs KRaft all come from ``cluster``, so no caller can forget one.
        Forgetting ``kraft`` once made a KRaft cluster's snapshot name a random live broker its controller
        (KIP-590).

        A run's own adapter keeps the default patience (``attempts`` tries: it rides through a broker
        bounce); a look at the cluster is :meth:`look`."""
        return cls(cluster.kafka, timeout=timeout, attempts=attempts, dry_run=dry_run, kraft=cluster.kraft)

    @classmethod
    def look(cls, cluster: Cluster, *, timeout: float = 5.0) -> KafkaAdmin:
        """A read-only adapter that tries once: ``kafkaops status``, ``check``/``snapshot``, the mirror
        lag, a run's background sampler and stability watch. An operator asking "can I touch this cluster?"
        wants "Kafka did not answer" within one ``timeout``, not after a run's patient retries (inside a
        run the runner's retry policy is the patience); and a look never changes the cluster, so its
        writes refuse (:mod:`kafkaops.systems.guard`)."""
        return cls.for_cluster(cluster, timeout=timeout, attempts=1, dry_run=True)

    def _new_admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        timeout = self.timeout
        conf: dict[str, Any] = {
            **librdkafka_config(self.endpoint),
            "error_cb": self._refusals,
            "socket.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": int(min(timeout, 5) * 1000),
            # librdkafka 2.x drops its bootstrap connections as soon as the first (brokers-only)
            # metadata answer arrives, which kills an in-flight topic-metadata request; the retry then
            # waits out the "sparse connect" pause of reconnect.backoff.ms / 2 (50 ms by default).
            # 20 ms makes that pause its 11 ms floor: `kafkaops status` answers ~40 ms sooner.
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 1000,
            # info and above (connections failed and made): they go to the run's debug log, not to stderr
            "log_level": 6,
        }
        return build(AdminClient, conf, self.endpoint)

    def _unreachable(self, what: str, exc: BaseException, needs: Sequence[Acl] = ()) -> KafkaOpsError:
        """The error of a request that failed: a refusal (credentials, TLS, ACL) when the brokers refused
        who kafkaops is, never retried; else "did not answer", which a run retries."""
        refusal = classify(self.endpoint, what, exc, needs)
        if refusal is not None:
            return refusal
        try:
            self._refusals.check(self.endpoint, what, self._admin)
        except AuthError as error:
            return error
        if _kafka_code(exc) in _SILENT:
            return self._silence(what)
        return UnreachableError(f"Kafka at {self.bootstrap} did not answer {what}: {_kafka_words(exc)}",
                                hint="check the brokers are up and bootstrap_servers in the inventory")

    def _resolvable(self) -> None:
        """Before the first request: when no bootstrap name resolves, say so now (a lookup takes
        milliseconds) rather than after librdkafka's timeout and the retries — a name that does not resolve
        is a typo or a missing DNS record, and waiting does not fix either.

        Raises:
            UnreachableError: No bootstrap name resolves (each name and the resolver's words).
        """
        if self._names_checked:
            return
        from kafkaops.systems.tcp import host_ports, unresolved

        names = host_ports(self.bootstrap, 9092)
        failures = [f"cannot resolve {host} ({why})" for host, _ in names if (why := unresolved(host))]
        if failures and len(failures) == len(names):
            error = UnreachableError(
                f"cannot reach Kafka at {self.bootstrap}: {'; '.join(failures)}",
                hint="check kafka.bootstrap_servers in the inventory (and this host's DNS: `kafkaops doctor`)")
            error.final = True
            raise error
        self._names_checked = True

    def _silence(self, what: str) -> UnreachableError:
        """No broker could be talked to: why, per bootstrap address, in the system's words — the name that
        does not resolve, the port that refuses — as ``kafkaops doctor`` says it, not librdkafka's
        ``_TRANSPORT``. When no bootstrap name resolves, the error is marked final: a name that does not
        resolve now will not in a second, and retrying only makes the operator wait."""
        from kafkaops.systems.tcp import host_ports, refusal, unresolved

        reasons, names_fail = [], True
        for host, port in host_ports(self.bootstrap, 9092):
            dns = unresolved(host)
            if dns is not None:
                reasons.append(f"cannot resolve {host} ({dns})")
                continue
            names_fail = False
            why = refusal(host, port, min(self.timeout, 3.0))
            reasons.append(f"{host}:{port}: {why or 'accepts TCP, but no Kafka answered in time'}")
        error = UnreachableError(f"no broker of {self.bootstrap} answered {what}: {'; '.join(reasons)}",
                                 hint="check kafka.bootstrap_servers in the inventory and that this host reaches "
                                      "the brokers (`kafkaops doctor` checks each one)")
        error.final = names_fail
        return error

    def _result(self, future: Any, what: str, timeout: float | None = None, needs: Sequence[Acl] = ()) -> Any:
        try:
            return future.result(timeout=timeout or self.timeout)
        except KafkaOpsError:
            raise
        except Exception as exc:
            raise self._unreachable(what, exc, needs) from exc

    def metadata(self, attempts: int | None = None) -> Any:
        """Cluster metadata (brokers, controller id, topics); retried briefly, since a broker bounce
        or a controller election makes single requests time out while the cluster is fine."""
        tries = attempts or self.attempts
        self._resolvable()
        for attempt in range(tries):
            try:
                return self._admin.list_topics(timeout=self.timeout)
            except Exception as exc:
                error = self._unreachable("a metadata request", exc, [acls.topic("DESCRIBE")])
                if attempt == tries - 1 or isinstance(error, AuthError) or getattr(error, "final", False):
                    raise error from exc
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def controller(self, attempts: int | None = None) -> int | None:
        controller = self.metadata(attempts).controller_id
        return int(controller) if controller >= 0 and not self.kraft else None

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
            entries = self._result(fut, f"describe_configs({res.name})",
                                   needs=[acls.topic("DESCRIBE_CONFIGS", res.name)])
            out[res.name] = TopicConfig(
                name=res.name,
                min_insync_replicas=int(entries["min.insync.replicas"].value),
                replication_factor=replication.get(res.name, 0),
                cleanup_policy=str(entries["cleanup.policy"].value),
            )
        return out

    def snapshot(self, *, include_internal: bool = True, with_configs: bool = True,
                 attempts: int | None = None) -> ClusterSnapshot:
        """Brokers, controller, every partition's leader/replicas/ISR, topic min ISR — one instant.

        ``attempts`` overrides the adapter's metadata tries (one, where a caller retries itself)."""
        md = self.metadata(attempts)
        controller = md.controller_id if md.controller_id >= 0 and not self.kraft else None
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
            endpoints={int(b): (str(m.host), int(m.port)) for b, m in md.brokers.items()},
        )
        return self.with_configs(snap) if with_configs else snap

    def with_configs(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        """``snap`` with its topics' configs (min ISR), read in one batched request."""
        replication: dict[str, int] = {}
        for p in snap.partitions:
            replication.setdefault(p.topic, len(p.replicas))
        return replace(snap, topics=self.topic_configs(replication, replication))

    @write
    def elect_preferred_leaders(self, partitions: Sequence[tuple[str, int]] | None = None) -> dict[str, str]:
        """Run a preferred-replica election; return {"topic-partition": error} for the ones that failed.

        ``ELECTION_NOT_NEEDED`` is success (the preferred replica already leads). ``partitions=None``
        means every partition, like ``kafka preferred-replica-election``.
        """
        from confluent_kafka import ElectionType, TopicPartition

        tps = [TopicPartition(t, p) for t, p in partitions] if partitions is not None else None
        for fresh in (False, True):
            try:
                future = self._admin.elect_leaders(ElectionType.PREFERRED, tps)
                result = future.result(timeout=max(self.timeout, 30.0))
                break
            except Exception as exc:
                if fresh or "_TIMED_OUT" not in str(exc):
                    raise self._unreachable("elect_leaders", exc, [acls.cluster("ALTER")]) from exc
                # Right after the controller moved (its broker restarted), librdkafka can keep sending the
                # election to a connection that never answers: measured on the stretch lab, 10 s lost and
                # a step retry. A new client asks the cluster afresh who the controller is.
                self._admin = self._new_admin()
        failed = {}
        for tp, err in (result or {}).items():
            if err is None:
                continue
            code = err.name() if hasattr(err, "name") else str(err)
            if code != "ELECTION_NOT_NEEDED":
                failed[f"{tp.topic}-{tp.partition}"] = err.str() if hasattr(err, "str") else str(err)
        return failed

    def topic_settings(self, topics: Iterable[str], names: Sequence[str]) -> dict[str, dict[str, str]]:
        """The effective values of the topic configs ``names`` (``retention.ms``...), one batched
        DescribeConfigs (read-only). Topics that could not be described are left out."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        wanted = sorted(set(topics))
        if not wanted:
            return {}
        futures = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in wanted],
                                               request_timeout=self.timeout)
        out: dict[str, dict[str, str]] = {}
        for res, fut in futures.items():
            try:
                entries = fut.result(timeout=self.timeout)
            except Exception:
                continue
            out[res.name] = {n: str(entries[n].value) for n in names if n in entries and entries[n].value is not None}
        return out

    @write
    def alter_configs(self, *, brokers: Mapping[int, Mapping[str, str | None]] | None = None,
                      topics: Mapping[str, Mapping[str, str | None]] | None = None) -> None:
        """Set (a value) or delete (``None``) dynamic configs of brokers and topics, incrementally: the
        other dynamic configs of each resource stay as they are (``AlterConfigs`` would reset them).

        Used for replication throttles: ``{leader,follower}.replication.throttled.rate`` per broker and
        ``{leader,follower}.replication.throttled.replicas`` per topic.

        Raises:
            UnreachableError: Kafka refused or did not answer, naming the resource.
        """
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        def entries(values: Mapping[str, str | None]) -> list[Any]:
            return [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET if v is not None
                                else AlterConfigOpType.DELETE) for n, v in sorted(values.items())]

        topic_resources = [ConfigResource(ResourceType.TOPIC, t, incremental_configs=entries(v))
                           for t, v in sorted((topics or {}).items()) if v]
        # librdkafka sends a broker's configs to that broker: one BROKER resource per request.
        requests = [[ConfigResource(ResourceType.BROKER, str(b), incremental_configs=entries(v))]
                    for b, v in sorted((brokers or {}).items()) if v]
        if topic_resources:
            requests.append(topic_resources)
        for resources in requests:
            futures = self._admin.incremental_alter_configs(resources, request_timeout=self.timeout)
            for res, fut in futures.items():
                self._result(fut, f"altering the configs of {res.restype.name.lower()} {res.name}",
                             needs=[_config_acl("ALTER_CONFIGS", res)])

    def dynamic_configs(self, *, brokers: Iterable[int] = (), topics: Iterable[str] = (),
                        names: Sequence[str]) -> dict[str, dict[str, str]]:
        """The dynamic (explicitly set) values of ``names`` on brokers (keyed ``broker:<id>``) and topics
        (keyed by name): what a throttle left behind, read-only."""
        from confluent_kafka.admin import ConfigSource, ResourceType

        # ConfigEntry.source is the protocol's number (2), not the enum: compare numbers.
        dynamic = {ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        out: dict[str, dict[str, str]] = {}
        for res, found in self._describe_configs(brokers, topics).items():
            key = f"broker:{res.name}" if res.restype == ResourceType.BROKER else res.name
            out[key] = {n: str(found[n].value) for n in names
                        if n in found and found[n].value not in (None, "") and _source(found[n]) in dynamic}
        return out

    def broker_settings(self, brokers: Iterable[int], names: Sequence[str]) -> dict[int, dict[str, str]]:
        """The effective values of the broker configs ``names`` (``broker.rack``,
        ``replica.selector.class``...), static or dynamic; read-only."""
        out: dict[int, dict[str, str]] = {}
        for res, found in self._describe_configs(brokers, ()).items():
            out[int(res.name)] = {n: str(found[n].value) for n in names
                                  if n in found and found[n].value not in (None, "")}
        return out

    def acls(self) -> list[AclEntry] | None:
        """Every ACL the cluster serves (DescribeAcls with a match-all filter, read-only); None when it answers
        ``SECURITY_DISABLED`` (no authorizer): there are no ACLs to read, which is not an error. (Kafka 4.3's
        KRaft brokers without an authorizer answered an empty list on the lab.)"""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        # None matches any name, principal and host (the Admin API's filter; the type stubs say str).
        match_all = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                     AclOperation.ANY, AclPermissionType.ANY)
        future = self._admin.describe_acls(match_all, request_timeout=self.timeout)
        try:
            bindings = future.result(timeout=self.timeout)
        except Exception as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.SECURITY_DISABLED:
                return None
            raise self._unreachable("a DescribeAcls request", exc, [acls.cluster("DESCRIBE")]) from exc
        from kafkaops.policy.acl_migration import AclEntry

        # librdkafka names Kafka's CLUSTER resource type (4) BROKER.
        return sorted(AclEntry("CLUSTER" if b.restype.name == "BROKER" else b.restype.name, b.name,
                               b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                               b.permission_type.name) for b in bindings)

    def _describe_configs(self, brokers: Iterable[int], topics: Iterable[str]) -> dict[Any, Any]:
        """DescribeConfigs of brokers and topics: one request per broker (librdkafka sends a broker's
        configs to that broker and refuses two BROKER resources in one call), one for all topics."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        requests = [[ConfigResource(ResourceType.BROKER, str(b))] for b in sorted(set(brokers))]
        if topics:
            requests.append([ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))])
        out: dict[Any, Any] = {}
        for resources in requests:
            for res, fut in self._admin.describe_configs(resources, request_timeout=self.timeout).items():
                out[res] = self._result(fut, f"describing the configs of {res.restype.name.lower()} {res.name}",
                                        needs=[_config_acl("DESCRIBE_CONFIGS", res)])
        return out

    def partition_sizes(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Bytes on disk of each partition's leader replica (``DescribeLogDirs`` v1, read-only).

        The AdminClient has no DescribeLogDirs, so this speaks the protocol itself to each leader,
        over the listener the metadata advertises, with the cluster's TLS and SASL (:mod:`kafkaops.systems.kafka_wire`).
        The post-check needs it to judge ``retention.bytes``. Best effort: a broker that does not
        answer, or answers with an error, leaves its partitions out.
        """
        md = self.metadata()
        by_leader: dict[int, list[TopicPartitionKey]] = {}
        for t, p in dict.fromkeys(partitions):
            topic = md.topics.get(t)
            meta = topic.partitions.get(p) if topic is not None else None
            if meta is not None and meta.leader in md.brokers:
                by_leader.setdefault(meta.leader, []).append((t, p))
        out: dict[TopicPartitionKey, int] = {}
        for leader, keys in by_leader.items():
            broker = md.brokers[leader]
            try:
                sizes = describe_log_dirs(self.endpoint, broker.host, int(broker.port), keys, timeout=self.timeout)
            except (OSError, ValueError, struct.error):
                continue
            out.update({k: sizes[k] for k in keys if k in sizes})
        return out

    def replica_sizes(self, broker: int, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Bytes on disk of ``broker``'s own replica of each partition (``DescribeLogDirs`` v1 to that broker,
        read-only): how far a broker catching up on an empty disk has come. Best effort like
        :meth:`partition_sizes`: a broker not in the metadata, or not answering, gives ``{}``."""
        md = self.metadata()
        meta = md.brokers.get(broker)
        keys = list(dict.fromkeys(partitions))
        if meta is None or not keys:
            return {}
        try:
            sizes = describe_log_dirs(self.endpoint, meta.host, int(meta.port), keys, timeout=self.timeout)
        except (OSError, ValueError, struct.error):
            return {}
        return {k: sizes[k] for k in keys if k in sizes}


_CORRELATION = itertools.count(1)


#: librdkafka's codes for "no broker could be talked to" (as opposed to a broker that answered "no").
_SILENT = frozenset({"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE"})


def _kafka_error(exc: BaseException) -> Any:
    """The ``KafkaError`` a confluent-kafka exception carries (``KafkaException(KafkaError)``), else None."""
    inner = exc.args[0] if exc.args else None
    return inner if hasattr(inner, "name") and hasattr(inner, "str") else None


def _kafka_code(exc: BaseException) -> str | None:
    error = _kafka_error(exc)
    return str(error.name()) if error is not None else None


def _kafka_words(exc: BaseException) -> str:
    """What went wrong, in words: the KafkaError's text (``Failed to get metadata: Local: Broker transport
    failure``), never its repr (``KafkaError{code=_TRANSPORT,val=-195,...}``)."""
    error = _kafka_error(exc)
    if error is not None:
        return str(error.str())
    return str(exc) or type(exc).__name__


def _source(entry: Any) -> int:
    """A ConfigEntry's source as a number, whether the client gives the enum or the wire value."""
    source = entry.source
    return int(getattr(source, "value", source))


def describe_log_dirs(endpoint: KafkaEndpoint, host: str, port: int, partitions: Sequence[TopicPartitionKey], *,
                      timeout: float = 10.0) -> dict[TopicPartitionKey, int]:
    """One ``DescribeLogDirs`` v1 request to one broker: the size of its replica of each partition.

    v1 is the oldest version Kafka 4 still serves and the newest without tagged fields: a fixed
    layout of big-endian integers and int16-length strings. Future replicas (a move between log
    dirs in progress) are left out.

    Raises:
        OSError: Connection failed or closed early.
        ValueError: The broker answered with an error, or not DescribeLogDirs.
    """
    # Here, not at the top: the raw connection (socket, ssl) serves this one request, and every Kafka
    # command, `kafkaops status` first, imports this module.
    from kafkaops.systems.kafka_wire import open_connection, read_frame, remaining

    topics: dict[str, list[int]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    corr = next(_CORRELATION) & 0x7FFFFFFF
    client = b"kafkaops"
    body = struct.pack(">hhih", 35, 1, corr, len(client)) + client + struct.pack(">i", len(topics))
    for t, ps in topics.items():
        name = t.encode()
        body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(ps)) + b"".join(
            struct.pack(">i", p) for p in ps)
    deadline = time.monotonic() + timeout
    with open_connection(endpoint, host, port, deadline) as sock:
        sock.settimeout(remaining(deadline))
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = read_frame(sock, deadline, 256 << 20)[4:]
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values[0]

    def string() -> str:
        nonlocal pos
        n = take(">h")
        text = data[pos:pos + n].decode()
        pos += n
        return text

    if take(">i") != corr:
        raise ValueError("DescribeLogDirs: answer to another request")
    take(">i")  # throttle time
    out: dict[TopicPartitionKey, int] = {}
    for _ in range(take(">i")):
        error = take(">h")
        string()  # the log dir
        for _ in range(take(">i")):
            topic = string()
            for _ in range(take(">i")):
                partition, size_bytes, _lag, future = take(">i"), take(">q"), take(">q"), take(">?")
                if not error and not future:
                    out[(topic, partition)] = out.get((topic, partition), 0) + size_bytes
    return out


def _config_acl(operation: str, resource: Any) -> Acl:
    """The ACL a DescribeConfigs/AlterConfigs of ``resource`` (a ``ConfigResource``) needs: a broker's
    configs are the cluster's, a topic's its own."""
    from confluent_kafka.admin import ResourceType

    return acls.cluster(operation) if resource.restype == ResourceType.BROKER else acls.topic(operation, resource.name)
