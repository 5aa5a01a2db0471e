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

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafkaops.errors import ConfigError, Interrupted, WaitTimeout
from kafkaops.facts.tcpdump import listening, parse_syn_count, syn_line
from kafkaops.model import Host
from kafkaops.systems.ssh import CommandResult, SshClient
from kafkaops.templates import placeholders, render


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


class QuietAcross:
    """The quiet window over several captures running at once, one per host: the pure part of the gate.

    Behind an LVS in direct routing each realserver sees only its own share of the VIP's connections, so
    no single host's capture proves that no client connects any more: a client whose connections are
    scheduled to another host goes unseen. The window therefore counts only while *every* capture listens
    and none sees a SYN: it starts at the latest of the captures' ``listening on`` lines and of every
    host's last SYN. One host still receiving SYNs keeps it open, whatever the others see.

    Not thread-safe on its own: :func:`watch_syns_on` calls it under one lock.
    """

    def __init__(self, hosts: Sequence[str], window: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not hosts:
            raise ValueError("a SYN gate needs at least one capture")
        self.hosts = tuple(hosts)
        self.window = window
        self.clock = clock
        self.listening_at: dict[str, float | None] = dict.fromkeys(self.hosts)
        self.last_syn: dict[str, float | None] = dict.fromkeys(self.hosts)
        self.syns: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self.sources: dict[str, set[str]] = {h: set() for h in self.hosts}

    def listening(self, host: str) -> None:
        """``host``'s tcpdump printed ``listening on``: from now on it sees every SYN to it."""
        if self.listening_at[host] is None:
            self.listening_at[host] = self.clock()

    def syn(self, host: str, source: str) -> int:
        """A new SYN from ``source`` reached ``host``; returns that host's count so far."""
        self.syns[host] += 1
        self.sources[host].add(source)
        self.last_syn[host] = self.clock()
        return self.syns[host]

    def quiet_since(self) -> float | None:
        """When the current window began on every host at once; None while a capture is not listening yet."""
        started = list(self.listening_at.values())
        if any(t is None for t in started):
            return None
        return max([t for t in started if t is not None] + [t for t in self.last_syn.values() if t is not None])

    def quiet(self) -> bool:
        """Whether every capture has seen no SYN for a whole window (all of them listening throughout)."""
        since = self.quiet_since()
        return since is not None and self.clock() - since >= self.window

    def busy(self) -> tuple[str, ...]:
        """The hosts keeping the window open now: one that got a SYN within the last window."""
        now = self.clock()
        return tuple(h for h in self.hosts if (t := self.last_syn[h]) is not None and now - t < self.window)

    def seen(self, host: str) -> str:
        """``N new SYN(s) from A, B`` for ``host``, for the operator."""
        sources = sorted(self.sources[host])
        return f"{self.syns[host]} new SYN(s)" + (f" from {', '.join(sources)}" if sources else "")

    def summary(self) -> str:
        """What every capture saw: one host's count alone, several hosts' named, and which keep it open."""
        if len(self.hosts) == 1:
            return self.seen(self.hosts[0])
        each = "; ".join(f"{h}: {self.seen(h)}" for h in self.hosts)
        busy = self.busy()
        return (f"{', '.join(busy)} still received SYNs in the last {self.window:.0f}s; " if busy else "") + each


@dataclass(frozen=True)
class Capture:
    """One host's capture in a gate: the SSH connection to it, the host, and its capture template."""

    ssh: SshClient
    host: Host
    template: str | None


def watch_syns(ssh: SshClient, host: Host, template: str | None, port: int, window: float, *, budget: float,
               vip: str | None = None, on_syn: Callable[[str, int], None] | None = None,
               cancelled: Callable[[], bool] | None = None,
               clock: Callable[[], float] = time.monotonic) -> QuietWindow:
    """Capture new SYNs to ``host``:``port`` until ``window`` seconds pass with none: the gate of one
    depooled host (:func:`watch_syns_on` with one capture; see there).

    Args:
        on_syn: Called with the source address and the count so far at every SYN (progress lines).
        cancelled: Polled while capturing; true ends the capture with ``Interrupted`` (Ctrl-C).
    """
    def each(_host: str, source: str, count: int) -> None:
        if on_syn is not None:
            on_syn(source, count)

    return watch_syns_on([Capture(ssh, host, template)], port, window, budget=budget, vip=vip,
                         label=f"{host.name}:{port}", on_syn=each, cancelled=cancelled, clock=clock,
                         hint="the balancer still routes to the host: check its pool state; "
                              "resume once it is drained")[0]


def watch_syns_on(captures: Sequence[Capture], port: int, window: float, *, budget: float, label: str,
                  hint: str, vip: str | None = None, on_syn: Callable[[str, str, int], None] | None = None,
                  cancelled: Callable[[], bool] | None = None,
                  clock: Callable[[], float] = time.monotonic) -> tuple[QuietWindow, ...]:
    """Capture new SYNs to ``port`` on every host of ``captures`` at once, until ``window`` seconds pass
    with none on any of them (:class:`QuietAcross`).

    One capture per host for the whole wait, each read line by line as tcpdump prints them in its own
    thread: a host's window runs from its tcpdump's ``listening on`` line (SYNs before it opened its socket
    would go unseen), and the gate's window from the latest of those and of every host's last SYN. So the
    proof is one unbroken capture per host — no SYN can fall between two captures — and a late SYN costs
    only the time since it. Each capture's own limit is the step's remaining ``budget`` (the template's
    ``{window}``) and its SSH session has a deadline (``budget`` + 10 s), so none outlives the step; the
    first capture to end (a failure, or its budget) ends them all, as does the quiet window: a host whose
    capture stopped can no longer prove anything. Ended early, a capture is hung up with its session.

    Args:
        label: What is watched, for messages (``kafka1001:8085``, ``127.0.60.100:8085 at eqiad``).
        hint: What the operator should do when the budget runs out.
        on_syn: Called with the host, the source address and that host's count at every SYN (progress
            lines); never from two captures at once.
        cancelled: Polled while capturing; true ends every capture with ``Interrupted`` (Ctrl-C).

    Returns:
        Each host's quiet window, in the order of ``captures`` (``waited`` is the gate's).

    Raises:
        WaitTimeout: The budget ran out before a quiet window, naming the hosts still receiving SYNs.
        ConfigError: A capture ended before a quiet window (tcpdump failed: no permission, a bad filter),
            quoting its last line.
        MalformedAnswer: A line is not a SYN packet (see :func:`kafkaops.facts.tcpdump.syn_line`).
        UnreachableError: A host could not be reached.
        Interrupted: ``cancelled()`` became true.
    """

    names = [c.host.name for c in captures]
    if len(set(names)) != len(names):
        raise ConfigError(f"a SYN gate captures once per host, got {', '.join(names)}")
    commands = [capture_command(c.host, c.template, port, budget, vip=vip) for c in captures]
    state = QuietAcross(names, window, clock)
    lock = threading.Lock()
    started = clock()
    outcome = ""          # "quiet", "cancelled" or "ended" (a capture ended, failed, or the wait was abandoned)
    first_end: int | None = None
    waited = 0.0
    results: list[CommandResult | None] = [None] * len(captures)
    errors: list[Exception | None] = [None] * len(captures)
    abandoned = threading.Event()

    def stop() -> bool:
        nonlocal outcome, waited
        with lock:
            if not outcome:
                if abandoned.is_set():
                    outcome = "ended"
                elif cancelled is not None and cancelled():
                    outcome = "cancelled"
                elif state.quiet():
                    outcome, waited = "quiet", clock() - started
            return bool(outcome)

    def reader(i: int) -> Callable[[str], None]:
        name, lines = names[i], [0]

        def on_line(line: str) -> None:
            lines[0] += 1
            if listening(line):
                with lock:
                    state.listening(name)
                return
            src = syn_line(line, number=lines[0], host=name, command=commands[i])
            if src is not None:
                with lock:
                    count = state.syn(name, src)
                    if on_syn is not None:
                        on_syn(name, src, count)
        return on_line

    def run(i: int) -> None:
        nonlocal outcome, first_end
        try:
            results[i] = captures[i].ssh.stream(commands[i], on_line=reader(i), stop=stop, timeout=budget + 10)
        except Exception as exc:  # handed to the caller below, in the caller's thread
            errors[i] = exc
        with lock:
            if not outcome:
                outcome, first_end = "ended", i

    threads = [threading.Thread(target=run, args=(i,), name=f"syn-capture-{n}", daemon=True)
               for i, n in enumerate(names)]
    # The SSH sessions end by budget + 10 s; connecting has its own timeout. Past this, give up on them.
    deadline = time.monotonic() + budget + 60
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.1)  # short joins: Ctrl-C's handler runs in this thread meanwhile
            if time.monotonic() > deadline:
                raise WaitTimeout(f"the SYN captures on {label} did not end within {budget + 60:.0f}s",
                                  hint="check the hosts: their captures end with their SSH sessions")
    finally:
        abandoned.set()  # however this ends (Ctrl-C twice included), every capture stops
    if outcome == "quiet":
        return tuple(QuietWindow(n, port, window, state.syns[n], tuple(sorted(state.sources[n])), waited)
                     for n in names)
    if outcome == "cancelled":
        busy = state.busy()
        raise Interrupted(f"SYN capture{'s' if len(names) > 1 else ''} on {label} interrupted by the operator"
                          + (f" ({', '.join(busy)} still received SYNs in the last {window:.0f}s)" if busy else ""))
    assert first_end is not None
    error = errors[first_end]
    if error is not None:
        raise error
    result = results[first_end]
    assert result is not None
    name = names[first_end]
    if result.exit_code == 124 or (state.listening_at[name] is not None and result.exit_code == 0):
        raise WaitTimeout(f"no {window:.0f}s without a new SYN to {label} within {budget:.0f}s ({state.summary()})",
                          hint=hint)
    detail = [ln for ln in result.stdout.strip().splitlines() if ln.strip()]
    raise ConfigError(f"SYN capture on {name} ended (exit {result.exit_code}) before it captured: "
                      f"{detail[-1].strip() if detail else commands[first_end]}",
                      hint="check the capture command template and that tcpdump may capture (sudo -n)")
