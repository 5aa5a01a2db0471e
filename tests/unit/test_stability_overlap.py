"""The stability window between two hosts of a roll overlaps the next host's depool and SYN window
(issue 14, point 2): the health watch proves the cluster stayed healthy while they ran; a break restarts
the count; a watch that stopped sampling proves nothing; the first host waits for nothing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.run_facts import RunFacts
from kafkaops.engine.runbook import load_runbook
from kafkaops.engine.step import Action, Noop, get_step_kind
from kafkaops.model import ClusterSnapshot, PartitionState
from kafkaops.systems.stability_watch import StabilityWatch, healthy, unhealthy_reason

REPO = Path(__file__).resolve().parents[2]


def snap(*, brokers: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] = (1, 2, 3)) -> ClusterSnapshot:
    return ClusterSnapshot("lab", 0.0, brokers, 1, (PartitionState("t", 0, 1, (1, 2, 3), isr),))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_healthy_means_no_urp_no_offline_every_broker_registered() -> None:
    assert healthy(snap(), frozenset({1, 2, 3}))
    assert not healthy(snap(isr=(1, 2)), frozenset({1, 2, 3}))
    assert not healthy(snap(brokers=(1, 2)), frozenset({1, 2, 3}))


def test_the_watch_counts_an_unbroken_healthy_streak() -> None:
    clock, states = Clock(), [snap()]
    watch = StabilityWatch(lambda: states[-1], frozenset({1, 2, 3}), interval=0.5, clock=clock)
    for _ in range(11):  # 5 s of healthy samples
        watch.sample()
        clock.now += 0.5
    clock.now -= 0.5
    assert watch.stable_for() == pytest.approx(5.0)
    states.append(snap(isr=(1, 2)))  # a broker drops out of an ISR: the count starts again
    clock.now += 0.5
    watch.sample()
    assert watch.stable_for() == 0.0
    states.append(snap())
    for _ in range(3):
        clock.now += 0.5
        watch.sample()
    assert watch.stable_for() == pytest.approx(1.0)


def test_a_broker_gone_from_zookeeper_breaks_the_streak_whatever_its_stale_metadata_says() -> None:
    """A broker cut off from ZooKeeper still answers with the metadata it had: all alive, all in sync.
    The registrations read from ZooKeeper itself decide, and the reason names the broker."""
    clock, registered = Clock(), [[1, 2, 3]]
    watch = StabilityWatch(lambda: snap(), frozenset({1, 2, 3}), registered=lambda: registered[-1], clock=clock)
    watch.sample()
    clock.now += 1
    watch.sample()
    assert watch.stable_for() == pytest.approx(1.0) and watch.reason() == ""
    registered.append([1, 2])
    clock.now += 0.5
    watch.sample()
    assert watch.stable_for() == 0.0
    assert watch.reason() == "broker(s) 3 not registered in ZooKeeper"


def test_the_reason_names_the_partitions() -> None:
    assert unhealthy_reason(snap(isr=(1, 2)), frozenset({1, 2, 3})).startswith("1 under-replicated (t-0")
    assert unhealthy_reason(snap(), frozenset({1, 2, 3})) == ""


def test_a_failed_read_breaks_the_streak() -> None:
    clock = Clock()
    answers: list[Any] = [snap(), snap(), RuntimeError("metadata timed out"), snap()]

    def read() -> ClusterSnapshot:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    watch = StabilityWatch(read, frozenset({1, 2, 3}), clock=clock)
    for _ in range(4):
        watch.sample()
        clock.now += 0.5
    clock.now -= 0.5
    assert watch.stable_for() == 0.0  # only the last sample is healthy again


def test_a_watch_that_stopped_sampling_proves_nothing() -> None:
    clock = Clock()
    watch = StabilityWatch(lambda: snap(), frozenset({1, 2, 3}), interval=0.5, clock=clock)
    watch.sample()
    clock.now += 10
    watch.sample()  # two samples 10 s apart: the streak "holds" only if the watch kept watching
    assert watch.stable_for() == pytest.approx(10.0)
    clock.now += 5  # no sample for 5 s
    assert watch.stable_for() == 0.0


def step(**params: Any) -> Any:
    entry = get_step_kind("kafka.wait_stable")
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params}, **params})


def test_wait_stable_waits_for_nothing_on_the_first_host_and_says_so() -> None:
    gate = step(stable_for=5.0)
    first = gate.plan(gate.observe(SimpleNamespace(target="kafka1", targets=("kafka1", "kafka2"))))
    assert isinstance(first, Noop) and "first host of the roll" in first.reason
    later = gate.plan(gate.observe(SimpleNamespace(target="kafka2", targets=("kafka1", "kafka2"))))
    assert isinstance(later, Action) and "healthy for 5s without a break" in later.description


def test_wait_stable_passes_once_the_watch_has_held_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.steps.kafka as kafka_steps

    held = [2.0, 4.0, 5.5]
    reasons = ["1 under-replicated (lab.load-0)", "", ""]

    class Watch:
        def stable_for(self) -> float:
            return held.pop(0) if len(held) > 1 else held[0]

        def reason(self) -> str:
            return reasons.pop(0) if len(reasons) > 1 else reasons[0]

    polls: list[str] = []

    def fake_wait(ctx: Any, predicate: Any, **kw: Any) -> None:
        while True:
            ok, value = predicate()
            polls.append(value)
            if ok:
                return

    monkeypatch.setattr(kafka_steps, "environment", lambda ctx: SimpleNamespace(stability_watch=Watch))
    monkeypatch.setattr(kafka_steps, "wait", fake_wait)
    step(stable_for=5.0).apply(SimpleNamespace(), Action(description="x"))
    assert polls == ["healthy for 2.0s of 5s; now: 1 under-replicated (lab.load-0)", "healthy for 4.0s of 5s",
                     "healthy for 5.5s of 5s"]


def test_the_rolling_runbooks_count_the_window_before_the_stop_not_in_the_gate() -> None:
    for name in ("rolling-reboot", "rolling-restart"):
        runbook = load_runbook(REPO / "runbooks" / f"{name}.yaml")
        kinds = [s.kind for s in runbook.steps]
        assert runbook.targets is not None and runbook.targets.gate is not None
        assert str(runbook.targets.gate.params["stable_for"]) in ("0s", "0", "0.0")
        # depool and SYN window before the wait; the stop after it
        assert kinds.index("conftool.depool") < kinds.index("traffic.wait_zero_syns") \
            < kinds.index("kafka.wait_stable") < kinds.index("kafka.stop_broker")


def _stop_world(monkeypatch: pytest.MonkeyPatch, *, registered: bool, sent: bool,
                active: list[bool]) -> tuple[list[str], Any]:
    """What the stop did, and the context of a run whose facts say whether the stop was already sent."""
    import kafkaops.steps.kafka as kafka_steps

    did: list[str] = []
    facts = RunFacts(None)
    if sent:
        facts.set("kafka_stop_sent/kafka3", 1.0)
    host = SimpleNamespace(name="kafka3", broker_id=3)
    svc = SimpleNamespace(
        command=lambda h, name: name,
        run=lambda h, cmd, **kw: SimpleNamespace(exit_code=0 if active.pop(0) else 3),
        change=lambda h, cmd, **kw: did.append(cmd),
    )

    def fake_wait(ctx: Any, predicate: Any, **kw: Any) -> None:
        while not predicate()[0]:
            pass
        did.append("waited: " + kw["what"])

    monkeypatch.setattr(kafka_steps, "environment", lambda ctx: svc)
    monkeypatch.setattr(kafka_steps, "target_host", lambda ctx: host)
    monkeypatch.setattr(kafka_steps, "registered_brokers", lambda ctx: [3] if registered else [])
    monkeypatch.setattr(kafka_steps, "_unregistered", lambda ctx, h: (True, "gone"))
    monkeypatch.setattr(kafka_steps, "wait", fake_wait)
    return did, SimpleNamespace(run_id="r", facts=facts)


def _stop_step() -> Any:
    entry = get_step_kind("kafka.stop_broker")
    assert entry is not None
    return entry.create({p.name: p.default for p in entry.params})


def test_a_stop_resumed_mid_shutdown_waits_for_the_process_and_never_stops_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    did, ctx = _stop_world(monkeypatch, registered=False, sent=True, active=[True, True, False])
    _stop_step().apply(ctx, Action(description="stop"))
    assert did == ["waited: Kafka on kafka3 stopped (the stop was sent before the resume)"]


def test_an_unregistered_broker_this_run_never_stopped_is_still_a_configuration_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkaops.errors import ConfigError

    did, ctx = _stop_world(monkeypatch, registered=False, sent=False, active=[True])
    with pytest.raises(ConfigError, match="its stop could not be confirmed"):
        _stop_step().apply(ctx, Action(description="stop"))
    assert did == []


def test_a_first_stop_sends_the_stop_and_waits_for_the_unregistration(monkeypatch: pytest.MonkeyPatch) -> None:
    did, ctx = _stop_world(monkeypatch, registered=True, sent=False, active=[])
    _stop_step().apply(ctx, Action(description="stop"))
    assert did == ["kafka_stop", "waited: broker 3 unregistered"]
