"""Another broker's leadership, lost through nothing the run did, restored by the gate that finds it (issue 41.6).

The field report: under load, a broker that was not the target (once the controller, once not) was cut
off from ZooKeeper for 25 s between two hosts of a roll and lost its leaderships; after the heal the next
host's ``kafka.preflight`` refused on the skew ("broker 1002 leads 0 of the 11 partitions it is preferred
leader of"), and so did two resumes. The rule of issue 28 (``kafka.verify_leaders`` only) now holds in
every gate that judges leadership, from one policy function (:func:`leadership_to_restore`) and one step
helper: when every broker is registered and every partition fully in sync, one preferred-replica election
for those partitions, journaled and shown, then the gate judges. Otherwise nothing is elected and the gate
refuses as before.

Driven like the runner drives a step (observe, plan, apply, then observe again) against an in-memory
cluster whose election moves leaders the way Kafka's does: to the preferred replica when it is in the ISR.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, cast

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.context import Projection, RunContext
from kafkaops.engine.step import Action, Noop, get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import SafetyRefusal
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.leaders import leader_spread, leadership_to_restore
from kafkaops.stepkit.projection import ELECTED, broker_key, project_snapshot

BROKERS = (1001, 1002, 1003)
RINGS = ((1001, 1002, 1003), (1002, 1003, 1001), (1003, 1001, 1002))


def balanced(n: int = 33) -> list[PartitionState]:
    """``n`` partitions, RF 3, preferred leaders round-robin (11 each for 33), led as assigned."""
    return [PartitionState("events", i, RINGS[i % 3][0], RINGS[i % 3], RINGS[i % 3]) for i in range(n)]


def cut_off(broker: int, parts: list[PartitionState]) -> list[PartitionState]:
    """After ``broker`` was cut from ZooKeeper and came back: in every ISR again, leading nothing (its
    partitions went to the next replica in assignment order, what the controller picks)."""
    return [dataclasses.replace(p, leader=p.replicas[1]) if p.leader == broker else p for p in parts]


def snapshot(parts: list[PartitionState], brokers: tuple[int, ...] = BROKERS, min_isr: int = 2) -> ClusterSnapshot:
    topics = {"events": TopicConfig("events", min_insync_replicas=min_isr, replication_factor=3)}
    return ClusterSnapshot("main", 0.0, brokers, 1001, tuple(parts), topics)


class Cluster(Environment):
    """An in-memory cluster behind the environment the kafka steps ask: metadata, the inventory's hosts,
    and a preferred election that moves a partition's leader to its preferred replica when that replica
    is registered and in the ISR (Kafka answers PREFERRED_LEADER_NOT_AVAILABLE otherwise)."""

    def __init__(self, snap: ClusterSnapshot, inventory: tuple[int, ...] = BROKERS,
                 refuse: dict[str, str] | None = None) -> None:  # no super().__init__: no inventory file
        self.state = snap
        self.cluster = cast(Any, SimpleNamespace(name="main", hosts=[self.host(f"kafka{b}") for b in inventory]))
        self.elections: list[list[tuple[str, int]]] = []
        self.events: list[str] = []  # journal events and elections, in the order they happened
        self.refuse = refuse or {}

    @property
    def kafka(self) -> Any:
        return SimpleNamespace(snapshot=lambda with_configs=False: self.state, elect_preferred_leaders=self.elect)

    def elect(self, partitions: list[tuple[str, int]]) -> dict[str, str]:
        self.elections.append(list(partitions))
        self.events.append("elect")
        if self.refuse:
            return dict(self.refuse)
        asked = set(partitions)
        live = set(self.state.brokers)
        self.state = dataclasses.replace(self.state, partitions=tuple(
            dataclasses.replace(p, leader=p.replicas[0])
            if (p.topic, p.partition) in asked and p.replicas[0] in live and p.replicas[0] in p.isr else p
            for p in self.state.partitions))
        return {}

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        return self.state

    def host(self, name: str) -> Any:
        return SimpleNamespace(name=name, broker_id=int(name.removeprefix("kafka")), services=())

    def registered_brokers(self) -> list[int]:
        return list(self.state.brokers)


class Gate:
    """One step of one host, run the way the runner runs it; ``records`` is what it journaled."""

    def __init__(self, env: Cluster, kind: str, target: str, targets: tuple[str, ...], **params: Any) -> None:
        entry = get_step_kind(kind)
        assert entry is not None
        self.env = env
        self.records: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.obj = entry.create({**{p.name: p.default for p in entry.params}, **params})
        self.ctx = RunContext(run_id="run-1", operator="o", reason="r", task=None, target=target, params={},
                              env=env, projected=Projection(), targets=targets, record=self.record,
                              progress=self.lines.append)

    def record(self, event: str, **fields: Any) -> None:
        self.records.append({"event": event, **fields})
        self.env.events.append(event)

    def plan(self) -> Action | Noop:
        return self.obj.plan(self.obj.observe(self.ctx))

    def run(self) -> Action | Noop:
        """observe → plan → apply (an action) → verify, as :meth:`Runner._converge` does."""
        decision = self.plan()
        if isinstance(decision, Action):
            self.obj.apply(self.ctx, decision)
        self.obj.verify(self.ctx)
        return decision


#: The roll of the field report: kafka1001 is done, kafka1003 is next, kafka1002 (still to come) was cut off.
ROLL = ("kafka1001", "kafka1003", "kafka1002")


def preflight(env: Cluster, target: str = "kafka1003", **params: Any) -> Gate:
    return Gate(env, "kafka.preflight", target, ROLL, **params)


def skewed() -> Cluster:
    return Cluster(snapshot(cut_off(1002, balanced())))


def preferred_of(broker: int, env: Cluster) -> list[tuple[str, int]]:
    return [(p.topic, p.partition) for p in env.state.partitions if p.replicas[0] == broker]


# ------------------------------------------------------------------------------------------ (1) the skew


def test_the_next_hosts_preflight_elects_the_cut_off_brokers_partitions_then_passes() -> None:
    env = skewed()
    me = next(b for b in leader_spread(env.state).brokers if b.broker_id == 1002)
    assert (me.preferred, me.preferred_led) == (11, 0)  # the field report's numbers
    gate = preflight(env)

    decision = gate.run()  # before issue 41.6: SafetyRefusal "broker 1002 leads 0 of the 11 partitions ..."

    assert isinstance(decision, Action)
    assert env.elections == [preferred_of(1002, env)]  # its 11, nothing else: not the target's, not 1001's
    assert leader_spread(env.state, 0).within(), leader_spread(env.state).line()
    assert isinstance(gate.plan(), Noop)  # judged again: the gates pass


def test_a_resume_of_the_refused_gate_passes_the_same_way() -> None:
    """Two resumes refused in the field: a resume is the same observe → plan → apply of the gate."""
    env = skewed()
    for _ in range(2):
        preflight(env).run()
    assert len(env.elections) == 1  # once restored, the second pass finds nothing to elect


# ------------------------------------------------------------------------------------------ (2) not whole


def test_with_the_cut_off_broker_not_registered_nothing_is_elected_and_the_gate_refuses() -> None:
    parts = [dataclasses.replace(p, isr=tuple(b for b in p.isr if b != 1002)) for p in cut_off(1002, balanced())]
    env = Cluster(snapshot(parts, brokers=(1001, 1003)))
    with pytest.raises(SafetyRefusal, match="under-replicated"):
        preflight(env).run()
    assert env.elections == [] and "leadership_restored" not in env.events


def test_with_one_of_its_partitions_not_in_sync_nothing_is_elected_and_the_skew_is_named() -> None:
    parts = cut_off(1002, balanced())
    parts[1] = dataclasses.replace(parts[1], isr=(1003, 1001))  # events-1: preferred 1002, lagging
    env = Cluster(snapshot(parts, min_isr=1))  # stopping 1003 keeps events-1 at min ISR: only the skew is left
    gate = preflight(env, allow_urp=True)  # --force: the URP gate is passed, the skew is what refuses
    with pytest.raises(SafetyRefusal) as refused:
        gate.run()
    message = refused.value.message
    assert "below min.insync.replicas" not in message
    assert "broker 1002 leads 0 of the 11 partitions it is preferred leader of (100% off)" in message
    assert "no preferred election: 1 partition(s) not fully in sync (events-1)" in message
    assert env.elections == [] and gate.records == []


def test_with_an_inventory_broker_not_registered_nothing_is_elected() -> None:
    env = Cluster(snapshot(cut_off(1002, balanced())), inventory=(*BROKERS, 1004))  # 1004 holds no replica
    with pytest.raises(SafetyRefusal, match=r"broker 1002 leads 0 .*no preferred election: broker\(s\) 1004 not "
                                            "registered"):
        preflight(env).run()
    assert env.elections == []


def test_a_spread_accepted_with_the_threshold_is_left_as_it_is() -> None:
    env = skewed()
    assert isinstance(preflight(env, max_leader_imbalance=100).run(), Noop)
    assert env.elections == []


def test_the_target_and_the_brokers_rolled_before_it_are_never_elected_by_the_preflight() -> None:
    env = skewed()
    assert isinstance(preflight(env, target="kafka1002").run(), Noop)  # its own election comes after its stop
    assert isinstance(Gate(env, "kafka.preflight", "kafka1001", ("kafka1002", "kafka1001")).run(), Noop)
    assert env.elections == []


def test_kafka_refusing_the_election_is_a_refusal_naming_the_skew_and_kafkas_answer() -> None:
    env = Cluster(snapshot(cut_off(1002, balanced())), refuse={"events-1": "PREFERRED_LEADER_NOT_AVAILABLE"})
    with pytest.raises(SafetyRefusal, match=r"broker 1002 leads 0 .*Kafka refused the preferred election for "
                                            "events-1: PREFERRED_LEADER_NOT_AVAILABLE"):
        preflight(env).run()


# ------------------------------------------------------------------------------------------ (3) journaled


def test_the_election_is_journaled_before_kafka_is_asked_and_shown() -> None:
    env = skewed()
    gate = preflight(env)
    gate.run()
    [record] = gate.records
    assert record["event"] == "leadership_restored" and record["brokers"] == [1002]
    assert record["partitions"] == [f"{t}-{p}" for t, p in preferred_of(1002, env)]
    assert "1002 0/11 (100% off)" in record["leaders_before"]
    assert env.events == ["leadership_restored", "elect"]  # intent first
    assert any("broker 1002 leads 0 of the 11 partitions" in line and "not through this run: preferred-replica "
               "election for 11 partition(s)" in line for line in gate.lines), gate.lines


# ------------------------------------------------------------------------------------------ the plan


def test_the_plan_says_the_gate_may_elect_and_what_it_elects() -> None:
    calm = preflight(Cluster(snapshot(balanced()))).plan()
    assert isinstance(calm, Noop) and "others' lost leaderships elected back first if all are in sync (journaled)" \
        in calm.reason
    planned = preflight(skewed()).plan()
    assert isinstance(planned, Action)
    assert "11 partition(s) whose preferred leader (broker(s) 1002) is registered and in sync but does not lead" \
        in planned.description
    assert planned.commands[0].startswith("AdminClient.elect_leaders(PREFERRED, [events-1, events-4")
    assert "broker 1002 leads 0 of the 11" in planned.impact
    verify = Gate(Cluster(snapshot(balanced())), "kafka.verify_leaders", "kafka1003", ROLL).plan()
    assert isinstance(verify, Noop) and "others' lost leaderships elected back then if all are in sync" in verify.reason


def test_a_dry_run_projects_the_restored_leadership_for_the_steps_after_the_gate() -> None:
    gate = preflight(skewed())
    obs = gate.obj.observe(gate.ctx)
    decision = gate.obj.plan(obs)
    assert isinstance(decision, Action)
    effects = gate.obj.effects(obs, decision)
    assert effects == {broker_key(1002): ELECTED}
    projected = Projection()
    for key, value in effects.items():
        projected.set(key, value, "kafka1003 (kafka.preflight)")
    ctx = dataclasses.replace(gate.ctx, projected=projected)
    assert leader_spread(project_snapshot(gate.env.state, ctx), 0).within()


# ------------------------------------------------------------------------------------------ one rule


def test_verify_leaders_restores_through_the_same_rule_and_helper() -> None:
    env = skewed()
    gate = Gate(env, "kafka.verify_leaders", "kafka1003", ROLL)
    assert isinstance(gate.run(), Action)
    assert env.elections == [preferred_of(1002, env)]
    assert [r["event"] for r in gate.records] == ["leadership_restored"] and gate.records[0]["brokers"] == [1002]


def test_the_policy_elects_only_on_a_whole_cluster_and_never_the_exempt() -> None:
    snap = snapshot(cut_off(1002, balanced()))
    whole = leadership_to_restore(snap, exempt=[1003], expected=BROKERS)
    assert whole.whole and whole.brokers() == [1002] and len(whole.partitions) == 11
    assert not leadership_to_restore(snap, exempt=[1002], expected=BROKERS).needed
    missing = leadership_to_restore(snap, exempt=[1003], expected=(*BROKERS, 1004))
    assert missing.needed and not missing.elect and missing.blocked() == "broker(s) 1004 not registered"
    assert not leadership_to_restore(snap, max_imbalance=100, expected=BROKERS).needed
