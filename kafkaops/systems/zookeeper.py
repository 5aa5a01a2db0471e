"""ZooKeeper through kazoo, for ZooKeeper-mode clusters: broker registrations, the controller, the lock.

``/brokers/ids/<id>`` is the cluster's own word on whether a broker is alive — the confirmation a stop
step needs (a stop command's exit code is not enough: Yelp #148). KRaft clusters skip this adapter.

:class:`ZooKeeper` is the one place kafkaops starts a ``KazooClient``, so every use of ZooKeeper fails
the same way: an unreachable server is one :class:`~kafkaops.errors.UnreachableError` line naming the
connect string and what kazoo saw (``Connection refused``), reported as soon as kazoo gives up rather
than after the whole timeout. kazoo's own log lines ("Connection dropped: socket connection broken")
are captured by a logging handler and never reach the operator's terminal beside our own message:
during a maintenance ZooKeeper is often briefly away, and a page of library warnings in the middle of a
run's output reads like a failure.

:class:`ZooKeeperLockBackend` keeps the cluster lock in a **persistent** znode
``/kafkaops/locks/<cluster>`` (see :mod:`kafkaops.engine.lock` for why the lock is run-scoped: a TTL or
an ephemeral node would die with the process or the session, and a crashed roll would no longer keep
others off a cluster already missing a broker).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from kafkaops.engine.lock import LockInfo, held_error
from kafkaops.errors import AuthError, CheckFailed, ConfigError, UnreachableError
from kafkaops.model import Cluster, ZooKeeperSecurity
from kafkaops.policy.acl_migration import AclEntry, from_znode
from kafkaops.systems.credentials import reveal
from kafkaops.systems.guard import write

T = TypeVar("T")

_HINT = "check ZooKeeper is up and kafka.zookeeper in the inventory"


class _KazooLog(logging.Handler):
    """Keeps kazoo's log lines (connection drops, refused connections) away from the terminal.

    The last lines are kept so that an error can say *why* ZooKeeper did not answer.
    """

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: deque[tuple[int, str]] = deque(maxlen=64)
        self._seq = 0
        self._mutex = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().splitlines()[0] if record.getMessage() else ""
        except Exception:  # a malformed log call inside kazoo must not break the caller
            return
        with self._mutex:
            self._seq += 1
            self.lines.append((self._seq, text))

    @property
    def seq(self) -> int:
        return self._seq

    def since(self, seq: int) -> list[str]:
        with self._mutex:
            return [text for n, text in self.lines if n > seq]


_kazoo_log = _KazooLog()


def _silence_kazoo() -> None:
    """Route the ``kazoo`` loggers to :data:`_kazoo_log` only (idempotent)."""
    log = logging.getLogger("kazoo")
    if _kazoo_log not in log.handlers:
        log.addHandler(_kazoo_log)
    log.setLevel(logging.INFO)
    log.propagate = False  # nor the root logger's handlers, nor logging's last-resort stderr handler


def _why(lines: list[str]) -> str:
    """The most telling thing kazoo logged: ``Connection refused``, ``Cannot resolve ...``."""
    for text in reversed(lines):
        if "Connection dropped" in text or "Cannot resolve" in text:
            return text.rsplit(": ", 1)[-1].strip().lower() if "Connection dropped" in text else text
    return ""


def _tls_refusal(lines: list[str]) -> str:
    """What kazoo logged when the TLS handshake failed (a certificate refused either way), or "": a refusal
    that waiting cannot heal, unlike a ZooKeeper that is down."""
    for text in reversed(lines):
        if "Connection dropped" in text and ("SSL" in text or "certificate" in text.lower()):
            return text.split("socket connection error: ", 1)[-1].strip()
    return ""


def _password(sec: ZooKeeperSecurity, hosts: str) -> str:
    assert sec.password is not None
    return reveal(sec.password, f"ZooKeeper {hosts}", "password", "check kafka.zookeeper_security in the inventory")


class ZooKeeper:
    """A kazoo session.

    Use it as a context manager for a short look (``with ZooKeeper(hosts) as zk: zk.controller()``), or
    keep one open (the lock backend): a session that was lost is reopened by the next call.

    Args:
        hosts: Connect string (``host:port,...``, chroot allowed).
        timeout: Seconds to connect, and the session timeout.
        dry_run: The run is a dry-run: methods marked :func:`~kafkaops.systems.guard.write` refuse (the
            revert's :meth:`delete_migration_state`; the lock backend's znode is the runner's business,
            and a dry-run never takes the lock).
    """

    def __init__(self, hosts: str, *, timeout: float = 10.0, dry_run: bool = False,
                 security: ZooKeeperSecurity | None = None) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self.dry_run = dry_run
        self.security = security
        self._zk: Any = None

    @classmethod
    def for_cluster(cls, cluster: Cluster, *, timeout: float = 10.0, dry_run: bool = False) -> ZooKeeper:
        """The session of an inventory's cluster: its connect string and its ``zookeeper_security``, so no
        caller can leave TLS or kafkaops' identity behind."""
        return cls(cluster.zookeeper or "", timeout=timeout, dry_run=dry_run, security=cluster.zookeeper_security)

    def _security_options(self) -> dict[str, Any]:
        """kazoo's options for TLS and kafkaops' ``digest`` identity (the password read now)."""
        sec = self.security
        if sec is None:
            return {}
        options: dict[str, Any] = {}
        if sec.tls:
            options.update(use_ssl=True, verify_certs=True, ca=sec.ca_file, certfile=sec.cert_file,
                           keyfile=sec.key_file)
        if sec.authenticated:
            options["auth_data"] = [("digest", f"{sec.username}:{_password(sec, self.hosts)}")]
        return options

    def lock_acl(self) -> list[Any] | None:
        """The ACL of a lock znode: only kafkaops' identity may change or delete it, anyone may read who holds
        it; None (ZooKeeper's open ACL) when kafkaops has no identity there."""
        sec = self.security
        if sec is None or not sec.authenticated:
            return None
        from kazoo.security import make_acl, make_digest_acl

        return [make_digest_acl(sec.username or "", _password(sec, self.hosts), all=True),
                make_acl("world", "anyone", read=True)]

    # --- the session ---------------------------------------------------------------------------

    def open(self) -> ZooKeeper:
        """Connect (if not connected already).

        Raises:
            UnreachableError: ZooKeeper did not answer (one line: connect string, timeout, why).
        """
        if self._zk is not None and self._zk.connected:
            return self
        self.close()
        from kazoo.client import KazooClient

        _silence_kazoo()
        mark = _kazoo_log.seq
        # A few quick tries: a ZooKeeper that has just started (or restarted) accepts a connection and
        # closes it until it serves sessions; a refused one is still reported in about a second.
        client = KazooClient(hosts=self.hosts, timeout=self.timeout,
                             connection_retry={"max_tries": 3, "delay": 0.2, "backoff": 2, "max_jitter": 0.1},
                             **self._security_options())
        with warnings.catch_warnings():
            # "No chroot path exists": the lock backend creates its path itself (makepath).
            warnings.simplefilter("ignore")
            live = client.start_async()
            deadline = time.monotonic() + self.timeout
            # kazoo's own start() waits the whole timeout even after its connection loop gave up on a
            # refused connection; watching that loop says "ZooKeeper is down" in milliseconds.
            routine = getattr(getattr(client, "_connection", None), "_connection_routine", None)
            while not live.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    break
                if routine is not None and hasattr(routine, "is_alive") and not routine.is_alive():
                    break
        if not client.connected:
            _stop(client)
            logged = _kazoo_log.since(mark)
            refusal = _tls_refusal(logged) if self.security is not None and self.security.tls else ""
            if refusal:
                sec = self.security
                assert sec is not None
                raise AuthError(f"ZooKeeper at {self.hosts} refused TLS: {refusal}",
                                hint=f"check kafka.zookeeper_security: the CA ({sec.ca_file}) must have signed "
                                     "ZooKeeper's certificate, and ZooKeeper's trust store kafkaops' "
                                     f"({sec.cert_file or 'no client certificate given'})")
            why = _why(logged)
            raise UnreachableError(
                f"ZooKeeper at {self.hosts} did not answer"
                + (f" ({why})" if why else f" within {self.timeout:g}s"),
                hint=_HINT,
            )
        self._zk = client
        return self

    def close(self) -> None:
        """End the session (idempotent). Persistent znodes, the lock's included, stay."""
        if self._zk is not None:
            _stop(self._zk)
            self._zk = None

    def handed_over(self, *, dry_run: bool) -> ZooKeeper:
        """A session object of mode ``dry_run`` that owns this one's open session (this one is left without):
        the session carries no permission, the object around it refuses writes or not."""
        other = ZooKeeper(self.hosts, timeout=self.timeout, dry_run=dry_run, security=self.security)
        other._zk, self._zk = self._zk, None
        return other

    def __enter__(self) -> ZooKeeper:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def client(self) -> Any:
        """The connected ``KazooClient`` (connects if needed)."""
        return self.open()._zk

    @contextmanager
    def calling(self, what: str) -> Iterator[Any]:
        """The connected client, with a lost connection or session mapped to :class:`UnreachableError`."""
        from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
        from kazoo.handlers.threading import KazooTimeoutError

        client = self.client
        try:
            yield client
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError) as exc:
            self.close()  # the next call reconnects
            raise UnreachableError(f"ZooKeeper at {self.hosts} went away during {what} "
                                   f"({type(exc).__name__})", hint=_HINT) from None

    def call(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(client)`` with ZooKeeper's connection errors as :class:`UnreachableError`."""
        with self.calling(what) as client:
            return fn(client)

    # --- reads -------------------------------------------------------------------------------------

    def chroot(self) -> tuple[str, bool]:
        """The connect string's chroot (``/`` without one) and whether it exists. kazoo connects to a chroot
        that does not exist (a typo in ``kafka.zookeeper``) without a word, and every read then finds no
        broker registered and no controller: ``kafkaops doctor`` asks this first."""
        path = "/" + self.hosts.split("/", 1)[1].strip("/") if "/" in self.hosts else "/"
        return path, self.call(f"a read of the chroot {path}", lambda zk: zk.exists("/")) is not None

    def registered_brokers(self) -> list[int]:
        """Broker ids registered under ``/brokers/ids`` (the cluster's own list of live brokers)."""
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(int(b) for b in self.call("a read of /brokers/ids",
                                                    lambda zk: zk.get_children("/brokers/ids")))
        except NoNodeError:
            return []

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        """The JSON registration of a live broker, ``None`` when it is not registered."""
        from kazoo.exceptions import NoNodeError

        path = f"/brokers/ids/{broker_id}"
        try:
            data, _ = self.call(f"a read of {path}", lambda zk: zk.get(path))
        except NoNodeError:
            return None
        return dict(json.loads(data))

    def controller(self) -> int | None:
        """The controller's broker id, ``None`` during an election."""
        record = self.controller_record()
        return int(record["brokerid"]) if record is not None else None

    def controller_record(self) -> dict[str, Any] | None:
        """``/controller`` as Kafka wrote it: ``brokerid``, and ``kraftControllerEpoch`` once a KRaft
        controller in migration mode holds the controllership (its id is then a controller node's, not a
        broker's); ``None`` during an election."""
        return self._json("/controller")

    def cluster_id(self) -> str | None:
        """The cluster's id (``/cluster/id``), which the KRaft controllers of a migration are formatted with."""
        record = self._json("/cluster/id")
        return str(record["id"]) if record is not None and "id" in record else None

    def migration_record(self) -> dict[str, Any] | None:
        """``/migration``: the KRaft controller's record of a ZooKeeper → KRaft migration
        (``kraft_metadata_offset`` is -1 until the metadata was copied); ``None`` before one started."""
        return self._json("/migration")

    def controller_epoch(self) -> int | None:
        """``/controller_epoch``: the epoch the last controller elected through ZooKeeper holds (a broker, or a
        KRaft controller registering during a migration); ``None`` before any election."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.call("a read of /controller_epoch", lambda zk: zk.get("/controller_epoch"))
        except NoNodeError:
            return None
        return int(data)

    def highest_partition_controller_epoch(self) -> tuple[int, str] | None:
        """The highest ``controller_epoch`` in the partition states (``/brokers/topics/*/partitions/*/state``)
        and one partition carrying it: the epoch a controller must hold for ZooKeeper mode to let it change
        partition state (Kafka refuses a state written by a higher epoch: "Leader and isr path written by
        another controller"). ``None`` without partitions. Read concurrently: one request per partition."""
        from kazoo.exceptions import NoNodeError

        def scan(zk: Any) -> tuple[int, str] | None:
            try:
                topics = zk.get_children("/brokers/topics")
            except NoNodeError:
                return None
            listed = [(t, zk.get_children_async(f"/brokers/topics/{t}/partitions")) for t in topics]
            reads = []
            for topic, children in listed:
                try:
                    partitions = children.get(timeout=self.timeout)
                except NoNodeError:
                    continue  # a topic being created or deleted
                reads += [(f"{topic}-{p}", zk.get_async(f"/brokers/topics/{topic}/partitions/{p}/state"))
                          for p in partitions]
            best: tuple[int, str] | None = None
            for name, read in reads:
                try:
                    data, _ = read.get(timeout=self.timeout)
                    epoch = int(json.loads(data).get("controller_epoch", -1))
                except (NoNodeError, ValueError, AttributeError):
                    continue
                if best is None or epoch > best[0]:
                    best = (epoch, name)
            return best

        return self.call("a read of the partition states", scan)

    def controller_epoch_raise(self, kraft_epoch: int) -> tuple[int, int, int] | None:
        """``(now, to, version)`` when ``/controller_epoch`` is below the epoch a broker must be elected above
        — the KRaft controller's (``kraft_epoch``) and the partition states' (:meth:`delete_migration_state`
        says why) — with the znode's version read; None when it is not below, or absent."""
        from kazoo.exceptions import NoNodeError

        highest = self.highest_partition_controller_epoch()
        floor = max(kraft_epoch, highest[0] if highest else -1)
        try:
            with self.calling("a read of /controller_epoch") as zk:
                value, stat = zk.get("/controller_epoch")
        except NoNodeError:
            return None
        return (int(value), floor, stat.version) if int(value) < floor else None

    @write
    def delete_migration_state(self) -> list[str]:
        """Kafka's revert of a migration in ZooKeeper: delete ``/controller`` if a KRaft controller holds it (so
        that a broker is elected controller again) and ``/migration`` (so that a later migration starts afresh).
        Each znode is deleted at the version read: a broker elected meanwhile keeps its ``/controller``.

        **The epoch a broker is elected with.** A broker elected controller takes ``/controller_epoch + 1``.
        During the migration the KRaft controller wrote the partition states with its *KRaft* epoch, which
        more KRaft elections (a controller stopped, a run killed and resumed with the quorum half down) can
        take past ``/controller_epoch`` (KAFKA-20488). A broker elected below it can change no partition's
        state: leaders are never moved off a stopped broker. So, in the same transaction as the deletion,
        ``/controller_epoch`` is raised to the highest of the KRaft controller's epoch and the partition
        states' (when it is below): the broker elected next holds one more than any of them.

        Returns what was done (none: nothing of the migration was left), e.g. ``["/controller_epoch 4 -> 6",
        "/controller", "/migration"]``."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        done: list[str] = []
        for path in ("/controller", "/migration"):
            try:
                with self.calling(f"a read of {path}") as zk:
                    data, stat = zk.get(path)
            except NoNodeError:
                continue
            raise_to: tuple[int, int, int] | None = None  # (from, to, version of /controller_epoch)
            if path == "/controller":
                try:
                    epoch = json.loads(data).get("kraftControllerEpoch", -1)
                except (ValueError, AttributeError):
                    epoch = -1
                if not isinstance(epoch, int) or epoch < 0:
                    continue  # a broker's: ZooKeeper mode already has its controller
                raise_to = self.controller_epoch_raise(epoch)
            try:
                with self.calling(f"the deletion of {path}") as zk:
                    if raise_to is None:
                        zk.delete(path, version=stat.version)
                    else:
                        change = zk.transaction()
                        change.set_data("/controller_epoch", str(raise_to[1]).encode(), version=raise_to[2])
                        change.delete(path, version=stat.version)
                        results = change.commit()
                        failed = [r for r in results if isinstance(r, Exception)]
                        if failed:
                            raise failed[0]
            except (NoNodeError, BadVersionError):
                continue  # gone or rewritten meanwhile (an election, a KRaft controller registering): not the one read
            if raise_to is not None:
                done.append(f"/controller_epoch {raise_to[0]} -> {raise_to[1]}")
            done.append(path)
        return done

    def kafka_acls(self) -> list[AclEntry]:
        """Every ACL ZooKeeper-mode brokers enforce: ``AclAuthorizer``'s store, ``/kafka-acl/<Type>/<name>``
        (literal) and ``/kafka-acl-extended/prefixed/<Type>/<name>`` (prefixed); read-only.

        Raises:
            CheckFailed: A znode is not what AclAuthorizer writes.
        """
        from kazoo.exceptions import NoNodeError


        def children(path: str) -> list[str]:
            try:
                return sorted(self.call(f"a listing of {path}", lambda zk: zk.get_children(path)))
            except NoNodeError:
                return []

        out: list[AclEntry] = []
        for root, pattern in (("/kafka-acl", "LITERAL"), ("/kafka-acl-extended/prefixed", "PREFIXED")):
            for resource in children(root):
                for name in children(f"{root}/{resource}"):
                    path = f"{root}/{resource}/{name}"
                    record = self._json(path)
                    if record is None:
                        continue  # deleted meanwhile: no ACL left there
                    try:
                        out += from_znode(resource, name, pattern, record)
                    except ValueError as exc:
                        raise CheckFailed(f"ZooKeeper {self.hosts}: {path}: {exc}", hint="the ACLs in ZooKeeper "
                                          "are not what Kafka's AclAuthorizer writes") from exc
        return sorted(out)

    def _json(self, path: str) -> dict[str, Any] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.call(f"a read of {path}", lambda zk: zk.get(path))
        except NoNodeError:
            return None
        try:
            record = json.loads(data)
        except ValueError as exc:
            raise CheckFailed(f"ZooKeeper {self.hosts}: {path} is not JSON ({data[:80]!r})",
                              hint="the cluster's metadata in ZooKeeper is not what Kafka writes") from exc
        if not isinstance(record, dict):
            raise CheckFailed(f"ZooKeeper {self.hosts}: {path} is not a JSON object ({data[:80]!r})",
                              hint="the cluster's metadata in ZooKeeper is not what Kafka writes")
        return record


def _stop(client: Any) -> None:
    """Stop and close a kazoo client whatever state it is in (its thread must not outlive us)."""
    for method in (client.stop, client.close):
        try:
            method()
        except Exception:  # a half-started client may refuse either; nothing is left to clean then
            pass


class ZooKeeperLockBackend:
    """Cluster locks as persistent znodes ``<root>/<cluster>`` holding a JSON :class:`LockInfo`.

    Same contract as every :class:`~kafkaops.engine.lock.LockBackend`: ``acquire`` is atomic (a
    ``create`` that fails if the znode exists) and re-entrant for the same run id; ``release`` deletes
    only the version it read, and only if it still names this run; ``force_unlock`` removes it whoever
    holds it. These are not dry-run guarded: a dry-run never takes the lock (the runner decides).

    Args:
        hosts: ZooKeeper connect string (``host:port,...``, chroot allowed).
        root: Parent path of the lock znodes.
        timeout: Seconds to connect.
        zookeeper: A :class:`ZooKeeper` session to use (tests, or to share one).
    """

    def __init__(self, hosts: str, root: str = "/kafkaops/locks", timeout: float = 10.0,
                 zookeeper: ZooKeeper | None = None, security: ZooKeeperSecurity | None = None) -> None:
        self.hosts, self.root, self.timeout = hosts, root.rstrip("/"), timeout
        self.zookeeper = zookeeper or ZooKeeper(hosts, timeout=timeout, security=security)

    def close(self) -> None:
        """End the session; the lock znodes stay (that is the point)."""
        self.zookeeper.close()

    def _path(self, cluster: str) -> str:
        return f"{self.root}/{cluster}"

    def _info(self, cluster: str, data: bytes) -> LockInfo:
        try:
            return LockInfo.from_json(data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"the lock znode {self._path(cluster)} on ZooKeeper {self.hosts} is corrupt: {exc}",
                hint=f"inspect it, then `kafkaops runs unlock {cluster} --force --reason ...`",
            ) from None

    def acquire(self, info: LockInfo) -> LockInfo:
        """Take the lock for ``info.run_id`` (its own lock back after a crash).

        Raises:
            LockHeldError: Another run holds it (naming run, operator, reason, task and start time).
            UnreachableError: ZooKeeper did not answer.
        """
        from kazoo.exceptions import NodeExistsError

        path = self._path(info.cluster)
        # With kafkaops' identity, the znode (and the parents it makes) only that identity may change:
        # another client of the ZooKeeper can read who holds the lock, never take or remove it.
        acl = self.zookeeper.lock_acl()
        for _ in range(3):
            try:
                # Persistent on purpose: the lock must outlive this process and its session.
                self.zookeeper.call(f"the creation of {path}",
                                    lambda zk: zk.create(path, info.to_json().encode(), makepath=True, acl=acl))
                return info
            except NodeExistsError:
                current = self.holder(info.cluster)
                if current is None:  # released between our create and our read: try again
                    continue
                if current.run_id == info.run_id:
                    return current  # a resumed run takes its own lock back
                raise held_error(current) from None
        raise UnreachableError(f"the lock znode {path} keeps appearing and disappearing; retry",
                               hint="another kafkaops is taking and releasing this cluster's lock")

    def release(self, cluster: str, run_id: str) -> bool:
        """Delete the lock if (and only if) ``run_id`` holds it; whether it did."""
        from kazoo.exceptions import BadVersionError, NoNodeError

        path = self._path(cluster)
        try:
            data, stat = self.zookeeper.call(f"a read of {path}", lambda zk: zk.get(path))
        except NoNodeError:
            return False
        if self._info(cluster, data).run_id != run_id:
            return False
        try:
            # Only the version we read: if someone force-unlocked and another run locked in between,
            # that run's lock stays.
            self.zookeeper.call(f"the deletion of {path}", lambda zk: zk.delete(path, version=stat.version))
        except (NoNodeError, BadVersionError):
            return False
        return True

    def holder(self, cluster: str) -> LockInfo | None:
        """Who holds the lock, ``None`` when nobody does; within :attr:`timeout`.

        Bounded because the runner reads it right before every destructive step (fencing): kazoo's plain
        ``get`` queues a request on a *suspended* session (a partition it has not yet given up on) and
        waits for as long as the partition lasts.

        Raises:
            UnreachableError: ZooKeeper did not answer within the timeout.
        """
        from kazoo.exceptions import NoNodeError

        path = self._path(cluster)
        try:
            data, _ = self.zookeeper.call(f"a read of {path}",
                                          lambda zk: zk.get_async(path).get(timeout=self.timeout))
        except NoNodeError:
            return None
        return self._info(cluster, data)

    def force_unlock(self, cluster: str) -> LockInfo | None:
        """Remove the lock whoever holds it; the previous holder (``None``: there was no lock)."""
        from kazoo.exceptions import NoNodeError

        path = self._path(cluster)
        try:
            previous = self.holder(cluster)
        except ConfigError:  # corrupt: removing it is exactly what the operator asked for
            previous = None
        try:
            self.zookeeper.call(f"the deletion of {path}", lambda zk: zk.delete(path))
        except NoNodeError:
            return None
        return previous
