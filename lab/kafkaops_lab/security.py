"""The secured lab's Kafka: a lab CA, a certificate per broker, SCRAM users, SASL_SSL listeners.

A lab whose inventory says ``kafka.security.protocol: SASL_SSL`` is secured as production clusters are
(issue 43): every listener, inter-broker traffic included, is TLS with SCRAM-SHA-512, so a plaintext client
or a wrong password is refused by the real brokers, and every kafkaops client is shown to work that way.

At ``lab up``, before any broker starts:

* a lab CA (``openssl``, EC P-256, valid 30 days: a lab lives hours) and, per broker, a key and a
  certificate for its FQDN and loopback address, in a PKCS#12 keystore the broker reads;
* one password per SCRAM user (``broker``, ``kafkaops``, ``eventbus``, ``load``), each in a 0600 file;
  kafkaops' own at the path the inventory names, as a Puppet-managed admin host would hold it;
* the users' SCRAM credentials written to ZooKeeper (``/config/users/NAME``) as Kafka's ``kafka-configs
  --zookeeper`` writes them, computed here with ``scramp``: no password on any command line.

The brokers run ``AclAuthorizer`` with ``User:broker`` as the only super user, and nothing is allowed
without an ACL. Before they start, :func:`write_acls` gives ``kafkaops`` exactly what
:mod:`kafkaops.policy.kafka_acls` says it needs, and the eventbus and the load generator their topics and
groups. The lab's own set-up (topics, test data) runs as ``broker`` (:func:`admin_endpoint`), so every test
runs kafkaops with its least privilege.

Nothing here is imported by the product: the lab is one more user of the inventory's ``kafka.security``.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from base64 import b64encode
from dataclasses import replace
from pathlib import Path

from kafkaops.errors import LabError
from kafkaops.model import Cluster, KafkaEndpoint, KafkaSecurity, Secret
from kafkaops.policy import kafka_acls as acls
from kafkaops.policy.kafka_acls import Acl
from kafkaops_lab.dirs import lab_dir
from kafkaops_lab.spec import LabHostSpec, LabSpec

MECHANISM = "SCRAM-SHA-512"
#: The load generator's topic, and the prefix of its checker's consumer groups (one per run).
LOAD_TOPIC = "lab.load"
LOAD_GROUP_PREFIX = "kafkaops-load-"
#: The two-site lab's switched service's consumer group (inventory/lab-sites.yaml ``consumer_groups``): the
#: switchover's load (:mod:`kafkaops_lab.switch_load`) reads the service's topics in it as ``load``.
SWITCHED_GROUP = "lab-switchover"
#: The lab's SCRAM users: the brokers (inter-broker), kafkaops, the eventbus service, the load generator.
USERS = ("broker", "kafkaops", "eventbus", "load")
_ITERATIONS = 4096
_VALID_DAYS = 30


def tls_dir(spec: LabSpec) -> Path:
    return Path(spec.lab_dir) / "tls"


def ca_file(spec: LabSpec) -> Path:
    """The lab CA's certificate: the inventory's ``kafka.security.ca_file`` when it names one."""
    return Path(spec.kafka_ca_file) if spec.kafka_ca_file else tls_dir(spec) / "ca.pem"


def password_file(spec: LabSpec, user: str) -> Path:
    """Where ``user``'s password lives (0600): kafkaops' at the inventory's ``password_file``."""
    if user == "kafkaops" and spec.kafka_password_file:
        return Path(spec.kafka_password_file)
    return Path(spec.lab_dir) / "secrets" / f"{user}.password"


def keystore(spec: LabSpec, h: LabHostSpec) -> Path:
    return tls_dir(spec) / f"{h.name}.p12"


def endpoint(spec: LabSpec, user: str = "kafkaops") -> KafkaEndpoint:
    """The lab's brokers as ``user`` reaches them (plaintext on a plaintext lab)."""
    if not spec.secured:
        return KafkaEndpoint(spec.bootstrap_servers, cluster=spec.cluster)
    sec = KafkaSecurity(protocol="SASL_SSL", ca_file=str(ca_file(spec)), sasl_mechanism=MECHANISM, username=user,
                        password=Secret(file=str(password_file(spec, user))))
    return KafkaEndpoint(spec.bootstrap_servers, sec, spec.cluster)


def user_endpoint(cluster: Cluster, user: str) -> KafkaEndpoint:
    """A lab cluster's brokers as one of the lab's own users (``load``, ``eventbus``) reaches them, from its
    inventory alone: kafkaops' settings with that user and its password file beside the lab's others."""
    base = cluster.kafka
    sec = base.security
    if not sec.sasl or user == sec.username:
        return base
    secret = Secret(file=str(lab_dir(cluster.name) / "secrets" / f"{user}.password"))
    return replace(base, security=replace(sec, username=user, password=secret))


def admin_endpoint(cluster: Cluster) -> KafkaEndpoint:
    """A lab cluster's brokers as the lab's super user (``broker``): for the lab's and its tests' own set-up
    (creating topics, writing or deleting test data), never for kafkaops."""
    return user_endpoint(cluster, "broker")


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if done.returncode:
        raise LabError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")


def write_private(path: Path, text: str) -> None:
    """``text`` in ``path``, readable by its owner only (0600) from its first byte: a file that holds a
    password or a key (server.properties, MirrorMaker's config, the lab's secrets)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def _certificate(spec: LabSpec, name: str, subject: str, san: str, key: Path, cert: Path) -> None:
    """A key and a certificate for ``san`` signed by the lab CA (server and client use)."""
    d = tls_dir(spec)
    csr, ext = d / f"{name}.csr", d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n")
    key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
             "-out", str(csr), "-subj", f"/CN={subject}")
    key.chmod(0o600)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_file(spec)), "-CAkey", str(d / "ca.key"),
             "-CAcreateserial", "-out", str(cert), "-days", str(_VALID_DAYS), "-extfile", str(ext))
    for tmp in (csr, ext):
        tmp.unlink()


def etcd_client_pem(spec: LabSpec) -> Path:
    """kafkaops' etcd client certificate and key in one 0600 file, as conftool's etcdrc names it."""
    return tls_dir(spec) / "etcd-client-combined.pem"


def zookeeper_tls_properties(spec: LabSpec) -> str:
    """zoo.cfg's TLS port for kafkaops (Netty, client certificates of the lab CA required; the keystore's
    password read from a 0600 file, never written in zoo.cfg); "" without one."""
    if not spec.zk_secure_port:
        return ""
    d = tls_dir(spec)
    return f"""secureClientPort={spec.zk_secure_port}
secureClientPortAddress={spec.zk_address}
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location={d / "zookeeper.p12"}
ssl.keyStore.passwordPath={d / "zookeeper-keystore.password"}
ssl.keyStore.type=PKCS12
ssl.trustStore.location={ca_file(spec)}
ssl.trustStore.type=PEM
ssl.clientAuth=need
"""


def etcd_server_args(spec: LabSpec) -> list[str]:
    """etcd's flags for TLS with client certificates required (none on a plain-http lab)."""
    if not spec.etcd_cert_file:
        return []
    d = tls_dir(spec)
    return ["--cert-file", str(d / "etcd-server.pem"), "--key-file", str(d / "etcd-server.key"),
            "--client-cert-auth", "--trusted-ca-file", str(ca_file(spec))]


def prepare(spec: LabSpec) -> None:
    """The CA, each broker's keystore, etcd's certificates, and every user's password file (before
    anything starts)."""
    if spec.zookeeper_password_file:
        write_private(Path(spec.zookeeper_password_file), secrets.token_urlsafe(24) + "\n")
    if not spec.needs_ca:
        return
    d = tls_dir(spec)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key, ca = d / "ca.key", ca_file(spec)
    ca.parent.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             str(ca_key), "-out", str(ca), "-days", str(_VALID_DAYS), "-subj", f"/CN=kafkaops lab CA {spec.cluster}")
    if spec.etcd_cert_file:
        _certificate(spec, "etcd-server", spec.etcd_address, f"IP:{spec.etcd_address}", d / "etcd-server.key",
                     d / "etcd-server.pem")
        client_key, client_cert = Path(spec.etcd_key_file), Path(spec.etcd_cert_file)
        _certificate(spec, "etcd-client", "kafkaops", "DNS:kafkaops", client_key, client_cert)
        write_private(etcd_client_pem(spec), client_cert.read_text() + client_key.read_text())
    if spec.zk_secure_port:
        key, cert, zk_store = d / "zookeeper.key", d / "zookeeper.pem", d / "zookeeper-keystore.password"
        _certificate(spec, "zookeeper", spec.zk_address, f"IP:{spec.zk_address}", key, cert)
        write_private(zk_store, secrets.token_urlsafe(24))
        _openssl("pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-out", str(d / "zookeeper.p12"),
                 "-name", "zookeeper", "-passout", f"file:{zk_store}")
        _certificate(spec, "zookeeper-client", "kafkaops", "DNS:kafkaops", Path(spec.zookeeper_key_file),
                     Path(spec.zookeeper_cert_file))
    if not spec.secured:
        return
    for user in USERS:
        write_private(password_file(spec, user), secrets.token_urlsafe(24) + "\n")
    store_password = password_file(spec, "broker").read_text().strip()
    for h in (*spec.brokers, *spec.controllers):
        node_keystore(spec, h)
    if not store_password:
        raise LabError("the lab's broker password is empty")


def node_keystore(spec: LabSpec, h: LabHostSpec) -> None:
    """A broker's (or controller's) key and certificate, signed by the lab's CA, in its PKCS#12 keystore: at
    ``lab up`` for each node, and for a host added to a running lab (``lab host add``)."""
    d = tls_dir(spec)
    ca_key, ca = d / "ca.key", ca_file(spec)
    key, csr, cert = d / f"{h.name}.key", d / f"{h.name}.csr", d / f"{h.name}.pem"
    ext = d / f"{h.name}.ext"
    ext.write_text(f"subjectAltName=DNS:{h.fqdn},IP:{h.address}\nextendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
             "-out", str(csr), "-subj", f"/CN={h.fqdn}")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", str(_VALID_DAYS), "-extfile", str(ext))
    # The keystore's password comes from a file descriptor's worth of file, never the argv.
    _openssl("pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-out", str(keystore(spec, h)),
             "-name", h.fqdn, "-passout", f"file:{password_file(spec, 'broker')}")
    for tmp in (csr, ext):
        tmp.unlink()


def scram_credentials(password: str) -> str:
    """A SCRAM-SHA-512 credential as Kafka stores it in ZooKeeper (``ScramCredentialUtils``):
    ``salt=...,stored_key=...,server_key=...,iterations=N``, base64."""
    from scramp import ScramMechanism

    salt, stored_key, server_key, iterations = ScramMechanism(MECHANISM).make_auth_info(
        password, iteration_count=_ITERATIONS)
    return (f"salt={b64encode(salt).decode()},stored_key={b64encode(stored_key).decode()},"
            f"server_key={b64encode(server_key).decode()},iterations={iterations}")


def create_users(spec: LabSpec) -> None:
    """Every lab user's SCRAM credential in ZooKeeper, before the first broker starts (a broker reads them
    at start-up; later changes would need ``/config/changes`` notifications, which kafka-configs writes)."""
    if not spec.secured or spec.kraft:
        return
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=spec.zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        for user in USERS:
            secret = password_file(spec, user).read_text().strip()
            data = json.dumps({"version": 1, "config": {MECHANISM: scram_credentials(secret)}}).encode()
            zk.ensure_path("/config/users")
            zk.create(f"/config/users/{user}", data)
    finally:
        zk.stop()
        zk.close()


def grants(service_prefixes: tuple[str, ...]) -> dict[str, list[Acl]]:
    """Every lab user's ACLs: kafkaops' least privilege, the eventbus' service topics, the load's topic and
    groups, and the switched service's topics and consumer group on the two-site lab. ``broker`` is the
    super user and needs none."""
    eventbus = [acls.topic(op, p, "PREFIXED") for p in service_prefixes for op in ("WRITE", "DESCRIBE")]
    load = [*(acls.topic(op, LOAD_TOPIC) for op in ("WRITE", "READ", "DESCRIBE")),
            *(Acl(op, "GROUP", LOAD_GROUP_PREFIX, "PREFIXED") for op in ("READ", "DESCRIBE")),
            *(acls.topic("READ", p, "PREFIXED") for p in service_prefixes),
            *(acls.group(op, SWITCHED_GROUP) for op in ("READ", "DESCRIBE"))]
    return {"kafkaops": acls.required(service_prefixes), "eventbus": eventbus, "load": load}


def write_acls(spec: LabSpec, service_prefixes: tuple[str, ...]) -> None:
    """Every :func:`grants` ACL written to ZooKeeper as ``AclAuthorizer`` stores them (``/kafka-acl/<Type>/<name>``,
    prefixed ones under ``/kafka-acl-extended/prefixed``), before the first broker starts: every broker loads
    them at start-up. Granted through the Admin API once the brokers run, they reach each broker's cache a
    moment later, and a client refused in that moment can stay broken (an idempotent producer refused its
    producer id is dead: the eventbus' was)."""
    if not spec.secured or spec.kraft:
        return
    from kazoo.client import KazooClient

    operation = {"DESCRIBE": "Describe", "READ": "Read", "WRITE": "Write", "ALTER": "Alter",
                 "DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "AlterConfigs"}
    resource = {"TOPIC": "Topic", "GROUP": "Group", "CLUSTER": "Cluster"}
    znodes: dict[str, list[dict[str, str]]] = {}
    for user, wanted in grants(service_prefixes).items():
        for acl in wanted:
            root = "/kafka-acl" if acl.pattern == "LITERAL" else "/kafka-acl-extended/prefixed"
            znodes.setdefault(f"{root}/{resource[acl.resource]}/{acl.name}", []).append(
                {"principal": f"User:{user}", "permissionType": "Allow", "host": "*",
                 "operation": operation[acl.operation]})
    zk = KazooClient(hosts=spec.zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        for path, entries in sorted(znodes.items()):
            zk.create(path, json.dumps({"version": 1, "acls": entries}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


#: ZooKeeper mode's authorizer (ACLs in ZooKeeper) and KRaft's (ACLs in the metadata log, KIP-801).
ZK_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
KRAFT_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def authorizer(name: str, super_users: tuple[str, ...] = ("broker",)) -> str:
    """An authorizer with ``super_users`` and nothing allowed without an ACL."""
    return f"""authorizer.class.name={name}
super.users={";".join(f"User:{u}" for u in super_users)}
allow.everyone.if.no.acl.found=false
"""


def _scram_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def tls_store_properties(spec: LabSpec, h: LabHostSpec) -> str:
    """The node's keystore (its certificate) and the lab CA as truststore: for every listener it serves and
    every connection it makes."""
    return f"""ssl.keystore.type=PKCS12
ssl.keystore.location={keystore(spec, h)}
ssl.keystore.password={password_file(spec, "broker").read_text().strip()}
ssl.truststore.type=PEM
ssl.truststore.location={ca_file(spec)}
"""


def listener_properties(spec: LabSpec, h: LabHostSpec, authorizer_class: str = ZK_AUTHORIZER) -> str:
    """A broker's listener: SASL_SSL for clients and brokers alike (SCRAM), with ``authorizer_class``."""
    if not spec.secured:
        return f"""listeners=PLAINTEXT://{h.address}:{h.kafka_port}
advertised.listeners=PLAINTEXT://{h.address}:{h.kafka_port}
"""
    broker_password = password_file(spec, "broker").read_text().strip()
    return f"""listeners=SASL_SSL://{h.address}:{h.kafka_port}
advertised.listeners=SASL_SSL://{h.address}:{h.kafka_port}
security.inter.broker.protocol=SASL_SSL
sasl.enabled.mechanisms={MECHANISM}
sasl.mechanism.inter.broker.protocol={MECHANISM}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={_scram_jaas("broker", broker_password)}
""" + tls_store_properties(spec, h) + authorizer(authorizer_class)


def broker_listener_name(spec: LabSpec) -> str:
    return "SASL_SSL" if spec.secured else "PLAINTEXT"


def controller_channel(spec: LabSpec) -> str:
    """The controller listener's security on a secured migration lab, on both its ends (a controller serves it,
    a broker calls it): SASL_SSL, SASL PLAIN between the nodes as ``broker``, SCRAM-SHA-512 for kafkaops'
    tools (``kafka-metadata-quorum``, ``kafka-features`` with ``--bootstrap-controller``).

    Why PLAIN between the nodes: a controller checks SCRAM against the credentials in its metadata log,
    which holds none until the migration copies ZooKeeper's, and the nodes must talk before that. kafkaops'
    own SCRAM credential is put in the controllers' log when their storage is formatted (KIP-900,
    :meth:`kafkaops_lab.host.LabHost.format_storage`), so its tools authenticate as it does everywhere."""
    if not spec.secured:
        return ""
    pw = password_file(spec, "broker").read_text().strip()
    return f"""sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN,{MECHANISM}
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
  required username="broker" password="{pw}" user_broker="{pw}";
listener.name.controller.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\
  required;
"""


def protocol_map(spec: LabSpec) -> str:
    """``listener.security.protocol.map`` of a node that has (or calls) a controller listener."""
    proto = broker_listener_name(spec)
    return f"listener.security.protocol.map={proto}:{proto},CONTROLLER:{proto}\n"


def controller_security(spec: LabSpec, h: LabHostSpec) -> str:
    """A secured migration lab's controller: its TLS stores, the controller channel, KRaft's authorizer with
    ``kafkaops`` a super user of the controllers (they hold no ACL until the migration copies ZooKeeper's,
    and kafkaops asks them DescribeQuorum, which needs DESCRIBE on the cluster, before that: docs/security.md).
    """
    if not spec.secured:
        return ""
    return (tls_store_properties(spec, h) + controller_channel(spec)
            + authorizer(KRAFT_AUTHORIZER, ("broker", "kafkaops")))


def controller_to_brokers(spec: LabSpec) -> str:
    """How a migrating controller reaches the ZooKeeper-mode brokers (it sends them metadata): their listener,
    as ``broker`` with SCRAM on a secured lab."""
    if not spec.secured:
        return "inter.broker.listener.name=PLAINTEXT\n"
    pw = password_file(spec, "broker").read_text().strip()
    return f"""inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms={MECHANISM}
sasl.mechanism.inter.broker.protocol={MECHANISM}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={_scram_jaas("broker", pw)}
"""


def format_scram_argument(spec: LabSpec) -> str:
    """``kafka-storage format``'s ``--add-scram`` value for kafkaops (its password inside: given to the JVM in
    a 0600 argument file, never on a command line)."""
    pw = password_file(spec, "kafkaops").read_text().strip()
    return f'{MECHANISM}=[name=kafkaops,password="{pw}"]'
