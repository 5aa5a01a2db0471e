"""The cluster lock: one run per cluster, held for the life of the *run*, not of a process.

Two operators rolling the same cluster at once is how you lose two replicas of a partition. So a run
takes its cluster's lock when it starts and gives it back only when it finishes or is aborted. The lock
is deliberately **not** TTL-based and **not** tied to a process or session:

* a TTL lock expired in the middle of multi-hour Wikimedia rolls, letting a second roll start;
* a crash left Zalando's cluster one broker short (bubuku #158) -- if the lock had died with the
  process, someone else could have started a roll on a cluster already missing a broker.

A crashed, paused or failed run keeps the lock; ``kafkaops resume RUN`` takes *its own* lock back
(same run id), and anyone else is refused with the holder's run id, operator, reason and start time
(:class:`~kafkaops.errors.LockHeldError`). A lock whose run is gone for good is removed by a human with
``kafkaops runs unlock CLUSTER --force --reason ...`` (audited).

This module holds what every backend shares (:class:`LockInfo`, the :class:`LockBackend` protocol, the
audited :func:`force_unlock`) and the local backend, a JSON lock file created with ``O_EXCL``
(:class:`FileLockBackend`: one admin host, the lab). The backends that coordinate several admin hosts
talk to a server, so they live with the other adapters (the engine imports no client library):

* :class:`kafkaops.systems.zookeeper.ZooKeeperLockBackend` when the cluster has ZooKeeper: a
  *persistent* znode ``/kafkaops/locks/<cluster>`` with JSON data -- persistent, not ephemeral,
  precisely so that it outlives a crashed process and its ZooKeeper session;
* :class:`kafkaops.systems.etcd.EtcdLockBackend` for clusters without ZooKeeper: a key in the etcd
  conftool uses, created only if absent and with no lease (a lease is a TTL by another name).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from kafkaops.engine.audit import default_audit
from kafkaops.errors import ConfigError, LockHeldError


@dataclass(frozen=True)
class LockInfo:
    """Who holds a cluster's lock and why."""

    cluster: str
    run_id: str
    operator: str
    reason: str
    started_at: float
    task: str | None = None
    hostname: str = ""
    pid: int = 0

    @property
    def started_iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> LockInfo:
        d = json.loads(text)
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**fields)

    def describe(self) -> str:
        task = f", task {self.task}" if self.task else ""
        return f"run {self.run_id} by {self.operator} since {self.started_iso} (reason: {self.reason}{task})"


def held_error(info: LockInfo) -> LockHeldError:
    """The refusal every backend raises when another run holds the lock: who, since when, why, and the
    ways out that do not touch the cluster behind that run's back (wait; its owner resumes or aborts it;
    ``runs unlock`` without ``--force`` says whether the lock is orphaned)."""
    return LockHeldError(
        f"cluster {info.cluster} is locked by {info.describe()}",
        hint=f"wait for it to finish, or ask {info.operator} (`kafkaops runs show {info.run_id}`); "
        f"`kafkaops runs unlock {info.cluster} --reason ...` tells whether that run is gone and its lock orphaned",
    )


class LockBackend(Protocol):
    """A place to keep cluster locks."""

    def acquire(self, info: LockInfo) -> LockInfo:
        """Take the lock for ``info.run_id``; re-entrant for the same run id.

        Raises:
            LockHeldError: Another run holds it.
        """
        ...

    def release(self, cluster: str, run_id: str) -> bool:
        """Release if (and only if) ``run_id`` holds it; returns whether it did."""
        ...

    def holder(self, cluster: str) -> LockInfo | None:
        """The current holder, if any, read from the store now and within the backend's deadline.

        The runner calls it right before every destructive step (fencing): an answer that can take as
        long as a network partition lasts would let a run hang there instead of pausing.

        Raises:
            UnreachableError: The store did not answer in time.
        """
        ...

    def force_unlock(self, cluster: str) -> LockInfo | None:
        """Remove the lock whoever holds it; returns the previous holder."""
        ...


class FileLockBackend:
    """Lock files ``<dir>/<cluster>.lock`` holding JSON, created atomically with ``O_EXCL``.

    Mode 0640: the holder's operator, reason and task are for the admin host's operators (group), not
    for every local account.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, cluster: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cluster)
        return self.directory / f"{safe}.lock"

    def acquire(self, info: LockInfo) -> LockInfo:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(info.cluster)
        for _ in range(3):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
            except FileExistsError:
                current = self.holder(info.cluster)
                if current is None:  # vanished (released) between open and read: retry
                    continue
                if current.run_id == info.run_id:
                    return current  # a resumed run takes its own lock back
                raise held_error(current) from None
            try:
                os.write(fd, info.to_json().encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            return info
        raise LockHeldError(f"cluster {info.cluster}: lock file {path} keeps changing; retry")

    def release(self, cluster: str, run_id: str) -> bool:
        current = self.holder(cluster)
        if current is None or current.run_id != run_id:
            return False
        try:
            self._path(cluster).unlink()
        except FileNotFoundError:
            return False
        return True

    def holder(self, cluster: str) -> LockInfo | None:
        path = self._path(cluster)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        if not text.strip():
            # Created but not yet written (or a crash in between): treat as held by an unknown run.
            return LockInfo(cluster, "?", "?", f"incomplete lock file {path}", path.stat().st_mtime)
        try:
            return LockInfo.from_json(text)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"lock file {path} is corrupt: {exc}",
                hint=f"inspect it, then `kafkaops runs unlock {cluster} --force --reason ...`",
            ) from exc

    def force_unlock(self, cluster: str) -> LockInfo | None:
        path = self._path(cluster)
        try:
            previous = self.holder(cluster)
        except ConfigError:
            previous = None
        try:
            path.unlink()
        except FileNotFoundError:
            return None
        return previous


class SiteLocks:
    """A multi-site run's lock: its own, and the lock of every site it touches, held together.

    A switchover sends every client of a service to one site. A roll or a reboot started on that site
    half-way through would take brokers away from all of them at once, so the switchover holds each
    site's own cluster lock (the one those runs take) for its whole life, under its run id: a roll is
    refused, naming the switchover, and the switchover is refused while a roll holds a site. Taken in
    a fixed order (the run's own, then the sites by name); a refusal gives back what this call took and
    leaves what the run already held (a resume that is refused keeps its run's own lock).
    """

    def __init__(self, own: LockBackend, sites: Mapping[str, LockBackend]) -> None:
        self.own = own
        self.sites = dict(sorted(sites.items()))

    def acquire(self, info: LockInfo) -> LockInfo:
        taken: list[tuple[str, LockBackend]] = []
        try:
            for name, backend in [(info.cluster, self.own), *self.sites.items()]:
                current = backend.holder(name)
                backend.acquire(replace(info, cluster=name))
                if current is None:
                    taken.append((name, backend))
        except BaseException:
            for name, backend in reversed(taken):
                backend.release(name, info.run_id)
            raise
        return info

    def release(self, cluster: str, run_id: str) -> bool:
        for name, backend in reversed(self.sites.items()):
            backend.release(name, run_id)
        return self.own.release(cluster, run_id)

    def holder(self, cluster: str) -> LockInfo | None:
        return self.own.holder(cluster)

    def close(self) -> None:
        """Close the run's own lock's client; each site's is its site environment's to close."""
        close = getattr(self.own, "close", None)
        if callable(close):
            close()

    def force_unlock(self, cluster: str) -> LockInfo | None:
        """Remove the run's own lock, and each site's lock *that same run* holds (not another run's)."""
        previous = self.own.force_unlock(cluster)
        if previous is not None:
            for name, backend in self.sites.items():
                site = backend.holder(name)
                if site is not None and site.run_id == previous.run_id:
                    backend.force_unlock(name)
        return previous


def force_unlock(
    cluster: str,
    reason: str,
    *,
    operator: str,
    backend: LockBackend,
    audit: Any = None,
) -> LockInfo | None:
    """Remove a cluster's lock whatever run holds it, and audit who did it and why.

    Args:
        cluster: Cluster name.
        reason: Why (mandatory: this overrides a safety mechanism).
        operator: ``user@host``.
        backend: The cluster's lock backend (from its environment).
        audit: An :class:`~kafkaops.engine.audit.AuditLog` (default: the file audit log).

    Returns:
        The previous holder, or ``None`` when there was no lock.
    """
    if not reason.strip():
        raise ConfigError("force unlock needs a --reason", hint="say why the holding run is gone")
    previous = backend.force_unlock(cluster)
    if audit is None:

        audit = default_audit()
    audit.record(
        run=previous.run_id if previous else "-",
        operator=operator,
        reason=reason,
        action=f"force-unlock {cluster}",
        outcome="removed" if previous else "no-lock",
        target=cluster,
        previous_holder=asdict(previous) if previous else None,
    )
    return previous


def lock_info(cluster: str, run_id: str, operator: str, reason: str, task: str | None) -> LockInfo:
    """A :class:`LockInfo` for this process."""
    import socket

    return LockInfo(
        cluster=cluster,
        run_id=run_id,
        operator=operator,
        reason=reason,
        started_at=time.time(),
        task=task,
        hostname=socket.gethostname(),
        pid=os.getpid(),
    )


def holder_dict(info: LockInfo | None) -> Mapping[str, Any] | None:
    return asdict(info) if info else None
