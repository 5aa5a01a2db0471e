"""An SSH authentication that times out is the network hanging (a partition, a host still booting), not
a wrong key: it is UnreachableError (waited for, retried), never ConfigError (issue 32: found by the lab's
SSH-hang test, which stopped the reboot wait at once with "check ssh.user and ssh.key_file")."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.model import SshEndpoint
from kafkaops.systems.ssh import SshClient


@pytest.mark.parametrize("message,error", [("Authentication timeout.", UnreachableError),
                                           ("Authentication failed.", ConfigError)])
def test_an_authentication_timeout_is_unreachable_and_a_refusal_is_configuration(
        message: str, error: type[Exception], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")

    def connect(self: paramiko.SSHClient, *args: object, **kwargs: object) -> None:
        raise paramiko.AuthenticationException(message)

    monkeypatch.setattr(paramiko.SSHClient, "connect", connect)
    client = SshClient(SshEndpoint(address="127.0.10.2", port=2222, user="root", known_hosts=str(known)),
                       name="kafka1002", connect_timeout=10)
    with pytest.raises(error) as raised:
        client.run("cat /proc/sys/kernel/random/boot_id")
    assert type(raised.value) is error and "kafka1002" in str(raised.value)
