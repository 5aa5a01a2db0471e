"""kafkaops' ZooKeeper client over TLS with a client certificate (issue 43), against a real ZooKeeper whose
secure port (Netty) requires certificates signed by its CA: the lock works with the inventory's
``kafka.zookeeper_security``; a certificate the server refuses, or a server certificate kafkaops cannot
verify, is exit 14 at once — never "ZooKeeper did not answer" retried as an outage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_servers import Server, make_pki, start_zookeeper

from kafkaops.engine.lock import lock_info
from kafkaops.errors import AuthError
from kafkaops.model import ZooKeeperSecurity
from kafkaops.systems.zookeeper import ZooKeeperLockBackend


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory, pki: Path) -> Iterator[Server]:
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"), tls=pki)
    try:
        yield server
    finally:
        server.stop()


def test_the_lock_works_over_tls_with_the_inventorys_client_certificate(zookeeper: Server, pki: Path,
                                                                       tmp_path: Path) -> None:
    tls = ZooKeeperSecurity(ca_file=str(pki / "ca.pem"), cert_file=str(pki / "client.pem"),
                            key_file=str(pki / "client.key"))
    backend = ZooKeeperLockBackend(zookeeper.address, root=f"/kafkaops-{tmp_path.name}/locks", timeout=5, security=tls)
    try:
        backend.acquire(lock_info("main", "run-1", "alice", "test", None))
        holder = backend.holder("main")
        assert holder is not None and holder.run_id == "run-1"
        assert backend.release("main", "run-1")
    finally:
        backend.close()


@pytest.mark.parametrize("which", ["no client certificate", "another CA"])
def test_a_refused_certificate_is_exit_14_at_once(zookeeper: Server, pki: Path, tmp_path: Path, which: str) -> None:
    if which == "no client certificate":
        tls = ZooKeeperSecurity(ca_file=str(pki / "ca.pem"))
    else:
        other = make_pki(tmp_path / "other")
        tls = ZooKeeperSecurity(ca_file=str(other / "ca.pem"), cert_file=str(pki / "client.pem"),
                                key_file=str(pki / "client.key"))
    backend = ZooKeeperLockBackend(zookeeper.address, root=f"/kafkaops-{tmp_path.name}/locks", timeout=5, security=tls)
    began = time.monotonic()
    with pytest.raises(AuthError, match=rf"ZooKeeper at {zookeeper.address} refused TLS") as refused:
        backend.holder("main")
    assert refused.value.exit_code == 14
    assert time.monotonic() - began < 5, "a refusal was waited out like an outage"
