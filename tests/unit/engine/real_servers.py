"""Real ZooKeeper and etcd servers for the lock tests, on free loopback ports, in a temp directory.

The lock is what stops two operators from rolling one cluster at once; a fake server would test our
idea of ZooKeeper and etcd, not theirs (``create`` atomicity, versions, compare-and-delete, what a
client logs when a server goes away). So these start the real ones — ZooKeeper's
``ZooKeeperServerMain`` from the Kafka jars ``scripts/install.sh`` resolves, Debian's ``etcd`` — once per
test session, on 127.0.0.1 and ports the OS hands out (never the lab's 127.0.10.x), and stop them by
pid. Not skipped when something is missing: CI installs both, and a lock test that silently skips is
how the ZooKeeper lock went untested. ``KAFKAOPS_TEST_NO_SERVERS=1`` skips them on purpose.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ADDRESS = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A port nothing listens on (bound and released: refused until someone takes it)."""
    return free_port()


@dataclass
class Server:
    """A started server: its address, process and log."""

    name: str
    address: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def _require(what: str, ok: bool) -> None:
    if ok:
        return
    if os.environ.get("KAFKAOPS_TEST_NO_SERVERS"):
        pytest.skip(f"{what} missing and KAFKAOPS_TEST_NO_SERVERS is set")
    pytest.fail(f"{what} not found: run scripts/install.sh (or set KAFKAOPS_TEST_NO_SERVERS=1 to skip)",
                pytrace=False)


def _wait(server: Server, ready: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if server.process.poll() is not None:
            break
        time.sleep(0.1)
    server.stop()
    tail = server.log.read_text(errors="replace")[-2000:] if server.log.exists() else ""
    pytest.fail(f"{server.name} did not start on {server.address}:\n{tail}", pytrace=False)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(d: Path) -> Path:
    """In ``d``: a CA (``ca.pem``), a server and a client certificate for 127.0.0.1 signed by it (``server.pem``
    / ``.key``, ``client.pem`` / ``.key``), and the server's as a PKCS#12 keystore (``server.p12``, password
    ``changeit``) for the Java servers."""
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
    _openssl("pkcs12", "-export", "-in", str(d / "server.pem"), "-inkey", str(d / "server.key"), "-out",
             str(d / "server.p12"), "-passout", "pass:changeit", "-name", "server")
    return d


def start_zookeeper(directory: Path, tls: Path | None = None) -> Server:
    """``org.apache.zookeeper.server.ZooKeeperServerMain`` on 127.0.0.1:<free port>, data in ``directory``. With
    ``tls`` (a :func:`make_pki` directory), a second port on TLS requiring client certificates signed by its
    CA (Netty, as production's secure ZooKeepers run), and the server's address is that port's."""
    from kafkaops_lab.dirs import kafka_jars

    if os.environ.get("KAFKAOPS_TEST_NO_SERVERS"):
        pytest.skip("KAFKAOPS_TEST_NO_SERVERS is set")
    java = shutil.which("java")
    jars = kafka_jars()
    _require("java", java is not None)
    _require(f"the ZooKeeper jar in {jars}", any(jars.glob("zookeeper-*.jar")))
    assert java is not None
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    secure_port = free_port() if tls else None
    secure = (f"secureClientPort={secure_port}\nsecureClientPortAddress={ADDRESS}\n"
              "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
              f"ssl.keyStore.location={tls / 'server.p12'}\nssl.keyStore.password=changeit\nssl.keyStore.type=PKCS12\n"
              f"ssl.trustStore.location={tls / 'ca.pem'}\nssl.trustStore.type=PEM\nssl.clientAuth=need\n"
              if tls else "")
    (directory / "zoo.cfg").write_text(
        f"dataDir={directory / 'data'}\nclientPort={port}\nclientPortAddress={ADDRESS}\ntickTime=500\n"
        "maxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n" + secure)
    (directory / "log4j.properties").write_text(
        "log4j.rootLogger=WARN, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={directory / 'zookeeper.log'}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    log = directory / "stdout.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [java, "-Xmx96m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Dzookeeper.admin.enableServer=false",
             f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}", "-cp", f"{jars}/*",
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(directory / "zoo.cfg")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    server = Server("ZooKeeper", f"{ADDRESS}:{secure_port or port}", proc, log)

    def serving() -> bool:
        # `ruok` says imok before the server accepts sessions; `srvr` names the mode only once it does.
        try:
            with socket.create_connection((ADDRESS, port), timeout=1) as s:
                s.sendall(b"srvr")
                return b"Mode: standalone" in s.recv(4096)
        except OSError:
            return False

    _wait(server, serving)
    return server


def start_etcd(directory: Path, tls: Path | None = None) -> Server:
    """Debian's ``etcd`` on 127.0.0.1:<free port> (client) and another free port (peer); with ``tls`` (a
    directory holding ``ca.pem``, ``server.pem``, ``server.key``), on https requiring client certificates."""
    if os.environ.get("KAFKAOPS_TEST_NO_SERVERS"):
        pytest.skip("KAFKAOPS_TEST_NO_SERVERS is set")
    etcd = shutil.which("etcd")
    _require("etcd", etcd is not None)
    assert etcd is not None
    directory.mkdir(parents=True, exist_ok=True)
    client, peer = free_port(), free_port()
    url = f"{'https' if tls else 'http'}://{ADDRESS}:{client}"
    secure = (["--cert-file", str(tls / "server.pem"), "--key-file", str(tls / "server.key"), "--client-cert-auth",
               "--trusted-ca-file", str(tls / "ca.pem")] if tls else [])
    log = directory / "etcd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [etcd, "--name", "locktest", "--data-dir", str(directory / "data"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", f"http://{ADDRESS}:{peer}",
             "--initial-advertise-peer-urls", f"http://{ADDRESS}:{peer}",
             "--initial-cluster", f"locktest=http://{ADDRESS}:{peer}", "--log-level", "warn", *secure],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    server = Server("etcd", url, proc, log)

    def healthy() -> bool:
        import requests

        auth = ({"verify": str(tls / "ca.pem"), "cert": (str(tls / "client.pem"), str(tls / "client.key"))}
                if tls else {})
        try:
            return requests.get(f"{url}/health", timeout=1, **auth).json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    _wait(server, healthy)
    return server


@dataclass
class DroppingProxy:
    """A TCP proxy in front of a server that can cut every connection at once and stop listening —
    what a client sees when its server crashes (and ``resume()``: the server is back)."""

    target: tuple[str, int]
    port: int = field(default_factory=free_port)
    _listener: socket.socket | None = None
    _conns: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def address(self) -> str:
        return f"{ADDRESS}:{self.port}"

    def resume(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((ADDRESS, self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                conn.close()
                continue
            with self._lock:
                self._conns += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop(self) -> None:
        """Stop listening and cut every open connection."""
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in its thread
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


def start_sshd(directory: Path, host_key: Path, *, certificate: Path | None = None,
               authorized_keys: Path) -> Server:
    """OpenSSH's ``sshd`` on 127.0.0.1:<free port> with ``host_key`` (and its host ``certificate``), letting in
    the keys of ``authorized_keys`` as root. It re-reads its host keys for each connection (sshd re-executes
    itself per connection), so a test may swap the certificate between connections."""
    if os.environ.get("KAFKAOPS_TEST_NO_SERVERS"):
        pytest.skip("KAFKAOPS_TEST_NO_SERVERS is set")
    sshd = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    _require("sshd", sshd is not None)
    assert sshd is not None
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = directory / "sshd_config"
    config.write_text(f"""ListenAddress {ADDRESS}:{port}
HostKey {host_key}
{f"HostCertificate {certificate}" if certificate else ""}
PidFile {directory / "sshd.pid"}
AuthorizedKeysFile {authorized_keys}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
LogLevel ERROR
SetEnv SHLVL=1
""")
    log = directory / "sshd.log"
    # -D: stay in the foreground, so the process we hold is the server and stop() stops it.
    proc = subprocess.Popen([sshd, "-D", "-f", str(config), "-E", str(log)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    server = Server("sshd", f"{ADDRESS}:{port}", proc, log)

    def listening() -> bool:
        try:
            with socket.create_connection((ADDRESS, port), timeout=1) as s:
                return s.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    _wait(server, listening, timeout=20)
    return server
