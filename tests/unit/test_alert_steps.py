"""The pure parts of the alert steps and the Alertmanager adapter: the silence's bound, how Alertmanager's
answers are read, and the no-op without monitoring. What they do against a real Alertmanager is
tests/lab/test_alerts_on_lab.py's."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from kafkaops.engine.binding import BoundStep
from kafkaops.engine.context import RunContext
from kafkaops.environment import Environment
from kafkaops.inventory import load_inventory
from kafkaops.queries.silences import DEFAULT_MARGIN, silence_bound
from kafkaops.steps.alerts import Gate, SilenceHost, Unsilence
from kafkaops.systems.alertmanager import Matcher, Silence, _alert, _quote, _silence, parse_time, silence_comment, utc

REPO = Path(__file__).resolve().parents[2]


def _ctx(steps: tuple[BoundStep, ...], index: int, *, batch: tuple[str, ...] = (), env: object = None) -> RunContext:
    return RunContext(run_id="r1", operator="o", reason="r", task=None, target="kafka1001", params={}, env=env,
                      step_index=index, steps=steps, batch=batch)


STEPS = (
    BoundStep(1, "kafka.preflight", {}),
    BoundStep(2, "alerts.silence", {"margin": 600.0}),
    BoundStep(3, "conftool.depool", {}),
    BoundStep(4, "traffic.wait_zero_syns", {"window": 10.0, "timeout": 300.0}),
    BoundStep(5, "host.reboot", {"timeout": 900.0}),
    BoundStep(6, "kafka.wait_in_sync", {"timeout": 1800.0}),
    BoundStep(7, "alerts.unsilence", {"timeout": 120.0}),
    BoundStep(8, "health.post_check", {"timeout": 300.0}),
    BoundStep(9, "kafka.wait_healthy", {"timeout": 1800.0}, gate=True),
)


def test_the_silence_lasts_the_timeouts_it_covers_plus_the_margin() -> None:
    bound, covers = silence_bound(_ctx(STEPS, 2), 600)
    assert bound == 300 + 900 + 1800 + 120 + 600  # not the post-check after the unsilence, nor the roll's gate
    assert covers == ["traffic.wait_zero_syns 5m", "host.reboot 15m", "kafka.wait_in_sync 30m", "alerts.unsilence 2m"]


def test_a_batch_goes_step_by_step_together_so_its_hosts_silences_cover_the_batch() -> None:
    bound, _ = silence_bound(_ctx(STEPS, 2, batch=("kafka1001", "kafka1002")), 600)
    assert bound == 2 * (300 + 900 + 1800 + 120) + 600


def test_without_an_unsilence_the_silence_covers_the_rest_of_the_host() -> None:
    steps = tuple(s for s in STEPS if s.kind != "alerts.unsilence")
    bound, _ = silence_bound(_ctx(steps, 2), DEFAULT_MARGIN)
    assert bound == 300 + 900 + 1800 + 300 + DEFAULT_MARGIN


def test_every_step_is_a_noop_saying_so_without_monitoring() -> None:
    cluster = load_inventory(REPO / "inventory" / "eqiad-main.example.yaml")
    assert cluster.monitoring is None
    env = Environment(cluster, dry_run=True)
    host = cluster.hosts[0].name
    for step in (SilenceHost({"margin": 600.0}), Unsilence({"timeout": 120.0}),
                 Gate({"timeout": 600.0, "at_end": False})):
        ctx = dataclasses.replace(_ctx(STEPS, 2, env=env), target=host)
        plan = step.plan(step.observe(ctx))
        assert getattr(plan, "reason", None) == f"no monitoring: configured for cluster {cluster.name} " \
                                                "(inventory monitoring: block)"


def test_the_comment_says_run_reason_and_task() -> None:
    assert silence_comment("20261102T100405-ab12", "kernel update", "T123") == \
        "kafkaops 20261102T100405-ab12: kernel update (T123)"
    assert silence_comment("r", "why", None) == "kafkaops r: why"


def test_times_go_to_alertmanager_and_back() -> None:
    assert utc(0) == "1970-01-01T00:00:00.000Z"
    assert parse_time("2026-11-02T10:04:05.123456789Z") == pytest.approx(1793613845.123456789)
    assert parse_time("2026-11-02T11:04:05+01:00") == 1793613845
    assert parse_time("yesterday") is None


def test_a_filter_value_is_quoted_as_alertmanager_reads_it() -> None:
    assert _quote('a"b\\c') == '"a\\"b\\\\c"'


def test_alertmanagers_answers_are_read_as_strings() -> None:
    alert = _alert({"labels": {"alertname": "KafkaBrokerDown", "instance": "kafka1001.lab.local:7800", "n": 3},
                    "status": {"state": "suppressed", "silencedBy": ["s1"]}, "annotations": {"summary": "down"}})
    assert alert.line() == "KafkaBrokerDown@kafka1001.lab.local:7800" and alert.silenced_by == ("s1",)
    assert alert.labels["n"] == "3"
    silence = _silence({"id": "s1", "matchers": [{"name": "instance", "value": "k\\.x:.*", "isRegex": True}],
                        "startsAt": "2026-11-02T10:00:00Z", "endsAt": "2026-11-02T11:00:00Z", "createdBy": "o",
                        "comment": "kafkaops r: x", "status": {"state": "active"}})
    assert silence.live and silence.matches([Matcher("instance", "k\\.x:.*", is_regex=True)])
    assert silence.ends_at is not None and silence.starts_at is not None
    assert silence.ends_at - silence.starts_at == 3600
    assert str(silence.matchers[0]) == 'instance=~"k\\.x:.*"'
    assert not _silence({"status": "nonsense"}).live


class _FakeAlertmanager:
    """Alertmanager's silences in memory (the real one is tests/lab/test_alerts_on_lab.py's)."""

    url = "http://127.0.10.31:9093"

    def __init__(self) -> None:
        self.live: dict[str, Silence] = {}
        self.calls: list[str] = []

    def silences(self) -> list[Silence]:
        return list(self.live.values())

    def create_silence(self, matchers: list[Matcher], *, starts_at: float, ends_at: float, created_by: str,
                       comment: str) -> str:
        sid = f"s{len(self.calls)}"
        self.calls.append(f"create {sid}")
        self.live[sid] = Silence(sid, tuple(matchers), starts_at, ends_at, created_by, comment, "active")
        return sid

    def extend_silence(self, silence: Silence, *, ends_at: float) -> str:
        self.calls.append(f"extend {silence.id}")
        self.live[silence.id] = dataclasses.replace(silence, ends_at=ends_at)
        return silence.id


def _renewal(monkeypatch: pytest.MonkeyPatch) -> tuple[SilenceHost, RunContext, _FakeAlertmanager]:
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    env = Environment(cluster)
    am = _FakeAlertmanager()
    monkeypatch.setattr(env, "_alertmanager", am)
    host = cluster.hosts[0].name
    ctx = dataclasses.replace(_ctx(STEPS, 2, env=env), target=host)
    return SilenceHost({"margin": 600.0}), ctx, am


def test_a_renewal_makes_a_lapsed_silence_again(monkeypatch: pytest.MonkeyPatch) -> None:
    step, ctx, am = _renewal(monkeypatch)
    found = step.renew(ctx, 5)  # resumed before host.reboot: nothing of this run silences the host any more
    assert am.calls == ["create s0"] and "lapsed" in found
    made = am.live["s0"]
    assert made.comment.startswith("kafkaops r1") and made.ends_at is not None
    assert made.ends_at - time.time() == pytest.approx(900 + 1800 + 120 + 600, abs=5)  # what is left, + margin


def test_a_renewal_extends_a_silence_that_would_end_too_soon_and_leaves_one_that_lasts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    step, ctx, am = _renewal(monkeypatch)
    step.renew(ctx, 5)
    assert step.renew(ctx, 5).endswith(am.live["s0"].id + " lasts until " + time.strftime(
        "%H:%M:%SZ", time.gmtime(am.live["s0"].ends_at)))
    am.live["s0"] = dataclasses.replace(am.live["s0"], ends_at=time.time() + 60)  # the run was held long
    found = step.renew(ctx, 5)
    assert am.calls == ["create s0", "extend s0"] and "extended" in found
    assert (am.live["s0"].ends_at or 0) > time.time() + 3000
