"""ZooKeeper through kazoo, for ZooKeeper-mode clusters: broker registrations and the controller.

``/brokers/ids/<id>`` is the cluster's own word on whether a broker is alive — the confirmation a stop
step needs (a stop command's exit code is not enough: Yelp #148). KRaft clusters skip this adapter.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import Any

from kafkaops.errors import UnreachableError


class ZooKeeper:
    """A short-lived kazoo session; use as a context manager."""

    def __init__(self, hosts: str, *, timeout: float = 10.0) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self._zk: Any = None

    def __enter__(self) -> ZooKeeper:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        self._zk = KazooClient(hosts=self.hosts, timeout=self.timeout, connection_retry={"max_tries": 1})
        try:
            self._zk.start(timeout=self.timeout)
        except KazooTimeoutError as exc:
            self._zk.close()
            raise UnreachableError(f"ZooKeeper at {self.hosts} did not answer within {self.timeout:.0f}s",
                                   hint="check ZooKeeper is up and kafka.zookeeper in the inventory") from exc
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    @property
    def client(self) -> Any:
        return self._zk

    def registered_brokers(self) -> list[int]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(int(b) for b in self._zk.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self._zk.get(f"/brokers/ids/{broker_id}")
        except NoNodeError:
            return None
        return dict(json.loads(data))

    def controller(self) -> int | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self._zk.get("/controller")
        except NoNodeError:
            return None
        return int(json.loads(data)["brokerid"])
