"""The switchover's SYN gate watches every host behind the site's VIP, not one (issue 28, item 1).

Behind an LVS in direct routing each realserver sees only its own share of the VIP's connections: a
client scheduled to the second host never shows in the first host's capture. The gate's window must
therefore count only while every host's capture listens and none sees a SYN (:class:`QuietAcross`, pure,
on a fake clock), and the concurrent captures must end together (:func:`watch_syns_on`, with scripted
captures that advance one fake clock in lockstep).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.step import Action, Observation, get_step_kind
from kafkaops.errors import Interrupted, WaitTimeout
from kafkaops.facts import MalformedAnswer
from kafkaops.model import Host, SshEndpoint
from kafkaops.systems.ssh import CommandResult
from kafkaops.systems.traffic import Capture, QuietAcross, capture_command, watch_syns_on

ROOT = Path(__file__).resolve().parents[2]
LISTENING = "listening on lo, link-type EN10MB (Ethernet), snapshot length 262144 bytes"
SYN = ("18:03:18.774268 IP 127.0.60.100.45708 > {dst}.8085: Flags [S], seq 4184137718, win 65495, "
       "options [mss 65495,sackOK,TS val 3794986122 ecr 0,nop,wscale 10], length 0")
TEMPLATE = ("timeout {window} tcpdump -n -l -i lo src host {vip} and dst host {host.address} and dst port {port} "
            "and '(tcp[tcpflags] & (tcp-syn|tcp-ack)) == tcp-syn'")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# --- the pure part: one window over several captures ------------------------------------------------------


def test_a_host_still_receiving_syns_keeps_the_window_open_while_the_other_is_quiet() -> None:
    clock = Clock()
    gate = QuietAcross(["kafka-main1001", "kafka-main1002"], 2.0, clock)
    gate.listening("kafka-main1001")
    gate.listening("kafka-main1002")
    for t in (0.5, 1.5, 2.5, 3.5):
        clock.now = t
        gate.syn("kafka-main1002", "127.0.60.100")
    clock.now = 5.0  # kafka-main1001 has been quiet for 5 s, more than twice the window
    assert not gate.quiet()
    assert gate.busy() == ("kafka-main1002",)
    assert gate.summary() == ("kafka-main1002 still received SYNs in the last 2s; kafka-main1001: 0 new SYN(s); "
                              "kafka-main1002: 4 new SYN(s) from 127.0.60.100")
    clock.now = 5.5  # 2 s after the last SYN on any host
    assert gate.quiet() and gate.busy() == ()


def test_the_window_starts_when_the_last_capture_listens() -> None:
    clock = Clock()
    gate = QuietAcross(["a", "b"], 2.0, clock)
    gate.listening("a")
    clock.now = 3.0
    assert gate.quiet_since() is None and not gate.quiet()  # b is not capturing: nothing is proven
    clock.now = 1.5 + 3.0
    gate.listening("b")
    clock.now = 4.5 + 1.9
    assert not gate.quiet()
    clock.now = 4.5 + 2.0
    assert gate.quiet() and gate.quiet_since() == 4.5


def test_a_syn_before_every_capture_listens_still_counts_after() -> None:
    clock = Clock()
    gate = QuietAcross(["a", "b"], 2.0, clock)
    gate.listening("a")
    clock.now = 1.0
    gate.syn("a", "10.64.0.12")
    clock.now = 0.5 + 1.0
    gate.listening("b")  # b listens after a's SYN: the window starts with b
    assert gate.quiet_since() == 1.5 and gate.syns == {"a": 1, "b": 0}


def test_one_host_reads_as_before() -> None:
    clock = Clock()
    gate = QuietAcross(["kafka1001"], 3.0, clock)
    gate.listening("kafka1001")
    gate.syn("kafka1001", "127.0.10.9")
    gate.syn("kafka1001", "127.0.10.100")
    assert gate.summary() == "2 new SYN(s) from 127.0.10.100, 127.0.10.9"


def test_a_gate_needs_a_capture() -> None:
    with pytest.raises(ValueError, match="at least one capture"):
        QuietAcross([], 2.0)


# --- the captures, concurrently ---------------------------------------------------------------------------


class Lockstep:
    """One fake clock for every capture: it moves 0.1 s once each of them has run the current tick."""

    def __init__(self, parties: int) -> None:
        self.now = 0.0
        self.barrier = threading.Barrier(parties, action=self._tick)

    def _tick(self) -> None:
        self.now = round(self.now + 0.1, 3)

    def clock(self) -> float:
        return self.now


class ScriptedHost:
    """tcpdump on one host as the gate sees it: ``(second, line)`` events on the shared clock, then its end
    (``exit_code``) at ``end_at`` unless the gate stops it first."""

    def __init__(self, steps: Lockstep, events: list[tuple[float, str]], *, end_at: float = 60.0,
                 exit_code: int = 124) -> None:
        self.steps, self.events, self.end_at, self.exit_code = steps, list(events), end_at, exit_code
        self.command = ""
        self.stopped_at: float | None = None

    def stream(self, command: str, *, on_line: Any, stop: Any, timeout: float) -> CommandResult:
        self.command = command
        while not stop():
            while self.events and self.events[0][0] <= self.steps.now:
                on_line(self.events.pop(0)[1])
            if self.steps.now >= self.end_at:
                self.steps.barrier.abort()  # the other captures stop waiting for this one
                return CommandResult(command, self.exit_code, "", "", self.steps.now)
            try:
                self.steps.barrier.wait(10)
            except threading.BrokenBarrierError:
                threading.Event().wait(0.001)  # another capture ended: the gate stops this one next
        self.stopped_at = self.steps.now
        self.steps.barrier.abort()
        return CommandResult(command, -1, "", "", self.steps.now)


def _host(n: int) -> Host:
    address = f"127.0.60.{n}"
    return Host(name=f"kafka-main100{n}", fqdn=f"kafka-main100{n}.eqiad.lab.local", address=address,
                broker_id=1000 + n, dc="eqiad", rack="AB"[n - 1], ssh=SshEndpoint(address=address))


def _watch(first: ScriptedHost, second: ScriptedHost, **kw: Any) -> Any:
    captures = [Capture(first, _host(1), TEMPLATE), Capture(second, _host(2), TEMPLATE)]  # type: ignore[arg-type]
    return watch_syns_on(captures, 8085, 2.0, budget=kw.pop("budget", 60.0), vip="127.0.60.100",
                         label="127.0.60.100:8085 at eqiad", hint="find the clients", clock=first.steps.clock, **kw)


def _syns(dst: str, times: list[float]) -> list[tuple[float, str]]:
    return [(t, SYN.format(dst=dst)) for t in times]


def test_syns_on_the_second_host_only_time_the_gate_out_naming_that_host() -> None:
    steps = Lockstep(2)
    quiet = ScriptedHost(steps, [(0.2, LISTENING)], end_at=8.0)
    busy = ScriptedHost(steps, [(0.3, LISTENING), *_syns("127.0.60.2", [0.5 * k for k in range(1, 17)])], end_at=8.0)
    with pytest.raises(WaitTimeout) as info:
        _watch(quiet, busy, budget=8.0)
    assert str(info.value).startswith(
        "no 2s without a new SYN to 127.0.60.100:8085 at eqiad within 8s (kafka-main1002 still received SYNs in "
        "the last 2s; kafka-main1001: 0 new SYN(s); kafka-main1002: 16 new SYN(s) from 127.0.60.100)")
    assert info.value.hint == "find the clients"
    # Each host's capture is its own command, naming its own address, bounded by the budget.
    assert quiet.command.startswith("timeout 8 tcpdump") and "dst host 127.0.60.1 " in quiet.command
    assert "dst host 127.0.60.2 " in busy.command


def test_the_gate_passes_once_the_last_host_has_been_quiet_a_whole_window() -> None:
    steps = Lockstep(2)
    seen: list[tuple[str, str, int]] = []
    first = ScriptedHost(steps, [(0.2, LISTENING)])
    second = ScriptedHost(steps, [(0.3, LISTENING), *_syns("127.0.60.2", [1.0, 2.0, 3.0])])
    windows = _watch(first, second, on_syn=lambda host, src, n: seen.append((host, src, n)))
    assert [(w.host, w.syns, w.sources) for w in windows] == [
        ("kafka-main1001", 0, ()), ("kafka-main1002", 3, ("127.0.60.100",))]
    assert {w.waited for w in windows} == {5.0}  # 2 s after the last SYN, on the fake clock
    assert first.stopped_at == second.stopped_at == 5.0  # both captures end with the gate
    assert seen == [("kafka-main1002", "127.0.60.100", 1), ("kafka-main1002", "127.0.60.100", 2),
                    ("kafka-main1002", "127.0.60.100", 3)]


def test_ctrl_c_ends_every_capture_naming_the_busy_host() -> None:
    steps = Lockstep(2)
    first = ScriptedHost(steps, [(0.2, LISTENING)])
    second = ScriptedHost(steps, [(0.3, LISTENING), *_syns("127.0.60.2", [0.5, 1.0, 1.5])])
    with pytest.raises(Interrupted, match=r"SYN captures on 127\.0\.60\.100:8085 at eqiad interrupted by the "
                                          r"operator \(kafka-main1002 still received SYNs in the last 2s\)"):
        _watch(first, second, cancelled=lambda: steps.now >= 2.0)
    assert first.stopped_at == second.stopped_at == 2.0


def test_a_malformed_line_on_one_host_stops_the_gate_naming_that_host() -> None:
    steps = Lockstep(2)
    first = ScriptedHost(steps, [(0.2, LISTENING)])
    second = ScriptedHost(steps, [(0.3, LISTENING), (1.0, "rm -rf / ; something else")])
    with pytest.raises(MalformedAnswer, match=r"malformed answer from kafka-main1002"):
        _watch(first, second)
    assert first.stopped_at is not None  # the other capture was ended too, not left running


# --- the lab's template and the plan -----------------------------------------------------------------------


def test_the_lab_templates_capture_each_hosts_own_share() -> None:
    """Every lab host shares ``lo``: a capture that does not name its host's address sees all of them."""
    from kafkaops.inventory import load_inventory

    sites = load_inventory(ROOT / "inventory" / "lab-sites.yaml")
    for site in sites.sites.values():
        commands = {capture_command(h, h.commands.get("vip_syn_capture"), 8085, 300, vip=h.services[0].vip)
                    for h in site.hosts}
        assert len(commands) == len(site.hosts) >= 2, commands
        for h in site.hosts:
            assert any(f"dst host {h.address} " in c for c in commands), (h.address, commands)


def test_the_plan_says_on_which_hosts_the_gate_captures() -> None:
    entry = get_step_kind("traffic.wait_zero_syns_at_site")
    assert entry is not None
    gate = entry.create({"service": "eventbus", "site": "eqiad", "window": 10.0, "timeout": 300.0})
    obs = Observation({"site": "eqiad", "vip": "127.0.60.100", "port": 8085, "window": 10.0, "timeout": 300.0,
                       "captures": [{"host": "kafka-main1001", "command": "tcpdump one"},
                                    {"host": "kafka-main1002", "command": "tcpdump two"}]})
    decision = gate.plan(obs)
    assert isinstance(decision, Action)
    assert "on any of its 2 host(s) kafka-main1001, kafka-main1002, captured on each at once" in decision.description
    assert [c.split("   ")[0] for c in decision.commands] == ["on kafka-main1001: tcpdump one",
                                                              "on kafka-main1002: tcpdump two"]
