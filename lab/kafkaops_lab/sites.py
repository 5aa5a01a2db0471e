"""The two-site lab: main-eqiad and main-codfw, MirrorMaker 2 between them, discovery records in conftool.

``kafkaops lab up --sites eqiad,codfw`` starts each site as a lab of its own (its inventory in
``inventory/lab-sites.yaml``'s ``clusters:``; ZooKeeper, two brokers, etcd + conftool, sshd per host,
eventbus behind the site's VIP), then what makes them two sites of one deployment:

* every site's prefixed topics exist on both sites (``eqiad.test.event`` on main-codfw is the mirror);
* the mirror copies start with records of their own, so a mirrored record's offset differs between
  the sites — as it does in production, where the clusters were not born together. A consumer group's
  offsets therefore mean nothing on the other site; only timestamps carry over (the seed's lesson);
* MirrorMaker 2 in dedicated mode, Kafka's own ``connect-mirror`` jars: ``eqiad.*`` to codfw and
  ``codfw.*`` to eqiad, topic names unchanged (IdentityReplicationPolicy), record timestamps kept;
* the service's discovery records in conftool: the first site pooled (active), the others not.

Its own directory (``~/.local/state/kafkaops/lab-sites``) holds MirrorMaker's config, log and pid;
``lab --lab lab-sites down`` stops MirrorMaker, then each site.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from kafkaops.errors import KafkaOpsError, LabError
from kafkaops.model import Cluster
from kafkaops.systems.kafka_auth import java_properties, librdkafka_config, properties_text
from kafkaops.systems.mirror import MirrorLag
from kafkaops_lab import dirs, lab, procs, security
from kafkaops_lab.kafka import LabKafka, TopicSpec
from kafkaops_lab.pools import LabDiscovery

Progress = Callable[[str], None]

#: Records written straight into each mirror copy before MirrorMaker starts (per partition): they
#: shift every mirrored record's offset on the other site by this much.
HISTORY = 25
#: The test stream every site's eventbus produces to (``<dc>.test.event``), partitions per topic.
STREAM_PARTITIONS = 3
MIRROR_HEAP = "-Xmx384m"


def _noop(_msg: str) -> None:
    return None


def _prefixed(progress: Progress, dc: str) -> Progress:
    return lambda msg: progress(f"{dc}: {msg}")


def sites_dir(sites: Cluster) -> Path:
    return dirs.lab_dir(sites.name)


def is_sites_lab(base: Path) -> bool:
    """The lab directory is a multi-site lab's (``sites.json``), not one site's (``lab.json``)."""
    return (base / "sites.json").is_file()


def mirror_properties(sites: Cluster) -> str:
    """MirrorMaker 2's dedicated-mode config: each site's ``<dc>.*`` topics to every other site, names
    unchanged, offsets committed every second (what the switchover's lag reads), nothing else synced.

    On secured sites MirrorMaker reaches each one as that site's super user (``broker``), trusting that
    site's own CA (``<dc>.security.protocol``, ``<dc>.sasl.jaas.config``, ...: MirrorMaker gives a cluster's
    settings to every client it makes for it). Its passwords are references to :func:`mirror_secrets`, never
    the passwords themselves: MirrorMaker keeps its connectors' configs in a topic. Production
    grants MirrorMaker a principal of its own (topics, groups, transactional ids, its internal topics);
    the lab does not model MirrorMaker's least privilege, only kafkaops'."""
    dcs = list(sites.sites)
    replicas = min(len(s.hosts) for s in sites.sites.values())
    lines = [f"clusters = {', '.join(dcs)}"]
    lines += [f"{dc}.bootstrap.servers = {site.bootstrap_servers}" for dc, site in sites.sites.items()]
    for src in dcs:
        for dst in dcs:
            if src != dst:
                # A properties file turns "\\\\" into "\\": MirrorMaker gets the regex eqiad\\..* (a literal dot).
                lines += [f"{src}->{dst}.enabled = true", f"{src}->{dst}.topics = {src}\\\\..*"]
    lines += [
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        f"replication.factor = {replicas}",
        *(f"{t}.replication.factor = {replicas}" for t in (
            "offset-syncs.topic", "checkpoints.topic", "heartbeats.topic", "offset.storage", "status.storage",
            "config.storage")),
        # The switchover translates offsets itself; MirrorMaker's own group-offset sync would race it. Its
        # checkpoints (what RemoteClusterUtils.translateOffsets reads) are emitted, for the plan to show beside.
        "emit.checkpoints.enabled = true", "emit.checkpoints.interval.seconds = 5",
        "refresh.groups.interval.seconds = 5", "sync.group.offsets.enabled = false",
        "emit.heartbeats.enabled = false", "sync.topic.acls.enabled = false", "sync.topic.configs.enabled = false",
        "refresh.topics.interval.seconds = 5",
        # A Connect worker setting only counts with the target's alias in front (a bare one stays 60 s).
        *(f"{dc}.offset.flush.interval.ms = 1000" for dc in dcs),
        # Exactly-once (KIP-618, MirrorMaker 2 dedicated mode since Kafka 3.5): each site is written to in
        # transactions, so every mirror copy carries commit markers, offsets no record holds (what the
        # translation must read past, issue 42); the source consumers read only committed records, so a
        # producer's aborted transaction is not mirrored.
        *(f"{dc}.exactly.once.source.support = enabled" for dc in dcs),
        *(f"{dc}.consumer.isolation.level = read_committed" for dc in dcs),
        "tasks.max = 2",
    ]
    secured = {f"{dc}.{key}": value for dc, site in sites.sites.items()
               for key, value in java_properties(security.admin_endpoint(site)).items()}
    if not secured:
        return "\n".join(lines) + "\n"
    # The passwords stay in a 0600 file of their own, named by reference (Kafka's FileConfigProvider): MirrorMaker
    # stores its connectors' configs in a topic of each site, and a password written here would be in it.
    secret_keys = sorted(k for k in secured if k.endswith(".sasl.jaas.config"))
    references = {k: f"${{file:{mirror_secrets(sites)}:{k}}}" for k in secret_keys}
    shown = {**secured, **references, "config.providers": "file",
             "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider"}
    return "\n".join(lines) + "\n" + properties_text(shown)


def mirror_secrets(sites: Cluster) -> Path:
    """The file MirrorMaker's passwords live in (0600), read by its config provider when a client starts."""
    return sites_dir(sites) / "secrets" / "mm2.properties"


def mirror_secret_properties(sites: Cluster) -> str:
    """Each site's ``<dc>.sasl.jaas.config``, the one thing in MirrorMaker's config that is a secret."""
    return properties_text({f"{dc}.{key}": value for dc, site in sites.sites.items()
                            for key, value in java_properties(security.admin_endpoint(site)).items()
                            if key == "sasl.jaas.config"})


def _ensure_topics(sites: Cluster) -> None:
    """Every site's test stream on every site: the origin's, and its mirror copy elsewhere."""

    for site in sites.sites.values():
        admin = LabKafka(security.admin_endpoint(site), timeout=15)
        replicas = min(3, len(site.hosts))
        admin.create_topics([TopicSpec(f"{dc}.test.event", STREAM_PARTITIONS, replicas) for dc in sites.sites])


def _seed_history(sites: Cluster) -> None:
    """Write :data:`HISTORY` records per partition into each mirror copy before MirrorMaker starts, so a
    mirrored record's offset on the other site is not its offset at the origin."""
    from confluent_kafka import Producer

    for dc, site in sites.sites.items():
        producer = Producer({**librdkafka_config(security.admin_endpoint(site)), "acks": "all"})
        for origin in sites.sites:
            if origin == dc:
                continue
            for partition in range(STREAM_PARTITIONS):
                for i in range(HISTORY):
                    producer.produce(f"{origin}.test.event", json.dumps({"history": i, "site": dc}).encode(),
                                     partition=partition, timestamp=int((time.time() - 86400) * 1000))
        if producer.flush(30):
            raise LabError(f"could not write the mirror copies' history on {site.name}")


def _seed_discovery(sites: Cluster) -> None:
    """One discovery record per switched service and site: the first site active."""

    assert sites.conftool_config is not None
    discovery = LabDiscovery(sites.conftool_config)
    first = next(iter(sites.sites))
    for service in sites.switched.values():
        for dc in sites.sites:
            discovery.seed(service.discovery, dc, pooled=dc == first)


def _start_mirror(sites: Cluster, base: Path) -> int:
    import shutil

    java = shutil.which("java")
    if java is None:
        raise LabError("java not found on PATH", hint="run scripts/install.sh (installs OpenJDK)")
    jars = dirs.kafka_jars()
    if not any(jars.glob("connect-mirror-*.jar")):
        raise LabError(f"MirrorMaker 2 jars (connect-mirror) are not in {jars}",
                       hint="run scripts/install.sh (resolves them from Maven Central)")
    security.write_private(mirror_secrets(sites), mirror_secret_properties(sites))
    security.write_private(base / "mm2.properties", mirror_properties(sites))
    (base / "log4j.properties").write_text(
        "log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.org.apache.kafka.connect.mirror=INFO\n")
    argv = [java, MIRROR_HEAP, "-XX:TieredStopAtLevel=1", f"-Dlog4j.configuration=file:{base / 'log4j.properties'}",
            "-cp", f"{jars}/*", "org.apache.kafka.connect.mirror.MirrorMaker", str(base / "mm2.properties")]
    env = {procs.LAB_DIR_ENV: str(base), procs.LAB_MEMBER_ENV: str(base)}
    return procs.spawn(argv, log=base / "log" / "mirrormaker.log", pidfile=base / "run" / "mirrormaker.pid", env=env)


def mirror_pid(base: Path) -> int | None:
    return procs.live_pid(base / "run" / "mirrormaker.pid")


def _wait_mirroring(sites: Cluster, base: Path, timeout: float = 120.0) -> None:
    """Until MirrorMaker has mirrored every site's history marker (one record each way)."""
    from confluent_kafka import Producer


    marker = {dc: Producer({**librdkafka_config(security.admin_endpoint(s)), "acks": "all"})
              for dc, s in sites.sites.items()}
    for dc, producer in marker.items():
        for partition in range(STREAM_PARTITIONS):
            producer.produce(f"{dc}.test.event", json.dumps({"marker": dc}).encode(), partition=partition)
        producer.flush(15)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mirror_pid(base) is None:
            log = base / "log" / "mirrormaker.log"
            tail = log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []
            raise LabError(f"MirrorMaker 2 exited during start-up: {' / '.join(tail)[:300]}", hint=f"see {log}")
        try:
            if all(MirrorLag(sites, src, dst).total() == 0 for src in sites.sites for dst in sites.sites
                   if src != dst):
                return
        except KafkaOpsError:
            pass
        time.sleep(1)
    raise LabError(f"MirrorMaker 2 did not mirror the sites' first records within {timeout:.0f}s",
                   hint=f"see {base / 'log' / 'mirrormaker.log'}")


def up(sites: Cluster, progress: Progress = _noop) -> float:
    """Start every site, then MirrorMaker 2 and the discovery records; return the seconds it took."""
    started = time.monotonic()
    base = sites_dir(sites)
    if any(lab.is_up(dirs.lab_dir(s.name)) for s in sites.sites.values()) or mirror_pid(base):
        raise LabError(f"the two-site lab is already up ({base})", hint="`kafkaops lab --lab lab-sites down` first")
    base.mkdir(parents=True, exist_ok=True)
    (base / "sites.json").write_text(json.dumps({"name": sites.name, "inventory": sites.source,
                                                 "sites": {dc: s.name for dc, s in sites.sites.items()}}))
    try:
        for dc, site in sites.sites.items():
            progress(f"site {dc}: starting {site.name}")
            lab.up(site, progress=_prefixed(progress, dc))
        progress("creating every site's test stream on every site, and the mirror copies' own history")
        _ensure_topics(sites)
        _seed_history(sites)
        progress("discovery records: " + ", ".join(f"{s.discovery}/{dc}" for s in sites.switched.values()
                                                  for dc in sites.sites) + f" ({next(iter(sites.sites))} active)")
        _seed_discovery(sites)
        progress("starting MirrorMaker 2 (" + ", ".join(f"{a}.* -> {b}" for a in sites.sites for b in sites.sites
                                                      if a != b) + ")")
        _start_mirror(sites, base)
        progress("waiting for MirrorMaker to mirror the first records")
        _wait_mirroring(sites, base)
    except BaseException:
        progress("start-up failed, tearing down what was started")
        down(sites, progress)
        raise
    elapsed = time.monotonic() - started
    (base / "up.json").write_text(json.dumps({"started_at": time.time(), "seconds": elapsed}))
    return elapsed


def down(sites: Cluster, progress: Progress = _noop) -> int:
    """Stop MirrorMaker, then every site (each by pid). Idempotent."""
    base = sites_dir(sites)
    stopped = 0
    pid = mirror_pid(base)
    if pid is not None:
        progress("stopping MirrorMaker 2")
        stopped += len(procs.terminate([pid], timeout=lab.DOWN_GRACE))
    for dc, site in sites.sites.items():
        progress(f"site {dc}: stopping {site.name}")
        stopped += lab.down(dirs.lab_dir(site.name), progress=_prefixed(progress, dc))
    return stopped


def status(sites: Cluster) -> list[lab.Component]:
    """Every site's components (named ``<dc>/...``), then MirrorMaker with its lag per direction."""
    out: list[lab.Component] = []
    for dc, site in sites.sites.items():
        try:
            components = lab.status(dirs.lab_dir(site.name))
        except LabError:
            components = [lab.Component(site.name, "lab", "", None, False, "not up")]
        out += [lab.Component(f"{dc}/{c.name}", c.kind, c.address, c.pid, c.healthy, c.detail) for c in components]
    base = sites_dir(sites)
    pid = mirror_pid(base)
    detail = "not running"
    healthy = False
    if pid is not None:

        try:
            lags = {f"{a}->{b}": MirrorLag(sites, a, b).total() for a in sites.sites for b in sites.sites if a != b}
            detail = ", ".join(f"{k} lag {v}" for k, v in lags.items())
            healthy = True
        except KafkaOpsError as exc:
            detail = f"lag unknown: {exc}"
    out.append(lab.Component("mirrormaker", "mirrormaker", ", ".join(sites.sites), pid, healthy, detail))
    return out
