"""The run's environment: one root object that owns every adapter, the lock and the run's identity.

A run acts on one world: the cluster described by *one* inventory file, reached through adapters that
all know whether this is a dry-run. Before this object existed, each layer looked the cluster up again
by name (and a lookup that failed could silently turn a ZooKeeper lock into a local lock file); a
resumed run searched the inventories anew. Now the CLI builds an :class:`Environment` once — from the
inventory file, the cluster, and the dry-run switch (spicerack's ``Spicerack`` accessor is the model) —
and everything else asks it:

* **adapters** (Kafka, ZooKeeper, conftool, SSH), built lazily so a dry-run that never touches SSH
  does not need SSH, each built with ``dry_run`` so that its writes refuse themselves
  (:mod:`kafkaops.systems.guard`);
* **the lock**, chosen from the cluster and never degraded silently: ZooKeeper when the cluster has one,
  else the etcd that conftool uses, else a file lock in a *shared* directory — and :attr:`lock_label`
  says which, for the plan;
* **the run's identity** (:meth:`identity`): the inventory path and a hash of everything the run depends
  on (hosts, addresses, bootstrap, ZooKeeper, pools, command templates). The runner journals it when the
  run starts; ``resume`` and ``apply`` rebuild the environment from that record and refuse, naming the
  difference, when the inventory changed under the run (:func:`environment_changes`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaops import places
from kafkaops.errors import ConfigError, StalePlanError
from kafkaops.model import Cluster, Host

if TYPE_CHECKING:
    from kafkaops.engine.lock import LockBackend
    from kafkaops.systems.conftool import Conftool, Discovery
    from kafkaops.systems.groups import ConsumerGroups
    from kafkaops.systems.health_watch import HealthWatch
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops.systems.quorum import MetadataQuorum
    from kafkaops.systems.reassign import Reassigner
    from kafkaops.systems.run_samples import RunSampler
    from kafkaops.systems.ssh import CommandResult, SshClient, SshPool
    from kafkaops.systems.zookeeper import ZooKeeper

#: Where file locks live when a cluster has neither ZooKeeper nor etcd: a directory every operator of
#: the admin host shares (not a home directory, or two operators would not exclude each other).
DEFAULT_LOCK_DIR = places.DEFAULT_LOCK_DIR


class EnvironmentChanged(StalePlanError):
    """The inventory changed in something the run depends on since the run started (exit 8)."""


def dependencies(cluster: Cluster) -> dict[str, Any]:
    """Everything of the inventory a run depends on, as canonical JSON-able data.

    The whole cluster model except where it was read from: addresses, broker ids, bootstrap servers,
    ZooKeeper, etcd/conftool, SSH endpoints, services, pool tags and every command template.
    """
    data = dataclasses.asdict(cluster)
    data.pop("source", None)
    return json.loads(json.dumps(data, sort_keys=True, default=str))


def digest(deps: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(deps, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, Mapping) and "name" in v for v in value):
        return _flatten({str(v["name"]): v for v in value}, prefix)
    return {prefix: value}


#: What the journal writes in place of a secret-named value (it never stores secrets).
_REDACTED = "***"


def environment_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between a journaled :meth:`Environment.identity` and the current inventory, one
    line per key path (``bootstrap_servers: '127.0.10.1:9092' -> '127.0.10.9:9092'``).

    The hash decides; the journaled copy (secret-named values masked) names the difference."""
    deps = dict(current)
    if recorded.get("sha256") == digest(deps):
        return []
    old, new = _flatten(recorded.get("depends") or {}), _flatten(deps)
    lines = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, "<absent>"), new.get(key, "<absent>")
        if before != after and before != _REDACTED:
            lines.append(f"{key}: {before!r} -> {after!r}")
    return lines or ["a secret-named value (not journaled) changed"]


class RunFacts:
    """Facts a step must remember across a crash, beside the run's journal (``facts.json``).

    The journal records what the runner did; these record what the *world* was before a step changed
    it: the boot id before a reboot (so a resumed reboot step can tell it already happened), and the
    pool state before a depool (so the run repools only what it depooled — never a host someone else
    had taken out). Written atomically (temp file, fsync, rename, directory fsync) *before* the side
    effect. A dry-run keeps them in memory (``path`` None).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._mem: dict[str, Any] = {}

    def _load(self) -> dict[str, Any]:
        if self.path is None:
            return self._mem
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def set(self, key: str, value: Any) -> None:
        data = self._load()
        data[key] = value
        if self.path is None:
            self._mem = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".facts.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself must survive a power loss, or a resume reboots twice
        finally:
            os.close(dfd)


def parse_batch(spec: str) -> int | None:
    """``--batch``: ``auto`` (None: as many as safe) or a positive number.

    Raises:
        ValueError: Anything else.
    """
    text = str(spec).strip().lower()
    if text == "auto":
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"{spec!r} is not auto or a number of brokers (1 or more)")


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
        self._facts: dict[str, RunFacts] = {}
        self._health_watch: HealthWatch | None = None
        self._reassigner: Reassigner | None = None
        self._sites: dict[str, Environment] = {}
        self._discovery: Discovery | None = None

    # --- building ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, inventory: Path | str, **kwargs: Any) -> Environment:
        """The environment of the cluster described by ``inventory``."""
        from kafkaops.inventory import load_inventory

        return cls(load_inventory(inventory), inventory=inventory, **kwargs)

    def identity(self) -> dict[str, Any]:
        """What the journal records at run start: the inventory path, the cluster, the lock, and the hash
        (with the data) of everything the run depends on."""
        deps = dependencies(self.cluster)
        return {"inventory": str(self.inventory) if self.inventory else None, "cluster": self.cluster.name,
                "lock": self.lock_label, "sha256": digest(deps), "depends": deps}

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
        path = recorded.get("inventory")
        what = "plan" if for_plan else "run"
        if not path:
            raise ConfigError(f"the {what} did not record its inventory (made by an older kafkaops)",
                              hint="re-create the plan" if for_plan else
                              "finish it with that version, or abort it and start a new run")
        if not Path(path).is_file():
            raise ConfigError(f"the run's inventory {path} is gone",
                              hint="restore it (the run acts on the cluster it describes)")
        env = cls.load(path, **kwargs)
        if env.cluster.name != recorded.get("cluster"):
            raise ConfigError(f"{path} now describes cluster {env.cluster.name!r}, not the run's "
                              f"{recorded.get('cluster')!r}", hint="restore the inventory the run started with")
        changes = environment_changes(recorded, dependencies(env.cluster))
        if changes and not accept_changes:
            listed = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
            since = "the plan was made" if for_plan else "the run started"
            raise EnvironmentChanged(
                f"the inventory {path} changed since {since}: {listed}",
                hint="review a fresh plan: re-run with --dry-run --save-plan FILE" if for_plan else
                "restore it, or pass --accept-inventory-change to go on with the new values (recorded in the journal)")
        return env, changes

    def live(self) -> Environment:
        """The same environment with writes allowed: plans are made in a dry-run environment (its
        adapters refuse every write), the run then gets a fresh one of these."""
        return Environment(self.cluster, inventory=self.inventory, dry_run=False, home=self.home,
                           kafka_timeout=self.kafka_timeout, confirm=self.confirm, lock_dir=self.lock_dir)

    def order_hosts(self, hosts: list[Host], order: str) -> tuple[list[Host], list[str]]:
        """``hosts`` in the order a runbook's ``targets.order`` asks for, and a note for the plan.

        ``controller_last``: the current controller goes last, so a roll causes one controller election
        instead of one per broker bounce (an election per bounce caused outages: WMF T399005, Yelp #150).
        Asked of Kafka once, with one try: an unreachable cluster is reported in one request timeout.
        """
        if order != "controller_last":
            return list(hosts), []
        if self.cluster.kraft:
            return self._kraft_order(hosts)
        controller = self.kafka.controller(attempts=1)
        last = [h for h in hosts if h.broker_id == controller]
        if not last:
            return list(hosts), []
        return [h for h in hosts if h.broker_id != controller] + last, [
            f"controller {last[0].name} goes last (one controller election for the whole roll)"]

    def _kraft_order(self, hosts: list[Host]) -> tuple[list[Host], list[str]]:
        """A KRaft roll: controller nodes first, the quorum's leader last among them (one leader election
        for the whole roll); then the brokers in inventory order (no broker is the controller on KRaft)."""
        from kafkaops.policy.quorum import judge

        controllers = [h for h in hosts if h.role == "controller"]
        brokers = [h for h in hosts if h.role != "controller"]
        if not controllers:
            return brokers, []
        leader = judge(self.quorum().replication()).leader_id
        last = [h for h in controllers if h.broker_id == leader]
        ordered = [h for h in controllers if h.broker_id != leader] + last
        notes = [f"controller nodes first, the active controller {last[0].name} last (one quorum leader election "
                 "for the whole roll)" if last else "the quorum has no leader now: the quorum gate will refuse"]
        if brokers:
            notes.append("then the brokers, in inventory order, once the quorum is whole")
        return ordered + brokers, notes

    def batch_hosts(self, hosts: list[Host], spec: str, *, headroom: int = 0) -> tuple[list[list[Host]], list[str]]:
        """``hosts`` (in roll order) cut into the batches ``--batch`` asks for, and notes for the plan.

        ``1``: one at a time. ``auto``: the largest batches the live placement allows
        (:func:`kafkaops.batching.plan_batches`: a DC — or a rack, on a one-DC cluster — at once where every
        partition keeps min ISR + ``headroom``; the controller's batch last; hosts of a pooled service one
        at a time). ``N``: at most N per batch, judged the same way.
        """
        max_size = parse_batch(spec)
        if max_size == 1 or len(hosts) < 2:
            return [[h] for h in hosts], []
        controllers = [[h] for h in hosts if h.role == "controller"]
        if controllers:  # a quorum loses one voter at a time, whatever --batch says for the brokers
            batches, notes = self.batch_hosts([h for h in hosts if h.role != "controller"], spec, headroom=headroom)
            return controllers + batches, ["controller nodes one at a time (a quorum may lose only one voter)",
                                           *notes]
        from kafkaops.batching import plan_batches

        snap = self.kafka.snapshot(with_configs=True)
        by_id = {h.broker_id: h for h in hosts}
        several_dcs = len({h.dc for h in hosts}) > 1
        plan = plan_batches(snap, [h.broker_id for h in hosts],
                            group_of={h.broker_id: h.dc if several_dcs else h.rack for h in hosts},
                            headroom=headroom, max_size=max_size,
                            services={h.broker_id: [s.name for s in h.services] if h.conftool_tags else []
                                      for h in hosts})
        batches = [[by_id[b] for b in batch] for batch in plan.batches]
        shown = " then ".join("[" + ", ".join(h.name for h in b) + "]" for b in batches)
        return batches, [f"--batch {spec}: {len(batches)} batch(es), {plan.strategy}: {shown}",
                         *(f"batch boundary: {r}" for r in plan.reasons)]

    # --- adapters ----------------------------------------------------------------------------------

    @property
    def kafka(self) -> KafkaAdmin:
        if self._kafka is None:
            from kafkaops.systems.kafka import KafkaAdmin

            self._kafka = KafkaAdmin(self.cluster.bootstrap_servers, timeout=self.kafka_timeout,
                                     cluster=self.cluster.name, dry_run=self.dry_run, kraft=self.cluster.kraft)
        return self._kafka

    @property
    def conftool(self) -> Conftool:
        if self._conftool is None:
            if not self.cluster.conftool_config:
                raise ConfigError(f"cluster {self.cluster.name} has no conftool.config in {self.cluster.source}",
                                  hint="add conftool: {etcd: ..., config: /etc/conftool/config.yaml}")
            from kafkaops.systems.conftool import Conftool

            self._conftool = Conftool(self.cluster.conftool_config, dry_run=self.dry_run)
        return self._conftool

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
            from kafkaops.systems.conftool import Discovery

            self._discovery = Discovery(self.cluster.conftool_config, dry_run=self.dry_run)
        return self._discovery

    def groups(self, dc: str) -> ConsumerGroups:
        """Consumer groups on site ``dc``'s cluster (a new client: a translation asks a few times)."""
        from kafkaops.systems.groups import ConsumerGroups

        site = self.site(dc).cluster
        return ConsumerGroups(site.bootstrap_servers, cluster=site.name, timeout=self.kafka_timeout,
                              dry_run=self.dry_run)

    @contextmanager
    def zookeeper(self) -> Iterator[ZooKeeper | None]:
        """A ZooKeeper session, or None for KRaft clusters (callers fall back to Kafka metadata)."""
        if not self.cluster.zookeeper:
            yield None
            return
        from kafkaops.systems.zookeeper import ZooKeeper

        with ZooKeeper(self.cluster.zookeeper, timeout=self.kafka_timeout, dry_run=self.dry_run) as zk:
            yield zk

    def registered_brokers(self) -> list[int]:
        """Broker ids the cluster itself considers alive (ZooKeeper registrations, else metadata)."""
        with self.zookeeper() as zk:
            if zk is not None:
                return zk.registered_brokers()
        return sorted(self.kafka.metadata().brokers)

    def host(self, name: str) -> Host:
        """The inventory host ``name`` (short name or FQDN) of this run's cluster."""
        host = self.hosts.get(name)
        if host is not None:
            return host
        from kafkaops.inventory import resolve_host

        return resolve_host(self.cluster, name)

    def command(self, host: Host, name: str, **values: Any) -> str:
        """The host's command template ``name`` with ``{host...}`` and ``values`` filled in, every value
        shell-quoted (:mod:`kafkaops.templates`)."""
        from kafkaops.templates import check_values, render

        template = host.commands.get(name)
        if not template:
            raise ConfigError(f"no '{name}' command template for {host.name} in {self.cluster.source}",
                              hint=f"add commands.{name} to the inventory")
        check_values(values)
        return render(template, host=host, cluster=self.cluster, **values)

    def quorum(self) -> MetadataQuorum:
        """The KRaft metadata quorum, asked through ``kafka-metadata-quorum`` on the inventory's controller
        nodes (any that answers). Refused for a ZooKeeper-mode cluster, which has no such quorum."""
        if self._quorum is None:
            if not self.cluster.kraft:
                raise ConfigError(f"{self.cluster.name} runs in ZooKeeper mode: it has no KRaft metadata quorum",
                                  hint="its controller is a broker elected through ZooKeeper")
            from kafkaops.systems.quorum import MetadataQuorum

            self._quorum = MetadataQuorum(self, self.cluster.controllers or self.cluster.hosts)
        return self._quorum

    def reassigner(self) -> Reassigner:
        """Kafka's ``kafka-reassign-partitions`` on the first inventory broker that is registered (the
        inventory's ``kafka_reassign`` template): how a run moves replicas. Chosen once per environment:
        every observe and apply of a placement run asks it, and choosing asks ZooKeeper."""
        if self._reassigner is not None:
            return self._reassigner
        from kafkaops.systems.reassign import Reassigner

        alive = set(self.registered_brokers())
        host = next((h for h in self.cluster.hosts if h.broker_id in alive), None)
        if host is None:
            raise ConfigError(f"no broker of {self.cluster.name} is registered to run kafka-reassign-partitions on",
                              hint="start a broker first")
        self._reassigner = Reassigner(self.ssh(host), self.command(host, "kafka_reassign"), dry_run=self.dry_run)
        return self._reassigner

    def ssh(self, host: Host) -> SshClient:
        """The run's SSH connection to ``host`` (host keys checked), opened on first use."""
        if self._ssh is None:
            from kafkaops.systems.ssh import SshPool

            self._ssh = SshPool(dry_run=self.dry_run)
        return self._ssh.get(host.name, host.ssh)

    def run(self, host: Host, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        """Run a read-only command on ``host`` (boot id, status, logs)."""
        return self.ssh(host).run(command, timeout=timeout, check=check)

    def change(self, host: Host, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        """Run a command that changes ``host`` (stop, start, reboot, restart, deploy): refused in a dry-run."""
        return self.ssh(host).change(command, timeout=timeout, check=check)

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
                from kafkaops.engine.lock import SiteLocks
                from kafkaops.systems.etcd import EtcdLockBackend

                if not self.cluster.etcd:
                    raise ConfigError(f"{self.cluster.name} has no discovery.etcd to keep its run lock in "
                                      f"({self.cluster.source})", hint="add discovery: {etcd: http://HOST:2379}")
                sites = {site.name: self.site(dc).lock for dc, site in self.cluster.sites.items()}
                self._lock = SiteLocks(EtcdLockBackend(self.cluster.etcd, timeout=self.kafka_timeout), sites)
            elif self.cluster.zookeeper:
                from kafkaops.systems.zookeeper import ZooKeeperLockBackend

                self._lock = ZooKeeperLockBackend(self.cluster.zookeeper, timeout=self.kafka_timeout)
            elif self.cluster.etcd:
                from kafkaops.systems.etcd import EtcdLockBackend

                self._lock = EtcdLockBackend(self.cluster.etcd, timeout=self.kafka_timeout)
            else:
                from kafkaops.engine.lock import FileLockBackend

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

    # --- per-run state beside the journal -----------------------------------------------------------

    def facts(self, run_id: str) -> RunFacts:
        """The run's facts; in memory for a dry-run (no run id)."""
        if run_id not in self._facts:
            if not run_id:
                self._facts[run_id] = RunFacts(None)
            else:
                from kafkaops.engine.journal import runs_dir

                self._facts[run_id] = RunFacts(runs_dir(self.home) / run_id / "facts.json")
        return self._facts[run_id]

    def run_sampler(self, path: Path) -> RunSampler | None:
        """A sampler of the cluster's URP and produce rate for the run's chart, on its own client; None in a
        dry-run (a plan is not a run). The runner starts it for each process of a run."""
        if self.dry_run:
            return None
        from kafkaops.systems.kafka import KafkaAdmin
        from kafkaops.systems.run_samples import RunSampler, sample, sites_sample

        def admin(cluster: Cluster) -> KafkaAdmin:
            return KafkaAdmin(cluster.bootstrap_servers, timeout=5.0, cluster=cluster.name, attempts=1,
                              dry_run=True, kraft=cluster.kraft)  # it only reads

        if self.cluster.multi_site:
            sites = {dc: admin(site) for dc, site in self.cluster.sites.items()}
            return RunSampler(path, lambda: sites_sample({
                dc: sample(a.snapshot(with_configs=False), a.list_offsets, own_prefix=f"{dc}.")
                for dc, a in sites.items()}))
        one = admin(self.cluster)
        return RunSampler(path, lambda: sample(one.snapshot(with_configs=False), one.list_offsets))

    def health_watch(self) -> HealthWatch:
        """The run's background witness of cluster health (:mod:`kafkaops.systems.health_watch`), started on
        first use, on its own AdminClient so it never waits behind the run's requests."""
        if self._health_watch is None:
            from kafkaops.systems.health_watch import HealthWatch
            from kafkaops.systems.kafka import KafkaAdmin

            admin = KafkaAdmin(self.cluster.bootstrap_servers, timeout=5.0, cluster=self.cluster.name,
                               attempts=1, dry_run=True, kraft=self.cluster.kraft)  # it only reads
            self._health_watch = HealthWatch(lambda: admin.snapshot(with_configs=False),
                                             frozenset(h.broker_id for h in self.cluster.hosts))
            self._health_watch.start()
        return self._health_watch

    def urp_samples(self, run_id: str) -> list[tuple[float, int]]:
        from kafkaops.engine.journal import runs_dir
        from kafkaops.health.check import URP_SAMPLES, read_urp_samples

        return read_urp_samples(runs_dir(self.home) / run_id / URP_SAMPLES) if run_id else []

    def close(self) -> None:
        for site in self._sites.values():
            site.close()
        if self._health_watch is not None:
            self._health_watch.stop()
        if self._ssh is not None:
            self._ssh.close()
        close = getattr(self._lock, "close", None)
        if callable(close):
            close()
