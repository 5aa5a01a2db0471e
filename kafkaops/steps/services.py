"""The services a run's steps use: the cluster's adapters, built lazily, plus per-run facts.

The engine passes this object through untouched (it is opaque to it). Adapters are created on first
use so a dry-run of a runbook that never touches SSH does not need SSH, and one connection per host is
reused across the steps of a run.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaops.errors import ConfigError
from kafkaops.model import Cluster, Host

if TYPE_CHECKING:
    from kafkaops.systems.conftool import Conftool
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops.systems.ssh import CommandResult, SshClient, SshPool
    from kafkaops.systems.zookeeper import ZooKeeper


class RunFacts:
    """Facts a step must remember across a crash, beside the run's journal (``facts.json``).

    The journal records what the runner did; these record what the *world* was before a step changed
    it: the boot id before a reboot (so a resumed reboot step can tell it already happened), and the
    pool state before a depool (so the run repools only what it depooled — never a host someone else
    had taken out). Written atomically (temp file, fsync, rename) *before* the side effect.
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


class Services:
    """Adapters for one cluster, shared by all steps of a run."""

    def __init__(self, cluster: Cluster, *, home: Path | None = None, kafka_timeout: float = 10.0) -> None:
        self.cluster = cluster
        self.home = home
        self.kafka_timeout = kafka_timeout
        self._kafka: KafkaAdmin | None = None
        self._conftool: Conftool | None = None
        self._ssh: SshPool | None = None
        #: Asks the operator a yes/no question (the CLI's prompt; ``--yes`` answers yes). None: nobody to
        #: ask, so steps that need a decision pause the run instead (``kafkaops resume`` is the answer).
        self.confirm: Callable[[str], bool] | None = None

    # --- adapters ---------------------------------------------------------------------------------
    @property
    def kafka(self) -> KafkaAdmin:
        if self._kafka is None:
            from kafkaops.systems.kafka import KafkaAdmin

            self._kafka = KafkaAdmin(self.cluster.bootstrap_servers, timeout=self.kafka_timeout,
                                     cluster=self.cluster.name)
        return self._kafka

    @property
    def conftool(self) -> Conftool:
        if self._conftool is None:
            if not self.cluster.conftool_config:
                raise ConfigError(f"cluster {self.cluster.name} has no conftool.config in {self.cluster.source}",
                                  hint="add conftool: {etcd: ..., config: /etc/conftool/config.yaml}")
            from kafkaops.systems.conftool import Conftool

            self._conftool = Conftool(self.cluster.conftool_config)
        return self._conftool

    @contextmanager
    def zookeeper(self) -> Iterator[ZooKeeper | None]:
        """A ZooKeeper session, or None for KRaft clusters (callers fall back to Kafka metadata)."""
        if not self.cluster.zookeeper:
            yield None
            return
        from kafkaops.systems.zookeeper import ZooKeeper

        with ZooKeeper(self.cluster.zookeeper, timeout=self.kafka_timeout) as zk:
            yield zk

    def registered_brokers(self) -> list[int]:
        """Broker ids the cluster itself considers alive (ZooKeeper registrations, else metadata)."""
        with self.zookeeper() as zk:
            if zk is not None:
                return zk.registered_brokers()
        return sorted(self.kafka.metadata().brokers)

    def host(self, name: str) -> Host:
        from kafkaops.inventory import resolve_host

        return resolve_host(self.cluster, name)

    def command(self, host: Host, name: str, **values: Any) -> str:
        """The host's command template ``name`` with ``{host...}`` and ``values`` filled in."""
        template = host.commands.get(name)
        if not template:
            raise ConfigError(f"no '{name}' command template for {host.name} in {self.cluster.source}",
                              hint=f"add commands.{name} to the inventory")
        return template.format(host=host, cluster=self.cluster, **values)

    def ssh(self, host: Host) -> SshClient:
        """The run's SSH connection to ``host`` (host keys checked), opened on first use."""
        if self._ssh is None:
            from kafkaops.systems.ssh import SshPool

            self._ssh = SshPool()
        return self._ssh.get(host.name, host.ssh)

    def run(self, host: Host, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        """Run a command on ``host`` over SSH."""
        return self.ssh(host).run(command, timeout=timeout, check=check)

    def reconnect(self, host: Host) -> None:
        """Forget the SSH connection to ``host`` (after a reboot its old one is dead)."""
        if self._ssh is not None:
            self._ssh.get(host.name, host.ssh).close()

    def sample_urp(self, run_id: str, snapshot: Any) -> None:
        """Append (time, under-replicated partitions) to the run's ``urp.jsonl``: the post-check's chart
        shows what the cluster went through during the run, not only before and after."""
        if not run_id:
            return
        from kafkaops.engine.journal import runs_dir
        from kafkaops.health.check import URP_SAMPLES

        urp = sum(1 for p in snapshot.partitions if p.under_replicated)
        with open(runs_dir(self.home) / run_id / URP_SAMPLES, "a") as f:
            f.write(json.dumps([round(snapshot.taken_at, 3), urp]) + "\n")

    def urp_samples(self, run_id: str) -> list[tuple[float, int]]:
        from kafkaops.engine.journal import runs_dir
        from kafkaops.health.check import URP_SAMPLES, read_urp_samples

        return read_urp_samples(runs_dir(self.home) / run_id / URP_SAMPLES) if run_id else []

    def facts(self, run_id: str) -> RunFacts:
        if not run_id:
            return _DRY_FACTS.setdefault(id(self), RunFacts(None))
        from kafkaops.engine.journal import runs_dir

        return RunFacts(runs_dir(self.home) / run_id / "facts.json")

    def close(self) -> None:
        if self._ssh is not None:
            self._ssh.close()


_DRY_FACTS: dict[int, RunFacts] = {}
