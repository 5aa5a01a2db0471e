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

import time
from collections.abc import Callable
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


@dataclass(frozen=True)
class QuietWindow:
    """A whole window in which one continuous capture on ``host``:``port`` saw no new SYN.

    Attributes:
        host: The host's inventory name.
        port: The captured service port.
        window: The quiet window's length, in seconds.
        syns: New SYNs seen before it (each one started the window again).
        sources: Their distinct source addresses, sorted.
        waited: Seconds from sending the capture to the end of the quiet window.
    """

    host: str
    port: int
    window: float
    syns: int
    sources: tuple[str, ...]
    waited: float


def watch_syns(ssh: SshClient, host: Host, template: str | None, port: int, window: float, *, budget: float,
               vip: str | None = None, on_syn: Callable[[str, int], None] | None = None,
               cancelled: Callable[[], bool] | None = None,
               clock: Callable[[], float] = time.monotonic) -> QuietWindow:
    """Capture new SYNs to ``host``:``port`` until ``window`` seconds pass with none.

    One capture for the whole wait, read line by line as tcpdump prints them: the window runs from
    tcpdump's own ``listening on`` line (SYNs before it opened its socket would go unseen) or from the
    last SYN, whichever is later. So the proof is one unbroken capture — no SYN can fall between two
    captures — and a late SYN costs only the time since it, not a whole window started again plus a
    new tcpdump. The capture's own limit is the step's remaining ``budget`` (the template's
    ``{window}``), so on the host it never outlives the step; ended early, it is hung up with its session.

    Args:
        on_syn: Called with the source address and the count so far at every SYN (progress lines).
        cancelled: Polled while capturing; true ends the capture with ``Interrupted`` (Ctrl-C).

    Raises:
        WaitTimeout: The budget ran out before a quiet window.
        ConfigError: The capture ended before a quiet window (tcpdump failed: no permission, a bad
            filter), quoting its last line.
        MalformedAnswer: A line is not a SYN packet (see :func:`kafkaops.facts.tcpdump.syn_line`).
        Interrupted: ``cancelled()`` became true.
    """
    from kafkaops.errors import Interrupted, WaitTimeout
    from kafkaops.facts.tcpdump import listening, syn_line

    command = capture_command(host, template, port, budget, vip=vip)
    started = clock()
    listening_at: float | None = None
    last_syn: float | None = None
    lines = 0
    sources: set[str] = set()
    syns = 0
    outcome = ""

    def on_line(line: str) -> None:
        nonlocal listening_at, last_syn, lines, syns
        lines += 1
        if listening(line):
            if listening_at is None:
                listening_at = clock()
            return
        src = syn_line(line, number=lines, host=host.name, command=command)
        if src is not None:
            syns += 1
            sources.add(src)
            last_syn = clock()
            if on_syn is not None:
                on_syn(src, syns)

    def stop() -> bool:
        nonlocal outcome
        if cancelled is not None and cancelled():
            outcome = "cancelled"
        elif listening_at is not None and clock() - max(listening_at, last_syn or 0.0) >= window:
            outcome = "quiet"
        return bool(outcome)

    result = ssh.stream(command, on_line=on_line, stop=stop, timeout=budget + 10)
    if outcome == "quiet":
        return QuietWindow(host.name, port, window, syns, tuple(sorted(sources)), clock() - started)
    if outcome == "cancelled":
        raise Interrupted(f"SYN capture on {host.name}:{port} interrupted by the operator")
    seen = f"{syns} new SYN(s)" + (f" from {', '.join(sorted(sources))}" if sources else "")
    if result.exit_code == 124 or (listening_at is not None and result.exit_code == 0):
        raise WaitTimeout(f"no {window:.0f}s without a new SYN to {host.name}:{port} within {budget:.0f}s "
                          f"({seen})", hint="the balancer still routes to the host: check its pool state; "
                          "resume once it is drained")
    detail = [ln for ln in result.stdout.strip().splitlines() if ln.strip()]
    raise ConfigError(f"SYN capture on {host.name} ended (exit {result.exit_code}) before it captured: "
                      f"{detail[-1].strip() if detail else command}",
                      hint="check commands.syn_capture and that tcpdump may capture (sudo -n)")
