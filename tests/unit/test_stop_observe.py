"""What `kafka.stop_broker` asks before a stop (issue 47): the cluster always, the host only about a broker
the cluster does not list — a registered broker is stopped whatever its process says, and asking its host
cost an SSH command per broker in the plan and again in the run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, get_step_kind
from kafkaops.environment import Environment
from kafkaops.model import ClusterSnapshot, PartitionState


class HostsAsked(Environment):
    """A cluster snapshot, and a host whose unit status answers ``unit_runs``; counts what the hosts are asked."""

    def __init__(self, registered: tuple[int, ...], unit_runs: bool) -> None:  # no inventory, no adapters
        self.state = ClusterSnapshot("c", 0.0, registered, 1002,
                                     (PartitionState("t", 0, 1002, (1002, 1001, 1003), (1002, 1003)),))
        self.unit_runs, self.asked = unit_runs, []
        self.cluster = cast(Any, SimpleNamespace(kraft=False, hosts=[self.host("kafka1001")], sites=()))

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        return self.state

    def host(self, name: str) -> Any:
        return SimpleNamespace(name=name, broker_id=int(name.removeprefix("kafka")), dc="eqiad", rack=None)

    def command(self, host: Any, name: str, **_: Any) -> str:
        return f"hostctl {name}"

    def run(self, host: Any, command: str, **_: Any) -> Any:
        self.asked.append(command)
        return SimpleNamespace(exit_code=0 if self.unit_runs else 3, stdout="", stderr="")


def _observe(env: HostsAsked) -> tuple[Any, Noop | Action]:
    entry = get_step_kind("kafka.stop_broker")
    assert entry is not None
    step = entry.create({p.name: p.default for p in entry.params})
    ctx = RunContext(run_id="r", operator="o", reason="r", task=None, target="kafka1001", params={}, env=env,
                     targets=("kafka1001",))
    obs = step.observe(ctx)
    return obs, step.plan(obs)


def test_a_registered_broker_is_stopped_without_asking_its_host() -> None:
    env = HostsAsked(registered=(1001, 1002, 1003), unit_runs=False)   # a crashed broker, still registered
    obs, decision = _observe(env)
    assert env.asked == []
    assert isinstance(decision, Action)
    assert obs.summary.startswith("broker 1001: registered, leads 0")


def test_an_unregistered_broker_is_asked_about_and_a_stopped_one_is_left_alone() -> None:
    stopped = HostsAsked(registered=(1002, 1003), unit_runs=False)
    obs, decision = _observe(stopped)
    assert stopped.asked == ["hostctl kafka_status"]
    assert isinstance(decision, Noop) and "already stopped" in decision.reason
    assert obs.summary.startswith("broker 1001: process inactive, not registered")
    starting = HostsAsked(registered=(1002, 1003), unit_runs=True)   # its process runs, not registered yet
    obs, decision = _observe(starting)
    assert starting.asked == ["hostctl kafka_status"] and isinstance(decision, Action)
    assert obs.summary.startswith("broker 1001: process active, not registered")
