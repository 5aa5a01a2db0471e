"""Pool state through the real conftool library (etcd v2 backend), as ``confctl`` does it.

A maintenance run only ever repools what it depooled itself, so every change goes through
:meth:`Conftool.set_pooled`, which returns the state it replaced; the runner journals that and the
rollback restores exactly it. conftool keeps its configuration in class-level globals, hence one
``Conftool`` per configuration per process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from kafkaops.errors import AuthError, ConfigError, UnreachableError
from kafkaops.model import PoolState
from kafkaops.systems.guard import write

_clients: dict[str, Any] = {}

#: Seconds one etcd request may take. python-etcd's own default is 60, and urllib3 tries a connection
#: four times: an etcd that drops packets (a partition, not a refusal) held a repool for minutes. etcd
#: answers a healthy read in milliseconds; this bounds an unreachable one to about 20 s per call.
ETCD_TIMEOUT = 5.0


def _bounded_etcd() -> str:
    """Cap the read timeout of conftool's etcd client (process-wide, like conftool's backend); return the
    etcd it talks to, for messages ("" when conftool's backend is not an etcd one)."""
    from conftool.kvobject import Entity

    client = getattr(getattr(getattr(Entity, "backend", None), "driver", None), "client", None)
    if client is None:
        return ""
    if getattr(client, "_read_timeout", 0) > ETCD_TIMEOUT:
        client._read_timeout = ETCD_TIMEOUT  # python-etcd exposes it read-only; conftool never sets it
    return str(getattr(client, "base_uri", ""))


class _BackendErrors(logging.Handler):
    """Collects the errors conftool logs instead of raising.

    conftool's object fetch catches an unreachable etcd, logs "Backend error while fetching ..." and
    reports the object as absent: without this, a dead etcd read as "no such host in conftool" and the
    library's log line reached the operator's terminal beside our own one-line error.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


_backend_errors = _BackendErrors()


_URLLIB3_CHAIN = re.compile(r"\(Caused by (\w+)\(.*?: (?:\[Errno \d+\] )?([^'\"()]+)")


def summarise(error: BaseException | str, limit: int = 160) -> str:
    """One short line for a library error: urllib3's retry chains ("HTTPConnectionPool(host=..., port=...):
    Max retries exceeded with url: ... (Caused by NewConnectionError('<urllib3.connection...>: Failed to
    establish a new connection: [Errno 111] Connection refused'))", 1.6 KB in a repool failure) become
    "NewConnectionError: Connection refused"."""
    text = str(error)
    caused = _URLLIB3_CHAIN.search(text)
    if caused:
        text = f"{caused.group(1)}: {caused.group(2).strip()}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: The config conftool's process-wide backend was last set up for (see :meth:`Conftool._backend`).
_active: list[str] = [""]


#: Object types beside conftool's built-in ``node``: the DNS discovery records of multi-DC services, as
#: production's conftool-data schema defines them (``discovery/<dnsdisc>/<dc>``, ``pooled`` a bool).
SCHEMA: dict[str, Any] = {
    "discovery": {
        "path": "discovery",
        "tags": ["dnsdisc"],
        "schema": {"pooled": {"type": "bool", "default": False},
                   "references": {"type": "list", "default": []},
                   "ttl": {"type": "int", "default": 300}},
    },
}


class Conftool:
    """Pool state through the real conftool library; writes refuse themselves in a dry-run."""

    def __init__(self, config_path: str, *, dry_run: bool = False) -> None:
        self.config_path = config_path
        self.dry_run = dry_run
        self._node: Any = None
        self._etcd = ""  # the etcd conftool's client talks to (messages)

    @property
    def node(self) -> Any:
        if self._node is None:
            from conftool.cli import ConftoolClient

            conftool_log = logging.getLogger("conftool")
            conftool_log.setLevel(logging.WARNING)
            if _backend_errors not in conftool_log.handlers:
                conftool_log.addHandler(_backend_errors)
                conftool_log.propagate = False
            try:
                client = _clients.get(self.config_path)
                if client is None:
                    client = ConftoolClient(configfile=self.config_path, schema=SCHEMA, irc_logging=False)
                    _active[0] = self.config_path  # the constructor set the process-wide backend up for it
            except Exception as exc:
                raise ConfigError(f"cannot load conftool config {self.config_path}: {exc}",
                                  hint="check conftool.config in the inventory") from exc
            # conftool audits every write to syslog (stderr without one); kafkaops keeps its own audit
            # log of the same actions, so route conftool's into Python logging, silent by default.
            audit = logging.getLogger("kafkaops.conftool.audit")
            audit.addHandler(logging.NullHandler())
            audit.propagate = False
            client.set_audit_logger(audit)
            _clients[self.config_path] = client
            self._node = client.get("node")
        return self._node

    def _backend(self) -> Any:
        """The node type, with conftool's process-wide backend pointing at *this* config's etcd.

        conftool keeps one backend per process (``Entity.setup`` sets class attributes). A process that
        talks to two conftool configs — the test session with the default and the KRaft lab, an operator's
        script over two sites — would otherwise ask the etcd of whichever was set up last."""
        node = self.node
        if _active[0] != self.config_path:
            from conftool.kvobject import Entity

            Entity.setup(_clients[self.config_path].configuration)
            _active[0] = self.config_path
        self._etcd = _bounded_etcd()
        return node

    def _obj(self, fqdn: str, tags: Mapping[str, str]) -> Any:
        missing = [t for t in ("dc", "cluster", "service") if t not in tags]
        if missing:
            raise ConfigError(f"conftool tags of {fqdn} lack {', '.join(missing)}",
                              hint="set hosts.<host>.conftool: {dc, cluster, service} in the inventory")
        node = self._backend()
        return self._load(fqdn, lambda: node(tags["dc"], tags["cluster"], tags["service"], fqdn))

    def _load(self, what: str, make: Any) -> Any:
        """An object of conftool's, loaded from etcd by ``make()``; conftool logs (not raises) a backend
        error and answers an empty object, which must not pass for "not there"."""
        _backend_errors.messages.clear()
        try:
            obj = make()
        except Exception as exc:
            raise self._unreachable(exc) from exc
        if _backend_errors.messages:
            raise UnreachableError(f"etcd {self._etcd} did not answer for {what} ({self.config_path}): "
                                   f"{summarise(_backend_errors.messages[0])}",
                                   hint="check etcd is up and reachable from here, and the hosts in the conftool "
                                        "config; then `kafkaops resume`")
        return obj

    def _unreachable(self, exc: BaseException) -> UnreachableError:
        return UnreachableError(f"conftool/etcd {self._etcd} did not answer ({self.config_path}): "
                                f"{summarise(exc)}",
                                hint="check etcd is up and reachable from here, and the hosts in the conftool "
                                     "config; then `kafkaops resume`")

    def get(self, fqdn: str, tags: Mapping[str, str]) -> PoolState:
        obj = self._obj(fqdn, tags)
        if not obj.exists:
            raise ConfigError(f"conftool has no object for {fqdn} "
                              f"(dc={tags['dc']} cluster={tags['cluster']} service={tags['service']})",
                              hint="check the host's conftool tags in the inventory")
        return PoolState(host=fqdn, service=tags["service"], pooled=obj.pooled, weight=int(obj.weight))

    @write
    def set_pooled(self, fqdn: str, tags: Mapping[str, str], pooled: str) -> PoolState:
        """Set ``pooled`` (yes/no/inactive); return the state before the change."""
        before = self.get(fqdn, tags)
        if before.pooled != pooled:
            try:
                self._obj(fqdn, tags).update({"pooled": pooled})
            except Exception as exc:
                raise self._unreachable(exc) from exc
        return before

    def list(self, tags: Mapping[str, str]) -> list[PoolState]:
        query = {k: re.compile(f"^{re.escape(v)}$") for k, v in tags.items()}
        try:
            return sorted((PoolState(host=o.name, service=o.tags["service"], pooled=o.pooled, weight=int(o.weight))
                           for o in self._backend().query(query)), key=lambda s: s.host)
        except Exception as exc:
            raise self._unreachable(exc) from exc


class Discovery(Conftool):
    """The discovery records of multi-DC services (``confctl --object-type discovery``): one object per
    service and DC whose ``pooled`` says whether clients resolving the service are sent to that DC."""

    def _record_type(self) -> Any:
        self._backend()
        return _clients[self.config_path].get("discovery")

    def _record(self, service: str, dc: str) -> Any:
        kind = self._record_type()
        return self._load(f"discovery/{service}/{dc}", lambda: kind(service, dc))

    def states(self, service: str) -> dict[str, bool]:
        """DC -> pooled, for every discovery record of ``service``."""
        try:
            found = self._record_type().query({"dnsdisc": re.compile(f"^{re.escape(service)}$")})
            return {o.name: bool(o.pooled) for o in sorted(found, key=lambda o: o.name)}
        except Exception as exc:
            raise self._unreachable(exc) from exc

    def active(self, service: str) -> list[str]:
        """The DCs clients of ``service`` are sent to (pooled records)."""
        return [dc for dc, pooled in self.states(service).items() if pooled]

    @write
    def set(self, service: str, dc: str, pooled: bool) -> bool:
        """Pool or depool ``service`` in ``dc``; return the state before."""
        obj = self._record(service, dc)
        if not obj.exists:
            raise ConfigError(f"conftool has no discovery record {service}/{dc}",
                              hint="create it (confctl --object-type discovery ...) or check switchover: in "
                                   "the multi-site inventory")
        before = bool(obj.pooled)
        if before != pooled:
            try:
                obj.update({"pooled": pooled})
            except Exception as exc:
                raise self._unreachable(exc) from exc
        return before



def _conftool_config(config_path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(config_path) as f:
            return yaml.safe_load(f) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read conftool config {config_path}: {exc.strerror}") from exc


def etcd_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The python-etcd settings conftool itself would use for this configuration: ``/etc/etcd/etcdrc``, then
    ``~/.etcdrc``, then the configuration's ``driver_options.etcd_config_file`` (or ``/etc/conftool/etcdrc``),
    each YAML, later files winning — conftool's own order (``conftool/drivers/etcd.py``). Read here so the
    fast read below speaks to etcd exactly as conftool does (its CA, its client certificate, its user)."""
    import os

    import yaml

    options = cfg.get("driver_options") or {}
    files = ["/etc/etcd/etcdrc", os.path.expanduser("~/.etcdrc"),
             str(options.get("etcd_config_file") or "/etc/conftool/etcdrc")]
    out: dict[str, Any] = {}
    for path in files:
        try:
            with open(path) as f:
                data = yaml.safe_load(f)
        except OSError:
            continue
        except yaml.YAMLError as exc:
            raise ConfigError(f"cannot parse conftool's etcd settings {path}: {exc}") from None
        if isinstance(data, Mapping):
            out.update(data)
    return out


def _etcd_request(cfg: Mapping[str, Any], url: str) -> tuple[Any, Any]:
    """A ``urllib`` request of ``url`` and its TLS context, with the TLS and credentials conftool's etcd
    settings give (:func:`etcd_settings`): the CA, the client certificate, the user."""
    import base64
    import ssl
    import urllib.request

    settings = etcd_settings(cfg)
    context = None
    if url.startswith("https://"):
        context = ssl.create_default_context(cafile=settings.get("ca_cert"))
        cert = settings.get("cert")
        if isinstance(cert, list | tuple) and len(cert) == 2:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        elif cert:
            context.load_cert_chain(str(cert))
    request = urllib.request.Request(url)
    if settings.get("username"):
        token = base64.b64encode(f"{settings['username']}:{settings.get('password', '')}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request, context


def etcd_health(config_path: str, *, timeout: float = 3.0) -> str:
    """Which of conftool's etcd hosts answers ``GET /health`` healthy, spoken to as conftool itself does (its
    CA, client certificate and user): the read ``kafkaops doctor`` makes for a cluster whose pools conftool
    keeps — a depool must be able to reach that etcd.

    Raises:
        AuthError: TLS refused, or etcd refused conftool's credentials (401/403).
        UnreachableError: no host answered healthy.
        ConfigError: the configuration cannot be read.
    """
    import json
    import ssl
    import urllib.error
    import urllib.request

    cfg = _conftool_config(config_path)
    failures = []
    for host in cfg.get("hosts") or ["http://localhost:2379"]:
        base = str(host).rstrip("/")
        try:
            request, context = _etcd_request(cfg, f"{base}/health")
            with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
                if str(json.load(resp).get("health")) == "true":
                    return f"{base} healthy (conftool's settings)"
                failures.append(f"{base}: not healthy")
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise AuthError(f"etcd at {base} refused conftool's credentials (HTTP {exc.code})",
                                hint=f"check the etcdrc {config_path} points to (username, password, cert)") from None
            failures.append(f"{base}: HTTP {exc.code}")
        except ssl.SSLError as exc:
            raise AuthError(f"etcd at {base}: TLS refused ({exc.reason or exc})",
                            hint=f"check the etcdrc {config_path} points to (ca_cert, cert)") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLError):
                raise AuthError(f"etcd at {base}: TLS refused ({exc.reason.reason or exc.reason})",
                                hint=f"check the etcdrc {config_path} points to (ca_cert, cert)") from None
            failures.append(f"{base}: {exc.reason}")
        except (OSError, ValueError, AttributeError) as exc:
            failures.append(f"{base}: {exc or type(exc).__name__}")
    raise UnreachableError(f"conftool's etcd is not healthy ({'; '.join(failures)})",
                           hint="check conftool.config's hosts")


def _etcd_read(cfg: Mapping[str, Any], *parts: str, timeout: float) -> list[dict[str, Any]]:
    """The child nodes of conftool's key ``<namespace>/<api_version>/<parts...>`` over etcd's v2 API, with
    the TLS and credentials conftool's etcd settings give (:func:`etcd_settings`)."""
    import json
    import urllib.error
    import urllib.request

    base = (cfg.get("hosts") or ["http://localhost:2379"])[0].rstrip("/")
    path = "/".join(p.strip("/") for p in (cfg.get("namespace", "/conftool"), cfg.get("api_version", "v1"), *parts))
    request, context = _etcd_request(cfg, f"{base}/v2/keys/{path}?recursive=true")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            nodes: list[dict[str, Any]] = json.load(resp).get("node", {}).get("nodes", [])
            return nodes
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise UnreachableError(f"etcd at {base} answered {exc.code} for {path}") from exc
    except (OSError, ValueError) as exc:
        raise UnreachableError(f"etcd at {base} did not answer: {exc}", hint="check conftool.etcd") from exc


def read_pools(config_path: str, tags: Mapping[str, str], *, timeout: float = 3.0) -> list[PoolState]:
    """Read pool states straight from etcd's v2 API, where conftool keeps them (read-only).

    ``kafkaops status`` shows pool state on every call; the conftool library costs ~0.2 s to import
    (python-etcd, dnspython, jsonschema), more than the rest of the command. Reading the same keys over
    HTTP takes milliseconds. Every *write* still goes through :class:`Conftool`.
    """
    import json

    cfg = _conftool_config(config_path)
    nodes = _etcd_read(cfg, cfg.get("pools_path", "pools"), tags["dc"], tags["cluster"], tags["service"],
                       timeout=timeout)
    out = []
    for node in nodes:
        value = json.loads(node.get("value") or "{}")
        out.append(PoolState(host=node["key"].rsplit("/", 1)[-1], service=tags["service"],
                             pooled=str(value.get("pooled", "inactive")), weight=int(value.get("weight", 0))))
    return sorted(out, key=lambda s: s.host)


def read_discovery(config_path: str, record: str, *, timeout: float = 3.0) -> dict[str, bool]:
    """DC -> pooled of discovery record ``record``, straight from etcd (read-only, as :func:`read_pools`):
    what ``kafkaops status`` shows, and what the lab's clients resolve the service by."""
    import json

    out = {}
    for node in _etcd_read(_conftool_config(config_path), "discovery", record, timeout=timeout):
        value = json.loads(node.get("value") or "{}")
        pooled = value.get("pooled")
        if not isinstance(pooled, bool):
            raise UnreachableError(f"discovery/{record}/{node['key'].rsplit('/', 1)[-1]} has pooled={pooled!r}, "
                                   "not true or false", hint="fix it with confctl --object-type discovery")
        out[node["key"].rsplit("/", 1)[-1]] = pooled
    return dict(sorted(out.items()))
