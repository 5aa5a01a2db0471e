"""kafkaops' own etcd client over TLS with a client certificate (issue 43), against Debian's etcd requiring
client certificates: the lock works with the inventory's ``conftool.tls``; without a client certificate,
or with a CA that did not sign etcd's, it is refused at once (exit 14), never "etcd did not answer"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from real_servers import Server, make_pki, start_etcd

from kafkaops.engine.lock import lock_info
from kafkaops.errors import AuthError
from kafkaops.model import TlsFiles
from kafkaops.systems.etcd import EtcdLockBackend


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory, pki: Path) -> Iterator[Server]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"), tls=pki)
    try:
        yield server
    finally:
        server.stop()


def test_the_lock_works_over_tls_with_the_inventorys_client_certificate(etcd: Server, pki: Path) -> None:
    assert etcd.address.startswith("https://")
    tls = TlsFiles(ca_file=str(pki / "ca.pem"), cert_file=str(pki / "client.pem"), key_file=str(pki / "client.key"))
    backend = EtcdLockBackend(etcd.address, tls=tls)
    backend.acquire(lock_info("main", "run-1", "alice", "test", None))
    holder = backend.holder("main")
    assert holder is not None and holder.run_id == "run-1"
    assert backend.release("main", "run-1")
    backend.close()


@pytest.mark.parametrize("which", ["no client certificate", "another CA"])
def test_a_refused_certificate_is_exit_14_at_once(etcd: Server, pki: Path, tmp_path: Path, which: str) -> None:
    if which == "no client certificate":
        tls = TlsFiles(ca_file=str(pki / "ca.pem"))
    else:
        other = make_pki(tmp_path / "other")
        tls = TlsFiles(ca_file=str(other / "ca.pem"), cert_file=str(pki / "client.pem"),
                       key_file=str(pki / "client.key"))
    with pytest.raises(AuthError, match=r"etcd at https://127\.0\.0\.1:\d+: TLS refused") as refused:
        EtcdLockBackend(etcd.address, tls=tls).holder("main")
    assert refused.value.exit_code == 14
