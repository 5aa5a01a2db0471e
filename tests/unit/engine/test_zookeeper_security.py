"""ZooKeeper with kafkaops' identity (issue 43): the lock znode only kafkaops may change — against a real
ZooKeeper (ZooKeeper's built-in ``digest`` scheme needs no server configuration)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from real_servers import Server, start_zookeeper

from kafkaops.engine.lock import lock_info
from kafkaops.errors import ConfigError, LockHeldError
from kafkaops.inventory import load_inventory
from kafkaops.model import Secret, ZooKeeperSecurity
from kafkaops.systems.zookeeper import ZooKeeperLockBackend

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server
    finally:
        server.stop()


def _identity(tmp_path: Path, user: str, password: str) -> ZooKeeperSecurity:
    f = tmp_path / f"{user}.password"
    f.write_text(password + "\n")
    f.chmod(0o600)
    return ZooKeeperSecurity(username=user, password=Secret(file=str(f)))


def test_the_lock_znode_only_kafkaops_may_change(zookeeper: Server, tmp_path: Path) -> None:
    root = f"/kafkaops-{tmp_path.name}/locks"
    ours = ZooKeeperLockBackend(zookeeper.address, root=root, security=_identity(tmp_path, "kafkaops", "pw-1"))
    info = lock_info("main", "run-1", "alice", "test", None)
    ours.acquire(info)
    stranger = KazooClient(hosts=zookeeper.address, timeout=10)
    other = KazooClient(hosts=zookeeper.address, timeout=10, auth_data=[("digest", "mallory:pw-2")])
    stranger.start(10)
    other.start(10)
    try:
        data, _ = stranger.get(f"{root}/main")  # anyone may see who holds the lock
        assert b"run-1" in data
        for client in (stranger, other):
            with pytest.raises(NoAuthError):
                client.delete(f"{root}/main")
            with pytest.raises(NoAuthError):
                client.set(f"{root}/main", b'{"run_id": "theirs"}')
            with pytest.raises(NoAuthError):  # nor plant a lock of another cluster beside it
                client.create(f"{root}/other", b"{}")
        acl, _ = stranger.get_acls(f"{root}/main")
        assert {(a.id.scheme, a.perms) for a in acl} == {("digest", 31), ("world", 1)}
    finally:
        stranger.stop()
        other.stop()
    with pytest.raises(LockHeldError):  # the same identity, another run: refused as ever
        ZooKeeperLockBackend(zookeeper.address, root=root, security=_identity(tmp_path, "kafkaops", "pw-1")).acquire(
            lock_info("main", "run-2", "bob", "test", None))
    assert ours.release("main", "run-1")
    ours.close()


def test_without_an_identity_the_lock_is_open_as_before(zookeeper: Server, tmp_path: Path) -> None:
    root = f"/kafkaops-{tmp_path.name}/locks"
    backend = ZooKeeperLockBackend(zookeeper.address, root=root)
    backend.acquire(lock_info("main", "run-1", "alice", "test", None))
    acl, _ = backend.zookeeper.client.get_acls(f"{root}/main")
    assert [(a.id.scheme, a.perms) for a in acl] == [("world", 31)]
    assert backend.force_unlock("main") is not None
    backend.close()


def _inventory(tmp_path: Path, block: str) -> Path:
    """The lab inventory with its ``kafka.zookeeper_security`` replaced by ``block``."""
    text = (REPO / "inventory" / "lab.yaml").read_text()
    start = text.index("  zookeeper_security:")
    end = text.index("  # Secured as production")
    path = tmp_path / "lab.yaml"
    path.write_text(text[:start] + block + text[end:])
    return path


def test_the_lab_names_its_zookeeper_tls_and_identity_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", "/srv/labdir")
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    assert cluster.zookeeper_security == ZooKeeperSecurity(
        ca_file="/srv/labdir/tls/ca.pem", cert_file="/srv/labdir/tls/kafkaops-zookeeper.pem",
        key_file="/srv/labdir/tls/kafkaops-zookeeper.key",
        username="kafkaops", password=Secret(file="/srv/labdir/secrets/zookeeper.password"))
    from kafkaops_lab.spec import from_inventory

    spec = from_inventory(cluster)  # kafkaops on the TLS port the inventory names, the brokers just below
    assert (spec.zk_secure_port, spec.zk_port) == (2182, 2181)
    assert spec.zookeeper_cert_file == "/srv/labdir/tls/kafkaops-zookeeper.pem"


@pytest.mark.parametrize(("block", "expected"), [
    ("  zookeeper_security: {}\n", r"give ca_file \(TLS\) and/or digest"),
    ("  zookeeper_security: {digest: {username: k, password: x}}\n", r"a password is never written"),
    ("  zookeeper_security: {digest: {username: k}}\n",
     r"name the password by exactly one of password_file or password_env"),
    ("  zookeeper_security: {cert_file: /etc/c.pem, key_file: /etc/k.pem}\n", r"give the ca_file"),
    ("  zookeeper_security: {sasl: {}}\n", r"unknown key"),
])
def test_malformed_zookeeper_security_is_refused_at_load(tmp_path: Path, block: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_inventory(tmp_path, block))


def test_zookeeper_security_loads(tmp_path: Path) -> None:
    cluster = load_inventory(_inventory(tmp_path, "  zookeeper_security:\n    digest: {username: kafkaops, "
                                                  "password_env: ZK_PASSWORD}\n"))
    assert cluster.zookeeper_security == ZooKeeperSecurity(username="kafkaops", password=Secret(env="ZK_PASSWORD"))
