"""Remote commands over SSH with paramiko: strict host keys, ssh_config, bounded time.

- Host keys are checked against the known-hosts files OpenSSH would read (the inventory's or ssh_config's
  user files, and the global ones such as Puppet's ``/etc/ssh/ssh_known_hosts``:
  :mod:`kafkaops.systems.known_hosts`); an unknown or different key is fatal (:class:`HostKeyError`) and
  never retried — that is what an impersonated host looks like.
- ``~/.ssh/config`` is honoured (HostName, User, Port, IdentityFile, ProxyJump); the inventory wins
  where it says something explicitly.
- Every command has a timeout. Remote templates use ``sudo -n`` so a password prompt fails at once
  instead of hanging the run (Yelp's tool hung forever on one, #261).
- Reads and changes are two methods: :meth:`SshClient.run` (boot id, status, logs, captures) and
  :meth:`SshClient.change` (stop, start, reboot, restart, deploy), which refuses in a dry-run
  (:mod:`kafkaops.systems.guard`).
"""

from __future__ import annotations

import getpass
import logging
import os
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kafkaops.errors import ConfigError, HostKeyError, UnreachableError, WaitTimeout
from kafkaops.model import SshEndpoint
from kafkaops.systems.guard import write
from kafkaops.systems.host_certificates import CERTIFICATE_ALGORITHMS, CertificateRefused, check_host_certificate
from kafkaops.systems.known_hosts import (
    CertAuthority,
    TrustFiles,
    cert_authorities,
    fingerprint,
    host_names,
    load_plain_keys,
    revoked_keys,
    trust_files,
)


class BehindBastion(ConfigError):
    """A host's key cannot be checked without logging in to its ProxyJump bastion: left to the first real
    connection, which verifies it like any other (``kafkaops doctor`` says so as a warning)."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class RemoteCommandError(UnreachableError):
    """A remote command exited non-zero where success was required."""


@dataclass(frozen=True)
class _Target:
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: TrustFiles
    proxy_jump: str | None


def _resolve(endpoint: SshEndpoint, config_path: str) -> _Target:
    import paramiko

    cfg: dict[str, Any] = {}
    if os.path.exists(config_path):
        cfg = dict(paramiko.SSHConfig.from_path(config_path).lookup(endpoint.address))
    keys = [endpoint.key_file] if endpoint.key_file else [os.path.expanduser(k) for k in cfg.get("identityfile", [])]
    return _Target(
        hostname=cfg.get("hostname", endpoint.address) if endpoint.address else cfg.get("hostname", ""),
        port=endpoint.port or int(cfg.get("port", 22)),
        user=endpoint.user or cfg.get("user") or getpass.getuser(),
        key_files=tuple(k for k in keys if k),
        known_hosts=trust_files(endpoint.known_hosts, cfg),
        proxy_jump=endpoint.proxy_jump or cfg.get("proxyjump"),
    )


def _drop_revoked(keys: Any, names: tuple[str, ...], revoked: dict[str, str]) -> list[Any] | None:
    """Remove from ``keys`` (a ``paramiko.HostKeys``) the keys of ``names`` that are ``@revoked``; return
    the ones left, or None when none was recorded at all. A revoked key is never accepted, even where it
    is also recorded as the host's (as ssh(1): the old key of a re-keyed host often stays in some file)."""
    found: list[Any] = []
    kept: list[Any] = []
    for name in names:
        entries = keys.lookup(name)
        if entries is None:
            continue
        for key in list(entries.values()):
            found.append(key)
            if f"{key.get_name()} {key.get_base64()}" in revoked:
                del entries[key.get_name()]
            else:
                kept.append(key)
    return kept if found else None


def _certificate_first(sock: Any, disabled_algorithms: Any = None) -> Any:
    """A paramiko transport asking for the server's host *certificate* first (for a host trusted through a
    CA): a server offers its certificate only when the client lists a certificate algorithm before the
    plain ones, as ssh(1) does for a host it has a ``@cert-authority`` line for."""
    import paramiko

    transport = paramiko.Transport(sock, disabled_algorithms=disabled_algorithms)
    options = transport.get_security_options()
    options.key_types = [*CERTIFICATE_ALGORITHMS, *(k for k in options.key_types if k not in CERTIFICATE_ALGORITHMS)]
    return transport


class _CertificatePolicy:
    """paramiko's hook for a host key found in no known-hosts file: accept it only as a host certificate
    :func:`~kafkaops.systems.host_certificates.check_host_certificate` verifies (paramiko has already
    checked that the server holds the certified key). Anything else is :class:`HostKeyError`."""

    def __init__(self, where: str, hostname: str, cas: list[CertAuthority], revoked: dict[str, str]) -> None:
        self.where, self.hostname, self.cas, self.revoked = where, hostname, cas, revoked
        self.vouched: CertAuthority | None = None  # the CA that vouched for the host, once one did

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        blob = getattr(key, "public_blob", None)
        trusted = ", ".join(str(ca) for ca in self.cas)
        try:
            if blob is None:
                raise CertificateRefused(f"it presented a bare {key.get_name()} key, not a host certificate")
            self.vouched = check_host_certificate(blob.key_type, blob.key_blob, hostname=self.hostname,
                                                  authorities=self.cas, revoked=self.revoked)
        except CertificateRefused as exc:
            raise HostKeyError(f"{self.where} is trusted only through {trusted}, and {exc}: possible "
                               "impersonation, refusing to connect",
                               hint="have the host's key signed by the CA for this name (ssh-keygen -s ... -h "
                                    f"-n {self.hostname}), or verify and add its key to known_hosts") from None


class SshClient:
    """One SSH connection to one host, opened lazily and re-opened after a reboot.

    ``dry_run``: the run is a dry-run, so :meth:`change` refuses (:class:`~kafkaops.systems.guard.DryRunViolation`)
    while :meth:`run` still reads the host.
    """

    def __init__(self, endpoint: SshEndpoint, *, name: str = "", connect_timeout: float = 10.0,
                 ssh_config: str = "~/.ssh/config", dry_run: bool = False) -> None:
        self.endpoint = endpoint
        self.name = name or endpoint.address
        self.connect_timeout = connect_timeout
        self.ssh_config = os.path.expanduser(ssh_config)
        self.dry_run = dry_run
        self._client: Any = None
        self._jump: Any = None

    def __repr__(self) -> str:
        return f"SshClient({self.name})"

    def _where(self, t: _Target) -> str:
        return f"{self.name} ({t.user}@{t.hostname}:{t.port})"

    def connect(self) -> Any:
        import paramiko

        if self._client is not None and self._client.get_transport() is not None \
                and self._client.get_transport().is_active():
            return self._client
        self.close()
        t = _resolve(self.endpoint, self.ssh_config)
        client, certificate, files = self._trusting(t)
        sock = self._proxy_sock(t) if t.proxy_jump else None
        try:
            client.connect(
                t.hostname, port=t.port, username=t.user, key_filename=list(t.key_files) or None,
                timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout, allow_agent=not t.key_files, look_for_keys=not t.key_files,
                sock=sock, transport_factory=cast(Any, _certificate_first) if certificate else None,
            )
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            raise self._mismatch(t, files) from exc
        except paramiko.AuthenticationException as exc:
            if "timeout" in str(exc).lower():
                # No answer to the authentication within auth_timeout: the network (or sshd) hangs - a
                # host that is still booting, a partition - not a wrong key. Unreachable, hence retried
                # and waited for like any other silence; never "fix your credentials".
                raise UnreachableError(f"ssh to {self._where(t)} did not answer the authentication within "
                                       f"{self.connect_timeout:g}s ({exc})",
                                       hint="is the host up and reachable? check the network to it") from exc
            raise ConfigError(f"ssh authentication to {self._where(t)} failed: {exc}",
                              hint="check ssh.user and ssh.key_file (or your agent)") from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise self._unknown(t, files) from exc
            raise UnreachableError(f"ssh to {self._where(t)} failed: {exc}") from exc
        except (TimeoutError, OSError, EOFError) as exc:
            raise UnreachableError(f"ssh to {self._where(t)} failed: {exc}",
                                   hint="is the host up and sshd listening? check ssh.address/port") from exc
        transport = client.get_transport()
        transport_sock = transport.sock if transport is not None else None
        if isinstance(transport_sock, socket.socket):
            # Every command is a few small messages each way (open a channel, exec, exit status): with
            # Nagle's algorithm each waits for the peer's delayed ACK — 44 ms per command measured, most
            # of a command's cost on a LAN. OpenSSH's own client sets this too.
            transport_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client = client
        return client

    def _trusting(self, t: _Target) -> tuple[Any, _CertificatePolicy | None, tuple[str, ...]]:
        """A ``paramiko.SSHClient`` that trusts what OpenSSH would for ``t``: the plain keys of its known-hosts
        files (``@revoked`` ones dropped), else its host CAs (:class:`_CertificatePolicy`), else nothing
        (``RejectPolicy``); with the certificate policy (None: no CA trusted) and the files. Shared by
        :meth:`connect` and :meth:`verify_host_key`, so that what ``kafkaops doctor`` checks is what a run's
        connection will verify.

        Raises:
            HostKeyError: no known-hosts file, or every recorded key of the host is ``@revoked``.
        """
        import paramiko

        client = paramiko.SSHClient()
        files = t.known_hosts.existing
        if not files:
            raise HostKeyError(f"no known_hosts file for {self._where(t)} (looked for {t.known_hosts.shown()})",
                               hint="set ssh.known_hosts in the inventory, or add the host's key first")
        names = host_names(t.hostname, t.port)
        revoked = revoked_keys(files, names)
        for path in files:
            load_plain_keys(client.get_host_keys(), path)
        recorded = _drop_revoked(client.get_host_keys(), names, revoked)
        if recorded is not None and not recorded:
            raise HostKeyError(f"every host key recorded for {self._where(t)} is marked @revoked "
                               f"({', '.join(sorted(set(revoked.values())))})",
                               hint="the host must be re-keyed; never remove the @revoked line to get in")
        cas = [] if recorded else cert_authorities(files, names)
        certificate = _CertificatePolicy(self._where(t), t.hostname, cas, revoked)
        client.set_missing_host_key_policy(cast(Any, certificate) if cas else paramiko.RejectPolicy())
        return client, certificate if cas else None, files

    def _mismatch(self, t: _Target, files: tuple[str, ...]) -> HostKeyError:
        return HostKeyError(f"host key of {self._where(t)} does not match {', '.join(files)}: possible "
                            "impersonation, refusing to connect",
                            hint="if the host was reinstalled, verify and update known_hosts")

    def _unknown(self, t: _Target, files: tuple[str, ...]) -> HostKeyError:
        return HostKeyError(f"{self._where(t)} is not in {', '.join(files)}; refusing to trust it blindly",
                            hint="add its verified key, or a @cert-authority line for its host CA, to known_hosts")

    def verify_host_key(self) -> str:
        """Verify the host's key (or host certificate) as :meth:`connect` does, without authenticating: a
        ``paramiko.Transport`` key exchange (which proves the server holds the key it shows), then the same
        known-hosts / ``@cert-authority`` verification paramiko's ``SSHClient.connect`` applies before it
        authenticates. Nothing is logged in to, nothing runs: what ``kafkaops doctor`` asks of a host. What
        verified it, in words.

        Raises:
            HostKeyError: unknown, different or revoked key; a certificate that does not prove the host.
            UnreachableError: no SSH handshake within ``connect_timeout``.
            BehindBastion: the host is reached through a ProxyJump (checking it would log in to the bastion).
        """
        import paramiko

        t = _resolve(self.endpoint, self.ssh_config)
        if t.proxy_jump:
            raise BehindBastion(f"{self._where(t)} is reached through ProxyJump {t.proxy_jump}: its key is checked "
                              "on the first connection (checking it here would log in to the bastion)",
                              hint="connect once with ssh(1) through the bastion to check it by hand")
        client, certificate, files = self._trusting(t)
        name = t.hostname if t.port == 22 else f"[{t.hostname}]:{t.port}"
        recorded = client.get_host_keys().get(name)
        transport = None
        try:
            sock = socket.create_connection((t.hostname, t.port), timeout=self.connect_timeout)
            transport = (_certificate_first if certificate else paramiko.Transport)(sock)
            transport.banner_timeout = self.connect_timeout
            if recorded is not None:  # as SSHClient.connect: ask for the recorded key's type first
                options = transport.get_security_options()
                wanted = recorded.keys()[0]
                if wanted == "ssh-rsa":
                    wanted = next((k for k in ("rsa-sha2-512", "rsa-sha2-256") if k in options.key_types), wanted)
                options.key_types = [wanted, *(k for k in options.key_types if k != wanted)]
            transport.start_client(timeout=self.connect_timeout)
            key = transport.get_remote_server_key()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise UnreachableError(f"ssh to {self._where(t)}: no SSH handshake within {self.connect_timeout:g}s "
                                   f"({exc or type(exc).__name__})",
                                   hint="is the host up and sshd listening? check ssh.address/port") from None
        finally:
            if transport is not None:
                transport.close()
        if recorded is None:
            if certificate is None:
                raise self._unknown(t, files)
            certificate.missing_host_key(client, name, key)  # HostKeyError unless the certificate proves the host
            blob = getattr(key, "public_blob", None)
            return f"{blob.key_type if blob else key.get_name()} certificate signed by {certificate.vouched}"
        if recorded.get(key.get_name()) != key:
            raise self._mismatch(t, files)
        return f"{key.get_name()} key {fingerprint(key.asbytes())} as recorded in {', '.join(files)}"

    def _proxy_sock(self, t: _Target) -> Any:
        jump_spec = t.proxy_jump or ""
        user, _, rest = jump_spec.rpartition("@")
        host, _, port = rest.partition(":")
        # The bastion authenticates with its own ~/.ssh/config identity if it has one, else with the
        # target's key (one operator key across the fleet and its bastions is the common case).
        own = _resolve(SshEndpoint(address=host), self.ssh_config).key_files
        jump = SshClient(SshEndpoint(address=host, port=int(port) if port else None, user=user or None,
                                     key_file=None if own else (t.key_files[0] if t.key_files else None),
                                     known_hosts=t.known_hosts.user[0] if t.known_hosts.user else None),
                         name=f"jump {host}",
                         connect_timeout=self.connect_timeout, ssh_config=self.ssh_config, dry_run=self.dry_run)
        self._jump = jump
        transport = jump.connect().get_transport()
        return transport.open_channel("direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None

    def handed_over(self, *, dry_run: bool) -> SshClient:
        """A client of mode ``dry_run`` that owns this one's open connection (this one is left without):
        a session carries no permission, the client around it does — what a plan opened, its run reuses."""
        other = SshClient(self.endpoint, name=self.name, connect_timeout=self.connect_timeout,
                          ssh_config=self.ssh_config, dry_run=dry_run)
        other._client, other._jump, self._client, self._jump = self._client, self._jump, None, None
        return other

    @write
    def change(self, command: str, *, timeout: float = 60.0, check: bool = True,
               on_stdout_line: Callable[[str], None] | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run ``command``, which changes the host (stop, start, reboot, restart, deploy); as :meth:`run`.

        Why two methods for one transport: the adapter itself can then refuse every change in a
        dry-run — the second line of defence behind the planner, which never applies a step in a
        dry-run — while reads (boot id, status, logs, SYN captures) stay allowed, so a dry-run plan is
        built from what the hosts really say now. spicerack's ``RemoteHosts`` guards itself the same way.

        Raises:
            DryRunViolation: This client belongs to a dry-run (a bug in the caller; nothing was sent).
            RemoteCommandError / WaitTimeout / UnreachableError / HostKeyError: as :meth:`run`.
        """
        return self.run(command, timeout=timeout, check=check, on_stdout_line=on_stdout_line, stdin=stdin)

    def run(self, command: str, *, timeout: float = 60.0, check: bool = True,
            on_stdout_line: Callable[[str], None] | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run ``command``, which only reads the host; return its result. ``check`` raises on a non-zero exit.

        ``stdin``: bytes sent to the command's standard input, then end of file — how a document reaches
        a tool on the host (``--reassignment-json-file /dev/stdin``) without a file left behind there.

        Allowed in a dry-run; a command that changes the host goes through :meth:`change`.

        Raises:
            WaitTimeout: the command did not finish within ``timeout`` (its channel is closed).
            UnreachableError / HostKeyError: as :meth:`connect`.
        """
        client = self.connect()
        started = time.monotonic()
        try:
            channel = client.get_transport().open_session(timeout=self.connect_timeout)
            channel.settimeout(0.2)
            channel.exec_command(command)
            if stdin is not None:
                channel.sendall(stdin)
                channel.shutdown_write()
        except Exception as exc:
            self.close()
            raise UnreachableError(f"ssh to {self.name}: could not start {command!r}: {exc}") from exc
        out, err, partial = bytearray(), bytearray(), b""
        deadline = started + timeout
        try:
            while True:
                got = False
                if channel.recv_ready():
                    data = channel.recv(65536)
                    out += data
                    got = True
                    if on_stdout_line is not None:
                        partial += data
                        *lines, partial = partial.split(b"\n")
                        for line in lines:
                            on_stdout_line(line.decode(errors="replace"))
                if channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                    got = True
                if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                if channel.closed and not got:
                    break
                if time.monotonic() > deadline:
                    raise WaitTimeout(f"{command!r} on {self.name} did not finish within {timeout:.0f}s",
                                      hint="the remote command may still run; check the host")
                if not got:
                    _until_more(channel, 0.02)
            code = channel.recv_exit_status()
        finally:
            channel.close()
        result = CommandResult(command, code, out.decode(errors="replace"), err.decode(errors="replace"),
                               time.monotonic() - started)
        _log.debug("%s: exit %d in %.3fs: %s", self.name, code, result.seconds, command)
        if check and not result.ok:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise RemoteCommandError(f"{command!r} on {self.name} exited {code}"
                                     + (f": {detail[-1][:200]}" if detail else ""))
        return result

    def stream(self, command: str, *, on_line: Callable[[str], None], stop: Callable[[], bool],
               timeout: float) -> CommandResult:
        """Run ``command``, which only reads the host and prints as it goes (a packet capture), handing
        each output line to ``on_line`` as it arrives, until it exits or ``stop()`` says enough.

        The command gets a pseudo-terminal so that stopping it early is clean: closing the channel hangs
        the terminal up, which ends the remote command (SIGHUP; GNU ``timeout`` passes it on to its
        child) instead of leaving it capturing on the host until its own time limit. A terminal merges
        stderr into the output and ends lines with CRLF; lines are handed over without the CR.

        Returns:
            The result; ``exit_code`` is -1 when ``stop()`` ended it.

        Raises:
            WaitTimeout: Neither happened within ``timeout`` (the channel is closed).
            UnreachableError / HostKeyError: as :meth:`connect`.
        """
        client = self.connect()
        started = time.monotonic()
        try:
            channel = client.get_transport().open_session(timeout=self.connect_timeout)
            channel.settimeout(0.2)
            channel.get_pty(width=400)
            channel.exec_command(command)
        except Exception as exc:
            self.close()
            raise UnreachableError(f"ssh to {self.name}: could not start {command!r}: {exc}") from exc
        out, partial, code = bytearray(), b"", -1
        try:
            while not stop():
                if channel.recv_ready():
                    data = channel.recv(65536)
                    out += data
                    partial += data
                    *lines, partial = partial.split(b"\n")
                    for line in lines:
                        on_line(line.decode(errors="replace").rstrip("\r"))
                    continue
                if channel.exit_status_ready():
                    code = channel.recv_exit_status()
                    if partial:
                        on_line(partial.decode(errors="replace").rstrip("\r"))
                    break
                if time.monotonic() - started > timeout:
                    raise WaitTimeout(f"{command!r} on {self.name} did not end within {timeout:.0f}s",
                                      hint="the remote command is ended with the session; check the host")
                time.sleep(0.02)
        finally:
            channel.close()
        return CommandResult(command, code, out.decode(errors="replace"), "", time.monotonic() - started)


#: One DEBUG line per command run on a host (the run's debug log): what ran where, its exit code and how long
#: it took — the post-mortem's "what did kafkaops do on kafka1002 at 03:12", and the time a roll spent in
#: the hosts' own commands (bench/bench_roll.py sums it).
_log = logging.getLogger("kafkaops.ssh")


def _until_more(channel: Any, at_most: float) -> None:
    """Wait until ``channel`` has more to read, is at its end, or ``at_most`` seconds passed.

    Why not a plain sleep between polls: a command's answer arrived on average half a poll late, and a roll
    runs some twenty commands per broker (status, logs, stop, start). paramiko's channel wakes a ``select``
    when output arrives or the stream ends; output only on stderr does not, hence the bound. After the end of
    the stream the exit status is what is still to come, and it has its own event."""
    if channel.eof_received:
        channel.status_event.wait(at_most)
    else:
        select.select([channel], [], [], at_most)


class SshPool:
    """One :class:`SshClient` per host name, shared by the steps of a run."""

    def __init__(self, connect_timeout: float = 10.0, *, dry_run: bool = False) -> None:
        self.connect_timeout = connect_timeout
        self.dry_run = dry_run
        self._clients: dict[str, SshClient] = {}

    def get(self, name: str, endpoint: SshEndpoint) -> SshClient:
        if name not in self._clients:
            self._clients[name] = SshClient(endpoint, name=name, connect_timeout=self.connect_timeout,
                                            dry_run=self.dry_run)
        return self._clients[name]

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()

    def handed_over(self, *, dry_run: bool) -> SshPool:
        """A pool of mode ``dry_run`` owning this pool's open connections (see :meth:`SshClient.handed_over`);
        this pool is left empty."""
        other = SshPool(self.connect_timeout, dry_run=dry_run)
        other._clients = {name: c.handed_over(dry_run=dry_run) for name, c in self._clients.items()}
        self._clients.clear()
        return other
