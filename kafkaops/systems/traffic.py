"""New-connection (SYN) counts on a host's service port, captured with tcpdump over SSH.

Why SYNs and not established connections: after a depool the load balancer stops sending *new*
connections, while existing ones drain on their own. Zero new SYNs for a whole window is the
runbook's evidence that nothing will route to the host any more (its ``tcpdump ... tcp-syn | pv -l``).
The capture command is the inventory's ``syn_capture`` template (interface and filter differ per site);
tcpdump prints one line per packet with ``-l``. Its output comes from the host, so it is parsed by the
:mod:`kafkaops.facts.tcpdump` fact: every line must be a SYN packet line (or one of tcpdump's status
lines), every source an IP address; anything else stops the gate with
:class:`~kafkaops.facts.MalformedAnswer` instead of being counted as a connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkaops.errors import ConfigError
from kafkaops.facts.tcpdump import parse_syn_count
from kafkaops.model import Host
from kafkaops.systems.ssh import SshClient


@dataclass(frozen=True)
class SynWindow:
    """What one capture window on ``host``:``port`` saw.

    Attributes:
        host: The host's inventory name.
        port: The captured service port.
        window: How long the capture ran, in seconds.
        syns: New SYNs seen (see :class:`kafkaops.facts.tcpdump.SynCount`).
        sources: Distinct source addresses seen, sorted, for the operator.
    """

    host: str
    port: int
    window: float
    syns: int
    sources: tuple[str, ...]

    @property
    def quiet(self) -> bool:
        return self.syns == 0


def capture_command(host: Host, template: str | None, port: int, window: float, *, vip: str | None = None) -> str:
    """The host's ``syn_capture`` template rendered for one window. ``{vip}`` is the service address
    (the runbook's ``tcpdump dst eventbus.svc.eqiad.wmnet and port 8085``): a template naming it needs
    the service's ``vip`` in the inventory."""
    if not template:
        raise ConfigError(f"no syn_capture command template for {host.name}",
                          hint="add commands.syn_capture (a tcpdump command) to the inventory")
    from kafkaops.templates import placeholders, render

    if "vip" in placeholders(template) and not vip:
        raise ConfigError(f"commands.syn_capture uses {{vip}} but the service on {host.name}:{port} has no vip",
                          hint="add services.<name>.vip (the load-balanced address) to the inventory")
    return render(template, host=host, port=port, window=max(1, round(window)), vip=vip or "")


def count_syns(ssh: SshClient, host: Host, template: str | None, port: int, window: float,
               *, budget: float | None = None, vip: str | None = None) -> SynWindow:
    """Count new TCP SYNs to ``host``:``port`` over ``window`` seconds.

    ``budget``: seconds left of the step's timeout; the capture command gets no more than that (plus a
    few seconds for SSH), so a wait never outlives its step's timeout by a whole capture.

    Raises:
        ConfigError: The capture command failed (exit other than 0, or 124 from ``timeout``).
        MalformedAnswer: Its output holds a line that is not a SYN packet (see :func:`parse_syn_count`).
    """
    command = capture_command(host, template, port, window, vip=vip)
    limit = window + 30 if budget is None else max(1.0, min(window + 30, budget + 5))
    result = ssh.run(command, timeout=limit, check=False)
    # `timeout` ends tcpdump with 124 once the window is over; anything else with no output is an error.
    if result.exit_code not in (0, 124):
        detail = result.stderr.strip().splitlines()
        raise ConfigError(f"SYN capture on {host.name} failed (exit {result.exit_code}): "
                          f"{detail[-1] if detail else command}",
                          hint="check commands.syn_capture and that tcpdump may capture (sudo -n)")
    count = parse_syn_count(result.stdout, host=host.name, command=command)
    return SynWindow(host.name, port, window, count.syns, count.sources)
