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

Host *certificates* (``@cert-authority`` lines) are recognised but not verified: paramiko cannot check a
host certificate (its issue 771). A host trusted only through a CA is refused with that said, rather than
as an unknown host, so the operator knows what to add. ``@revoked`` keys are refused.
"""

from __future__ import annotations

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


def _patterns_match(patterns: str, names: tuple[str, ...]) -> bool:
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


def marker_lines(files: tuple[str, ...], marker: str, names: tuple[str, ...]) -> list[str]:
    """The files holding a ``@cert-authority``/``@revoked`` (``marker``) line whose patterns match ``names``."""
    found = []
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) >= 3 and fields[0] == marker and _patterns_match(fields[1], names):
                found.append(path)
                break
    return found


def load_plain_keys(keys: Any, path: str) -> None:
    """Add ``path``'s plain host keys to ``keys`` (a ``paramiko.HostKeys``). Marker lines (``@cert-authority``,
    ``@revoked``) are skipped here — :func:`marker_lines` reads them — as are lines paramiko cannot parse:
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
    """The first file (in OpenSSH's order) holding a plain key for any of ``names``, or None."""
    import paramiko

    for path in files.existing:
        keys = paramiko.HostKeys()
        try:
            load_plain_keys(keys, path)
        except OSError:
            continue
        if any(keys.lookup(n) for n in names):
            return path
    return None
