"""The cluster lock in etcd, for clusters without ZooKeeper (KRaft): the etcd conftool already uses.

Two operators on two admin hosts must not roll the same cluster at once, so the lock has to live
somewhere both see. A KRaft cluster has no ZooKeeper, but every cluster whose pools conftool manages
has an etcd, so the lock lives there, as a key ``/kafkaops/locks/<cluster>`` whose value is the JSON
:class:`~kafkaops.engine.lock.LockInfo` (run, operator, reason, task, start time, host, pid).

Run-scoped like the ZooKeeper lock (see :mod:`kafkaops.engine.lock`): the key has **no lease**. A lease
is a TTL by another name, and a TTL lock expiring in the middle of a multi-hour roll is exactly how a
second roll started on Wikimedia's clusters; the key outlives the process that wrote it, so a crashed
run keeps others off a cluster that may be one broker short until it is resumed, aborted or
force-unlocked by a human.

Every change is one etcd transaction, so two admin hosts racing cannot both win:

* acquire: *create only if absent* (``create_revision == 0``), else read the holder in the same
  transaction; the same run id takes its own lock back (``kafkaops resume``);
* release: delete only if the key is still the revision we read *and* that revision names this run
  (compare-and-delete), so a run never removes the lock another run took after a force-unlock;
* force unlock: delete and return what was deleted (``prev_kv``), in one request.

It speaks etcd's v3 JSON gateway (``POST /v3/kv/range|txn|deleterange``, base64 keys and values) through
``requests``, imported lazily — no etcd client library to install. conftool itself uses the v2 API of
the same server; the v2 and v3 key spaces are separate, so the lock never shows up as a conftool object.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from kafkaops.engine.lock import LockInfo, held_error
from kafkaops.errors import AuthError, ConfigError, UnreachableError
from kafkaops.model import TlsFiles
from kafkaops.systems.http_auth import pinned_session

_HINT = "check etcd is up and conftool.etcd in the inventory (this cluster's lock lives there)"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def _unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def _reason(exc: BaseException, timeout: float) -> str:
    """A few words for a failed request (``connection refused``), not urllib3's nested retry chain."""
    import requests

    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout:g}s"
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(exc))
    if found:
        return found.group(1).strip().rstrip(".").lower()
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS handshake failed"
    return type(exc).__name__


class EtcdLockBackend:
    """Cluster locks as etcd keys ``<root>/<cluster>`` with no lease (see the module docstring).

    Same contract as every :class:`~kafkaops.engine.lock.LockBackend`. Not dry-run guarded: a dry-run
    never takes the lock (the runner decides).

    Args:
        url: etcd client URL (``http://conf1001:2379``); several, comma-separated, are tried in turn when
            one does not answer.
        root: Key prefix of the locks.
        timeout: Seconds per request.
    """

    def __init__(self, url: str, *, root: str = "/kafkaops/locks", timeout: float = 10.0,
                 tls: TlsFiles | None = None) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self.urls:
            raise ConfigError("no etcd URL for the cluster lock", hint="set conftool.etcd in the inventory")
        self.url = ",".join(self.urls)
        self.root = root.rstrip("/")
        self.timeout = timeout
        self.tls = tls
        self._session: Any = None

    def close(self) -> None:
        """Close the HTTP connections; the lock keys stay (that is the point)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _key(self, cluster: str) -> str:
        return f"{self.root}/{cluster}"

    # --- the gateway -----------------------------------------------------------------------------

    def _http(self) -> Any:
        """The ``requests`` session: the inventory's CA, and kafkaops' client certificate where etcd wants one."""
        if self._session is None:

            self._session = pinned_session()
            if self.tls is not None:
                self._session.verify = self.tls.ca_file
                if self.tls.cert_file:
                    self._session.cert = (self.tls.cert_file, self.tls.key_file)
        return self._session

    def health(self) -> str:
        """Which URL answers ``GET /health`` with ``{"health": "true"}``, over the lock's own TLS and client
        certificate: the read ``kafkaops doctor`` makes. etcd says healthy only when its member has a leader
        and has applied its log, so a lock could be taken there now.

        Raises:
            AuthError: TLS refused (CA, certificate) or etcd refused the client certificate (401/403).
            UnreachableError: no URL answered healthy (each one's reason).
        """
        import requests

        failures = []
        for base in self.urls:
            try:
                resp = self._http().get(f"{base}/health", timeout=self.timeout)
            except requests.exceptions.SSLError as exc:
                raise AuthError(f"etcd at {base}: TLS refused ({_reason(exc, self.timeout)})",
                                hint="check conftool.tls (ca_file, cert_file, key_file) in the inventory") from None
            except requests.RequestException as exc:
                failures.append(f"{base}: {_reason(exc, self.timeout)}")
                continue
            if resp.status_code in (401, 403):
                raise AuthError(f"etcd at {base} refused kafkaops (HTTP {resp.status_code} {_message(resp)})".rstrip(),
                                hint="check conftool.tls: etcd must accept kafkaops' client certificate")
            try:
                healthy = str((resp.json() or {}).get("health")) == "true"
            except (ValueError, AttributeError):
                healthy = False
            if resp.status_code == 200 and healthy:
                return f"{base} healthy"
            failures.append(f"{base}: not healthy (HTTP {resp.status_code} {_message(resp)})".rstrip())
        raise UnreachableError(f"etcd is not healthy ({'; '.join(failures)})", hint=_HINT)

    def _post(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to ``/v3/kv/<endpoint>`` on the first URL that answers.

        Raises:
            UnreachableError: No URL answered, or etcd answered it cannot serve (5xx).
            ConfigError: etcd refused the request (4xx: not a v3 gateway, authentication...).
        """
        import requests

        failures = []
        for base in self.urls:
            try:
                resp = self._http().post(f"{base}/v3/kv/{endpoint}", json=body, timeout=self.timeout)
            except requests.exceptions.SSLError as exc:  # a certificate refused either way: waiting will not help
                raise AuthError(f"etcd at {base}: TLS refused ({_reason(exc, self.timeout)}: "
                                f"{str(exc)[-160:]})", hint="check conftool.tls (ca_file, cert_file, key_file) in "
                                "the inventory") from None
            except requests.RequestException as exc:
                failures.append(f"{base}: {_reason(exc, self.timeout)}")
                continue
            if resp.status_code >= 500:
                failures.append(f"{base}: HTTP {resp.status_code} {_message(resp)}".rstrip())
                continue
            if resp.status_code != 200:
                raise ConfigError(
                    f"etcd at {base} refused /v3/kv/{endpoint}: HTTP {resp.status_code} {_message(resp)}".rstrip(),
                    hint="conftool.etcd must be an etcd (>= 3.4) client URL serving the v3 JSON gateway",
                )
            try:
                data = resp.json()
            except ValueError:
                raise ConfigError(f"etcd at {base} answered /v3/kv/{endpoint} with something that is not JSON",
                                  hint="conftool.etcd must be an etcd client URL") from None
            return data if isinstance(data, dict) else {}
        raise UnreachableError(f"etcd did not answer ({'; '.join(failures)})", hint=_HINT)

    def _range(self, key: str) -> dict[str, Any] | None:
        kvs = self._post("range", {"key": _b64(key)}).get("kvs") or []
        return kvs[0] if kvs else None

    def _info(self, cluster: str, kv: dict[str, Any]) -> LockInfo:
        try:
            return LockInfo.from_json(_unb64(kv.get("value", "")))
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"the lock key {self._key(cluster)} in etcd {self.url} is corrupt: {exc}",
                hint=f"inspect it, then `kafkaops runs unlock {cluster} --force --reason ...`",
            ) from None

    # --- the lock --------------------------------------------------------------------------------

    def acquire(self, info: LockInfo) -> LockInfo:
        """Take the lock for ``info.run_id`` (its own lock back after a crash).

        Raises:
            LockHeldError: Another run holds it (naming run, operator, reason, task and start time).
            UnreachableError: etcd did not answer.
        """
        key = _b64(self._key(info.cluster))
        for _ in range(3):
            answer = self._post("txn", {
                "compare": [{"key": key, "result": "EQUAL", "target": "CREATE", "create_revision": "0"}],
                "success": [{"request_put": {"key": key, "value": _b64(info.to_json())}}],  # no lease
                "failure": [{"request_range": {"key": key}}],
            })
            if answer.get("succeeded"):
                return info
            responses = answer.get("responses") or [{}]
            kvs = (responses[0].get("response_range") or {}).get("kvs") or []
            if not kvs:  # released between the compare and the read: try again
                continue
            current = self._info(info.cluster, kvs[0])
            if current.run_id == info.run_id:
                return current  # a resumed run takes its own lock back
            raise held_error(current)
        raise UnreachableError(f"the lock key {self._key(info.cluster)} keeps appearing and disappearing; retry",
                               hint="another kafkaops is taking and releasing this cluster's lock")

    def release(self, cluster: str, run_id: str) -> bool:
        """Delete the lock if (and only if) ``run_id`` holds it; whether it did."""
        kv = self._range(self._key(cluster))
        if kv is None or self._info(cluster, kv).run_id != run_id:
            return False
        key = _b64(self._key(cluster))
        answer = self._post("txn", {
            # The revision we read, which names this run: a lock taken since by another run stays.
            "compare": [{"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": str(kv["mod_revision"])}],
            "success": [{"request_delete_range": {"key": key}}],
        })
        return bool(answer.get("succeeded"))

    def holder(self, cluster: str) -> LockInfo | None:
        """Who holds the lock, ``None`` when nobody does."""
        kv = self._range(self._key(cluster))
        return None if kv is None else self._info(cluster, kv)

    def force_unlock(self, cluster: str) -> LockInfo | None:
        """Remove the lock whoever holds it; the previous holder (``None``: there was no lock)."""
        answer = self._post("deleterange", {"key": _b64(self._key(cluster)), "prev_kv": True})
        previous = answer.get("prev_kvs") or []
        if not previous:
            return None
        try:
            return self._info(cluster, previous[0])
        except ConfigError:  # it was corrupt; removed as asked
            return None


def _message(resp: Any) -> str:
    """etcd's own one-line error (``etcdserver: no leader``), if the body has one."""
    try:
        body = resp.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    text = str(body.get("message") or body.get("error") or "").strip()
    return text.splitlines()[0][:200] if text else ""
