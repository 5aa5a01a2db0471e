"""The lab's layout, derived once from ``inventory/lab.yaml`` and saved as ``$KAFKAOPS_LAB_DIR/lab.json``.

Commands that run *on* a lab host over SSH (``hostctl``) read this file instead of the inventory:
they must work whatever inventory path the operator used, the way systemd units on a real host do
not read the operator's inventory either.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from kafkaops.errors import LabError
from kafkaops_lab import dirs

if TYPE_CHECKING:
    from kafkaops.model import Cluster


@dataclass(frozen=True)
class LabHostSpec:
    name: str
    fqdn: str
    address: str
    broker_id: int
    rack: str
    dc: str
    ssh_port: int
    kafka_port: int
    http_port: int
    conftool_tags: dict[str, str] = field(default_factory=dict)
    eventbus: bool = True  # the host serves eventbus (the inventory gives it services)
    role: str = "broker"  # or "controller": a KRaft controller-only node (kafka_port is its controller listener)


@dataclass(frozen=True)
class LabSpec:
    cluster: str
    lab_dir: str
    python: str
    java: str
    kafka_jars: str
    zk_address: str
    zk_port: int
    etcd_address: str
    etcd_port: int
    conftool_config: str
    bootstrap_servers: str
    vip_address: str
    vip_port: int
    hosts: tuple[LabHostSpec, ...]
    #: The deploy server (only an sshd and the releases), when the inventory has a ``deploy_host``.
    deploy: LabHostSpec | None = None
    #: ``zookeeper`` (Kafka 3.9, the default lab), ``kraft`` (Kafka 4.x, controller nodes, no ZooKeeper) or
    #: ``migration`` (Kafka 3.9 in ZooKeeper mode, with KRaft controller hosts prepared but not running).
    mode: str = "zookeeper"
    #: The KRaft cluster id every node's storage is formatted with (``kafka-storage format -t``).
    cluster_id: str = ""
    #: The lab's monitoring (:mod:`kafkaops_lab.monitoring`): Prometheus, Alertmanager and the alert
    #: receiver, on addresses .30, .31, .32 of the lab's own /24; and the JMX exporter agent jar every
    #: Kafka JVM loads.
    prometheus_address: str = ""
    alertmanager_address: str = ""
    receiver_address: str = ""
    jmx_agent: str = ""
    #: Each broker's heap (``-Xmx``): 320m holds the lab's ~30 partitions with room to spare; a bench that grows
    #: the lab to thousands of partitions starts it with ``lab up --broker-heap 1g`` (at 10,000 partitions the
    #: 320m brokers died of OutOfMemoryError, the JMX exporter's scrape among the allocations).
    broker_heap: str = "320m"
    #: The brokers' listeners (:mod:`kafkaops_lab.security`): PLAINTEXT, or SASL_SSL with SCRAM-SHA-512,
    #: as the inventory's ``kafka.security`` says; with the CA and password files it names for kafkaops.
    kafka_protocol: str = "PLAINTEXT"
    kafka_ca_file: str = ""
    kafka_password_file: str = ""
    #: Alertmanager behind basic auth (inventory ``monitoring.auth``): kafkaops' user and its password file;
    #: empty: an open Alertmanager.
    monitoring_user: str = ""
    monitoring_password_file: str = ""
    #: kafkaops' ZooKeeper identity (inventory ``kafka.zookeeper_security.digest``): its password file, which
    #: ``lab up`` fills; ZooKeeper's digest scheme needs nothing of the server.
    zookeeper_password_file: str = ""
    #: ZooKeeper's TLS port for kafkaops (inventory ``kafka.zookeeper_security`` with a CA: the inventory's
    #: ``kafka.zookeeper`` names it), client certificates required; kafkaops' certificate and key, which
    #: ``lab up`` makes where the inventory says. The brokers and the lab itself use the plaintext port
    #: just below it (``zk_port``). 0: no TLS port.
    zk_secure_port: int = 0
    zookeeper_cert_file: str = ""
    zookeeper_key_file: str = ""
    #: etcd over TLS with client certificates (inventory ``conftool.tls``): kafkaops' client certificate and
    #: key, which ``lab up`` makes (signed by the lab CA) where the inventory says; empty: plain http.
    etcd_cert_file: str = ""
    etcd_key_file: str = ""

    @property
    def etcd_scheme(self) -> str:
        return "https" if self.etcd_cert_file else "http"

    @property
    def needs_ca(self) -> bool:
        """The lab makes a CA: for the brokers' certificates, etcd's or ZooKeeper's."""
        return self.secured or bool(self.etcd_cert_file) or bool(self.zk_secure_port)

    @property
    def secured(self) -> bool:
        """Brokers on SASL_SSL listeners: TLS and SCRAM for clients and brokers alike."""
        return self.kafka_protocol == "SASL_SSL"

    @property
    def kraft(self) -> bool:
        return self.mode == "kraft"

    @property
    def migration(self) -> bool:
        """The migration lab: a ZooKeeper-mode cluster (Kafka 3.9) with KRaft controller hosts prepared."""
        return self.mode == "migration"

    @property
    def brokers(self) -> tuple[LabHostSpec, ...]:
        return tuple(h for h in self.hosts if h.role == "broker")

    @property
    def controllers(self) -> tuple[LabHostSpec, ...]:
        return tuple(h for h in self.hosts if h.role == "controller")

    @property
    def quorum_voters(self) -> str:
        """``controller.quorum.voters``: a static quorum, ``id@host:port`` for each controller node (the
        migration lab: Kafka's ZooKeeper migration runs on a static quorum)."""
        return ",".join(f"{h.broker_id}@{h.address}:{h.kafka_port}" for h in self.controllers)

    @property
    def quorum_bootstrap(self) -> str:
        """``controller.quorum.bootstrap.servers``: where a node of a dynamic quorum (KIP-853, the KRaft lab)
        finds the quorum; the voters themselves are in the metadata log, not in any node's configuration."""
        return ",".join(f"{h.address}:{h.kafka_port}" for h in self.controllers)

    def initial_controllers(self, directory_ids: dict[str, str]) -> str:
        """``kafka-storage format --initial-controllers``: ``id@host:port:directory-id`` of each controller the
        quorum starts with (the same value on every controller; ``directory_ids`` by host name)."""
        return ",".join(f"{h.broker_id}@{h.address}:{h.kafka_port}:{directory_ids[h.name]}"
                        for h in self.controllers if h.name in directory_ids)

    @property
    def dcs(self) -> tuple[str, ...]:
        """The DCs the lab's brokers are in, in inventory order (two for the stretch lab)."""
        return tuple(dict.fromkeys(h.dc for h in self.brokers))

    def host(self, name: str) -> LabHostSpec:
        for h in self.hosts:
            if name in (h.name, h.fqdn):
                return h
        raise LabError(f"unknown lab host {name!r}", hint=f"lab hosts: {', '.join(h.name for h in self.hosts)}")

    @property
    def zk_connect(self) -> str:
        return f"{self.zk_address}:{self.zk_port}"

    def save(self) -> None:
        path = Path(self.lab_dir) / "lab.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, lab_dir: Path | None = None) -> LabSpec:
        path = (lab_dir or dirs.lab_dir()) / "lab.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise LabError(f"no lab at {path.parent}", hint="run `kafkaops lab up` first") from exc
        data["hosts"] = tuple(LabHostSpec(**h) for h in data["hosts"])
        data["deploy"] = LabHostSpec(**data["deploy"]) if data.get("deploy") else None
        # A lab started by another version of kafkaops may record fields this one does not know: `lab down`
        # must still stop it (its pids are in the run directory, not in these fields).
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _split(hostport: str, what: str) -> tuple[str, int]:
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise LabError(f"lab inventory: {what} {hostport!r} is not host:port")
    return host, int(port)


def from_inventory(cluster: Cluster) -> LabSpec:
    """Derive the lab layout from the lab inventory; refuse anything that is not loopback."""
    if not cluster.etcd or not cluster.conftool_config:
        raise LabError(f"{cluster.source}: a lab inventory needs conftool.etcd and conftool.config")
    if cluster.kraft and not cluster.controllers:
        raise LabError(f"{cluster.source}: a lab inventory needs kafka.zookeeper (ZooKeeper mode) or "
                       "controllers: (KRaft mode)")
    zk_address, zk_port = _split(cluster.zookeeper, "kafka.zookeeper") if cluster.zookeeper else ("", 0)
    etcd_address, etcd_port = _split(cluster.etcd.removeprefix("http://").removeprefix("https://"), "conftool.etcd")
    vip_address, vip_port = "", 0
    hosts = []
    brokers = dict(_split(hp, "bootstrap server") for hp in cluster.bootstrap_servers.split(","))
    for h in cluster.hosts:
        svc = h.services[0] if h.services else None
        if svc and svc.vip:
            vip_address, vip_port = svc.vip, svc.port
        hosts.append(LabHostSpec(
            name=h.name, fqdn=h.fqdn, address=h.address, broker_id=h.broker_id, rack=h.rack, dc=h.dc,
            ssh_port=h.ssh.port or 22, kafka_port=brokers.get(h.address, 9092),
            http_port=svc.port if svc else 8085, conftool_tags=dict(h.conftool_tags), eventbus=svc is not None,
        ))
    for c in cluster.controllers:
        hosts.append(LabHostSpec(
            name=c.name, fqdn=c.fqdn, address=c.address, broker_id=c.broker_id, rack=c.rack, dc=c.dc,
            ssh_port=c.ssh.port or 22, kafka_port=CONTROLLER_PORT, http_port=0, eventbus=False, role="controller",
        ))
    deploy = None
    if cluster.deploy_host is not None:
        d = cluster.deploy_host
        deploy = LabHostSpec(name=d.name, fqdn=d.fqdn, address=d.address, broker_id=-1, rack="", dc="",
                             ssh_port=d.ssh.port or 22, kafka_port=0, http_port=0)
    addresses = [zk_address, etcd_address, vip_address, *(h.address for h in hosts), deploy.address if deploy else ""]
    for address in filter(None, addresses):
        if not address.startswith("127."):
            raise LabError(f"{cluster.source}: lab address {address!r} is not loopback (127.0.0.0/8)",
                           hint="the lab only ever binds loopback addresses")
    java = shutil.which("java")
    if java is None:
        raise LabError("java not found on PATH", hint="run scripts/install.sh (installs OpenJDK)")
    # The monitoring's addresses: the lab's /24 (its etcd's, which every lab inventory has), hosts .30-.32.
    # Every lab (default, KRaft, each site, stretch, bench) has a /24 of its own, so they run side by side.
    subnet = etcd_address.rpartition(".")[0]
    prometheus, alertmanager, receiver = (f"{subnet}.{n}" for n in MONITORING_HOSTS)
    taken = {h.address for h in hosts} | {zk_address, etcd_address, vip_address}
    if taken & {prometheus, alertmanager, receiver}:
        raise LabError(f"{cluster.source}: the lab's monitoring needs {prometheus}, {alertmanager} and {receiver}",
                       hint=f"keep .{', .'.join(map(str, MONITORING_HOSTS))} of {subnet}.0/24 free of lab hosts")
    zk_cert, zk_key = _zookeeper_tls(cluster)
    zk_secure_port = zk_port if zk_cert else 0
    return LabSpec(
        cluster=cluster.name, lab_dir=str(dirs.lab_dir(cluster.name)), python=sys.executable, java=java,
        kafka_jars=str(dirs.kafka_jars(kraft=cluster.kraft)), zk_address=zk_address,
        zk_port=zk_port - 1 if zk_secure_port else zk_port, zk_secure_port=zk_secure_port,
        zookeeper_cert_file=zk_cert, zookeeper_key_file=zk_key,
        etcd_address=etcd_address, etcd_port=etcd_port, conftool_config=cluster.conftool_config,
        bootstrap_servers=cluster.bootstrap_servers, vip_address=vip_address, vip_port=vip_port,
        hosts=tuple(hosts), deploy=deploy, mode=_mode(cluster),
        cluster_id=_kraft_cluster_id() if cluster.kraft else "",
        prometheus_address=prometheus, alertmanager_address=alertmanager, receiver_address=receiver,
        jmx_agent=str(dirs.jmx_agent()),
        **_security(cluster),
        **_monitoring_auth(cluster),
        **_zookeeper_identity(cluster),
        **_etcd_tls(cluster),
    )


def _etcd_tls(cluster: Cluster) -> dict[str, str]:
    tls = cluster.etcd_tls
    if tls is None:
        return {}
    if not (cluster.etcd or "").startswith("https://") or not tls.cert_file or not tls.key_file:
        raise LabError(f"{cluster.source}: a lab's conftool.tls is a client certificate and key for an "
                       "https:// conftool.etcd (lab up makes them, with etcd's, signed by the lab CA)")
    return {"etcd_cert_file": tls.cert_file, "etcd_key_file": tls.key_file}


def _zookeeper_identity(cluster: Cluster) -> dict[str, str]:
    sec = cluster.zookeeper_security
    if sec is None or not sec.authenticated:
        return {}
    if sec.password is None or sec.password.file is None:
        raise LabError(f"{cluster.source}: a lab's kafka.zookeeper_security digest identity has a "
                       "password_file (lab up makes the password)")
    return {"zookeeper_password_file": sec.password.file}


def _zookeeper_tls(cluster: Cluster) -> tuple[str, str]:
    """kafkaops' ZooKeeper client certificate and key, or ("", ""): the inventory's ZooKeeper port is then
    the TLS one kafkaops uses, and the brokers get the one below it."""
    sec = cluster.zookeeper_security
    if sec is None or not sec.tls:
        return "", ""
    if not sec.cert_file or not sec.key_file:
        raise LabError(f"{cluster.source}: a lab's kafka.zookeeper_security TLS names a client certificate and "
                       "key (lab up makes them, with ZooKeeper's, signed by the lab CA; client certificates are "
                       "required)")
    return sec.cert_file, sec.key_file


def _security(cluster: Cluster) -> dict[str, str]:
    """The lab's side of the inventory's ``kafka.security``: a plaintext lab, or the one secured lab shape
    (SASL_SSL, SCRAM-SHA-512, user kafkaops, the CA and password by file) that ``lab up`` can make."""
    sec = cluster.kafka_security
    if sec.protocol == "PLAINTEXT":
        return {}
    if (sec.protocol != "SASL_SSL" or sec.sasl_mechanism != "SCRAM-SHA-512" or sec.username != "kafkaops"
            or not sec.ca_file or sec.password is None or sec.password.file is None or sec.cert_file):
        raise LabError(f"{cluster.source}: a lab is PLAINTEXT, or SASL_SSL with SCRAM-SHA-512 as user kafkaops, "
                       "a ca_file and a password_file (what lab up can make)")
    return {"kafka_protocol": sec.protocol, "kafka_ca_file": sec.ca_file, "kafka_password_file": sec.password.file}


def _monitoring_auth(cluster: Cluster) -> dict[str, str]:
    """The lab's Alertmanager behind basic auth when the inventory's ``monitoring.auth`` names a user and a
    password file (the one shape ``lab up`` makes: no CA, no token)."""
    auth = cluster.monitoring.auth if cluster.monitoring else None
    if auth is None:
        return {}
    if auth.ca_file or auth.token or not auth.username or auth.password is None or auth.password.file is None:
        raise LabError(f"{cluster.source}: a lab's monitoring.auth is a username and a password_file (what lab up "
                       "can make: Alertmanager behind basic auth, over http)")
    return {"monitoring_user": auth.username, "monitoring_password_file": auth.password.file}


def _mode(cluster: Cluster) -> str:
    """``kraft`` (no ZooKeeper), ``migration`` (ZooKeeper and KRaft controllers: ready to migrate) or
    ``zookeeper``."""
    if cluster.kraft:
        return "kraft"
    return "migration" if cluster.controllers else "zookeeper"


#: The last octets of the lab's Prometheus, Alertmanager and alert receiver addresses, in the lab's /24.
MONITORING_HOSTS = (30, 31, 32)


#: The controller listener of a KRaft lab's controller nodes (brokers reach the quorum there).
CONTROLLER_PORT = 9093


def _kraft_cluster_id() -> str:
    """A new cluster id as ``kafka-storage random-uuid`` prints it: 16 random bytes, URL-safe base64 (a
    controller's directory id has the same shape)."""
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
