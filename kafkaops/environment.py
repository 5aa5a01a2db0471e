"""The run's environment: the adapter locator — which adapter, lock and sampler serve this cluster.

A run acts on one world: the cluster described by *one* inventory file, reached through adapters that
all know whether this is a dry-run. Before this object existed, each layer looked the cluster up again
by name (and a lookup that failed could silently turn a ZooKeeper lock into a local lock file); a
resumed run searched the inventories anew. Now the CLI builds an :class:`Environment` once — from the
inventory file, the cluster, and the dry-run switch (spicerack's ``Spicerack`` accessor is the model) —
and everything else asks it:

* **adapters** (Kafka, ZooKeeper, conftool, SSH, the KRaft quorum, the reassigner, Prometheus), built lazily so a
  dry-run that never touches SSH does not need SSH, each built with ``dry_run`` so that its writes refuse
  themselves (:mod:`kafkaops.systems.guard`);
* **the lock**, chosen from the cluster and never degraded silently: ZooKeeper when the cluster has one,
  else the etcd that conftool uses, else a file lock in a *shared* directory — and :attr:`lock_label`
  says which, for the plan;
* **the run's sampler and stability watch** (:mod:`kafkaops.systems.run_samples`,
  :mod:`kafkaops.systems.stability_watch`), on clients of their own;
* **the run's identity** (:meth:`identity`, :meth:`from_identity`): the record is
  :mod:`kafkaops.run_identity`'s; this object only loads the inventory it names.

It implements the engine's :class:`~kafkaops.engine.context.RunEnvironment` protocol. What is decided
from what the adapters observe lives elsewhere: the roll's order and batches in :mod:`kafkaops.policy`,
the run's facts in :mod:`kafkaops.engine.run_facts`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaops import places
from kafkaops.engine.lock import FileLockBackend, SiteLocks
from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.inventory import load_inventory, resolve_host
from kafkaops.model import Cluster, ClusterSnapshot, Host
from kafkaops.policy.availability import as_alive
from kafkaops.run_identity import check_same_world, identity, recorded_inventory
from kafkaops.systems.alertmanager import Alertmanager
from kafkaops.systems.broker_probe import BrokerProbe, as_the_controller_sees
from kafkaops.systems.conftool import Conftool, Discovery
from kafkaops.systems.etcd import EtcdLockBackend
from kafkaops.systems.groups import ConsumerGroups
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.prometheus import Prometheus
from kafkaops.systems.quorum import MetadataQuorum
from kafkaops.systems.reassign import Reassigner
from kafkaops.systems.run_samples import cluster_sampler
from kafkaops.systems.ssh import SshPool
from kafkaops.systems.stability_watch import cluster_watch
from kafkaops.systems.zookeeper import ZooKeeper, ZooKeeperLockBackend
from kafkaops.templates import check_values, render

if TYPE_CHECKING:
    from kafkaops.engine.lock import LockBackend
    from kafkaops.systems.alertmanager import Alertmanager
    from kafkaops.systems.broker_probe import BrokerProbe
    from kafkaops.systems.conftool import Conftool, Discovery
    from kafkaops.systems.groups import ConsumerGroups
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops.systems.prometheus import Prometheus
    from kafkaops.systems.quorum import MetadataQuorum
    from kafkaops.systems.reassign import Reassigner
    from kafkaops.systems.run_samples import RunSampler
    from kafkaops.systems.ssh import CommandResult, SshClient, SshPool
    from kafkaops.systems.stability_watch import StabilityWatch
    from kafkaops.systems.zookeeper import ZooKeeper

#: Where file locks live when a cluster has neither ZooKeeper nor etcd: a directory every operator of
#: the admin host shares (not a home directory, or two operators would not exclude each other).
DEFAULT_LOCK_DIR = places.DEFAULT_LOCK_DIR


class Environment:
    """The root object of a run (see the module docstring).

    Args:
        cluster: The cluster, as loaded from ``inventory``.
        inventory: The inventory file the cluster came from (journaled).
        dry_run: Adapters refuse every write.
        home: kafkaops' state directory (journals, facts); default ``$KAFKAOPS_HOME``.
        kafka_timeout: Seconds per Kafka/ZooKeeper request.
        confirm: Asks the operator a yes/no question (``--yes`` answers yes); None: nobody to ask, so
            steps that need a decision pause the run instead (``kafkaops resume`` is the answer).
        lock_dir: Directory of file locks (clusters without ZooKeeper and etcd).
    """

    def __init__(self, cluster: Cluster, *, inventory: Path | str | None = None, dry_run: bool = False,
                 home: Path | None = None, kafka_timeout: float = 10.0,
                 confirm: Callable[[str], bool] | None = None, lock_dir: str | None = None) -> None:
        self.cluster = cluster
        self.inventory = Path(inventory or cluster.source).resolve() if (inventory or cluster.source) else None
        self.dry_run = dry_run
        self.home = home
        self.kafka_timeout = kafka_timeout
        self.confirm = confirm
        self.lock_dir = lock_dir or str(places.lock_dir())
        self.hosts: dict[str, Host] = {h.name: h for h in cluster.hosts}
        if cluster.deploy_host is not None:
            self.hosts.setdefault(cluster.deploy_host.name, cluster.deploy_host)
        self._kafka: KafkaAdmin | None = None
        self._conftool: Conftool | None = None
        self._ssh: SshPool | None = None
        self._lock: LockBackend | None = None
        self._quorum: MetadataQuorum | None = None
        self._stability_watch: StabilityWatch | None = None
        self._zk: ZooKeeper | None = None
        self._probe: BrokerProbe | None = None
        self._instant: dict[bool, ClusterSnapshot] | None = None
        self._pinned: dict[str, Any] | None = None
        self._reassigner: Reassigner | None = None
        self._sites: dict[str, Environment] = {}
        self._discovery: Discovery | None = None
        self._prometheus: Prometheus | None = None
        self._alertmanager: Alertmanager | None = None

    # --- building ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, inventory: Path | str, **kwargs: Any) -> Environment:
        """The environment of the cluster described by ``inventory``."""

        return cls(load_inventory(inventory), inventory=inventory, **kwargs)

    def identity(self) -> dict[str, Any]:
        """What the journal records at run start (:func:`kafkaops.run_identity.identity`)."""
        return identity(self.cluster, self.inventory, self.lock_label)

    @classmethod
    def from_identity(cls, recorded: Mapping[str, Any], *, accept_changes: bool = False,
                      for_plan: bool = False, **kwargs: Any) -> tuple[Environment, list[str]]:
        """Rebuild the environment a run started with, from its journaled :meth:`identity`.

        Args:
            recorded: A journaled or planned :meth:`identity`.
            accept_changes: Go on despite differences (they are returned, for the journal).
            for_plan: The record is a saved plan's: a changed inventory makes the plan stale (no accept).

        Returns:
            The environment and the differences found (empty, or accepted with ``accept_changes``).

        Raises:
            ConfigError: The inventory file is gone or no longer describes the run's cluster.
            EnvironmentChanged: It changed in what the run depends on (without ``accept_changes``).
        """
        path = recorded_inventory(recorded, for_plan=for_plan)
        env = cls.load(path, **kwargs)
        return env, check_same_world(recorded, env.cluster, path, accept_changes=accept_changes, for_plan=for_plan)

    @classmethod
    def of(cls, cluster: Cluster, **kwargs: Any) -> Environment:
        """The run environment of ``cluster``, from the inventory file it was loaded from (what a plan, a
        run and a status of that cluster are made in)."""
        return cls(cluster, inventory=cluster.source, **kwargs)

    def live(self) -> Environment:
        """The same environment with writes allowed: plans are made in a dry-run environment (its
        adapters refuse every write), the run then gets a fresh one of these.

        The connections the plan opened are handed over rather than opened again — the SSH sessions, the
        ZooKeeper session, the lock's store, the broker probes' logged-in connections: a run's first steps
        spent 0.2 s reconnecting to what its plan had just closed (issue 47). A connection carries no
        permission: every adapter around one is built anew in the live mode, and this environment is left
        without them (closing it closes nothing the run uses). A connection that died meanwhile (an operator
        long at the prompt) is opened again by its adapter, as after any loss."""
        live = Environment(self.cluster, inventory=self.inventory, dry_run=False, home=self.home,
                           kafka_timeout=self.kafka_timeout, confirm=self.confirm, lock_dir=self.lock_dir)
        if self._ssh is not None:
            live._ssh, self._ssh = self._ssh.handed_over(dry_run=False), None
        if self._zk is not None:
            live._zk = self._zk.handed_over(dry_run=False)
            if isinstance(self._lock, ZooKeeperLockBackend) and self._lock.zookeeper is self._zk:
                self._lock.zookeeper = live._zk  # the lock still shares the session
            self._zk = None
        live._probe, live._lock, self._probe, self._lock = self._probe, self._lock, None, None
        return live

    # --- adapters ----------------------------------------------------------------------------------

    @property
    def kafka(self) -> KafkaAdmin:
        if self._kafka is None:

            self._kafka = KafkaAdmin.for_cluster(self.cluster, timeout=self.kafka_timeout, dry_run=self.dry_run)
        return self._kafka

    @property
    def conftool(self) -> Conftool:
        if self._conftool is None:
            if not self.cluster.conftool_config:
                raise ConfigError(f"cluster {self.cluster.name} has no conftool.config in {self.cluster.source}",
                                  hint="add conftool: {etcd: ..., config: /etc/conftool/config.yaml}")

            self._conftool = Conftool(self.cluster.conftool_config, dry_run=self.dry_run)
        return self._conftool

    @property
    def prometheus(self) -> Prometheus:
        """The cluster's Prometheus (inventory ``monitoring.prometheus``), read-only: the metric gates ask it."""
        if self._prometheus is None:
            mon = self.cluster.monitoring
            if mon is None or not mon.prometheus:
                raise ConfigError(f"cluster {self.cluster.name} has no monitoring.prometheus in {self.cluster.source}",
                                  hint="add monitoring: {prometheus: http://HOST:9090, gates: [...]}")

            self._prometheus = Prometheus(mon.prometheus, timeout=self.kafka_timeout, auth=mon.auth)
        return self._prometheus

    @property
    def alertmanager(self) -> Alertmanager:
        """The cluster's Alertmanager (inventory ``monitoring.alertmanager``): its alerts and silences."""
        if self._alertmanager is None:
            monitoring = self.cluster.monitoring
            if monitoring is None or not monitoring.alertmanager:
                raise ConfigError(f"cluster {self.cluster.name} has no monitoring.alertmanager in "
                                  f"{self.cluster.source}", hint="add monitoring: {alertmanager: http://HOST:9093}")

            self._alertmanager = Alertmanager(monitoring.alertmanager, timeout=self.kafka_timeout,
                                              dry_run=self.dry_run, auth=monitoring.auth)
        return self._alertmanager

    # --- a multi-site inventory's sites ---------------------------------------------------------------

    def site(self, dc: str) -> Environment:
        """The environment of site ``dc`` of a multi-site inventory (its Kafka, conftool, hosts), sharing
        this one's dry-run, state directory and journal."""
        if dc not in self.cluster.sites:
            known = ", ".join(self.cluster.sites) or "none (not a multi-site inventory)"
            raise ConfigError(f"{self.cluster.name} has no site {dc!r} ({self.cluster.source})", hint=f"sites: {known}")
        if dc not in self._sites:
            site = self.cluster.sites[dc]
            self._sites[dc] = Environment(site, inventory=site.source, dry_run=self.dry_run, home=self.home,
                                          kafka_timeout=self.kafka_timeout, confirm=self.confirm,
                                          lock_dir=self.lock_dir)
        return self._sites[dc]

    @property
    def discovery(self) -> Discovery:
        """The discovery records (conftool) of a multi-site inventory."""
        if self._discovery is None:
            if not self.cluster.conftool_config:
                raise ConfigError(f"{self.cluster.name} has no discovery.config in {self.cluster.source}",
                                  hint="add discovery: {etcd: ..., config: /etc/conftool/config.yaml}")

            self._discovery = Discovery(self.cluster.conftool_config, dry_run=self.dry_run)
        return self._discovery

    def groups(self, dc: str) -> ConsumerGroups:
        """Consumer groups on site ``dc``'s cluster (a new client: a translation asks a few times)."""

        site = self.site(dc).cluster
        return ConsumerGroups(site.kafka, timeout=self.kafka_timeout,
                              dry_run=self.dry_run)

    @contextmanager
    def zookeeper(self) -> Iterator[ZooKeeper | None]:
        """The run's ZooKeeper session (:meth:`_session`), or None for KRaft clusters (callers fall back to Kafka
        metadata). Leaving the block keeps the session: the next step's read needs it again."""
        yield self._session() if self.cluster.zookeeper else None

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        """The cluster's metadata with only the brokers that are alive (:func:`~kafkaops.policy.
        availability.as_alive`): registered in ZooKeeper (ZooKeeper mode) and serving when asked
        directly (:mod:`kafkaops.systems.broker_probe`); in ZooKeeper mode each ISR also as the controller
        itself has it (:func:`~kafkaops.policy.availability.as_both_see`). That is what the run's health
        gates judge, so that neither one broker's stale metadata, nor a broker cut off from its peers, nor
        a broker whose host crashed a second ago can make them pass. ZooKeeper unreadable from here: its
        registrations and the controller's view are not applied — the run cannot confirm its lock then
        either, and the fencing before each destructive step stops it (docs/reliability.md)."""

        if self._instant is not None:
            pinned = self._instant.get(with_configs) or (self._instant.get(True) if not with_configs else None)
            if pinned is None:
                pinned = self._instant[with_configs] = self._live_snapshot(with_configs)
            return pinned
        return self._live_snapshot(with_configs)

    @contextmanager
    def one_instant(self) -> Iterator[None]:
        """Every :meth:`snapshot` inside the block is the first one taken in it: a plan is made of one instant
        of the cluster.

        Planning observes every step of every host — a roll of three brokers took 26 snapshots, each a
        Metadata request, the topics' configs, a probe of every broker and the controller's own view — and
        nothing changes while it does (a dry-run writes nothing; what the steps planned before will change
        is the projection's, not the snapshot's). With one snapshot, each step's projection can also resume
        from the step before (:mod:`kafkaops.stepkit.projection`). Only planning pins: a run's gates and
        waits always take a fresh snapshot. The metric gates' values are pinned the same way
        (:meth:`in_this_instant`): a plan asked Prometheus the same queries once per host."""
        self._instant, self._pinned = {}, {}
        try:
            yield
        finally:
            self._instant, self._pinned = None, None

    def in_this_instant(self, key: str, ask: Callable[[], Any]) -> Any:
        """``ask()`` — once per :meth:`one_instant` block, which then answers every later call with ``key``
        from the first; outside a block, asked every time (a run's gates always ask afresh)."""
        if self._pinned is None:
            return ask()
        if key not in self._pinned:
            self._pinned[key] = ask()
        return self._pinned[key]

    def _live_snapshot(self, with_configs: bool) -> ClusterSnapshot:
        snap = self.kafka.snapshot(with_configs=with_configs)
        alive = self.probe.serving(snap.endpoints, snap.brokers)
        if not self.cluster.zookeeper:
            return as_alive(snap, alive)
        try:
            zk = self._session()
            alive &= self._registered(zk, snap.endpoints)
        except UnreachableError:
            return as_alive(snap, alive)
        return as_alive(as_the_controller_sees(snap, zk, self.probe), alive)

    @property
    def probe(self) -> BrokerProbe:
        """The run's direct probe of each broker's listener: one object per run, its answers never cached
        (every snapshot asks each broker again: a gate decides a stop on it, and a crash a second ago
        must show)."""
        if self._probe is None:

            self._probe = BrokerProbe(self.cluster.kafka)
        return self._probe

    def _session(self) -> ZooKeeper:
        """The one ZooKeeper session this environment keeps, for every read and write of the run (a wait polls
        the registrations twice a second; a run of three brokers read ZooKeeper about 70 times). A session
        costs a TCP connection, TLS, the digest login and kazoo's threads — 37 ms each on the lab
        (bench/results/round-trips-2026-12-07.json), about a second of a roll when every read opened its own.
        A lost or expired session is not reused:
        :meth:`ZooKeeper.open` connects anew, and every call maps a loss to
        :class:`~kafkaops.errors.UnreachableError`."""
        return self._zookeeper().open()

    def _zookeeper(self) -> ZooKeeper:
        """The object of the environment's one ZooKeeper session (:meth:`_session`), not connected yet. The
        lock's store shares it: a second session cost another TLS handshake and login in every plan."""
        if self._zk is None:
            self._zk = ZooKeeper.for_cluster(self.cluster, timeout=self.kafka_timeout, dry_run=self.dry_run)
        return self._zk

    def _registered(self, zk: ZooKeeper, endpoints: Mapping[int, tuple[str, int]]) -> set[int]:
        """The brokers registered in ZooKeeper; during a migration to KRaft also the metadata's brokers that
        answer on their own listener. Seen on the migration lab: a broker moved to KRaft mode registers with
        the quorum only, never in ``/brokers/ids``; and the quorum keeps listing a migrating ZooKeeper-mode
        broker minutes after its stop — so the metadata alone would never see that stop."""
        registered = set(zk.registered_brokers())
        if not self.cluster.migrating:
            return registered
        return registered | self.probe.serving(endpoints, set(endpoints) - registered)

    def registered_brokers(self) -> list[int]:
        """Broker ids the cluster itself considers alive (ZooKeeper registrations, else metadata; during a
        migration to KRaft, see :meth:`_registered`)."""
        with self.zookeeper() as zk:
            if zk is not None:
                if not self.cluster.migrating:
                    return zk.registered_brokers()
                md = self.kafka.metadata()
                return sorted(self._registered(zk, {int(b): (str(m.host), int(m.port))
                                                    for b, m in md.brokers.items()}))
        return sorted(self.kafka.metadata().brokers)

    def host(self, name: str) -> Host:
        """The inventory host ``name`` (short name or FQDN) of this run's cluster."""
        host = self.hosts.get(name)
        if host is not None:
            return host

        return resolve_host(self.cluster, name)

    def command(self, host: Host, name: str, **values: Any) -> str:
        """The host's command template ``name`` with ``{host...}`` and ``values`` filled in, every value
        shell-quoted (:mod:`kafkaops.templates`)."""

        template = host.commands.get(name)
        if not template:
            raise ConfigError(f"no '{name}' command template for {host.name} in {self.cluster.source}",
                              hint=f"add commands.{name} to the inventory")
        check_values(values)
        return render(template, host=host, cluster=self.cluster, **values)

    def quorum(self) -> MetadataQuorum:
        """The KRaft metadata quorum, asked through ``kafka-metadata-quorum`` on the inventory's controller
        nodes (any that answers); during a migration, the quorum it moves to. Refused for a ZooKeeper-mode
        cluster, which has no such quorum."""
        if self._quorum is None:
            if not self.cluster.kraft and not self.cluster.migrating:
                raise ConfigError(f"{self.cluster.name} runs in ZooKeeper mode: it has no KRaft metadata quorum",
                                  hint="its controller is a broker elected through ZooKeeper")

            self._quorum = MetadataQuorum(self.cluster.controllers or self.cluster.hosts, ssh=self.ssh,
                                          command=lambda node: self.command(node, "kafka_metadata_quorum"),
                                          endpoint=self.cluster.kafka)
        return self._quorum

    def reassigner(self) -> Reassigner:
        """Kafka's ``kafka-reassign-partitions`` on the first inventory broker that is registered (the
        inventory's ``kafka_reassign`` template): how a run moves replicas. Chosen once per environment:
        every observe and apply of a placement run asks it, and choosing asks ZooKeeper."""
        if self._reassigner is not None:
            return self._reassigner

        alive = set(self.registered_brokers())
        host = next((h for h in self.cluster.hosts if h.broker_id in alive), None)
        if host is None:
            raise ConfigError(f"no broker of {self.cluster.name} is registered to run kafka-reassign-partitions on",
                              hint="start a broker first")
        self._reassigner = Reassigner(self.ssh(host), self.command(host, "kafka_reassign"), self.cluster.kafka,
                                          dry_run=self.dry_run)
        return self._reassigner

    def ssh(self, host: Host) -> SshClient:
        """The run's SSH connection to ``host`` (host keys checked), opened on first use."""
        if self._ssh is None:

            self._ssh = SshPool(dry_run=self.dry_run)
        return self._ssh.get(host.name, host.ssh)

    def run(self, host: Host, command: str, *, timeout: float = 60.0, check: bool = True,
            stdin: bytes | None = None) -> CommandResult:
        """Run a read-only command on ``host`` (boot id, status, logs)."""
        return self.ssh(host).run(command, timeout=timeout, check=check, stdin=stdin)

    def change(self, host: Host, command: str, *, timeout: float = 60.0, check: bool = True,
               stdin: bytes | None = None) -> CommandResult:
        """Run a command that changes ``host`` (stop, start, reboot, restart, deploy): refused in a dry-run."""
        return self.ssh(host).change(command, timeout=timeout, check=check, stdin=stdin)

    def reconnect(self, host: Host) -> None:
        """Forget the SSH connection to ``host`` (after a reboot its old one is dead)."""
        if self._ssh is not None:
            self._ssh.get(host.name, host.ssh).close()

    # --- the lock ------------------------------------------------------------------------------------

    @property
    def lock(self) -> LockBackend:
        """The cluster's lock: ZooKeeper, else conftool's etcd, else a file in a shared directory.

        A multi-site inventory's run also holds every site's own lock (:class:`SiteLocks`), so that no
        roll starts on a site while a switchover moves clients to it or from it.
        """
        if self._lock is None:
            if self.cluster.multi_site:

                if not self.cluster.etcd:
                    raise ConfigError(f"{self.cluster.name} has no discovery.etcd to keep its run lock in "
                                      f"({self.cluster.source})", hint="add discovery: {etcd: http://HOST:2379}")
                sites = {site.name: self.site(dc).lock for dc, site in self.cluster.sites.items()}
                self._lock = SiteLocks(EtcdLockBackend(self.cluster.etcd, timeout=self.kafka_timeout,
                                                       tls=self.cluster.etcd_tls), sites)
            elif self.cluster.zookeeper:

                self._lock = ZooKeeperLockBackend(self.cluster.zookeeper, timeout=self.kafka_timeout,
                                                  security=self.cluster.zookeeper_security,
                                                  zookeeper=self._zookeeper())
            elif self.cluster.etcd:

                self._lock = EtcdLockBackend(self.cluster.etcd, timeout=self.kafka_timeout, tls=self.cluster.etcd_tls)
            else:

                self._lock = FileLockBackend(Path(self.lock_dir))
        return self._lock

    @property
    def lock_label(self) -> str:
        """Which lock guards runs on this cluster, in words (shown in the plan and journaled)."""
        if self.cluster.multi_site:
            sites = "; ".join(f"{site.name}: {self.site(dc).lock_label}" for dc, site in self.cluster.sites.items())
            return f"etcd {self.cluster.etcd} key /kafkaops/locks/{self.cluster.name}, and each site's ({sites})"
        if self.cluster.zookeeper:
            return f"ZooKeeper {self.cluster.zookeeper} znode /kafkaops/locks/{self.cluster.name}"
        if self.cluster.etcd:
            return f"etcd {self.cluster.etcd} key /kafkaops/locks/{self.cluster.name}"
        return f"lock file {self.lock_dir}/{self.cluster.name}.lock (this admin host only)"

    # --- the run's background witnesses ---------------------------------------------------------------

    def run_sampler(self, run_dir: Path) -> RunSampler | None:
        """A sampler of the cluster's URP and produce rate for the run's chart, into the run's directory
        ``run_dir`` (:func:`kafkaops.systems.run_samples.cluster_sampler`); None in a dry-run (a plan is not
        a run). The runner starts it for each process of a run."""
        if self.dry_run:
            return None

        return cluster_sampler(self.cluster, run_dir)

    def stability_watch(self) -> StabilityWatch:
        """The run's background witness of cluster health (:mod:`kafkaops.systems.stability_watch`), started on
        first use, stopped with the environment."""
        if self._stability_watch is None:

            self._stability_watch = cluster_watch(self.cluster)
        return self._stability_watch

    def close(self) -> None:
        for site in self._sites.values():
            site.close()
        if self._stability_watch is not None:
            self._stability_watch.stop()
        if self._zk is not None:
            self._zk.close()
        if self._probe is not None:
            self._probe.close()
        if self._alertmanager is not None:
            self._alertmanager.close()
        if self._ssh is not None:
            self._ssh.close()
        close = getattr(self._lock, "close", None)
        if callable(close):
            close()
