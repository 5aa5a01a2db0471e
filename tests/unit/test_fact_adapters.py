"""The adapters that read host answers through facts (traffic, http), and the SSH adapter's dry-run guard."""

from __future__ import annotations

import pytest

from kafkaops.errors import ConfigError
from kafkaops.facts import MalformedAnswer
from kafkaops.model import Host, SshEndpoint
from kafkaops.systems.guard import DryRunViolation, write_methods
from kafkaops.systems.http import HttpCheck, served_revision
from kafkaops.systems.ssh import CommandResult, SshClient, SshPool
from kafkaops.systems.traffic import count_syns

HOST = Host(name="kafka1001", fqdn="kafka1001.lab.local", address="127.0.10.1", broker_id=1001, dc="eqiad",
            rack="A", ssh=SshEndpoint(address="127.0.10.1"))
TEMPLATE = "timeout {window} tcpdump -n -l -i lo 'dst host {host.address} and dst port {port}'"
SYN = ("18:03:18.774268 IP {src}.45708 > 127.0.10.1.8085: Flags [S], seq 4184137718, win 65495, "
       "options [mss 65495,sackOK,TS val 3794986122 ecr 0,nop,wscale 10], length 0")


class FakeSsh:
    """Answers every command with one canned result; records the commands."""

    def __init__(self, stdout: str, exit_code: int = 124, stderr: str = "") -> None:
        self.result = (exit_code, stdout, stderr)
        self.commands: list[str] = []

    def run(self, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        self.commands.append(command)
        code, out, err = self.result
        return CommandResult(command, code, out, err, 0.1)


def _count(ssh: FakeSsh) -> object:
    return count_syns(ssh, HOST, TEMPLATE, 8085, 3.0)  # type: ignore[arg-type]  # duck-typed SshClient


# --- traffic: the SynCount fact -------------------------------------------------------------------------


def test_count_syns_parses_the_capture_through_the_fact() -> None:
    out = "\n".join(SYN.format(src=s) for s in ("127.0.10.3", "127.0.10.2", "127.0.10.3")) + "\n\n"
    count = count_syns(FakeSsh(out), HOST, TEMPLATE, 8085, 3.0)  # type: ignore[arg-type]
    assert (count.host, count.port, count.window) == ("kafka1001", 8085, 3.0)
    assert (count.syns, count.sources, count.quiet) == (3, ("127.0.10.2", "127.0.10.3"), False)


def test_a_quiet_window_is_zero_syns() -> None:
    count = count_syns(FakeSsh("\n"), HOST, TEMPLATE, 8085, 3.0)  # type: ignore[arg-type]
    assert count.quiet and count.sources == ()


def test_a_line_that_is_not_a_syn_stops_the_gate_naming_host_and_command() -> None:
    ssh = FakeSsh(SYN.format(src="127.0.10.2") + "\nsomething else\n")
    with pytest.raises(MalformedAnswer) as info:
        _count(ssh)
    assert "malformed answer from kafka1001 (`timeout 3 tcpdump -n -l -i lo" in str(info.value)
    assert "line 2 is not one, got 'something else'" in str(info.value)
    assert info.value.exit_code == 9


def test_a_failed_capture_is_still_a_config_error() -> None:
    with pytest.raises(ConfigError, match="exit 1"):
        _count(FakeSsh("", exit_code=1, stderr="tcpdump: lo: You don't have permission to capture on that device"))


# --- traffic: the streamed SYN gate (watch_syns) ---------------------------------------------------------

LISTENING = "listening on lo, link-type EN10MB (Ethernet), snapshot length 262144 bytes"


class ScriptedCapture:
    """tcpdump as the gate sees it over a terminal: ``(second, line)`` events on a fake clock, then the
    command's end (its exit code) at ``end_at`` unless the gate stops it first."""

    def __init__(self, events: list[tuple[float, str]], *, end_at: float = 60.0, exit_code: int = 124) -> None:
        self.events, self.end_at, self.exit_code = list(events), end_at, exit_code
        self.now = 0.0
        self.command = ""
        self.stopped_at: float | None = None

    def clock(self) -> float:
        return self.now

    def stream(self, command: str, *, on_line: object, stop: object, timeout: float) -> CommandResult:
        self.command = command
        while not stop():  # type: ignore[operator]
            if self.events and self.events[0][0] <= self.now:
                on_line(self.events.pop(0)[1])  # type: ignore[operator]
                continue
            if self.now >= self.end_at:
                return CommandResult(command, self.exit_code, "", "", self.now)
            self.now = round(self.now + 0.1, 3)
        self.stopped_at = self.now
        return CommandResult(command, -1, "", "", self.now)


def _watch(capture: ScriptedCapture, **kw: object) -> object:
    from kafkaops.systems.traffic import watch_syns

    return watch_syns(capture, HOST, TEMPLATE, 8085, 3.0, budget=kw.pop("budget", 60.0),  # type: ignore[arg-type]
                      clock=capture.clock, **kw)  # type: ignore[arg-type]


def test_the_quiet_window_starts_when_tcpdump_listens_not_when_the_command_is_sent() -> None:
    capture = ScriptedCapture([(0.5, LISTENING)])
    quiet = _watch(capture)
    assert capture.stopped_at == 3.5  # 3 s after "listening on", not 3 s after the command
    assert (quiet.syns, quiet.sources, quiet.waited) == (0, (), 3.5)  # type: ignore[attr-defined]
    assert capture.command.startswith("timeout 60 tcpdump")  # one capture bounded by the step's budget


def test_every_new_syn_starts_the_window_again_within_one_capture() -> None:
    seen: list[tuple[str, int]] = []
    capture = ScriptedCapture([(0.5, LISTENING), (2.0, SYN.format(src="127.0.10.100")),
                               (4.0, SYN.format(src="127.0.10.9"))])
    quiet = _watch(capture, on_syn=lambda src, n: seen.append((src, n)))
    assert capture.stopped_at == 7.0  # 3 s after the last SYN
    assert seen == [("127.0.10.100", 1), ("127.0.10.9", 2)]
    assert (quiet.syns, quiet.sources) == (2, ("127.0.10.100", "127.0.10.9"))  # type: ignore[attr-defined]


def test_a_host_that_never_drains_times_out_saying_what_it_saw() -> None:
    from kafkaops.errors import WaitTimeout

    busy = [(0.2, LISTENING)] + [(float(t), SYN.format(src="127.0.10.100")) for t in range(1, 20)]
    with pytest.raises(WaitTimeout, match=r"no 3s without a new SYN to kafka1001:8085 within 20s "
                                          r"\(19 new SYN\(s\) from 127.0.10.100\)"):
        _watch(ScriptedCapture(busy, end_at=20.0), budget=20.0)


def test_a_capture_that_never_listens_is_a_config_error_quoting_tcpdump() -> None:
    capture = ScriptedCapture([(0.1, "tcpdump: lo: You don't have permission to capture on that device")],
                              end_at=0.2, exit_code=1)
    with pytest.raises(MalformedAnswer):  # not a status line, not a SYN: never counted, never ignored
        _watch(capture)
    with pytest.raises(ConfigError, match=r"ended \(exit 1\) before it captured"):
        _watch(ScriptedCapture([], end_at=0.2, exit_code=1))


def test_ctrl_c_ends_the_capture() -> None:
    from kafkaops.errors import Interrupted

    capture = ScriptedCapture([(0.5, LISTENING)])
    with pytest.raises(Interrupted):
        _watch(capture, cancelled=lambda: capture.now >= 1.0)
    assert capture.stopped_at == 1.0


# --- http: the served revision -------------------------------------------------------------------------


def test_served_revision_keeps_its_contract_for_good_bodies() -> None:
    assert served_revision({"revision": "r3"}) == "r3"
    assert served_revision({"version": 3}) == "3"
    assert served_revision({"status": "ok"}) is None and served_revision(["r1"]) is None
    assert HttpCheck("u", 200, {"revision": "r2"}).revision == "r2"


def test_a_malformed_served_revision_raises_naming_the_url() -> None:
    check = HttpCheck("http://127.0.10.1:8085/_info", 200, {"revision": "r1; reboot"})
    with pytest.raises(MalformedAnswer, match=r"from `http://127\.0\.10\.1:8085/_info`.*got 'r1; reboot'"):
        _ = check.revision
    with pytest.raises(MalformedAnswer):
        served_revision({"revision": " r1 "})


def test_line_never_raises_and_escapes_what_the_host_wrote() -> None:
    check = HttpCheck("u", 503, {"revision": "$(id)\n", "error": "broken\n\x1b[31mrelease"})
    assert check.line() == "HTTP 503 (revision malformed: '$(id)\\n'): broken\\n\\x1b[31mrelease"
    assert HttpCheck("u", 503, {"revision": "r9", "error": "bad"}).line() == "HTTP 503 (revision r9): bad"


# --- ssh: change is refused in a dry-run -----------------------------------------------------------------


def test_change_is_the_only_write_of_the_ssh_client() -> None:
    assert write_methods(SshClient) == ["change"]


def test_change_in_a_dry_run_refuses_before_connecting() -> None:
    client = SshClient(SshEndpoint(address="192.0.2.1"), name="kafka1001", dry_run=True)

    def connect() -> None:
        raise AssertionError("a dry-run change must not connect")

    client.connect = connect  # type: ignore[method-assign]
    with pytest.raises(DryRunViolation, match=r"SshClient\.change called in a dry-run"):
        client.change("sudo -n systemctl reboot")
    assert DryRunViolation.exit_code == 1


def test_run_stays_allowed_in_a_dry_run_and_change_delegates_to_it() -> None:
    seen: list[tuple[str, float, bool]] = []

    def run(command: str, *, timeout: float = 60.0, check: bool = True, on_stdout_line: object = None,
            stdin: bytes | None = None) -> CommandResult:
        seen.append((command, timeout, check))
        return CommandResult(command, 0, "ok\n", "", 0.0)

    dry = SshClient(SshEndpoint(address="192.0.2.1"), dry_run=True)
    dry.run = run  # type: ignore[method-assign]
    assert dry.run("hostctl boot-id").stdout == "ok\n"
    live = SshClient(SshEndpoint(address="192.0.2.1"))
    live.run = run  # type: ignore[method-assign]
    assert live.change("hostctl reboot", timeout=5.0, check=False).ok
    assert seen == [("hostctl boot-id", 60.0, True), ("hostctl reboot", 5.0, False)]


def test_the_pool_builds_clients_that_know_the_dry_run() -> None:
    endpoint = SshEndpoint(address="192.0.2.1")
    assert SshPool(dry_run=True).get("kafka1001", endpoint).dry_run is True
    assert SshPool().get("kafka1001", endpoint).dry_run is False
    assert SshPool(5.0, dry_run=True).get("kafka1002", endpoint).connect_timeout == 5.0
