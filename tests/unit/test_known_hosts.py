"""Which known-hosts files kafkaops reads, in OpenSSH's order (issue 43); the connection itself is tested
against the lab's sshd (tests/lab/test_secured_lab.py)."""

from __future__ import annotations

import os
from pathlib import Path

from kafkaops.systems.known_hosts import (
    GLOBAL_DEFAULTS,
    host_names,
    marked_keys,
    trust_files,
    verified_by,
)


def test_the_inventorys_file_replaces_the_user_files_and_the_global_ones_stay() -> None:
    files = trust_files("/srv/known", {})
    assert files.user == ("/srv/known",) and files.global_ == GLOBAL_DEFAULTS


def test_ssh_config_names_both_kinds() -> None:
    cfg = {"userknownhostsfile": "~/a /tmp/b", "globalknownhostsfile": "/etc/ssh/fleet_known_hosts none"}
    files = trust_files(None, cfg)
    assert files.user == (os.path.expanduser("~/a"), "/tmp/b")
    assert files.global_ == ("/etc/ssh/fleet_known_hosts",)  # "none" means no file, as ssh(1) reads it
    assert trust_files(None, {}).user == (os.path.expanduser("~/.ssh/known_hosts"),
                                          os.path.expanduser("~/.ssh/known_hosts2"))


def test_names_off_port_22_are_bracketed() -> None:
    assert host_names("kafka1001.eqiad.wmnet", 22) == ("kafka1001.eqiad.wmnet",)
    assert host_names("127.0.10.1", 2222) == ("[127.0.10.1]:2222",)


def test_markers_match_openssh_patterns_with_negation(tmp_path: Path) -> None:
    f = tmp_path / "known"
    f.write_text("# fleet CA\n@cert-authority *.eqiad.wmnet,!bastion*.eqiad.wmnet ssh-ed25519 AAAAC3Nza\n"
                 "@revoked [10.0.0.9]:2222 ssh-ed25519 AAAAC3Nzb\n")
    ca = [(m.key, m.path, m.line) for m in marked_keys((str(f),), "@cert-authority", ("kafka1001.eqiad.wmnet",))]
    assert ca == [("ssh-ed25519 AAAAC3Nza", str(f), 2)]
    assert marked_keys((str(f),), "@cert-authority", ("bastion1.eqiad.wmnet",)) == []
    assert marked_keys((str(f),), "@cert-authority", ("kafka1001.codfw.wmnet",)) == []
    assert [m.key for m in marked_keys((str(f),), "@revoked", ("[10.0.0.9]:2222",))] == ["ssh-ed25519 AAAAC3Nzb"]


def test_the_first_file_holding_the_key_is_the_one_that_verifies(tmp_path: Path) -> None:
    user, fleet = tmp_path / "user", tmp_path / "fleet"
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    user.write_text("")
    fleet.write_text(f"kafka1001.eqiad.wmnet {pub}\n")
    files = trust_files(str(user), {"globalknownhostsfile": str(fleet)})
    assert verified_by(files, ("kafka1001.eqiad.wmnet",)) == str(fleet)
    user.write_text(f"kafka1001.eqiad.wmnet {pub}\n")
    assert verified_by(files, ("kafka1001.eqiad.wmnet",)) == str(user)
    assert verified_by(files, ("kafka1002.eqiad.wmnet",)) is None


def test_a_marker_line_does_not_hide_the_plain_keys_beside_it(tmp_path: Path) -> None:
    """paramiko's own loader raises on an @cert-authority line: one CA line in Puppet's file would refuse
    every host. The plain keys around it are still read."""
    import paramiko

    from kafkaops.systems.known_hosts import load_plain_keys

    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    f = tmp_path / "ssh_known_hosts"
    f.write_text(f"@cert-authority *.eqiad.wmnet {pub}\nkafka1001.eqiad.wmnet {pub}\ngarbage line here\n")
    keys = paramiko.HostKeys()
    load_plain_keys(keys, str(f))
    assert keys.lookup("kafka1001.eqiad.wmnet") is not None and keys.lookup("kafka1002.eqiad.wmnet") is None
