"""Load and validate ``inventory/*.yaml`` into :mod:`kafkaops.model` objects.

The inventory is the only place that knows how a site does things: addresses, broker ids, racks,
conftool tags, and the *command templates* (how to stop Kafka, reboot, read the boot id, deploy).
That is what lets one runbook serve production (``sudo -n systemctl stop kafka``) and the lab.

Errors name the file, the line and the key path (``inventory/lab.yaml:12: hosts.kafka1001.broker_id:
expected an integer, got 'x'``) because an operator fixing an inventory at 3 a.m. should not have to
guess. Strings may use ``${VAR}`` / ``${VAR:-default}`` and ``~``, expanded at load time.

Why one module of ~890 lines: it is one job, the inventory format's reader, and most of it is the
one-line error (file:line, the key path, the fix) of each key of that format — hosts, commands, pools,
security, monitoring, sites; split by key, the format would have no single place to read, as with the
runbook format (:mod:`kafkaops.engine.runbook`). The types it builds are :mod:`kafkaops.model`'s.
:func:`check_inventory` runs the same reader collecting every error (``kafkaops inventory check``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from kafkaops.errors import ConfigError, UnknownHostError
from kafkaops.model import (
    KAFKA_PROTOCOLS,
    MONITORING_HOST_FIELDS,
    MONITORING_OWN_HOST_FIELDS,
    MONITORING_SCOPE_FIELDS,
    PLAINTEXT,
    SASL_MECHANISMS,
    Cluster,
    Host,
    HttpAuth,
    KafkaSecurity,
    MetricGate,
    Monitoring,
    Secret,
    Service,
    SshEndpoint,
    SwitchedService,
    TlsFiles,
    ZooKeeperSecurity,
    fill_template,
    template_fields,
)
from kafkaops.places import inventory_files
from kafkaops.templates import check_template

#: Command templates every inventory must define; runbooks fail to bind without them.
REQUIRED_COMMANDS = ("kafka_stop", "kafka_start", "kafka_status", "reboot", "boot_id")
#: Templates a runbook may use when present.
OPTIONAL_COMMANDS = ("service_restart", "service_status", "deploy", "syn_capture", "service_log",
                     "service_pid", "deploy_revision", "system_state", "kafka_log", "failed_events_read",
                     "kafka_reassign", "kafka_metadata_quorum", "vip_syn_capture",
                     # the ZooKeeper -> KRaft migration (docs/migration.md)
                     "kafka_version", "kafka_configure", "kafka_configured", "kafka_storage_id", "kafka_format",
                     "kafka_deprovision",
                     # the rolling upgrade (kafkaops rolling-upgrade)
                     "kafka_install", "kafka_features",
                     # KRaft quorum membership (kafkaops controllers add|remove) and unregistering a broker
                     "kafka_add_controller", "kafka_cluster")
#: What ``environment:`` may say: a lab needs no --yes for a benchmark; production is the default.
ENVIRONMENTS = ("production", "lab")

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def default_inventory() -> Path:
    """The inventory used when a command is given neither a file nor a name to look up: the only one of
    the place in use (:mod:`kafkaops.places`). Never the lab's: a production command that silently fell
    back to it would act on the wrong site.

    Raises:
        ConfigError: No inventory anywhere (naming the places searched), or several to choose from.
    """

    found = inventory_files()
    if len(found) > 1:
        raise ConfigError(f"{len(found)} inventories in {found[0].parent}, none named",
                          hint="pass --inventory FILE")
    return found[0]


def expand(value: str) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` and a leading ``~`` in one inventory string."""

    def sub(match: re.Match[str]) -> str:
        name, default = match.group("name"), match.group("default")
        env = os.environ.get(name)
        if env:
            return env
        if default is not None:
            return default
        raise KeyError(name)

    out = _VAR.sub(sub, value)
    return os.path.expanduser(out) if out.startswith("~") else out


class _Doc:
    """A parsed YAML document that remembers the line of every key, for error messages.

    With ``collect`` (``kafkaops inventory check``) every independent part of the file is checked even
    after one failed: :meth:`part` keeps its error in :attr:`collected` and the load goes on to the next
    (a host, a section, a key); otherwise the first error stops the load, as every command needs.
    """

    def __init__(self, path: Path, *, collect: bool = False) -> None:
        self.path = path
        self.collected: list[ConfigError] | None = [] if collect else None
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read inventory: {exc.strerror}",
                              hint="pass --inventory FILE or set KAFKAOPS_INVENTORY") from exc
        except UnicodeDecodeError as exc:
            line = exc.object[:exc.start].count(b"\n") + 1
            raise ConfigError(f"{path}:{line}: cannot read inventory: not UTF-8 text "
                              f"(byte {exc.object[exc.start]:#04x})", hint="save it as UTF-8") from exc
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 5x faster
        try:
            node = yaml.compose(text, Loader=loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
        self.lines: dict[str, int] = {}
        if node is not None:
            self._index(node, "")
        self.data: Any = yaml.load(text, Loader=loader)

    def _index(self, node: yaml.Node, prefix: str) -> None:
        self.lines[prefix] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                path = f"{prefix}.{key.value}" if prefix else str(key.value)
                line = key.start_mark.line + 1
                if path in seen:  # YAML loaders keep the last silently: two hosts would become one
                    twice = ConfigError(f"{self.path}:{line}: {path}: defined twice (first at line {seen[path]})",
                                        hint="a key may appear once per mapping: remove or rename one")
                    if self.collected is None:
                        raise twice
                    self.collected.append(twice)
                seen[path] = line
                self.lines[path] = line
                self._index(value, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._index(item, f"{prefix}[{i}]")

    @contextmanager
    def part(self) -> Iterator[None]:
        """One part of the file, checked on its own: when collecting, its error is kept and the next part is
        checked; otherwise the error stops the load."""
        try:
            yield
        except ConfigError as exc:
            if self.collected is None:
                raise
            self.collected.append(exc)

    def error(self, key: str, what: str) -> ConfigError:
        """An error at ``key``, located at its line (or its nearest parent's)."""
        probe = key
        while probe and probe not in self.lines:
            probe = probe.rsplit(".", 1)[0] if "." in probe else ""
        line = self.lines.get(probe)
        where = f"{self.path}:{line}" if line else str(self.path)
        return ConfigError(f"{where}: {key}: {what}")


class _Reader:
    """Typed access to a mapping at a key path, raising errors that say where and what."""

    def __init__(self, doc: _Doc, data: Any, path: str) -> None:
        if not isinstance(data, Mapping):
            raise doc.error(path or "(top)", f"expected a mapping, got {type(data).__name__}")
        self.doc, self.data, self.path = doc, data, path

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def allow(self, *names: str) -> None:
        for k in self.data:
            if k not in names:
                with self.doc.part():
                    raise self.doc.error(self.key(str(k)), f"unknown key (allowed: {', '.join(names)})")

    def has(self, name: str) -> bool:
        return name in self.data and self.data[name] is not None

    def text(self, name: str, default: str | None = None, *, required: bool = True) -> str | None:
        if not self.has(name):
            if default is None and required:
                raise self.doc.error(self.key(name) if self.path else name, "missing required key")
            return default
        value = self.data[name]
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.doc.error(self.key(name), f"expected a string, got {type(value).__name__}")
        try:
            return expand(str(value))
        except KeyError as exc:
            raise self.doc.error(self.key(name),
                                 f"environment variable {exc.args[0]} is not set and has no default") from exc

    def integer(self, name: str, default: int | None = None) -> int:
        if not self.has(name):
            if default is None:
                raise self.doc.error(self.key(name), "missing required key")
            return default
        value = self.data[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.doc.error(self.key(name), f"expected an integer, got {value!r}")
        return value

    def number(self, name: str) -> float:
        if not self.has(name):
            raise self.doc.error(self.key(name), "missing required key")
        value = self.data[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.doc.error(self.key(name), f"expected a number, got {value!r}")
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        if not self.has(name):
            return default
        value = self.data[name]
        if not isinstance(value, bool):
            raise self.doc.error(self.key(name), f"expected true or false, got {value!r}")
        return value

    def sub(self, name: str, *, required: bool = True) -> _Reader | None:
        if not self.has(name):
            if required:
                raise self.doc.error(self.key(name), "missing required section")
            return None
        return _Reader(self.doc, self.data[name], self.key(name))

    def str_map(self, name: str) -> dict[str, str]:
        sub = self.sub(name, required=False)
        if sub is None:
            return {}
        return {str(k): sub.text(str(k)) or "" for k in sub.data}

    def str_list(self, name: str) -> list[str]:
        if not self.has(name):
            return []
        value = self.data[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.doc.error(self.key(name), "expected a list of strings")
        return [expand(v) for v in value]


def _ssh(r: _Reader | None, address: str, defaults: SshEndpoint | None) -> SshEndpoint:
    d = defaults or SshEndpoint(address=address)
    if r is None:
        return SshEndpoint(address=address, port=d.port, user=d.user, key_file=d.key_file,
                           known_hosts=d.known_hosts, proxy_jump=d.proxy_jump)
    r.allow("address", "port", "user", "key_file", "known_hosts", "proxy_jump")
    return SshEndpoint(
        address=r.text("address", address) or address,
        port=r.integer("port", d.port) if (r.has("port") or d.port is not None) else None,
        user=r.text("user", d.user, required=False),
        key_file=r.text("key_file", d.key_file, required=False),
        known_hosts=r.text("known_hosts", d.known_hosts, required=False),
        proxy_jump=r.text("proxy_jump", d.proxy_jump, required=False),
    )


def _kafka_security(r: _Reader | None) -> KafkaSecurity:
    """``kafka.security``: how every Kafka client of kafkaops connects (docs/inventory.md, docs/security.md).

    Secrets are named by file or environment variable, never written inline: an inventory is reviewed,
    committed and copied, a password in it leaks with it. A secret file (password, private key) that other
    users may read is refused here, before anything connects. A file that does not exist yet is reported
    when kafkaops first connects, before any change: a reviewer can load an inventory on a machine that
    does not hold the secrets.
    """
    if r is None:
        return PLAINTEXT
    r.allow("protocol", "ca_file", "cert_file", "key_file", "sasl")
    protocol = (r.text("protocol") or "").upper()
    if protocol not in KAFKA_PROTOCOLS:
        raise r.doc.error(r.key("protocol"), f"unknown protocol {protocol!r} (known: {', '.join(KAFKA_PROTOCOLS)})")
    tls, sasl_on = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
    files = _tls_keys(r)
    if not tls and any(files.values()):
        raise r.doc.error(r.key(next(k for k, v in files.items() if v)),
                          f"a {protocol} connection uses no TLS files: remove it, or use SSL or SASL_SSL")
    sasl = r.sub("sasl", required=False)
    if sasl_on != (sasl is not None):
        raise r.doc.error(r.key("sasl" if sasl is not None else "protocol"),
                          f"{protocol} {'takes no' if sasl is not None else 'needs a'} sasl: section "
                          f"(mechanism, username, password_file or password_env)")
    if sasl is None:
        return KafkaSecurity(protocol=protocol, **files)
    password = _secret(sasl, "password", required=True)
    sasl.allow("mechanism", "username", "password_file", "password_env")
    mechanism = (sasl.text("mechanism") or "").upper()
    if mechanism not in SASL_MECHANISMS:
        why = (" (GSSAPI/Kerberos: the confluent-kafka wheels are built without Cyrus SASL, so librdkafka "
               "cannot speak it; `kafkaops docs security`)" if mechanism == "GSSAPI" else "")
        raise r.doc.error(sasl.key("mechanism"), f"unknown SASL mechanism {mechanism!r} "
                          f"(known: {', '.join(SASL_MECHANISMS)}){why}")
    if mechanism == "PLAIN" and not tls:
        raise r.doc.error(sasl.key("mechanism"), "PLAIN over SASL_PLAINTEXT sends the password in clear text: "
                          "use SASL_SSL, or a SCRAM mechanism")
    return KafkaSecurity(protocol=protocol, **files, sasl_mechanism=mechanism,
                         username=sasl.text("username"), password=password)


def _tls_keys(r: _Reader, *, ca_required: bool = False) -> dict[str, Any]:
    """A TLS client's ``ca_file``, ``cert_file`` and ``key_file`` (each absolute; the key only its owner
    reads; certificate and key both or neither), as keyword arguments of the security it belongs to."""
    files: dict[str, Any] = {k: r.text(k, required=ca_required and k == "ca_file")
                             for k in ("ca_file", "cert_file", "key_file")}
    if bool(files["cert_file"]) != bool(files["key_file"]):
        raise r.doc.error(r.key("cert_file" if files["key_file"] else "key_file"),
                          "mutual TLS needs both cert_file and key_file")
    for k, path in files.items():
        if path is not None:
            _check_file(r, k, path, secret=k == "key_file")
    return files


def _tls_files(r: _Reader | None) -> TlsFiles | None:
    """``conftool.tls``: kafkaops' own TLS to etcd (a CA, and a client certificate and key for mutual TLS).
    conftool reads its own configuration for the same server, as in production."""
    if r is None:
        return None
    r.allow("ca_file", "cert_file", "key_file")
    return TlsFiles(**_tls_keys(r, ca_required=True))


def _zookeeper_security(r: _Reader | None) -> ZooKeeperSecurity | None:
    """``kafka.zookeeper_security``: TLS to ZooKeeper's secure port (``ca_file``, and a client certificate
    for mutual TLS) and kafkaops' identity there (``digest``: ZooKeeper's built-in scheme, with which the lock
    znode's ACL is made). SASL to ZooKeeper is not offered: kazoo speaks it only through pure-sasl, which is
    not maintained."""
    if r is None:
        return None
    r.allow("ca_file", "cert_file", "key_file", "digest")
    files = _tls_keys(r)
    if files["cert_file"] and not files["ca_file"]:
        raise r.doc.error(r.key("ca_file"), "a client certificate is for TLS: give the ca_file ZooKeeper's "
                          "certificate chains to")
    digest = r.sub("digest", required=False)
    username, password = None, None
    if digest is not None:
        password = _secret(digest, "password", required=True)
        digest.allow("username", "password_file", "password_env")
        username = digest.text("username")
    if not files["ca_file"] and digest is None:
        raise r.doc.error(r.key("ca_file"), "give ca_file (TLS) and/or digest (who kafkaops is to ZooKeeper)")
    return ZooKeeperSecurity(**files, username=username, password=password)


def _check_file(r: _Reader, key: str, path: str, *, secret: bool) -> None:
    """An inventory's file: an absolute path; a secret one not readable by group or others (if it exists)."""
    if not os.path.isabs(path):
        raise r.doc.error(r.key(key), f"expected an absolute path, got {path!r}")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # checked again, with the error, right before kafkaops connects
    if secret and mode & 0o077:
        raise r.doc.error(r.key(key), f"{path} may be read by other users (mode {mode & 0o777:04o}): "
                          f"chmod 600 {path}")


def _services(r: _Reader | None) -> dict[str, Service]:
    if r is None:
        return {}
    out: dict[str, Service] = {}
    for name in r.data:
        s = r.sub(str(name))
        assert s is not None
        s.allow("port", "log_file", "error_patterns", "health_path", "vip", "events_path", "failed_events_log",
                "baseline", "active")
        baseline_rps, baseline_note = None, None
        b = s.sub("baseline", required=False)
        if b is not None:
            b.allow("requests_per_second", "note")
            baseline_rps = b.number("requests_per_second")
            if baseline_rps <= 0:
                raise r.doc.error(b.key("requests_per_second"), f"expected a positive number, got {baseline_rps}")
            baseline_note = b.text("note", required=False)
        for pattern_index, pattern in enumerate(s.str_list("error_patterns")):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise r.doc.error(s.key(f"error_patterns[{pattern_index}]"), f"bad regex: {exc}") from exc
        out[str(name)] = Service(
            name=str(name),
            port=s.integer("port"),
            log_file=s.text("log_file", required=False),
            error_patterns=tuple(s.str_list("error_patterns")),
            health_path=s.text("health_path", required=False),
            vip=s.text("vip", required=False),
            events_path=_path(s, "events_path"),
            failed_events_log=s.text("failed_events_log", required=False),
            baseline_rps=baseline_rps,
            baseline_note=baseline_note,
            active=s.boolean("active", True),
        )
    return out


def _path(r: _Reader, name: str) -> str | None:
    value = r.text(name, required=False)
    if value is not None and not value.startswith("/"):
        raise r.doc.error(r.key(name), f"expected a path starting with '/', got {value!r}")
    return value


def _check_templates(doc: _Doc, path: str, commands: Mapping[str, str]) -> None:
    """Every command template renders values safely: no placeholder inside the template's own quotes."""

    for name, template in commands.items():
        problem = check_template(name, template)
        if problem:
            raise doc.error(f"{path}.{name}", problem)


def _host(doc: _Doc, r: _Reader, name: str, services: dict[str, Service],
          ssh_defaults: SshEndpoint | None, commands: Mapping[str, str], *, broker: bool,
          role: str = "broker") -> Host:
    if role == "controller":  # a KRaft controller node: its node.id, no services, no pool
        r.allow("fqdn", "address", "node_id", "dc", "rack", "ssh", "commands")
    else:
        r.allow("fqdn", "address", "broker_id", "dc", "rack", "ssh", "services", "conftool", "commands")
    address = r.text("address") or ""
    host_services = []
    for i, svc in enumerate(r.str_list("services")):
        if svc not in services:
            raise doc.error(r.key(f"services[{i}]"),
                            f"unknown service {svc!r} (define it under services: {', '.join(services) or 'none'})")
        host_services.append(services[svc])
    unknown_cmds = set(r.str_map("commands")) - set(REQUIRED_COMMANDS) - set(OPTIONAL_COMMANDS)
    if unknown_cmds:
        raise doc.error(r.key("commands"), f"unknown command template(s): {', '.join(sorted(unknown_cmds))}")
    _check_templates(doc, r.key("commands"), r.str_map("commands"))
    fqdn = r.text("fqdn", name) or name
    broker_id = (r.integer("node_id") if role == "controller" else
                 r.integer("broker_id") if broker else r.integer("broker_id", -1))
    dc = rack = ""
    with doc.part():  # checking, a missing dc does not hide a missing rack
        dc = (r.text("dc", "") if not broker else r.text("dc")) or ""
    with doc.part():
        rack = (r.text("rack", "") if not broker else r.text("rack")) or ""
    return Host(
        name=name,
        fqdn=fqdn,
        address=address,
        broker_id=broker_id,
        dc=dc,
        rack=rack,
        ssh=_ssh(r.sub("ssh", required=False), address, ssh_defaults),
        services=tuple(host_services),
        conftool_tags=r.str_map("conftool"),
        commands={**commands, **r.str_map("commands")},
        role=role,
    )


def load_inventory(path: str | Path | None = None) -> Cluster:
    """Load one inventory file (one cluster) and validate it completely.

    Raises:
        ConfigError: naming file, line, key path and the problem (the first one found).
    """
    p = Path(path) if path else default_inventory()
    cluster = _load(_Doc(p), p)
    assert cluster is not None  # without collecting, the first error was raised
    return cluster


def check_inventory(path: str | Path) -> list[ConfigError]:
    """Every error of the inventory file at ``path``, each naming its file:line (``kafkaops inventory
    check``): each host, section and key is checked even when another failed. Empty: it loads."""
    p = Path(path)
    try:
        doc = _Doc(p, collect=True)
    except ConfigError as exc:  # unreadable, or not YAML: nothing further to check
        return [exc]
    assert doc.collected is not None
    try:
        _load(doc, p)
    except ConfigError as exc:  # a part whose failure leaves nothing to check after it
        doc.collected.append(exc)
    return list({str(e): e for e in doc.collected}.values())  # one line per problem


def read_kafka_security(path: str | Path) -> tuple[KafkaSecurity, dict[str, Any]]:
    """The ``kafka.security`` section of the YAML file at ``path`` (an inventory, or a file holding only
    that section), validated as an inventory's, and as written (for ``kafkaops inventory init`` to copy).

    Raises:
        ConfigError: The file has no ``kafka.security``, or it is wrong (file:line).
    """
    p = Path(path)
    doc = _Doc(p)
    top = _Reader(doc, doc.data if doc.data is not None else {}, "")
    kafka = top.sub("kafka")
    assert kafka is not None
    section = kafka.sub("security")
    assert section is not None
    return _kafka_security(section), dict(section.data)


def _load(doc: _Doc, p: Path) -> Cluster | None:
    """The cluster of ``doc``; None when collecting and a part failed (its errors are in ``doc.collected``)."""
    top = _Reader(doc, doc.data if doc.data is not None else {}, "")
    if top.has("sites"):
        with doc.part():
            return _load_sites(doc, top, p)
        return None
    top.allow("cluster", "environment", "kafka", "conftool", "ssh", "commands", "services", "hosts", "deploy_host",
              "checkpoints", "controllers", "monitoring")
    environment = "production"
    with doc.part():
        environment = top.text("environment", "production") or "production"
        if environment not in ENVIRONMENTS:
            raise doc.error("environment", f"expected one of {', '.join(ENVIRONMENTS)}, got {environment!r}")
    checkpoints: dict[str, str] = {}
    with doc.part():
        checkpoints = top.str_map("checkpoints")
    for name, text in checkpoints.items():
        with doc.part():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", name):
                raise doc.error(f"checkpoints.{name}", "a checkpoint name is lower-case letters, digits, - and _ "
                                "(it is typed on the command line: --confirmed NAME)")
            if not text.strip():
                raise doc.error(f"checkpoints.{name}", "say what the operator confirms, e.g. "
                                "'the Services team has paused ChangeProp'")
    cluster_name = ""
    with doc.part():
        cluster_name = top.text("cluster") or ""
    kafka: _Reader | None = None
    zookeeper_security: ZooKeeperSecurity | None = None
    migration: str | None = None
    with doc.part():
        kafka = top.sub("kafka")
    if kafka is not None:
        kafka.allow("bootstrap_servers", "zookeeper", "migration", "security", "zookeeper_security")
        with doc.part():
            zookeeper_security = _zookeeper_security(kafka.sub("zookeeper_security", required=False))
            if zookeeper_security is not None and not kafka.has("zookeeper"):
                raise doc.error("kafka.zookeeper_security",
                                "a cluster without kafka.zookeeper has no ZooKeeper to secure")
        with doc.part():
            migration = kafka.text("migration", required=False)
            if migration not in (None, "to-kraft"):
                raise doc.error("kafka.migration", f"expected to-kraft (a ZooKeeper cluster being migrated to the "
                                f"KRaft controllers listed under controllers:), got {migration!r}")
            if migration and not kafka.has("zookeeper"):
                raise doc.error("kafka.migration", "a migration to KRaft starts from a ZooKeeper cluster: "
                                "set kafka.zookeeper, or remove kafka.migration once the migration is finalized")
    conftool: _Reader | None = None
    pool_weight = 10
    with doc.part():
        conftool = top.sub("conftool", required=False)
    if conftool is not None:
        conftool.allow("etcd", "config", "weight", "tls")
        with doc.part():
            pool_weight = conftool.integer("weight", 10)
            if pool_weight <= 0:
                raise doc.error("conftool.weight", f"expected a positive weight, got {pool_weight}")
    ssh_defaults: SshEndpoint | None = None
    with doc.part():
        ssh_r = top.sub("ssh", required=False)
        ssh_defaults = _ssh(ssh_r, "", None) if ssh_r is not None else None
    commands: dict[str, str] = {}
    with doc.part():
        commands = top.str_map("commands")
        missing = [c for c in REQUIRED_COMMANDS if c not in commands]
        if missing:
            raise doc.error("commands", f"missing command template(s): {', '.join(missing)}")
        unknown = set(commands) - set(REQUIRED_COMMANDS) - set(OPTIONAL_COMMANDS)
        if unknown:
            raise doc.error("commands", f"unknown command template(s): {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(REQUIRED_COMMANDS + OPTIONAL_COMMANDS)})")
        _check_templates(doc, "commands", commands)
    services: dict[str, Service] = {}
    with doc.part():
        services = _services(top.sub("services", required=False))
    hosts: list[Host] = []
    seen_ids: dict[int, str] = {}
    hosts_r: _Reader | None = None
    with doc.part():
        hosts_r = top.sub("hosts")
        assert hosts_r is not None
        if not hosts_r.data:
            raise doc.error("hosts", "no hosts defined")
    for name in hosts_r.data if hosts_r is not None else ():
        with doc.part():
            hr = hosts_r.sub(str(name)) if hosts_r is not None else None
            assert hr is not None
            host = _host(doc, hr, str(name), services, ssh_defaults, commands, broker=True)
            if host.broker_id in seen_ids:
                raise doc.error(hr.key("broker_id"),
                                f"broker id {host.broker_id} already used by {seen_ids[host.broker_id]}")
            seen_ids[host.broker_id] = host.name
            hosts.append(host)
    controllers: list[Host] = []
    ctrl_r: _Reader | None = None
    with doc.part():
        ctrl_r = top.sub("controllers", required=False)
        if ctrl_r is not None and kafka is not None and kafka.has("zookeeper") and not migration:
            raise doc.error("controllers", "a ZooKeeper-mode cluster has no KRaft controller nodes (its "
                            "controller is a broker): remove controllers:, or kafka.zookeeper for a KRaft cluster "
                            "(or set kafka.migration: to-kraft: the quorum this cluster migrates to)")
    for name in (ctrl_r.data or {}) if ctrl_r is not None else ():
        with doc.part():
            cr = ctrl_r.sub(str(name)) if ctrl_r is not None else None
            assert cr is not None
            node = _host(doc, cr, str(name), services, ssh_defaults, commands, broker=False, role="controller")
            if node.broker_id in seen_ids:
                raise doc.error(cr.key("node_id"),
                                f"node id {node.broker_id} already used by {seen_ids[node.broker_id]}")
            if any(node.name == h.name for h in hosts):
                raise doc.error(cr.key("address"), f"{node.name} is both a broker and a controller: "
                                "combined nodes are listed once, under hosts:")
            seen_ids[node.broker_id] = node.name
            controllers.append(node)
    deploy_host = None
    with doc.part():
        deploy_r = top.sub("deploy_host", required=False)
        if deploy_r is not None:
            deploy_r_name = deploy_r.text("name", required=True) or ""
            deploy_r.allow("name", "fqdn", "address", "ssh", "commands")
            deploy_host = _host(doc, _Reader(doc, {k: v for k, v in deploy_r.data.items() if k != "name"},
                                             "deploy_host"),
                                deploy_r_name, services, ssh_defaults, commands, broker=False)
    monitoring = kafka_security = etcd_tls = None
    with doc.part():
        monitoring = _monitoring(top.sub("monitoring", required=False))
    if kafka is not None:
        with doc.part():
            kafka_security = _kafka_security(kafka.sub("security", required=False))
    if conftool is not None:
        with doc.part():
            etcd_tls = _tls_files(conftool.sub("tls", required=False))
    bootstrap = zookeeper = None
    if kafka is not None:
        with doc.part():
            bootstrap = kafka.text("bootstrap_servers") or ""
        with doc.part():
            zookeeper = kafka.text("zookeeper", required=False)
    etcd = conftool_config = None
    if conftool is not None:
        with doc.part():
            etcd = conftool.text("etcd", required=False)
            conftool_config = conftool.text("config", required=False)
    if doc.collected or kafka is None or bootstrap is None:
        return None
    return Cluster(
        name=cluster_name,
        bootstrap_servers=bootstrap,
        zookeeper=zookeeper,
        etcd=etcd,
        conftool_config=conftool_config,
        hosts=tuple(hosts),
        commands=commands,
        deploy_host=deploy_host,
        source=str(p),
        environment=environment,
        pool_weight=pool_weight,
        checkpoints=checkpoints,
        controllers=tuple(controllers),
        migrating=migration == "to-kraft",
        monitoring=monitoring,
        kafka_security=kafka_security if kafka_security is not None else _kafka_security(None),
        zookeeper_security=zookeeper_security,
        etcd_tls=etcd_tls,
    )


_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GATE_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")


def _url(r: _Reader, name: str) -> str | None:
    """An http(s) URL with a host (any host: the lab's are loopback, production's are not)."""
    from urllib.parse import urlsplit

    value = r.text(name, required=False)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise r.doc.error(r.key(name), f"expected an http(s) URL such as http://HOST:PORT, got {value!r}")
    return value.rstrip("/")


def _label_templates(r: _Reader, name: str, allowed: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``label: template`` pairs; a label is a Prometheus label name, a template names only ``allowed``."""
    out = []
    for label, template in r.str_map(name).items():
        key = r.key(f"{name}.{label}")
        if not _LABEL.fullmatch(label):
            raise r.doc.error(key, f"{label!r} is not a Prometheus label name ([A-Za-z_][A-Za-z0-9_]*)")
        try:
            fields = template_fields(template)
        except ValueError as exc:
            raise r.doc.error(key, f"bad template {template!r}: {exc}") from exc
        bad = [f for f in fields if f not in allowed]
        if bad:
            raise r.doc.error(key, f"unknown placeholder {{{bad[0]}}} (allowed: "
                              + ", ".join(f"{{{a}}}" for a in allowed) + ")")
        out.append((label, template))
    return tuple(out)


def _host_matchers(r: _Reader) -> tuple[tuple[str, str], ...]:
    """``host_matchers``: each template a valid regex naming a field, and together they name a field of
    the host itself — a silence is the AND of its matchers, so ``{cluster: '{cluster.name}'}`` alone
    would make every host's silence cover every alert of the cluster (and blind ``alerts.gate``)."""
    host_matchers = _label_templates(r, "host_matchers", MONITORING_HOST_FIELDS)
    for label, template in host_matchers:
        if not template_fields(template):
            raise r.doc.error(r.key(f"host_matchers.{label}"), f"{template!r} names no host field: a silence "
                              "made of it would silence every host (use e.g. '{host.fqdn}:.*')")
        try:
            re.compile(fill_template(template, dict.fromkeys(template_fields(template), "x"), escape=True))
        except re.error as exc:
            raise r.doc.error(r.key(f"host_matchers.{label}"), f"bad regex {template!r}: {exc}") from exc
    named = {f for _, template in host_matchers for f in template_fields(template)}
    if host_matchers and not named & set(MONITORING_OWN_HOST_FIELDS):
        own = ", ".join(f"{{{f}}}" for f in MONITORING_OWN_HOST_FIELDS[:-1])
        raise r.doc.error(r.key("host_matchers"), f"no matcher names a field of the host itself ({own} or "
                          f"{{{MONITORING_OWN_HOST_FIELDS[-1]}}}): its silence would cover every alert of the "
                          "cluster (or of its DC or rack), and alerts.gate would see none of them (use e.g. "
                          "instance: '{host.fqdn}:.*')")
    return host_matchers


#: A Prometheus alert name (a metric name): what ``roll_alerts`` lists, joined into one ``alertname=~`` regex.
_ALERT_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _roll_alerts(r: _Reader, scope: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """``roll_alerts``: alert names, each once; only with a ``scope``, or the roll's silence would cover
    those alerts of every cluster the Alertmanager serves."""
    names = r.str_list("roll_alerts")
    for i, name in enumerate(names):
        if not _ALERT_NAME.fullmatch(name):
            raise r.doc.error(r.key(f"roll_alerts[{i}]"), f"{name!r} is not an alert name "
                              "([a-zA-Z_:][a-zA-Z0-9_:]*)")
        if name in names[:i]:
            raise r.doc.error(r.key(f"roll_alerts[{i}]"), f"{name!r} named twice")
    if names and not scope:
        raise r.doc.error(r.key("roll_alerts"), "needs monitoring.scope (e.g. scope: {cluster: '{cluster.name}'}): "
                          "the roll's silence would otherwise cover these alerts of every cluster")
    return tuple(names)


def _monitoring(r: _Reader | None) -> Monitoring | None:
    """The cluster's ``monitoring:`` block: Prometheus and Alertmanager URLs, how a host's alerts are
    matched, which alerts are the cluster's, the alerts a roll causes on the other brokers, and the
    PromQL gates."""
    if r is None:
        return None
    r.allow("prometheus", "alertmanager", "host_matchers", "scope", "gates", "roll_alerts", "auth")
    host_matchers = _host_matchers(r)
    scope = _label_templates(r, "scope", MONITORING_SCOPE_FIELDS)
    roll_alerts = _roll_alerts(r, scope)
    gates: list[MetricGate] = []
    if r.has("gates"):
        if not isinstance(r.data["gates"], list):
            raise r.doc.error(r.key("gates"), "expected a list of {name, query, max and/or max_ratio}")
        for i, item in enumerate(r.data["gates"]):
            g = _Reader(r.doc, item, r.key(f"gates[{i}]"))
            g.allow("name", "query", "max", "max_ratio")
            name = g.text("name") or ""
            if not _GATE_NAME.fullmatch(name):
                raise r.doc.error(g.key("name"), f"{name!r} is not a gate name (lower-case letters, digits, _)")
            if any(name == other.name for other in gates):
                raise r.doc.error(g.key("name"), f"gate {name!r} defined twice")
            query = (g.text("query") or "").strip()
            if not query:
                raise r.doc.error(g.key("query"), "empty PromQL query")
            high = g.number("max") if g.has("max") else None
            ratio = g.number("max_ratio") if g.has("max_ratio") else None
            if high is None and ratio is None:
                raise r.doc.error(g.key("name"), f"gate {name!r} has no threshold: give max (absolute) "
                                  "and/or max_ratio (times the run's baseline)")
            if ratio is not None and ratio <= 0:
                raise r.doc.error(g.key("max_ratio"), f"expected a positive ratio, got {ratio}")
            gates.append(MetricGate(name=name, query=query, max=high, max_ratio=ratio))
    return Monitoring(
        prometheus=_url(r, "prometheus"),
        alertmanager=_url(r, "alertmanager"),
        host_matchers=host_matchers,
        scope=scope,
        gates=tuple(gates),
        roll_alerts=roll_alerts,
        auth=_http_auth(r.sub("auth", required=False)),
    )


def _http_auth(r: _Reader | None) -> HttpAuth | None:
    """``monitoring.auth``: a CA for https, and basic auth (username + password) or a bearer token, each
    secret named by file or environment variable (docs/inventory.md, Monitoring)."""
    if r is None:
        return None
    password, token = _secret(r, "password"), _secret(r, "bearer_token")
    r.allow("ca_file", "username", "password_file", "password_env", "bearer_token_file", "bearer_token_env")
    ca = r.text("ca_file", required=False)
    if ca is not None:
        _check_file(r, "ca_file", ca, secret=False)
    username = r.text("username", required=False)
    if password is not None and token is not None:
        raise r.doc.error(r.key("bearer_token_file"), "give basic auth (username, password) or a bearer token, "
                          "not both")
    if (username is None) != (password is None):
        raise r.doc.error(r.key("username" if password is not None else "password_file"),
                          "basic auth needs both username and password_file (or password_env)")
    return HttpAuth(ca_file=ca, username=username, password=password, token=token)


def _secret(r: _Reader, name: str, *, required: bool = False) -> Secret | None:
    """A secret named ``NAME_file`` (checked: absolute, only its owner reads it) or ``NAME_env``; None if
    neither is given (an error if ``required``). Never the secret itself: an inventory is reviewed,
    committed and copied, and a secret written in it leaks with it."""
    what = name.replace("_", " ")
    if r.has(name):
        raise r.doc.error(r.key(name), f"a {what} is never written in an inventory: put it in a file only "
                          f"kafkaops' user can read ({name}_file) or in the environment ({name}_env)")
    file, env = r.text(f"{name}_file", required=False), r.text(f"{name}_env", required=False)
    if required and file is None and env is None:
        raise r.doc.error(r.key(f"{name}_file"), f"name the {what} by exactly one of {name}_file or {name}_env")
    if file is not None and env is not None:
        raise r.doc.error(r.key(f"{name}_file"), f"name the {what} by exactly one of {name}_file or {name}_env, "
                          "not both")
    if file is not None:
        _check_file(r, f"{name}_file", file, secret=True)
        return Secret(file=file)
    if env is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
            raise r.doc.error(r.key(f"{name}_env"), f"{env!r} is not an environment variable name")
        return Secret(env=env)
    return None


_DNSDISC = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def _load_sites(doc: _Doc, top: _Reader, path: Path) -> Cluster:
    """A multi-site inventory: each DC's cluster (its own inventory file), where the discovery records
    live, and the services a switchover moves between the sites."""
    top.allow("sites", "environment", "clusters", "discovery", "switchover")
    environment = top.text("environment", "production") or "production"
    if environment not in ENVIRONMENTS:
        raise doc.error("environment", f"expected one of {', '.join(ENVIRONMENTS)}, got {environment!r}")
    clusters_r = top.sub("clusters")
    assert clusters_r is not None
    sites: dict[str, Cluster] = {}
    for dc in clusters_r.data:
        file = clusters_r.text(str(dc)) or ""
        site_path = Path(file) if Path(file).is_absolute() else path.parent / file
        if not site_path.is_file():
            raise doc.error(clusters_r.key(str(dc)), f"no inventory file {site_path}")
        site = load_inventory(site_path)
        if site.multi_site:
            raise doc.error(clusters_r.key(str(dc)), f"{site_path} is itself a multi-site inventory")
        wrong = sorted({h.dc for h in site.hosts} - {str(dc)})
        if wrong:
            raise doc.error(clusters_r.key(str(dc)), f"{site_path} has hosts in DC {', '.join(wrong)}, not {dc}: "
                            "each site is one DC's cluster")
        sites[str(dc)] = site
    if len(sites) < 2:
        raise doc.error("clusters", "a multi-site inventory needs two sites or more (dc: inventory file)")
    names = [s.name for s in sites.values()]
    if len(set(names)) < len(names):
        raise doc.error("clusters", f"two sites are the same cluster ({', '.join(names)})")
    discovery = top.sub("discovery")
    assert discovery is not None
    discovery.allow("etcd", "config", "tls")
    switched: dict[str, SwitchedService] = {}
    sw = top.sub("switchover", required=False)
    for name in (sw.data if sw is not None else {}):
        assert sw is not None
        r = sw.sub(str(name))
        assert r is not None
        r.allow("discovery", "consumer_groups")
        record = r.text("discovery", str(name)) or str(name)
        if not _DNSDISC.fullmatch(record):
            raise doc.error(r.key("discovery"), f"{record!r} is not a discovery record name (a-z, 0-9, - and _)")
        groups = r.str_list("consumer_groups")
        bad = [g for g in groups if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", g)]
        if bad:
            raise doc.error(r.key("consumer_groups"), f"{bad[0]!r} is not a Kafka group id (letters, digits, . _ -)")
        switched[str(name)] = SwitchedService(str(name), record, tuple(groups))
    return Cluster(
        name=top.text("sites") or "", bootstrap_servers="", hosts=(), source=str(path), environment=environment,
        etcd=discovery.text("etcd"), conftool_config=discovery.text("config"), sites=sites, switched=switched,
        etcd_tls=_tls_files(discovery.sub("tls", required=False)),
    )


def resolve_host(cluster: Cluster, name: str) -> Host:
    """Find HOST by short name or FQDN, or fail with the list of known hosts."""
    host = cluster.host(name)
    if host is None:
        known = ", ".join(h.name for h in (*cluster.hosts, *cluster.controllers))
        raise UnknownHostError(f"unknown host {name!r} in cluster {cluster.name!r} ({cluster.source})",
                               hint=f"known hosts: {known}")
    return host
