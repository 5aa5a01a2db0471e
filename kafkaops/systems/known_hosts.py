"""Which host keys kafkaops trusts: the files OpenSSH itself would read, in its order.

An admin host managed by Puppet trusts its fleet through ``/etc/ssh/ssh_known_hosts`` (every host's key,
exported by Puppet), often through ssh_config's ``GlobalKnownHostsFile``, and operators keep their own
``~/.ssh/known_hosts``. A tool that reads only one of them either refuses hosts every ``ssh`` accepts, or
makes the operator copy keys around. So, as ``ssh(1)``:

* the **user** files: the inventory's ``ssh.known_hosts`` if it names one, else ssh_config's
  ``UserKnownHostsFile``, else ``~/.ssh/known_hosts`` and ``~/.ssh/known_hosts2``;
* the **global** files: ssh_config's ``GlobalKnownHostsFile``, else ``/etc/ssh/ssh_known_hosts`` and
  ``/etc/ssh/ssh_known_hosts2``;

every one that exists is read. A key found nowhere, or different from the one recorded, is refused
(exit 5) naming the files read.

A host with no plain key in any of them but matched by a ``@cert-authority`` line is trusted through its
host certificate (:mod:`kafkaops.systems.host_certificates`). ``@revoked`` keys are refused.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any

USER_DEFAULTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_DEFAULTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


@dataclass(frozen=True)
class TrustFiles:
    """The known-hosts files of one target, user files first, as OpenSSH reads them."""

    user: tuple[str, ...]
    global_: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        return self.user + self.global_

    @property
    def existing(self) -> tuple[str, ...]:
        return tuple(f for f in self.all if os.path.isfile(f))

    def shown(self) -> str:
        return ", ".join(self.all)


def _split(value: str | list[str] | None) -> tuple[str, ...]:
    if not value:
        return ()
    words = value if isinstance(value, list) else value.split()
    return tuple(os.path.expanduser(w) for w in words if w.lower() != "none")


def trust_files(inventory_file: str | None, ssh_config: dict[str, object]) -> TrustFiles:
    """The files for a target whose inventory says ``inventory_file`` and whose ssh_config lookup is
    ``ssh_config`` (paramiko's ``SSHConfig.lookup``: lower-case keys)."""
    user_cfg = ssh_config.get("userknownhostsfile")
    global_cfg = ssh_config.get("globalknownhostsfile")
    user = ((os.path.expanduser(inventory_file),) if inventory_file else
            _split(user_cfg if isinstance(user_cfg, str | list) else None) or
            tuple(os.path.expanduser(f) for f in USER_DEFAULTS))
    global_ = _split(global_cfg if isinstance(global_cfg, str | list) else None) or GLOBAL_DEFAULTS
    return TrustFiles(user, global_)


def host_names(hostname: str, port: int) -> tuple[str, ...]:
    """How known_hosts names ``hostname`` reached on ``port`` (``[host]:port`` off port 22)."""
    return (hostname,) if port == 22 else (f"[{hostname}]:{port}",)


def _glob(pattern: str) -> re.Pattern[str]:
    """An OpenSSH pattern: ``*`` and ``?`` are wildcards, everything else literal — ``[host]:port`` too (a
    shell glob would read the brackets as a character class)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z")


def patterns_match(patterns: str, names: tuple[str, ...]) -> bool:
    """OpenSSH's comma-separated patterns (``*``/``?`` globs, ``!`` negation) against any of ``names``."""
    matched = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        glob = _glob(pattern.lstrip("!"))
        if any(glob.match(n) for n in names):
            if negated:
                return False
            matched = True
    return matched


@dataclass(frozen=True)
class MarkedKey:
    """A key on a ``@cert-authority`` or ``@revoked`` line: ``type base64``, and where it was read."""

    key: str
    path: str
    line: int


def marked_keys(files: tuple[str, ...], marker: str, names: tuple[str, ...]) -> list[MarkedKey]:
    """The keys of the ``marker`` (``@cert-authority``/``@revoked``) lines of ``files`` whose patterns match
    one of ``names``, in OpenSSH's file order."""
    found = []
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if len(fields) >= 4 and fields[0] == marker and patterns_match(fields[1], names):
                found.append(MarkedKey(f"{fields[2]} {fields[3]}", path, number))
    return found


def fingerprint(key_blob: bytes) -> str:
    """``ssh-keygen -l``'s SHA256 fingerprint of a public key blob."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key_blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class CertAuthority(MarkedKey):
    """One ``@cert-authority`` line: the CA's public key (``type base64``) and where it was read."""

    @property
    def fingerprint(self) -> str:
        return fingerprint(base64.b64decode(self.key.split()[1]))

    def __str__(self) -> str:
        return f"host CA {self.fingerprint} ({self.path}:{self.line})"


def cert_authorities(files: tuple[str, ...], names: tuple[str, ...]) -> list[CertAuthority]:
    """Every ``@cert-authority`` line of ``files`` whose patterns match one of ``names``, in file order."""
    return [CertAuthority(m.key, m.path, m.line) for m in marked_keys(files, "@cert-authority", names)]


def revoked_keys(files: tuple[str, ...], names: tuple[str, ...]) -> dict[str, str]:
    """The keys (``type base64``) that ``@revoked`` lines matching ``names`` refuse, each with its place."""
    return {m.key: f"{m.path}:{m.line}" for m in marked_keys(files, "@revoked", names)}


def load_plain_keys(keys: Any, path: str) -> None:
    """Add ``path``'s plain host keys to ``keys`` (a ``paramiko.HostKeys``). Marker lines (``@cert-authority``,
    ``@revoked``) are skipped here — :func:`marked_keys` reads them — as are lines paramiko cannot parse:
    its own loader raises on a marker line (base64 of the key type), which would make one CA line in
    Puppet's file refuse every host."""
    import binascii

    from paramiko.hostkeys import HostKeyEntry
    from paramiko.ssh_exception import SSHException

    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(("#", "@")):
            continue
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (SSHException, binascii.Error, ValueError):
            continue
        if entry is not None and entry.key is not None:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)


def verified_by(files: TrustFiles, names: tuple[str, ...]) -> str | None:
    """What a connection to ``names`` will be verified by: the first file (in OpenSSH's order) holding a
    plain key for one of them, else the first host CA trusted for them (its fingerprint and line), or None."""
    import paramiko

    for path in files.existing:
        keys = paramiko.HostKeys()
        try:
            load_plain_keys(keys, path)
        except OSError:
            continue
        if any(keys.lookup(n) for n in names):
            return path
    cas = cert_authorities(files.existing, names)
    return str(cas[0]) if cas else None
