"""What ``kafkaops doctor`` asks each system of a cluster: one read each, in its own protocol, with the
cluster's own security, bounded.

A TCP connection that opens proves a firewall lets the admin host through, not that kafkaops can work:
the broker's certificate may not verify against the inventory's CA, the password file may hold last
month's password, the ZooKeeper chroot may be a typo, Alertmanager may refuse kafkaops' user, the host
may show a key the known hosts do not vouch for. Each of those stops a maintenance at its first step;
asked here, each is one line on a new admin host instead.

Every probe goes through the adapter a run uses — :class:`~kafkaops.systems.kafka.KafkaAdmin` and the
broker probe, :class:`~kafkaops.systems.zookeeper.ZooKeeper`, the etcd lock's client and conftool's
settings, :class:`~kafkaops.systems.alertmanager.Alertmanager`, :class:`~kafkaops.systems.ssh.SshClient`
— built from the inventory the same way, so what passes here is what a run will be let in with. Each
returns what it saw, in words, or raises the adapter's own :class:`~kafkaops.errors.KafkaOpsError` (a
refusal is :class:`~kafkaops.errors.AuthError`, a silence :class:`~kafkaops.errors.UnreachableError`), one
line with its fix. Nothing is written, nobody is logged in to over SSH, nothing runs on a host.
"""

from __future__ import annotations

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.model import Cluster
from kafkaops.systems.tcp import host_ports

#: Seconds each probe may take (each protocol step is bounded by it; the doctor runs them all at once).
TIMEOUT = 4.0


class Unchecked(str):
    """A probe's answer that checked nothing, and says why (a host behind a bastion): a warning, not a pass."""


def kafka(cluster: Cluster, timeout: float = TIMEOUT) -> str:
    """ApiVersions answered by a bootstrap broker (over TLS when the listeners have it: the CA is checked
    here), then a Metadata request through the AdminClient a run uses (SASL: the password is checked here).

    Raises:
        AuthError: the broker's certificate does not verify, or the brokers refused the credentials.
        UnreachableError: no bootstrap broker answered (each one's reason), or Metadata went unanswered.
    """
    from kafkaops.systems.broker_probe import BrokerProbe
    from kafkaops.systems.kafka import KafkaAdmin
    from kafkaops.systems.tcp import refusal

    bootstrap = dict(enumerate(host_ports(cluster.kafka.bootstrap_servers, 9092)))
    if not BrokerProbe(cluster.kafka, timeout=timeout, keep=False).serving(bootstrap):
        why = "; ".join(f"{h}:{p}: {refusal(h, p, timeout) or 'accepts TCP but did not answer ApiVersions'}"
                        for h, p in bootstrap.values())
        raise UnreachableError(f"no bootstrap broker answered ApiVersions ({why or 'no address'})",
                               hint="check the brokers are up, kafka.bootstrap_servers and kafka.security.protocol")
    md = KafkaAdmin.look(cluster, timeout=timeout).metadata()
    controller = ("the KRaft quorum elects it" if cluster.kraft
                  else f"controller {md.controller_id}" if md.controller_id is not None and md.controller_id >= 0
                  else "no controller now")
    return (f"ApiVersions and Metadata answered ({cluster.kafka.security.protocol}): {len(md.brokers)} brokers, "
            f"{controller}")


def zookeeper(cluster: Cluster, timeout: float = TIMEOUT) -> str:
    """A session with the cluster's ZooKeeper security (TLS, kafkaops' digest identity), and its chroot.

    ZooKeeper accepts any ``digest`` password at login (the identity is only compared with a znode's ACL),
    so a wrong one shows when the lock is taken, not here.

    Raises:
        AuthError: TLS refused. UnreachableError: no session. ConfigError: the chroot does not exist.
    """
    from kafkaops.systems.zookeeper import ZooKeeper

    with ZooKeeper.for_cluster(cluster, timeout=timeout, dry_run=True) as zk:
        path, exists = zk.chroot()
        if not exists:
            raise ConfigError(f"ZooKeeper {cluster.zookeeper}: the chroot {path} does not exist (a session works, "
                              "but no broker is registered there)", hint="check kafka.zookeeper's chroot in the "
                              "inventory against the brokers' zookeeper.connect")
        brokers = zk.registered_brokers()
    sec = cluster.zookeeper_security
    how = ", ".join(w for w in ("TLS" if sec and sec.tls else "", f"digest as {sec.username}"
                                if sec and sec.authenticated else "") if w) or "plaintext"
    return f"session established ({how}); chroot {path} exists, {len(brokers)} brokers registered"


def etcd(cluster: Cluster, timeout: float = TIMEOUT) -> str:
    """``/health`` answered healthy by the etcd of the cluster's lock (its TLS and client certificate), and by
    conftool's etcd as conftool speaks to it (its etcdrc's CA, certificate and user).

    Raises:
        AuthError: TLS or the credentials refused. UnreachableError: not healthy, or no answer.
    """
    said = []
    if cluster.etcd:
        from kafkaops.systems.etcd import EtcdLockBackend

        lock = EtcdLockBackend(cluster.etcd, timeout=timeout, tls=cluster.etcd_tls)
        try:
            said.append(lock.health() + (" (kafkaops' client certificate)" if cluster.etcd_tls else ""))
        finally:
            lock.close()
    if cluster.conftool_config:
        from kafkaops.systems.conftool import etcd_health

        said.append(etcd_health(cluster.conftool_config, timeout=timeout))
    return "; ".join(said) or "no etcd in the inventory"


def alertmanager(cluster: Cluster, timeout: float = TIMEOUT) -> str:
    """``/-/ready`` answered by the inventory's Alertmanager, with its ``monitoring.auth``.

    Raises:
        AuthError: 401/403. UnreachableError: no answer, or not ready.
    """
    from kafkaops.systems.alertmanager import Alertmanager

    monitoring = cluster.monitoring
    if monitoring is None or not monitoring.alertmanager:
        return "no alertmanager in the inventory"
    am = Alertmanager(monitoring.alertmanager, timeout=timeout, dry_run=True, auth=monitoring.auth)
    try:
        return am.ready()
    finally:
        am.close()


def ssh_host_key(cluster: Cluster, timeout: float = TIMEOUT) -> str:
    """The first host's SSH key or host certificate, verified against the known hosts and ``@cert-authority``
    lines a run's connection is verified by (:meth:`~kafkaops.systems.ssh.SshClient.verify_host_key`):
    a key exchange only, no login.

    Raises:
        HostKeyError: unknown, different or revoked key; a certificate that does not prove the host.
        UnreachableError: no SSH handshake.
    """
    from kafkaops.systems.ssh import BehindBastion, SshClient

    if not cluster.hosts:
        return "no host in the inventory"
    host = cluster.hosts[0]
    try:
        return f"{host.name}: " + SshClient(host.ssh, name=host.name, connect_timeout=timeout,
                                            dry_run=True).verify_host_key()
    except BehindBastion as exc:
        return Unchecked(str(exc))
