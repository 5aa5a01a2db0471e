"""SSH host certificates, verified as ssh(1) verifies them, against a real sshd presenting one.

The certificates are made by OpenSSH's own ``ssh-keygen -s``, served by a real ``sshd`` (HostCertificate),
and cross-checked with OpenSSH's client where it matters: what kafkaops accepts, ``ssh`` accepts, and the
other way round for what it refuses.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkaops.errors import HostKeyError
from kafkaops.model import SshEndpoint
from kafkaops.systems.host_certificates import CertificateRefused, check_host_certificate
from kafkaops.systems.known_hosts import TrustFiles, cert_authorities, verified_by
from kafkaops.systems.ssh import SshClient
from tests.unit.engine.real_servers import ADDRESS, Server, start_sshd


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


@dataclass
class Fleet:
    """One sshd whose host certificate a test replaces (sshd reads it again for each connection)."""

    dir: Path
    ca: Path
    other_ca: Path
    host_key: Path
    user_key: Path
    served: Path
    server: Server

    @property
    def port(self) -> int:
        return int(self.server.address.rsplit(":", 1)[1])

    def serve(self, *, ca: Path | None = None, principals: str = ADDRESS, validity: str = "-5m:+1h",
              host: bool = True) -> None:
        """Sign the host key with ``ca`` and serve that certificate."""
        work = self.dir / "signing"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        pub = work / "host.pub"
        shutil.copy(self.host_key.with_suffix(".pub"), pub)
        args = ["ssh-keygen", "-q", "-s", str(ca or self.ca), "-I", "test-host", *(["-h"] if host else []),
                *(["-n", principals] if principals else []), "-V", validity, str(pub)]
        subprocess.run(args, check=True)
        shutil.copy(work / "host-cert.pub", self.served)

    def known_hosts(self, *lines: str) -> Path:
        path = self.dir / "known_hosts"
        path.write_text("".join(line + "\n" for line in lines))
        return path

    def ca_line(self, ca: Path | None = None, pattern: str | None = None) -> str:
        key = " ".join((ca or self.ca).with_suffix(".pub").read_text().split()[:2])
        return f"@cert-authority {pattern or f'[{ADDRESS}]:{self.port}'} {key}"

    def client(self, known_hosts: Path) -> SshClient:
        endpoint = SshEndpoint(address=ADDRESS, port=self.port, user="root", key_file=str(self.user_key),
                               known_hosts=str(known_hosts))
        return SshClient(endpoint, name="host1", ssh_config=str(self.dir / "no_ssh_config"), connect_timeout=10)

    def openssh_accepts(self, known_hosts: Path) -> bool:
        """What OpenSSH's own client says of the same host and known-hosts file."""
        done = subprocess.run(
            ["ssh", "-F", "/dev/null", "-i", str(self.user_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
             "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
             "-o", "StrictHostKeyChecking=yes", "-p", str(self.port), f"root@{ADDRESS}", "true"],
            capture_output=True, timeout=30)
        return done.returncode == 0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    d = tmp_path_factory.mktemp("certs")
    ca, other_ca = _keygen(d / "ca"), _keygen(d / "other_ca")
    host_key, user_key = _keygen(d / "host"), _keygen(d / "user")
    authorized = d / "authorized_keys"
    shutil.copy(user_key.with_suffix(".pub"), authorized)
    served = d / "served-cert.pub"
    fleet = Fleet(d, ca, other_ca, host_key, user_key, served, server=None)  # type: ignore[arg-type]
    fleet.serve()
    fleet.server = start_sshd(d / "sshd", host_key, certificate=served, authorized_keys=authorized)
    yield fleet
    fleet.server.stop()


def test_a_host_trusted_through_its_ca_is_let_in_and_doctor_names_the_ca(fleet: Fleet) -> None:
    fleet.serve()
    known = fleet.known_hosts(fleet.ca_line())
    assert fleet.client(known).run("echo ok").stdout.strip() == "ok"
    assert fleet.openssh_accepts(known)
    names = (f"[{ADDRESS}]:{fleet.port}",)
    by = verified_by(TrustFiles((str(known),), ()), names)
    fp = subprocess.run(["ssh-keygen", "-l", "-f", str(fleet.ca.with_suffix(".pub"))], capture_output=True,
                        text=True, check=True).stdout.split()[1]
    assert by == f"host CA {fp} ({known}:1)"


@pytest.mark.parametrize(("case", "refusal"), [
    ("another CA", r"is signed by SHA256:\S+, which no @cert-authority line for this host names"),
    ("expired", r"is valid from 2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z, not now"),
    ("another host", r"is for kafka9999\.example, not 127\.0\.0\.1"),
    ("any host", r"names no host"),
    ("user certificate", r"is a user certificate, not a host certificate"),
])
def test_a_certificate_that_does_not_prove_the_host_is_refused_as_ssh_refuses_it(
        fleet: Fleet, case: str, refusal: str) -> None:
    signing = {
        "another CA": {"ca": fleet.other_ca},
        "expired": {"validity": "20200101:20200102"},
        "another host": {"principals": "kafka9999.example"},
        "any host": {"principals": ""},
        "user certificate": {"host": False},
    }[case]
    fleet.serve(**signing)  # type: ignore[arg-type]
    known = fleet.known_hosts(fleet.ca_line())
    with pytest.raises(HostKeyError, match=rf"trusted only through host CA SHA256:\S+ \({known}:1\), and its "
                                           rf"certificate 'test-host' {refusal}") as refused:
        fleet.client(known).run("echo ok")
    assert refused.value.exit_code == 5
    if case != "any host":  # OpenSSH itself accepts a certificate naming no host; kafkaops is stricter
        assert not fleet.openssh_accepts(known), f"ssh accepts what kafkaops refused ({case})"


def test_a_revoked_ca_or_host_key_is_refused(fleet: Fleet) -> None:
    fleet.serve()
    ca_key = " ".join(fleet.ca.with_suffix(".pub").read_text().split()[:2])
    host_key = " ".join(fleet.host_key.with_suffix(".pub").read_text().split()[:2])
    for revoked, whose in ((ca_key, "its CA's key"), (host_key, "the host's key")):
        known = fleet.known_hosts(fleet.ca_line(), f"@revoked * {revoked}")
        with pytest.raises(HostKeyError, match=rf"is refused: {whose} is marked @revoked in {known}:2"):
            fleet.client(known).run("echo ok")
        assert not fleet.openssh_accepts(known)


def test_a_re_keyed_hosts_revoked_old_key_does_not_lock_it_out(fleet: Fleet, tmp_path: Path) -> None:
    """The old key of a re-keyed host, revoked, often stays recorded somewhere: the new one still lets it in;
    a host whose every recorded key is revoked is refused before any connection."""
    old = " ".join(_keygen(tmp_path / "old_host").with_suffix(".pub").read_text().split()[:2])
    new = " ".join(fleet.host_key.with_suffix(".pub").read_text().split()[:2])
    name = f"[{ADDRESS}]:{fleet.port}"
    known = fleet.known_hosts(f"{name} {old}", f"{name} {new}", f"@revoked * {old}")
    assert fleet.client(known).run("echo ok").stdout.strip() == "ok"
    assert fleet.openssh_accepts(known)
    known = fleet.known_hosts(f"{name} {old}", f"@revoked * {old}")
    with pytest.raises(HostKeyError, match=rf"every host key recorded for .* is marked @revoked \({known}:2\)"):
        fleet.client(known).run("echo ok")


def test_a_ca_for_other_hosts_does_not_vouch_for_this_one(fleet: Fleet) -> None:
    fleet.serve()
    known = fleet.known_hosts(fleet.ca_line(pattern="*.example.org"))
    with pytest.raises(HostKeyError, match=r"is not in .*known_hosts; refusing to trust it blindly"):
        fleet.client(known).run("echo ok")
    assert not fleet.openssh_accepts(known)


def test_a_plain_key_beside_the_ca_line_is_checked_as_a_plain_key(fleet: Fleet, tmp_path: Path) -> None:
    """A host with its own key recorded is verified by that key (as ssh(1) does), certificate or not: a
    recorded key that differs is an impersonation even if some CA signed the new one."""
    fleet.serve()
    other = _keygen(tmp_path / "other_host")
    wrong = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    known = fleet.known_hosts(f"[{ADDRESS}]:{fleet.port} {wrong}", fleet.ca_line())
    with pytest.raises(HostKeyError, match="does not match"):
        fleet.client(known).run("echo ok")


def _cert_blob(path: Path) -> tuple[str, bytes]:
    key_type, data = path.read_text().split()[:2]
    return key_type, base64.b64decode(data)


def test_a_bare_key_or_a_tampered_certificate_is_refused_without_a_server(fleet: Fleet) -> None:
    fleet.serve()
    authorities = cert_authorities((str(fleet.known_hosts(fleet.ca_line())),), (f"[{ADDRESS}]:{fleet.port}",))
    key_type, blob = _cert_blob(fleet.served)
    assert check_host_certificate(key_type, blob, hostname=ADDRESS, authorities=authorities, revoked={}) \
        == authorities[0]
    with pytest.raises(CertificateRefused, match="bare ssh-ed25519 key"):
        check_host_certificate(*_cert_blob(fleet.host_key.with_suffix(".pub")), hostname=ADDRESS,
                               authorities=authorities, revoked={})
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])  # the CA's signature, one bit off
    with pytest.raises(CertificateRefused, match=r"does not carry SHA256:\S+'s valid signature"):
        check_host_certificate(key_type, tampered, hostname=ADDRESS, authorities=authorities, revoked={})


def test_a_command_is_read_whole_as_it_ends_and_logged_with_its_time(fleet: Fleet,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Output on stderr only, after a pause, then much on stdout, then a non-zero exit: all of it read, the
    exit code kept, and one line in the run's debug log (what ran where, its exit code, how long)."""
    import logging

    fleet.serve()
    client = fleet.client(fleet.known_hosts(fleet.ca_line()))
    with caplog.at_level(logging.DEBUG, logger="kafkaops.ssh"):
        result = client.run("sleep 0.3; echo late >&2; seq 1 200000 | tail -c 7; exit 3", check=False)
    assert (result.exit_code, result.stderr, result.stdout) == (3, "late\n", "200000\n")
    assert result.seconds >= 0.3
    assert any(m.startswith("host1: exit 3 in ") and m.endswith("exit 3") and "seq 1 200000" in m
               for m in caplog.messages), caplog.messages
