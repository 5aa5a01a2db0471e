"""Bring the whole lab up, report its health, tear it down — by pid, leaving nothing behind.

``up`` checks everything it needs before it starts anything (Java, jars, binaries, free ports), so a
refusal leaves the machine untouched; if a later step fails it tears down what it started.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.errors import KafkaOpsError, LabError
from kafkaops.model import Cluster
from kafkaops.systems.conftool import Conftool
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.zookeeper import ZooKeeper
from kafkaops_lab import configs, monitoring, net, procs, security
from kafkaops_lab.deploy import seed_releases
from kafkaops_lab.dirs import host_dirs, lab_dir, lab_dirs
from kafkaops_lab.host import LabHost
from kafkaops_lab.kafka import LabKafka, TopicSpec
from kafkaops_lab.pools import LabConftool
from kafkaops_lab.spec import LabHostSpec, LabSpec, from_inventory

#: Topics that exist when the lab comes up: the runbook's EventBus streams in both DCs (for the
#: eqiad/codfw parity check) and the load generator's topic.
#: The prefixes of the eventbus' topics (its events name ``<dc>.<stream>``): a replay writes there.
SERVICE_PREFIXES = ("eqiad.", "codfw.")
LAB_TOPICS = (
    ("eqiad.mediawiki.revision-create", 6),
    ("eqiad.mediawiki.page-delete", 3),
    ("codfw.mediawiki.revision-create", 6),
    ("codfw.mediawiki.page-delete", 3),
    ("eqiad.test.event", 3),
    ("lab.load", 6),
)

Progress = Callable[[str], None]


def _noop(_msg: str) -> None:
    pass


@dataclass
class Component:
    name: str
    kind: str
    address: str
    pid: int | None
    healthy: bool
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "address": self.address, "pid": self.pid,
                "healthy": self.healthy, "detail": self.detail, **self.extra}


def _run_dir(spec: LabSpec) -> Path:
    return Path(spec.lab_dir) / "run"


def _log_dir(spec: LabSpec) -> Path:
    return Path(spec.lab_dir) / "log"


def _global_env(spec: LabSpec) -> dict[str, str]:
    return {procs.LAB_DIR_ENV: spec.lab_dir, procs.LAB_MEMBER_ENV: spec.lab_dir}


def _pidfiles(base: Path) -> list[Path]:
    return [*base.glob("run/*.pid"), *base.glob("hosts/*/run/*.pid")]


def is_up(base: Path | None = None) -> bool:
    """True when any process of the lab at ``base`` still runs."""
    base = base or lab_dir()
    return any(procs.live_pid(f) for f in _pidfiles(base)) or bool(procs.marked_pids(base))


def name(base: Path) -> str:
    """The cluster name of the lab at ``base`` (what ``--lab`` takes); its directory's name if unknown."""
    for marker, key in (("lab.json", "cluster"), ("sites.json", "name")):
        try:
            return str(json.loads((base / marker).read_text())[key])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return base.name


def site_dirs(base: Path) -> list[Path]:
    """The directories of a multi-site lab's sites (its ``sites.json``); [] for a lab of one cluster."""
    try:
        sites = json.loads((base / "sites.json").read_text())["sites"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [lab_dir(str(cluster)) for cluster in sites.values()]


def running() -> list[Path]:
    """The directory of every lab that is up (:func:`kafkaops_lab.dirs.lab_dirs`), a multi-site lab once
    for itself and its sites; multi-site labs first."""
    out: list[Path] = []
    covered: set[Path] = set()
    for base in lab_dirs():
        if base.resolve() in covered:
            continue
        members = site_dirs(base)
        if is_up(base) or any(is_up(m) for m in members):
            out.append(base)
            covered.update(m.resolve() for m in members)
    return out


def stop(base: Path, progress: Progress = _noop) -> int:
    """Stop the lab at ``base`` by pid; a multi-site lab's MirrorMaker first (its pidfile), then each
    site's lab. Returns how many processes were stopped. Idempotent."""
    stopped = down(base, progress)
    for member in site_dirs(base):
        progress(f"stopping the site lab {name(member)}")
        stopped += down(member, progress)
    return stopped


def strangers(base: Path) -> list[tuple[Path, int]]:
    """Pidfiles of the lab at ``base`` naming a live process they do not prove is the lab's (no start
    time, as before pidfiles recorded one, or another start time: a reused pid). ``lab down`` leaves
    those alone and names them, for the operator to judge."""
    return [(f, pid) for f in _pidfiles(base) if (pid := procs.stranger_pid(f)) is not None]


def _preflight(spec: LabSpec) -> None:
    jars = Path(spec.kafka_jars)
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise LabError(f"Kafka {'4.x ' if spec.kraft else ''}jars not found in {jars}",
                       hint="run scripts/install.sh to resolve them from Maven")
    for binary in ("etcd", "ssh-keygen", "tcpdump"):
        if shutil.which(binary) is None:
            raise LabError(f"{binary} not found on PATH", hint="run scripts/install.sh (Debian packages)")
    if not Path("/usr/sbin/sshd").exists():
        raise LabError("/usr/sbin/sshd not found", hint="run scripts/install.sh (openssh-server)")
    monitoring.preflight(spec)
    wanted = [(spec.etcd_address, spec.etcd_port, "etcd"), (spec.etcd_address, spec.etcd_port + 1, "etcd peer")]
    if not spec.kraft:
        wanted.append((spec.zk_address, spec.zk_port, "ZooKeeper"))
        if spec.zk_secure_port:
            wanted.append((spec.zk_address, spec.zk_secure_port, "ZooKeeper (TLS)"))
    if spec.vip_address:
        wanted.append((spec.vip_address, spec.vip_port, "VIP"))
    for h in spec.hosts:
        wanted += [(h.address, h.kafka_port, f"{h.name} kafka"), (h.address, h.ssh_port, f"{h.name} sshd")]
        if h.eventbus:
            wanted.append((h.address, h.http_port, f"{h.name} eventbus"))
    if spec.deploy is not None:
        wanted.append((spec.deploy.address, spec.deploy.ssh_port, f"{spec.deploy.name} sshd"))
    wanted += monitoring.wanted_ports(spec)
    taken = [f"{what} {a}:{p}" for a, p, what in wanted if not procs.port_free(a, p)]
    if taken:
        raise LabError(f"port(s) already in use: {', '.join(taken)}",
                       hint="stop what listens there (`ss -ltnp`), or `kafkaops lab down` if it is an old lab")


def _prepare(spec: LabSpec) -> None:
    base = Path(spec.lab_dir)
    # A lab starts from nothing: stale data dirs are how tests become order-dependent.
    if base.exists():
        shutil.rmtree(base)
    for sub in ("run", "log", "ssh", "zookeeper", "etcd", "conftool"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    ssh = base / "ssh"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafkaops-lab", "-f",
                    str(ssh / "id_ed25519")], check=True)
    (ssh / "authorized_keys").write_text((ssh / "id_ed25519.pub").read_text())
    # The hosts' keys are signed by the lab's host CA, and the admin side trusts the CA alone (one
    # @cert-authority line, no host key): as a Puppet-managed fleet is trusted from its admin hosts.
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafkaops-lab-host-ca", "-f",
                    str(ssh / "host_ca")], check=True)
    names = []
    for h in (*spec.hosts, *([spec.deploy] if spec.deploy else [])):
        if h is spec.hosts[0]:
            security.prepare(spec)  # the CA, keystores and passwords every server.properties names
        names += _prepare_host(spec, h)
    _trust(spec, names)
    (base / "zookeeper" / "zoo.cfg").write_text(configs.zoo_cfg(spec, base / "zookeeper"))
    (base / "conftool" / "etcdrc").write_text(configs.etcdrc(spec))
    monitoring.prepare(spec)
    Path(spec.conftool_config).parent.mkdir(parents=True, exist_ok=True)
    Path(spec.conftool_config).write_text(
        configs.conftool_config(spec, base / "conftool" / "etcdrc", base / "conftool" / "cache"))
    spec.save()


def _prepare_host(spec: LabSpec, h: LabHostSpec) -> list[str]:
    """One host's directories, SSH host key (signed by the lab's host CA), sshd and Kafka configs and
    scripts; returns the names its certificate is known by (for the CA line of ``known_hosts``)."""
    base = Path(spec.lab_dir)
    ssh = base / "ssh"
    d = host_dirs(h.name, base)
    for path in (d.run, d.log, d.bin, d.etc, *(() if h is spec.deploy else (d.kafka_data, d.release))):
        path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.fqdn, "-f",
                    str(d.etc / "ssh_host_ed25519_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-s", str(ssh / "host_ca"), "-I", h.fqdn, "-h", "-n",
                    f"{h.address},{h.fqdn}", "-V", "-5m:+52w", str(d.etc / "ssh_host_ed25519_key.pub")],
                   check=True)
    (d.etc / "sshd_config").write_text(configs.sshd_config(spec, h, d, ssh / "authorized_keys"))
    names = [f"[{h.address}]:{h.ssh_port}", f"[{h.fqdn}]:{h.ssh_port}"]
    if h is spec.deploy:
        script = d.bin / "labdeploy"
        script.write_text(configs.labdeploy_script(spec))
        script.chmod(0o755)
        seed_releases(base)
        return names
    # A secured broker's server.properties holds its password and its keystore's: owner-only.
    security.write_private(d.etc / "server.properties", configs.server_properties(spec, h, d))
    if spec.kraft or spec.migration:  # a migration lab's node may be upgraded to Kafka 4 (log4j2)
        (d.etc / "log4j2.properties").write_text(configs.log4j2_properties(d))
        (d.etc / "tools-log4j2.properties").write_text(configs.tools_log4j2_properties())
    if not spec.kraft:
        (d.etc / "log4j.properties").write_text(configs.log4j_properties(d))
    script = d.bin / "hostctl"
    script.write_text(configs.hostctl_script(spec))
    script.chmod(0o755)
    for tool, main_class in configs.kafka_tools(spec).items():
        script = d.bin / tool
        script.write_text(configs.kafka_tool_script(spec, main_class, d))
        script.chmod(0o755)
    return names


def _trust(spec: LabSpec, names: list[str]) -> None:
    """The admin side's ``known_hosts``: one ``@cert-authority`` line for every lab host name, no host key."""
    ssh = Path(spec.lab_dir) / "ssh"
    ca_key = " ".join((ssh / "host_ca.pub").read_text().split()[:2])
    (ssh / "known_hosts").write_text(f"@cert-authority {','.join(names)} {ca_key}\n")


def add_host(cluster: Cluster, name: str, progress: Progress = _noop) -> LabHostSpec:
    """Start one more host of ``cluster``'s inventory on the running lab — sshd, eventbus (depooled), a Kafka
    broker that joins the cluster holding no replica — for ``broker add`` and ``broker decommission`` to act
    on. Its keys, certificates and configs are made like every other host's; the lab's saved spec names it,
    so ``lab status`` shows it and ``lab down`` stops it.

    On the KRaft lab the host may be a controller node (``controllers:`` of the inventory): a racked machine
    with Kafka installed and configured (``controller.quorum.bootstrap.servers``) but its storage not
    formatted and Kafka not running — what ``kafkaops controllers add`` starts from (it formats, starts and
    adds it).

    Raises:
        LabError: No lab up, the inventory describes another lab, the host is already a lab host or is not
            a broker of the inventory (or a controller of a KRaft lab's), or its ports are taken.
    """
    running = LabSpec.load(lab_dir(cluster.name))  # the inventory's lab (the bench lab's own directory)
    wanted = from_inventory(cluster)
    if wanted.lab_dir != running.lab_dir or wanted.cluster != running.cluster:
        raise LabError(f"{cluster.source} describes lab {wanted.cluster} in {wanted.lab_dir}, not the running "
                       f"{running.cluster} ({running.lab_dir})", hint="give the running lab's inventory with the host")
    if any(name in (h.name, h.fqdn) for h in running.hosts):
        raise LabError(f"{name} is already a host of the lab", hint="`kafkaops lab status` lists them")
    h = wanted.host(name)
    if h.role != "broker" and not (h.role == "controller" and running.kraft):
        raise LabError(f"{name} is a {h.role} in {cluster.source}: only a broker host (or a KRaft lab's controller) "
                       "can be added")
    ports = ((h.kafka_port, "kafka"), (h.ssh_port, "sshd"), *(((h.http_port, "eventbus"),) if h.eventbus else ()))
    taken = [f"{what} {h.address}:{port}" for port, what in ports if not procs.port_free(h.address, port)]
    if taken:
        raise LabError(f"port(s) already in use: {', '.join(taken)}", hint="`ss -ltnp` shows who listens there")
    spec = dataclasses.replace(running, hosts=(*running.hosts, h))
    progress(f"preparing {h.name}: keys, certificate, configs")
    shutil.rmtree(host_dirs(h.name, Path(spec.lab_dir)).root, ignore_errors=True)  # a new machine: an empty disk
    if spec.secured:
        security.node_keystore(spec, h)
    names = [n for other in (*running.hosts, *([running.deploy] if running.deploy else []))
             for n in (f"[{other.address}]:{other.ssh_port}", f"[{other.fqdn}]:{other.ssh_port}")]
    _trust(spec, [*names, *_prepare_host(spec, h)])
    if h.conftool_tags:
        LabConftool(spec.conftool_config).ensure(h.fqdn, h.conftool_tags, pooled="no", weight=10)
    spec.save()
    host = LabHost(spec, h)
    if h.role == "controller":  # not provisioned: `kafkaops controllers add` formats and starts it
        progress(f"booting {h.name} (sshd; Kafka configured, storage not formatted)")
        host.power_on(wait=True)
        return h
    progress(f"booting {h.name} (sshd, kafka{', eventbus' if h.eventbus else ''})")
    host.power_on(wait=False)
    _wait(f"broker {h.broker_id} registered",
          lambda: _brokers_alive([host]) and h.broker_id in _metadata_brokers(spec), 90)
    for unit in ("sshd", *host.enabled_units):
        host.start(unit, wait=True)
    return h


def remove_host(name: str, progress: Progress = _noop) -> LabHostSpec:
    """Take a broker host out of the running lab for good (after ``kafkaops broker decommission``): its
    processes stopped, its pool object deleted, the lab's saved spec without it. Refused while its broker
    holds a replica: the lab would be left with partitions short of a replica. A KRaft lab's added controller
    (after ``kafkaops controllers remove``) likewise, refused while its Kafka runs.

    Raises:
        LabError: No lab up, an unknown host, the last broker, or a broker that still holds replicas.
    """
    spec = LabSpec.load()
    h = spec.host(name)
    if h.role == "controller" and spec.kraft and len(spec.controllers) > 3:
        if LabHost(spec, h).pid("kafka") is not None:
            raise LabError(f"controller {h.broker_id} ({h.name}) still runs",
                           hint=f"`kafkaops controllers remove {h.name}` first (it leaves the voters, then stops)")
        progress(f"stopping {h.name}")
        LabHost(spec, h).power_off(clean=True)
        dataclasses.replace(spec, hosts=tuple(x for x in spec.hosts if x is not h)).save()
        return h
    if h.role != "broker" or len(spec.brokers) <= 1:
        raise LabError(f"{h.name} is the lab's last broker or not a broker (or one of the KRaft lab's first three "
                       "controllers): it stays")
    admin = KafkaAdmin(security.endpoint(spec), timeout=10)
    held = [p for p in admin.snapshot(with_configs=False).partitions if h.broker_id in p.replicas]
    if held:
        raise LabError(f"broker {h.broker_id} still holds {len(held)} replica(s)",
                       hint=f"`kafkaops broker decommission {h.name}` first")
    progress(f"stopping {h.name}")
    LabHost(spec, h).power_off(clean=True)
    if h.conftool_tags:
        LabConftool(spec.conftool_config).remove(h.fqdn, h.conftool_tags)
    dataclasses.replace(spec, hosts=tuple(x for x in spec.hosts if x is not h)).save()
    return h


def _format_storage(spec: LabSpec) -> None:
    """``kafka-storage format`` on every KRaft node, in parallel: a KRaft node refuses to start on an
    unformatted log directory (it holds the cluster id and the node's directory id)."""
    base = Path(spec.lab_dir)
    running = []
    # A dynamic quorum (KIP-853): every controller is formatted with the same initial voters, each with its
    # own directory id (made here as Kafka makes one: 16 random bytes, URL-safe base64).
    ids = {h.name: _directory_id() for h in spec.controllers}
    initial = ["--initial-controllers", spec.initial_controllers(ids)]
    for h in spec.hosts:
        d = host_dirs(h.name, base)
        argv = [str(d.bin / "kafka-storage"), "format", "-t", spec.cluster_id, "-c", str(d.etc / "server.properties"),
                *(initial if h.role == "controller" else [])]
        log = open(d.log / "storage-format.log", "wb")  # noqa: SIM115 - closed below, after the wait
        running.append((h, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    for h, proc, log in running:
        if proc.wait(timeout=120) != 0:
            failed.append(h.name)
        log.close()
    if failed:
        raise LabError(f"kafka-storage format failed on {', '.join(failed)}",
                       hint=f"see hosts/{failed[0]}/log/storage-format.log under {base}")


def _directory_id() -> str:
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _start_zookeeper(spec: LabSpec) -> int:
    base = Path(spec.lab_dir)
    argv = [spec.java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-Dzookeeper.admin.enableServer=false",
            f"-Dlog4j.configuration=file:{base / 'zookeeper' / 'log4j.properties'}",
            "-cp", f"{spec.kafka_jars}/*", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(base / "zookeeper" / "zoo.cfg")]
    (base / "zookeeper" / "log4j.properties").write_text(
        "log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    return procs.spawn(argv, log=_log_dir(spec) / "zookeeper.log", pidfile=_run_dir(spec) / "zookeeper.pid",
                       env=_global_env(spec), group=procs.identity_gid(spec.zk_address))


def _start_etcd(spec: LabSpec) -> int:
    a, p, scheme = spec.etcd_address, spec.etcd_port, spec.etcd_scheme
    argv = ["etcd", "--name", "lab", "--data-dir", str(Path(spec.lab_dir) / "etcd" / "data"),
            "--listen-client-urls", f"{scheme}://{a}:{p}", "--advertise-client-urls", f"{scheme}://{a}:{p}",
            "--listen-peer-urls", f"http://{a}:{p + 1}", "--initial-advertise-peer-urls", f"http://{a}:{p + 1}",
            "--initial-cluster", f"lab=http://{a}:{p + 1}", "--enable-v2=true", "--log-level", "warn",
            *security.etcd_server_args(spec)]
    return procs.spawn(argv, log=_log_dir(spec) / "etcd.log", pidfile=_run_dir(spec) / "etcd.pid",
                       env=_global_env(spec), group=procs.identity_gid(spec.etcd_address))


def _start_balancer(spec: LabSpec) -> int:
    return procs.spawn([spec.python, "-m", "kafkaops_lab.balancer"], log=_log_dir(spec) / "balancer.log",
                       pidfile=_run_dir(spec) / "balancer.pid", env=_global_env(spec))


def _zk_ok(spec: LabSpec) -> bool:
    import socket

    try:
        with socket.create_connection((spec.zk_address, spec.zk_port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


def _wait(what: str, check: Callable[[], bool], timeout: float, pid: int | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if pid is not None and not procs.is_alive(pid):
            raise LabError(f"{what} exited during start-up", hint="see its log under $KAFKAOPS_LAB_DIR/log")
        time.sleep(0.2)
    raise LabError(f"{what} not ready after {timeout:.0f}s", hint="see its log under $KAFKAOPS_LAB_DIR/log")


def _seed_pools(spec: LabSpec) -> None:

    conftool = LabConftool(spec.conftool_config)
    for h in spec.hosts:
        if not h.conftool_tags:
            continue  # a host without a pooled service has no conftool object
        conftool.ensure(h.fqdn, h.conftool_tags, pooled="yes", weight=10)


def _brokers_registered(spec: LabSpec) -> bool:
    """Every broker is in the cluster's metadata, the view the controller places replicas by.

    Registered in ZooKeeper is not enough: the controller learns of a registration asynchronously, and a
    CreateTopics it answers before then fails "replication factor 3 larger than available brokers: 2"
    (found by CI on the stretch lab). On KRaft the metadata lists only registered, unfenced brokers.
    """
    return set(_metadata_brokers(spec)) >= {h.broker_id for h in spec.brokers}


def _metadata_brokers(spec: LabSpec) -> list[int]:

    try:
        return sorted(KafkaAdmin(security.endpoint(spec), timeout=3).metadata().brokers)
    except KafkaOpsError:
        return []


def _brokers_alive(hosts: list[LabHost]) -> bool:
    """Fail fast, with the broker's own fatal error, when a broker exits during start-up."""
    for host in hosts:
        if host.pid("kafka") is None:
            log = host.dirs.log / "kafka-server.log"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            fatal = next((line for line in reversed(lines) if "Exception" in line or "ERROR" in line), "")
            raise LabError(f"Kafka on {host.host.name} exited during start-up: {fatal[:300]}",
                           hint=f"see {log}")
    return True


def _create_topics(spec: LabSpec) -> None:

    admin = LabKafka(security.endpoint(spec, "broker"), timeout=15)  # the super user: kafkaops may not create
    replicas = min(3, len(spec.brokers))  # a site of the two-site lab has two brokers
    admin.create_topics([TopicSpec(name, partitions, replicas) for name, partitions in LAB_TOPICS])
    # Leave every partition led by its preferred replica, the state maintenance must restore.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        snap = admin.snapshot(with_configs=False)
        if all(p.leader is not None and len(p.isr) == len(p.replicas) for p in snap.partitions):
            break
        time.sleep(0.5)
    admin.elect_preferred_leaders()


def up(cluster: Cluster, progress: Progress = _noop, *, broker_heap: str | None = None) -> float:
    """Start the lab described by ``cluster`` (its brokers with ``broker_heap``, default the spec's); return
    the seconds it took."""
    started = time.monotonic()
    spec = from_inventory(cluster)
    if broker_heap is not None:
        if not re.fullmatch(r"[1-9][0-9]*[mg]", broker_heap):
            raise LabError(f"broker heap {broker_heap!r} is not a JVM size", hint="e.g. 320m or 1g")
        spec = dataclasses.replace(spec, broker_heap=broker_heap)
    if is_up(Path(spec.lab_dir)):
        raise LabError(f"the lab is already up ({spec.lab_dir})", hint="`kafkaops lab down` first, or use it")
    net.clear(spec.cluster)  # a partition left by a killed run must not greet the new lab
    _preflight(spec)
    try:
        progress("preparing keys and configs")
        _prepare(spec)
        if spec.kraft:
            progress("formatting KRaft storage (kafka-storage format)")
            _format_storage(spec)
        progress("starting etcd" if spec.kraft else "starting ZooKeeper and etcd")
        zk_pid = None if spec.kraft else _start_zookeeper(spec)
        etcd_pid = _start_etcd(spec)
        progress("booting hosts (sshd, kafka" + (", eventbus)" if any(h.eventbus for h in spec.hosts) else ")"))
        hosts = [LabHost(spec, h) for h in spec.hosts]
        _wait("etcd", lambda: procs.port_open(spec.etcd_address, spec.etcd_port), 30, etcd_pid)
        _seed_pools(spec)
        if zk_pid is not None:
            _wait("ZooKeeper", lambda: _zk_ok(spec), 60, zk_pid)
            security.create_users(spec)
            security.write_acls(spec, SERVICE_PREFIXES)
        for host in hosts:
            host.power_on(wait=False)
        progress("waiting for the brokers to register")
        kafkas = [h for h in hosts if "kafka" in h.enabled_units]  # a migration lab's controllers wait
        _wait("Kafka brokers", lambda: _brokers_alive(kafkas) and _brokers_registered(spec), 90)
        progress("creating topics")
        _create_topics(spec)
        if spec.vip_address:
            _start_balancer(spec)
        for host in hosts:
            for unit in ("sshd", *host.enabled_units):
                host.start(unit, wait=True)
        if spec.vip_address:
            _wait("load balancer", lambda: procs.port_open(spec.vip_address, spec.vip_port), 30)
        if spec.deploy is not None:
            progress(f"starting the deploy host {spec.deploy.name} (sshd)")
            LabHost(spec, spec.deploy).start("sshd", wait=True)
        # Last, with every broker in sync and every service up: nothing the start-up itself did pages anyone.
        progress(f"starting monitoring (Prometheus {spec.prometheus_address}, Alertmanager "
                 f"{spec.alertmanager_address}, alert receiver {spec.receiver_address})")
        monitoring.start(spec)
    except BaseException as exc:
        progress("start-up failed, tearing down what was started")
        down(Path(spec.lab_dir))
        if isinstance(exc, KafkaOpsError):
            raise
        if isinstance(exc, (RuntimeError, TimeoutError, OSError, subprocess.CalledProcessError)):
            raise LabError(f"lab start-up failed: {exc}", hint="see the logs under $KAFKAOPS_LAB_DIR") from exc
        raise
    elapsed = time.monotonic() - started
    (Path(spec.lab_dir) / "up.json").write_text(json.dumps({"started_at": time.time(), "seconds": elapsed}))
    return elapsed


#: Seconds a Kafka process of a lab going away gets after SIGTERM before SIGKILL.
DOWN_GRACE = 2.0


def down(base: Path | None = None, progress: Progress = _noop) -> int:
    """Stop every process of the lab, by pid; return how many were stopped. Idempotent."""
    base = base or lab_dir()
    try:
        spec: LabSpec | None = LabSpec.load(base)
    except LabError:
        spec = None
    # Network partitions first: the lab going away takes its fault rules with it (the heal timers are
    # pidfiles under run/, stopped below with everything else).
    net.clear(spec.cluster if spec is not None else name(base))
    stopped = 0
    if spec is not None:
        # Monitoring first: a lab going away is not an outage to page anyone about.
        progress("stopping monitoring")
        stopped += len(monitoring.stop(base))
        progress("stopping the load balancer and eventbus services")
        stopped += len(procs.terminate([p for p in [procs.live_pid(_run_dir(spec) / "balancer.pid")] if p]))
        hosts = [LabHost(spec, h) for h in spec.hosts]
        eventbus = [p for h in hosts if (p := h.pid("eventbus"))]
        procs.terminate(eventbus, timeout=10)
        progress("stopping the brokers")
        # All brokers at once, with a short grace: with the whole cluster going away a controlled shutdown
        # has nowhere to move leadership, and retries until its timeout (12 s of every stop of the stretch
        # lab, measured); the next `lab up` starts from empty directories, so nothing a clean shutdown
        # would have flushed is ever read again. KRaft controller nodes after them.
        brokers = [p for h in hosts if h.host.role == "broker" and (p := h.pid("kafka"))]
        procs.terminate(brokers, timeout=DOWN_GRACE)
        controllers = [p for h in hosts if h.host.role == "controller" and (p := h.pid("kafka"))]
        procs.terminate(controllers, timeout=DOWN_GRACE)
        stopped += len(eventbus) + len(brokers) + len(controllers)
        for h in hosts:
            h.power_off(clean=False)
        if spec.deploy is not None:
            LabHost(spec, spec.deploy).power_off(clean=False)
    progress("stopping everything else")
    tracked = [p for f in base.glob("run/*.pid") if (p := procs.live_pid(f))]
    rest = sorted(set(tracked + procs.descendants(tracked) + procs.marked_pids(base)))
    procs.terminate(rest, timeout=10, sig=signal.SIGTERM)
    return stopped + len(rest)


def status(base: Path | None = None) -> list[Component]:
    """Every component and its health, checked live (ports, ruok, registrations, pool state)."""
    spec = LabSpec.load(base)
    out: list[Component] = []
    if not spec.kraft:
        zk_pid = procs.live_pid(_run_dir(spec) / "zookeeper.pid")
        out.append(Component("zookeeper", "zookeeper", spec.zk_connect, zk_pid, _zk_ok(spec)))
    etcd_pid = procs.live_pid(_run_dir(spec) / "etcd.pid")
    etcd = Component("etcd", "etcd", f"{spec.etcd_address}:{spec.etcd_port}", etcd_pid,
                     etcd_pid is not None and procs.port_open(spec.etcd_address, spec.etcd_port))
    out.append(etcd)
    registered: set[int] = set()
    controller = None
    if spec.kraft:
        registered = set(_metadata_brokers(spec))
    elif out[0].healthy:

        try:
            with ZooKeeper(spec.zk_connect, timeout=3) as zk:
                registered, controller = set(zk.registered_brokers()), zk.controller()
        except KafkaOpsError:
            pass
    pools: dict[str, str] = {}
    if etcd.healthy and spec.hosts[0].conftool_tags:  # a cluster without a pooled service has no pools

        try:
            tags = spec.hosts[0].conftool_tags
            pools = {s.host: s.pooled for s in Conftool(spec.conftool_config).list(tags)}
        except KafkaOpsError:
            pass
    for h in spec.hosts:
        host = LabHost(spec, h)
        boot = host.boot_id()
        sshd = host.pid("sshd")
        out.append(Component(f"{h.name}/sshd", "sshd", f"{h.address}:{h.ssh_port}", sshd,
                             sshd is not None and procs.port_open(h.address, h.ssh_port),
                             extra={"host": h.name, "boot_id": boot}))
        kpid = host.pid("kafka")
        if h.role == "controller":  # its place in the quorum: `kafkaops status` asks Kafka's tool
            if not host.provisioned:  # a migration lab's controller host before the migration provisions it
                out.append(Component(f"{h.name}/kafka", "kafka-controller", f"{h.address}:{h.kafka_port}", kpid,
                                     kpid is None, detail=f"controller node {h.broker_id}: not provisioned",
                                     extra={"host": h.name, "node_id": h.broker_id, "provisioned": False}))
                continue
            out.append(Component(f"{h.name}/kafka", "kafka-controller", f"{h.address}:{h.kafka_port}", kpid,
                                 kpid is not None and procs.port_open(h.address, h.kafka_port),
                                 detail=f"controller node {h.broker_id}" + (f", {host.phase()}" if spec.migration
                                                                            else ""),
                                 extra={"host": h.name, "node_id": h.broker_id}))
            continue
        reg = h.broker_id in registered
        out.append(Component(f"{h.name}/kafka", "kafka", f"{h.address}:{h.kafka_port}", kpid,
                             kpid is not None and reg,
                             detail=("registered" if reg else "not registered")
                             + (", controller" if controller == h.broker_id else ""),
                             extra={"host": h.name, "broker_id": h.broker_id,
                                    "controller": controller == h.broker_id}))
        if not h.eventbus:
            continue
        epid = host.pid("eventbus")
        pooled = pools.get(h.fqdn, "unknown")
        out.append(Component(f"{h.name}/eventbus", "eventbus", f"{h.address}:{h.http_port}", epid,
                             epid is not None and procs.port_open(h.address, h.http_port),
                             detail=f"pooled={pooled}", extra={"host": h.name, "pooled": pooled}))
    if spec.deploy is not None:
        d = spec.deploy
        dpid = LabHost(spec, d).pid("sshd")
        out.append(Component(f"{d.name}/sshd", "sshd", f"{d.address}:{d.ssh_port}", dpid,
                             dpid is not None and procs.port_open(d.address, d.ssh_port),
                             detail="deploy host", extra={"host": d.name}))
    if spec.vip_address:  # a load-balanced service: its balancer
        lb = procs.live_pid(_run_dir(spec) / "balancer.pid")
        out.append(Component("balancer", "balancer", f"{spec.vip_address}:{spec.vip_port}", lb,
                             lb is not None and procs.port_open(spec.vip_address, spec.vip_port)))
    if spec.prometheus_address:  # a lab started before monitoring was part of it has none
        out += [Component(name, name, address, pid, ok, detail)
                for name, address, pid, ok, detail in monitoring.component_rows(spec)]
    return out
