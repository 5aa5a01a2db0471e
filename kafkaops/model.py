"""Plain, frozen data the rest of kafkaops reasons about.

Adapters in ``kafkaops.systems`` turn client-library objects into these; ``kafkaops.policy`` and the plans
work only on these, so availability analysis is pure and testable without a cluster.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SshEndpoint:
    """How to reach a host over SSH. ``None`` fields fall back to ``~/.ssh/config`` then defaults."""

    address: str
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None


@dataclass(frozen=True)
class Service:
    """A service a host runs and the load balancer routes to (conftool pools it)."""

    name: str
    port: int
    log_file: str | None = None
    error_patterns: tuple[str, ...] = ()
    health_path: str | None = None
    vip: str | None = None  # the load-balanced address clients use (pybal/LVS service IP)
    events_path: str | None = None  # where it accepts events (POST), e.g. /v1/events
    # The host's log of events it failed to produce (EventError records); may hold {host.name}.
    failed_events_log: str | None = None
    baseline_rps: float | None = None  # recorded throughput (requests/s) to compare a bench with
    baseline_note: str | None = None  # where and how that baseline was measured
    active: bool = True  # False: this DC's VIP is not the one clients are sent to (the passive site)

    def failed_events_log_on(self, host: str) -> str | None:
        """The failed-events log's path on ``host`` (its ``{host.name}`` filled in)."""
        return self.failed_events_log.replace("{host.name}", host) if self.failed_events_log else None


#: The roles of a step's target host (:attr:`Host.role`): steps that only make sense for one declare it.
BROKER = ("broker",)
CONTROLLER = ("controller",)


@dataclass(frozen=True)
class Host:
    """One machine of a cluster: a Kafka broker plus the services co-located on it, or (``role``
    ``controller``) a KRaft controller node, whose ``broker_id`` is its ``node.id``."""

    name: str  # short name, e.g. kafka1001
    fqdn: str  # kafka1001.eqiad.wmnet
    address: str
    broker_id: int
    dc: str
    rack: str
    ssh: SshEndpoint
    services: tuple[Service, ...] = ()
    conftool_tags: Mapping[str, str] = field(default_factory=dict)
    # Per-host overrides of the cluster's command templates (rare; e.g. a host with another init).
    commands: Mapping[str, str] = field(default_factory=dict)
    role: str = "broker"  # "broker", or "controller": a KRaft controller-only node (inventory `controllers:`)

    def service(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)


@dataclass(frozen=True)
class SwitchedService:
    """A service that runs in several sites, one of them active: which conftool discovery record says so,
    and the consumer groups that must follow it to the other site (their offsets translated)."""

    name: str  # eventbus
    discovery: str  # the conftool discovery object's name (its ``dnsdisc`` tag)
    consumer_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricGate:
    """A named PromQL gate (``metrics.gate``): the query's value must stay at or under ``max`` (absolute)
    and/or ``max_ratio`` times the value the run measured at its start (its baseline).

    The query may say ``{cluster.name}`` (literally; the only placeholder a query has, since PromQL itself
    is full of braces): :meth:`promql` fills it in, so one lab inventory serves every lab's copy."""

    name: str
    query: str
    max: float | None = None
    max_ratio: float | None = None

    def promql(self, cluster: str) -> str:
        """The query for ``cluster``: ``{cluster.name}`` replaced by its name."""
        return self.query.replace("{cluster.name}", cluster)


#: What a monitoring template may name: a host's fields and the cluster's name.
MONITORING_HOST_FIELDS = ("host.name", "host.fqdn", "host.address", "host.dc", "host.rack", "cluster.name")
#: The fields that are one host's own: ``host_matchers`` must name one of them, or each host's silence covers
#: every host of its rack, its DC or the cluster (and ``alerts.gate`` sees none of their alerts).
MONITORING_OWN_HOST_FIELDS = ("host.name", "host.fqdn", "host.address")
MONITORING_SCOPE_FIELDS = ("cluster.name",)


def template_fields(template: str) -> list[str]:
    """The fields a ``{host.fqdn}``-style template names (ValueError for a malformed one)."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def fill_template(template: str, values: Mapping[str, str], *, escape: bool) -> str:
    """``template`` with each ``{field}`` replaced by ``values[field]`` (regex-escaped with ``escape``)."""
    out = []
    for literal, name, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            value = values[name]
            out.append(re.escape(value) if escape else value)
    return "".join(out)


@dataclass(frozen=True)
class Monitoring:
    """Where a cluster's monitoring lives and how its alerts are told apart (inventory ``monitoring:``).

    ``host_matchers`` (label -> regex template) match one host's alerts: one Alertmanager silence per
    host is made of them. ``scope`` (label -> exact value template) says which alerts belong to the
    cluster at all: ``alerts.gate`` looks only at those. ``gates`` are the PromQL gates of
    ``metrics.gate``. ``roll_alerts`` are the alert names a broker's absence raises on its *peers*
    (Kafka's under-replicated partitions are counted on the leaders), which no host's silence covers:
    ``roll_alerts.silence`` silences exactly those, in ``scope``, while the run's broker is down. A URL
    left out turns the steps that need it into no-ops that say so."""

    prometheus: str | None = None
    alertmanager: str | None = None
    host_matchers: tuple[tuple[str, str], ...] = ()
    scope: tuple[tuple[str, str], ...] = ()
    gates: tuple[MetricGate, ...] = ()
    roll_alerts: tuple[str, ...] = ()
    # How to reach Prometheus and Alertmanager when they are secured (inventory ``monitoring.auth``).
    auth: HttpAuth | None = None

    @staticmethod
    def _values(host: Host | None, cluster: str) -> dict[str, str]:
        values = {"cluster.name": cluster}
        if host is not None:
            values.update({"host.name": host.name, "host.fqdn": host.fqdn, "host.address": host.address,
                           "host.dc": host.dc, "host.rack": host.rack})
        return values

    def host_regexes(self, host: Host, cluster: str) -> tuple[tuple[str, str], ...]:
        """``host_matchers`` rendered for ``host``: (label, regex), every filled-in value regex-escaped
        (``kafka1001\\.lab\\.local:.*``), as an Alertmanager silence's regex matchers."""
        values = self._values(host, cluster)
        return tuple((label, fill_template(t, values, escape=True)) for label, t in self.host_matchers)

    def scope_labels(self, cluster: str) -> tuple[tuple[str, str], ...]:
        """``scope`` rendered: (label, exact value) every alert of the cluster carries."""
        values = self._values(None, cluster)
        return tuple((label, fill_template(t, values, escape=False)) for label, t in self.scope)


#: Kafka's client security protocols, as both librdkafka and the JVM name them.
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms kafkaops speaks to Kafka. GSSAPI (Kerberos) is not among them: the confluent-kafka
#: wheels are built without Cyrus SASL, so librdkafka cannot speak it (docs/security.md).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Secret:
    """A secret named by *where it lives* (a file, an environment variable), never by its value.

    The model holds only the name, so a plan, a journal, a fingerprint or a repr that prints a cluster
    cannot print a password: the value exists only in the client configuration built right before a
    connection (:meth:`reveal`), and a rotated password is picked up by the next connection.
    """

    file: str | None = None
    env: str | None = None

    def reveal(self) -> str:
        """The secret's value (one trailing newline stripped, as ``echo pw > file`` leaves one).

        Raises:
            OSError: The file cannot be read.
            KeyError: The environment variable is not set.
        """
        if self.file is not None:
            with open(self.file, encoding="utf-8") as f:
                value = f.read()
            return value[:-1] if value.endswith("\n") else value
        import os

        return os.environ[self.env or ""]

    @property
    def where(self) -> str:
        """Where the secret lives, for messages: ``file /etc/kafkaops/kafka.pw`` or ``$KAFKA_PASSWORD``."""
        return f"file {self.file}" if self.file is not None else f"${self.env}"


@dataclass(frozen=True)
class KafkaSecurity:
    """How a client proves itself to a cluster's brokers and checks them (inventory ``kafka.security``).

    One object for every client kafkaops makes (admin, consumer, producer, the broker probe, Kafka's Java
    tools, the Spark readers), so none can be the one that forgot TLS.
    """

    protocol: str = "PLAINTEXT"
    ca_file: str | None = None  # PEM CA bundle the brokers' certificates must chain to
    cert_file: str | None = None  # client certificate (mutual TLS)
    key_file: str | None = None  # its private key (unencrypted PEM, mode 0600)
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    username: str | None = None
    password: Secret | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def principal(self) -> str:
        """Who kafkaops is to the brokers, for messages: ``User:kafkaops``, or ``ANONYMOUS``."""
        if self.sasl and self.username:
            return f"User:{self.username}"
        return "the client certificate's subject" if self.cert_file else "ANONYMOUS"


PLAINTEXT = KafkaSecurity()


@dataclass(frozen=True)
class HttpAuth:
    """How kafkaops proves itself to an HTTP API behind authentication (Prometheus, Alertmanager) and
    checks it: a CA for https, and basic auth or a bearer token, each secret named by where it lives."""

    ca_file: str | None = None
    username: str | None = None
    password: Secret | None = None
    token: Secret | None = None


@dataclass(frozen=True)
class TlsFiles:
    """A TLS client's files: the CA the server's certificate chains to, and a client certificate and key
    (mutual TLS) — for etcd (inventory ``conftool.tls``)."""

    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How kafkaops connects to a cluster's ZooKeeper (inventory ``kafka.zookeeper_security``): TLS to its
    secure client port, and who kafkaops is there (ZooKeeper's ``digest`` scheme). An identity also guards
    the cluster lock: its znode is created with an ACL only that identity can change."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    username: str | None = None
    password: Secret | None = None

    @property
    def tls(self) -> bool:
        return self.ca_file is not None

    @property
    def authenticated(self) -> bool:
        return self.username is not None and self.password is not None


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where a cluster's brokers are and how to connect to them: what every Kafka client is built from.

    Client adapters take this rather than a bootstrap string, so that the security of the cluster cannot
    be left behind on the way to a client.
    """

    bootstrap_servers: str
    security: KafkaSecurity = PLAINTEXT
    cluster: str = ""

    @property
    def name(self) -> str:
        """The cluster's name, or its bootstrap servers when it has none (messages)."""
        return self.cluster or self.bootstrap_servers


@dataclass(frozen=True)
class Cluster:
    """A Kafka cluster as the inventory describes it — or (``sites``) the sites of a multi-DC deployment:
    one cluster per DC, MirrorMaker 2 between them, discovery records in conftool saying which is active."""

    name: str
    bootstrap_servers: str
    hosts: tuple[Host, ...]
    zookeeper: str | None = None  # ZooKeeper connect string; None for KRaft clusters
    etcd: str | None = None  # conftool backend (etcd v2 URL), None when pools are not managed
    conftool_config: str | None = None  # path to conftool's config.yaml
    commands: Mapping[str, str] = field(default_factory=dict)  # command templates
    deploy_host: Host | None = None
    source: str = ""  # the inventory file it came from
    environment: str = "production"  # "lab": a local lab, where a benchmark needs no --yes
    pool_weight: int = 10  # the weight every pooled host is expected to have (conftool.weight)
    # Manual checkpoints a runbook may require (name -> what the operator confirms), e.g. changeprop.
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    # KRaft controller-only nodes (the quorum's voters), apart from ``hosts`` (the brokers): every
    # broker procedure iterates ``hosts``; only a roll asked to (``--role controllers|all``) takes these.
    controllers: tuple[Host, ...] = ()
    # A ZooKeeper cluster being migrated to KRaft (inventory ``kafka.migration: to-kraft``): ``controllers``
    # are the quorum it migrates to, provisioned by ``migrate-to-kraft``; until it is finalized the cluster
    # still has its ZooKeeper.
    migrating: bool = False
    # A multi-site inventory: DC -> that site's cluster. Its own ``hosts`` are empty (each host belongs to
    # its site's cluster) and ``etcd``/``conftool_config`` are where the discovery records live.
    sites: Mapping[str, Cluster] = field(default_factory=dict)
    switched: Mapping[str, SwitchedService] = field(default_factory=dict)
    # Prometheus/Alertmanager of the cluster (inventory ``monitoring:``); None: the monitoring steps are no-ops.
    monitoring: Monitoring | None = None
    # How clients connect to the brokers (inventory ``kafka.security``): TLS, SASL, mutual TLS.
    kafka_security: KafkaSecurity = PLAINTEXT
    # How kafkaops connects to ZooKeeper (inventory ``kafka.zookeeper_security``); None: open.
    zookeeper_security: ZooKeeperSecurity | None = None
    # kafkaops' own TLS to etcd (inventory ``conftool.tls``: the lock of a cluster without ZooKeeper);
    # conftool itself reads its own configuration (``conftool.config``), as in production.
    etcd_tls: TlsFiles | None = None

    @property
    def kafka(self) -> KafkaEndpoint:
        """The brokers of this cluster as every Kafka client connects to them."""
        return KafkaEndpoint(self.bootstrap_servers, self.kafka_security, self.name)

    @property
    def kraft(self) -> bool:
        """A KRaft cluster: metadata in Kafka's own quorum, no ZooKeeper (every cluster on Kafka 4)."""
        return not self.zookeeper and not self.sites

    @property
    def multi_site(self) -> bool:
        return bool(self.sites)

    def site(self, dc: str) -> Cluster:
        """The cluster of site ``dc``; KeyError when the inventory has no such site."""
        return self.sites[dc]

    def host(self, name: str) -> Host | None:
        """Find a host (a broker, or a controller node) by short name or FQDN."""
        return next((h for h in (*self.hosts, *self.controllers) if name in (h.name, h.fqdn)), None)

    def by_broker_id(self, broker_id: int) -> Host | None:
        return next((h for h in self.hosts if h.broker_id == broker_id), None)


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster reports it. ``replicas[0]`` is the preferred leader."""

    topic: str
    partition: int
    leader: int | None  # None (or -1 on the wire) when offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def preferred_leader(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    @property
    def offline(self) -> bool:
        return self.leader is None or self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicConfig:
    name: str
    min_insync_replicas: int
    replication_factor: int
    cleanup_policy: str = "delete"


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the cluster looked like at one instant: brokers, controller, partitions, topic configs."""

    cluster: str
    taken_at: float  # unix seconds
    brokers: tuple[int, ...]  # registered (alive) broker ids
    controller: int | None
    partitions: tuple[PartitionState, ...]
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    #: Each broker's listener as the metadata advertises it (host, port): where a gate asks a broker
    #: directly whether it serves (:mod:`kafkaops.systems.broker_probe`). Empty when not read.
    endpoints: Mapping[int, tuple[str, int]] = field(default_factory=dict)

    def min_isr(self, topic: str, default: int = 1) -> int:
        cfg = self.topics.get(topic)
        return cfg.min_insync_replicas if cfg else default


@dataclass(frozen=True)
class PoolState:
    """conftool's view of one (host, service): what the load balancer will do with it."""

    host: str  # fqdn, conftool's object name
    service: str
    pooled: str  # "yes" | "no" | "inactive"
    weight: int

    @property
    def is_pooled(self) -> bool:
        return self.pooled == "yes"
