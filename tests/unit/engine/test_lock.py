"""Cluster lock: one contract, three backends (lock file, ZooKeeper, etcd), tested against real servers.

Every backend must: take the lock atomically; give a run its own lock back (``kafkaops resume``); refuse
another run naming its run id, operator, reason, task and start time; release only for the run that
holds it, and not a lock another run took since (compare-and-delete); keep the lock after the process or
session that took it is gone (run-scoped, no TTL); and let a human force it off. An unreachable server
is one line naming it, and kazoo's own log lines never reach the terminal.

ZooKeeper and etcd are real servers started once per session on free 127.0.0.1 ports
(``real_servers.py``); they are not skipped in CI.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World
from real_servers import DroppingProxy, Server, closed_port, start_etcd, start_zookeeper

from kafkaops.engine.audit import AuditLog, MemorySink
from kafkaops.engine.binding import Target, bind_runbook
from kafkaops.engine.lock import FileLockBackend, LockBackend, LockInfo, force_unlock, lock_info
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.errors import ConfigError, LockHeldError, RunFailed, UnreachableError

# --- servers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


def _root() -> str:
    """A lock root of its own per test: tests share one server, never each other's locks."""
    return f"/kafkaops-test/{uuid.uuid4().hex[:8]}/locks"


BackendFactory = Callable[[], LockBackend]


@pytest.fixture(params=["file", "zookeeper", "etcd"])
def new_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendFactory]:
    """Builds backends on one lock store: two of them are two admin hosts (or a crashed process and
    its successor)."""
    made: list[Any] = []
    root = _root()

    def make() -> LockBackend:
        backend: Any
        if request.param == "file":
            backend = FileLockBackend(tmp_path / "locks")
        elif request.param == "zookeeper":
            from kafkaops.systems.zookeeper import ZooKeeperLockBackend

            server = request.getfixturevalue("zookeeper_server")
            backend = ZooKeeperLockBackend(server.address, root=root, timeout=10)
        else:
            from kafkaops.systems.etcd import EtcdLockBackend

            server = request.getfixturevalue("etcd_server")
            backend = EtcdLockBackend(server.address, root=root, timeout=10)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


ALICE = LockInfo("main", "run-A", "alice@admin1", "reboot for kernel", 1_700_000_000.0, task="T42",
                 hostname="admin1", pid=4242)
BOB = LockInfo("main", "run-B", "bob@admin2", "other", 1_700_000_100.0)


# --- the contract, for every backend -------------------------------------------------------------------


def test_acquire_is_reentrant_and_refuses_another_run_naming_the_holder(new_backend: BackendFactory) -> None:
    be = new_backend()
    assert be.holder("main") is None
    assert be.acquire(ALICE) == ALICE
    assert be.holder("main") == ALICE
    # the same run takes its own lock back (resume), and keeps the original record
    assert be.acquire(LockInfo("main", "run-A", "alice@admin1", "resumed", 1_800_000_000.0)) == ALICE
    with pytest.raises(LockHeldError) as info:
        new_backend().acquire(BOB)  # another admin host
    msg = str(info.value)
    assert "cluster main is locked by run run-A by alice@admin1 since 2023-11-14T22:13:20Z" in msg
    assert "(reason: reboot for kernel, task T42)" in msg
    assert "kafkaops runs show run-A" in msg and "kafkaops runs unlock main --reason" in msg
    assert "--force" not in msg and "resume" not in msg  # nothing that acts behind the holder's back
    assert info.value.exit_code == 7
    assert be.holder("main") == ALICE


def test_release_only_by_the_holder(new_backend: BackendFactory) -> None:
    be = new_backend()
    be.acquire(ALICE)
    be.acquire(LockInfo("other", "run-B", "bob@admin2", "other cluster", 0.0))  # clusters are independent
    assert be.release("main", "run-B") is False
    assert be.holder("main") == ALICE
    assert be.release("main", "run-A") is True
    assert be.holder("main") is None
    assert be.release("main", "run-A") is False
    assert be.holder("other") is not None and be.holder("other").run_id == "run-B"  # type: ignore[union-attr]


def test_a_stale_release_never_removes_the_next_runs_lock(new_backend: BackendFactory) -> None:
    """Run A's lock is forced off (its admin host died), run B takes it; when A's process comes back and
    finishes, its release must not free B's lock."""
    a, b = new_backend(), new_backend()
    a.acquire(ALICE)
    assert b.force_unlock("main") == ALICE
    b.acquire(BOB)
    assert a.release("main", "run-A") is False
    assert a.holder("main") == BOB


def test_force_unlock_returns_the_previous_holder(new_backend: BackendFactory) -> None:
    be = new_backend()
    assert be.force_unlock("main") is None
    be.acquire(ALICE)
    assert be.force_unlock("main") == ALICE
    assert be.holder("main") is None
    assert be.acquire(BOB) == BOB


def test_the_lock_outlives_the_process_that_took_it(new_backend: BackendFactory) -> None:
    """Run-scoped, not session- or TTL-scoped: a crashed run keeps the cluster locked."""
    first = new_backend()
    first.acquire(ALICE)
    close = getattr(first, "close", None)
    if close is not None:
        close()  # the ZooKeeper session ends (an ephemeral node would be gone now), HTTP connections too
    later = new_backend()
    assert later.holder("main") == ALICE
    with pytest.raises(LockHeldError):
        later.acquire(BOB)


def test_force_unlock_is_audited_and_lets_the_next_run_in(new_backend: BackendFactory) -> None:
    be = new_backend()
    be.acquire(lock_info("main", "ghost-run", "carol@c", "crashed host", None))
    sink = MemorySink()
    prev = force_unlock("main", "admin host died, run is gone", operator="dave@d", backend=be,
                        audit=AuditLog([sink]))
    assert prev is not None and prev.run_id == "ghost-run"
    assert be.holder("main") is None
    rec = sink.records[-1]
    assert rec["action"] == "force-unlock main" and rec["operator"] == "dave@d"
    assert rec["reason"] == "admin host died, run is gone" and rec["run"] == "ghost-run"
    assert rec["previous_holder"]["operator"] == "carol@c"
    assert force_unlock("main", "again", operator="dave@d", backend=be, audit=AuditLog([sink])) is None
    assert sink.records[-1]["outcome"] == "no-lock"


def test_force_unlock_needs_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--reason"):
        force_unlock("main", " ", operator="x", backend=FileLockBackend(tmp_path), audit=AuditLog())


# --- the runner holds the lock for the life of the run --------------------------------------------


def _bound() -> Any:
    rb = parse_runbook(
        {"name": "r", "summary": "s", "steps": [{"test.set": {"key": "a", "value": 1}}, {"test.fail": {}}]}
    )
    return bind_runbook(rb, cluster="main", targets=[Target("h1")])


def test_second_run_refused_while_first_is_failed_then_resume_retakes_its_lock(
    make_runner: Callable[..., Runner], world: World, home: Path
) -> None:
    world.data["broken"] = True
    with pytest.raises(RunFailed):
        make_runner().start(_bound(), env=world, operator="alice@a", reason="first")
    run_a = os.listdir(home / "runs")[0]
    with pytest.raises(LockHeldError, match=f"locked by run {run_a} by alice@a"):
        make_runner().start(_bound(), env=world, operator="bob@b", reason="second")
    assert len(os.listdir(home / "runs")) == 1  # the refused run left no journal
    world.data["broken"] = False
    assert make_runner().resume(run_a, env=world).status == "finished"
    # now free
    assert (
        make_runner().start(_bound(), env=world, operator="bob@b", reason="second").status == "finished"
    )


# --- backend specifics -------------------------------------------------------------------------------


def test_lock_files_are_not_world_readable(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        FileLockBackend(tmp_path).acquire(ALICE)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "main.lock").stat().st_mode) == 0o640


def test_a_corrupt_lock_is_an_error_naming_it_and_force_unlock_clears_it(
    zookeeper_server: Server, etcd_server: Server
) -> None:
    from kafkaops.systems.etcd import EtcdLockBackend
    from kafkaops.systems.zookeeper import ZooKeeperLockBackend

    root = _root()
    zk = ZooKeeperLockBackend(zookeeper_server.address, root=root)
    et = EtcdLockBackend(etcd_server.address, root=root)
    try:
        zk.zookeeper.client.create(f"{root}/main", b"{not json", makepath=True)
        with pytest.raises(ConfigError, match=f"lock znode {root}/main .* is corrupt"):
            zk.holder("main")
        assert zk.force_unlock("main") is None and zk.zookeeper.client.exists(f"{root}/main") is None
        et._post("put", {"key": _b64(f"{root}/main"), "value": _b64("{not json")})
        with pytest.raises(ConfigError, match=f"lock key {root}/main in etcd .* is corrupt"):
            et.acquire(BOB)
        assert et.force_unlock("main") is None and et.holder("main") is None
    finally:
        zk.close()
        et.close()


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def test_the_etcd_lock_has_no_lease(etcd_server: Server) -> None:
    """A lease is a TTL: the key must be permanent until released (the anchor's expired-lock bug)."""
    from kafkaops.systems.etcd import EtcdLockBackend

    root = _root()
    be = EtcdLockBackend(etcd_server.address, root=root)
    be.acquire(ALICE)
    kv = be._range(f"{root}/main")
    be.close()
    assert kv is not None and "lease" not in kv  # the JSON gateway omits a zero lease


def test_etcd_urls_are_tried_in_turn(etcd_server: Server) -> None:
    from kafkaops.systems.etcd import EtcdLockBackend

    dead = f"http://127.0.0.1:{closed_port()}"
    be = EtcdLockBackend(f"{dead},{etcd_server.address}", root=_root(), timeout=3)
    assert be.acquire(ALICE) == ALICE
    be.close()


# --- unreachable servers: one line, nothing else on the terminal ---------------------------------------


def test_unreachable_zookeeper_is_one_line_fast_and_silent(capfd: pytest.CaptureFixture[str]) -> None:
    from kafkaops.systems.zookeeper import ZooKeeper, ZooKeeperLockBackend

    hosts = f"127.0.0.1:{closed_port()}"
    t = time.monotonic()
    with pytest.raises(UnreachableError) as info:
        ZooKeeperLockBackend(hosts, timeout=10).acquire(ALICE)
    assert time.monotonic() - t < 5  # a refused connection is said at once, not after the timeout
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"ZooKeeper at {hosts} did not answer (connection refused)")
    assert "check ZooKeeper is up" in msg
    assert info.value.exit_code == 4
    with pytest.raises(UnreachableError), ZooKeeper(hosts, timeout=2) as zk:
        zk.controller()
    time.sleep(0.3)  # kazoo's connection thread logs after the caller returned, if it logs at all
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_zookeeper_going_away_mid_session_is_one_line_then_recovers(
    zookeeper_server: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    """The server crashes under an open session: kazoo's "Connection dropped" warnings stay off the
    terminal, the next call is an UnreachableError, and once the server is back the lock works again."""
    from kafkaops.systems.zookeeper import ZooKeeperLockBackend

    host, port = zookeeper_server.address.rsplit(":", 1)
    proxy = DroppingProxy((host, int(port)))
    proxy.resume()
    be = ZooKeeperLockBackend(proxy.address, root=_root(), timeout=3)
    try:
        be.acquire(ALICE)
        proxy.drop()
        time.sleep(0.5)
        with pytest.raises(UnreachableError) as info:
            be.holder("main")
        assert "\n" not in str(info.value) and proxy.address in str(info.value)
        proxy.resume()
        assert be.holder("main") == ALICE  # the session is reopened by the next call
        assert be.release("main", "run-A")
    finally:
        be.close()
        proxy.drop()
    time.sleep(0.3)
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_unreachable_etcd_is_one_line_naming_the_url(capfd: pytest.CaptureFixture[str]) -> None:
    from kafkaops.systems.etcd import EtcdLockBackend

    url = f"http://127.0.0.1:{closed_port()}"
    for call in (lambda be: be.acquire(ALICE), lambda be: be.holder("main"), lambda be: be.release("main", "x"),
                 lambda be: be.force_unlock("main")):
        with pytest.raises(UnreachableError) as info:
            call(EtcdLockBackend(url, timeout=3))
        msg = str(info.value)
        assert msg.splitlines() == [msg]
        assert msg.startswith(f"etcd did not answer ({url}: connection refused)")
        assert "check etcd is up and conftool.etcd in the inventory" in msg
        assert "HTTPConnectionPool" not in msg and "Max retries" not in msg and "urllib3" not in msg
        assert info.value.exit_code == 4
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_an_etcd_url_that_is_not_etcd_is_a_config_error(tmp_path: Path) -> None:
    """A URL answering 404 (a web server, a wrong path) is a configuration mistake, not an outage."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from kafkaops.systems.etcd import EtcdLockBackend

    class NotEtcd(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), NotEtcd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ConfigError, match=r"refused /v3/kv/range: HTTP 404") as info:
            EtcdLockBackend(f"http://127.0.0.1:{server.server_address[1]}").holder("main")
        assert info.value.exit_code == 3
    finally:
        server.shutdown()
        server.server_close()



# --- the one kazoo wrapper (systems/zookeeper.py), which the lock backend is built on ---------------------


def test_the_zookeeper_adapter_reads_registrations_and_the_controller(
    zookeeper_server: Server, capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    from kafkaops.systems.zookeeper import ZooKeeper

    chroot = f"/cluster-{uuid.uuid4().hex[:8]}"
    with ZooKeeper(zookeeper_server.address) as setup:
        setup.client.ensure_path(chroot)
    with ZooKeeper(zookeeper_server.address + chroot, dry_run=True) as zk:
        assert zk.registered_brokers() == [] and zk.controller() is None and zk.broker_registration(1) is None
        zk.client.create("/brokers/ids/1002", json.dumps({"host": "kafka1002", "port": 9092}).encode(),
                         makepath=True)
        zk.client.create("/brokers/ids/1001", b"{}")
        zk.client.create("/controller", json.dumps({"brokerid": 1002}).encode())
        assert zk.registered_brokers() == [1001, 1002]
        assert zk.broker_registration(1002) == {"host": "kafka1002", "port": 9092}
        assert zk.controller() == 1002
    assert zk.client.exists("/controller") is not None  # a closed adapter reconnects on use
    zk.close()
    out, err = capfd.readouterr()
    assert err == "" and out == ""
