"""New-connection (SYN) counts on a host's service port, captured with tcpdump over SSH.

Why SYNs and not established connections: after a depool the load balancer stops sending *new*
connections, while existing ones drain on their own. Zero new SYNs for a whole window is the
runbook's evidence that nothing will route to the host any more (its ``tcpdump ... tcp-syn | pv -l``).
The capture command is the inventory's ``syn_capture`` template (interface and filter differ per site);
tcpdump prints one line per packet with ``-l``, so the count is the number of stdout lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.errors import ConfigError
from kafkaops.model import Host
from kafkaops.systems.ssh import SshClient

_SRC = re.compile(r"IP6? (\S+?)\.\d+ > ")


@dataclass(frozen=True)
class SynCount:
    host: str
    port: int
    window: float
    syns: int
    sources: tuple[str, ...]  # distinct source addresses seen, for the operator

    @property
    def quiet(self) -> bool:
        return self.syns == 0


def capture_command(host: Host, template: str | None, port: int, window: float) -> str:
    if not template:
        raise ConfigError(f"no syn_capture command template for {host.name}",
                          hint="add commands.syn_capture (a tcpdump command) to the inventory")
    return template.format(host=host, port=port, window=max(1, round(window)))


def count_syns(ssh: SshClient, host: Host, template: str | None, port: int, window: float) -> SynCount:
    """Count new TCP SYNs to ``host``:``port`` over ``window`` seconds."""
    command = capture_command(host, template, port, window)
    result = ssh.run(command, timeout=window + 30, check=False)
    # `timeout` ends tcpdump with 124 once the window is over; anything else with no output is an error.
    if result.exit_code not in (0, 124):
        detail = result.stderr.strip().splitlines()
        raise ConfigError(f"SYN capture on {host.name} failed (exit {result.exit_code}): "
                          f"{detail[-1] if detail else command}",
                          hint="check commands.syn_capture and that tcpdump may capture (sudo -n)")
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    sources = sorted({m.group(1) for line in lines if (m := _SRC.search(line))})
    return SynCount(host.name, port, window, len(lines), tuple(sources))
