"""SSH host certificates: how an admin host trusts a fleet it has never seen the keys of.

Puppet-managed (and most large) fleets do not distribute every host's key. Each host's key is signed by
a host CA, and admin hosts trust the CA with one ``@cert-authority`` line in a known-hosts file. A tool
that cannot verify certificates can only refuse such hosts, or make the operator scan and trust each
key by hand, which is the habit that lets an impersonated host in.

paramiko parses a host certificate and checks that the server holds the certified key (the key
exchange's signature), but it does not check the certificate itself (its issue 771). This module does
that part as ``ssh(1)`` does (``check_host_cert`` in OpenSSH's sshconnect.c), with ``cryptography``'s
SSH certificate parser. We use that library because it is already a dependency of paramiko, and it
verifies the CA's signature with the same code as every other key type it supports. The checks:

* it is a *host* certificate (a user certificate presented by a server is an attack);
* it is signed by a CA named on an ``@cert-authority`` line whose patterns match the host, and neither
  the CA nor the host's key is ``@revoked``;
* the signature is good, and ``now`` is inside its validity window;
* the name kafkaops connected to is one of its principals. OpenSSH accepts a certificate with no
  principals for *any* host. We refuse it: one leaked key with such a certificate could impersonate the
  whole fleet;
* it carries no critical option (none is defined for host certificates; OpenSSH refuses them too).

Not done: KRLs (``RevokedHostKeys``) are not read.
"""

from __future__ import annotations

import base64
import time

from kafkaops.systems.known_hosts import CertAuthority, fingerprint

#: The certificate host-key algorithms paramiko can verify a server's signature with, asked for first when
#: a host is trusted through a CA (so the server presents its certificate, not its bare key).
CERTIFICATE_ALGORITHMS = (
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
)


class CertificateRefused(ValueError):
    """A host certificate that does not prove the host is the one asked for; the message says why."""


def _openssh(public_key: object) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()  # type: ignore[attr-defined]


def check_host_certificate(key_type: str, blob: bytes, *, hostname: str, authorities: list[CertAuthority],
                           revoked: dict[str, str], now: float | None = None) -> CertAuthority:
    """The CA that vouches for ``hostname`` with this certificate (``key_type``, wire ``blob``).

    Raises:
        CertificateRefused: not a host certificate, an unknown or revoked CA, a bad signature, outside
            its validity, not naming ``hostname``, or with a critical option.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.serialization import load_ssh_public_identity
    from cryptography.hazmat.primitives.serialization.ssh import SSHCertificate, SSHCertificateType

    try:
        cert = load_ssh_public_identity(key_type.encode() + b" " + base64.b64encode(blob))
    except (ValueError, TypeError) as exc:
        raise CertificateRefused(f"its {key_type} certificate cannot be read ({exc})") from exc
    if not isinstance(cert, SSHCertificate):
        raise CertificateRefused(f"it presented a bare {key_type} key, not a host certificate")
    what = f"its certificate {cert.key_id.decode(errors='replace')!r}"
    if cert.type != SSHCertificateType.HOST:
        raise CertificateRefused(f"{what} is a user certificate, not a host certificate")
    signer = _openssh(cert.signature_key())
    ca = next((a for a in authorities if a.key == signer), None)
    if ca is None:
        raise CertificateRefused(f"{what} is signed by {fingerprint(base64.b64decode(signer.split()[1]))}, "
                                 f"which no @cert-authority line for this host names")
    for key, whose in ((signer, "its CA's key"), (_openssh(cert.public_key()), "the host's key")):
        if key in revoked:
            raise CertificateRefused(f"{what} is refused: {whose} is marked @revoked in {revoked[key]}")
    try:
        cert.verify_cert_signature()
    except InvalidSignature as exc:
        raise CertificateRefused(f"{what} does not carry {ca.fingerprint}'s valid signature") from exc
    now = time.time() if now is None else now
    if not cert.valid_after <= now < cert.valid_before:
        window = f"{_when(cert.valid_after)} to {_when(cert.valid_before)}"
        raise CertificateRefused(f"{what} is valid from {window}, not now ({_when(now)})")
    principals = [p.decode(errors="replace") for p in cert.valid_principals]
    if not principals:
        raise CertificateRefused(f"{what} names no host (valid for any host: refused, one leaked key "
                                 "would impersonate the fleet)")
    if hostname not in principals:
        raise CertificateRefused(f"{what} is for {', '.join(principals)}, not {hostname}")
    if cert.critical_options:
        names = ", ".join(k.decode(errors="replace") for k in cert.critical_options)
        raise CertificateRefused(f"{what} carries critical options a host certificate must not have ({names})")
    return ca


def _when(epoch: float) -> str:
    if epoch >= 2**63:
        return "forever"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
