"""kafkaops' own etcd client over TLS with a client certificate (issue 43), against Debian's etcd requiring
client certificates: the lock works with the inventory's ``conftool.tls``; without a client certificate,
or with a CA that did not sign etcd's, it is refused at once (exit 14), never "etcd did not answer"."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_servers import Server, start_etcd

from kafkaops.engine.lock import lock_info
from kafkaops.errors import AuthError
from kafkaops.model import TlsFiles
from kafkaops.systems.etcd import EtcdLockBackend


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _make_pki(d: Path) -> Path:
    """A CA, etcd's certificate for 127.0.0.1, and a client certificate, all signed by the CA."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
             "-subj", "/CN=test CA")
    for name in ("server", "client"):
        (d / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
        _openssl("req", *ec, "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"), "-subj", f"/CN={name}")
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
                 "-CAcreateserial", "-out", str(d / f"{name}.pem"), "-days", "2", "-extfile", str(d / f"{name}.ext"))
    (d / "client.key").chmod(0o600)
    return d


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_pki(tmp_path_factory.mktemp("pki"))


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
        other = _make_pki(tmp_path / "other")
        tls = TlsFiles(ca_file=str(other / "ca.pem"), cert_file=str(pki / "client.pem"),
                       key_file=str(pki / "client.key"))
    with pytest.raises(AuthError, match=r"etcd at https://127\.0\.0\.1:\d+: TLS refused") as refused:
        EtcdLockBackend(etcd.address, tls=tls).holder("main")
    assert refused.value.exit_code == 14
