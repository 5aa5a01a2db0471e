"""Leader spread (issue 13.4) and election scope (13.5), from hand-built snapshots.

The spread is Kafka's own per-broker measure (``leader.imbalance.per.broker.percentage``): of the
partitions a broker is preferred leader of, the share it does not lead. The steps are driven through
``observe``/``plan``/``effects`` against a fake environment, with the projection a dry-run uses, so the
plans of a whole roll are checked without a cluster.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.context import Projection, RunContext
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import SafetyRefusal
from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig
from kafkaops.policy.availability import cluster_health
from kafkaops.policy.leaders import election_candidates, leader_spread
from kafkaops.policy.preflight import preflight
from kafkaops.stepkit.projection import CLUSTER_ELECTED, ELECTED, IN_SYNC, STOPPED, broker_key, project_snapshot


def P(topic: str, n: int, leader: int | None, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None
      ) -> PartitionState:
    return PartitionState(topic, n, leader, replicas, replicas if isr is None else isr)


def snap(parts: list[PartitionState], brokers: tuple[int, ...] = (1, 2, 3)) -> ClusterSnapshot:
    topics = {p.topic: TopicConfig(p.topic, min_insync_replicas=1, replication_factor=len(p.replicas)) for p in parts}
    return ClusterSnapshot("c", 0.0, brokers, 1, tuple(parts), topics)


def balanced(n: int = 12) -> list[PartitionState]:
    """``n`` partitions, RF 3, preferred leaders round-robin over brokers 1..3, each led as assigned."""
    rings = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    return [P("t", i, rings[i % 3][0], rings[i % 3]) for i in range(n)]


def broker_leads_nothing(broker: int, n: int = 12) -> list[PartitionState]:
    """``balanced`` after ``broker`` was restarted without an election: its partitions are led by the next
    replica in assignment order (what the controller picks)."""
    return [P(p.topic, p.partition, p.replicas[1], p.replicas) if p.leader == broker else p for p in balanced(n)]


# ------------------------------------------------------------------------------------------ the measure


def test_led_as_assigned_is_zero_off_whatever_the_layout() -> None:
    # Uneven on purpose: broker 1 is preferred leader of 6 partitions, 2 of 2, 3 of 1. Leaders per broker
    # differ by 5 (a max - min rule would call this skewed); each broker leads exactly its share.
    parts = [P("big", i, 1, (1, 2, 3)) for i in range(6)] + [P("small", 0, 2, (2, 3, 1)),
                                                             P("small", 1, 2, (2, 1, 3)), P("tiny", 0, 3, (3, 1, 2))]
    spread = leader_spread(snap(parts), 0)
    assert [(b.broker_id, b.leaders, b.preferred, b.not_led) for b in spread.brokers] == \
        [(1, 6, 6, 0), (2, 2, 2, 0), (3, 1, 1, 0)]
    assert spread.within() and spread.line() == "1 6/6, 2 2/2, 3 1/1"
    assert preflight(snap(parts), 2, max_leader_imbalance=0).ok


def test_a_broker_leading_nothing_is_100_percent_off_and_the_others_show_the_surplus() -> None:
    spread = leader_spread(snap(broker_leads_nothing(2)))
    by_id = {b.broker_id: b for b in spread.brokers}
    assert by_id[2].leaders == 0 and by_id[2].imbalance == 1.0
    assert by_id[3].leaders == 8 and by_id[3].imbalance == 0.0  # leads its 4 and broker 2's 4
    assert [b.broker_id for b in spread.over()] == [2]
    assert spread.line() == "1 4/4, 2 0/4 (100% off), 3 8/4"


@pytest.mark.parametrize(("not_led", "threshold", "over"), [
    (1, 10, False),   # 1 of 10 = 10 %: Kafka compares strictly above
    (2, 10, True),
    (1, 0, True),
    (10, 100, False),  # 100 accepts any spread
    (0, 0, False),
])
def test_threshold_is_strictly_above_as_kafka_compares(not_led: int, threshold: int, over: bool) -> None:
    parts = [P("t", i, 2 if i < not_led else 1, (1, 2)) for i in range(10)]
    assert bool(leader_spread(snap(parts, (1, 2)), threshold).over()) is over


def test_a_broker_that_is_down_is_not_judged_by_the_spread_gate() -> None:
    parts = [P(p.topic, p.partition, p.leader, p.replicas, tuple(r for r in p.replicas if r != 2))
             for p in broker_leads_nothing(2)]
    spread = leader_spread(snap(parts, (1, 3)))
    assert not spread.over()  # the registration and URP gates speak for broker 2
    assert "2 0/4 (100% off) (down)" not in spread.line()  # a broker down that leads nothing is not listed


def test_status_figures_are_the_spread_figures() -> None:
    s = snap(broker_leads_nothing(2))
    health = cluster_health(s)
    spread = leader_spread(s)
    assert health.leaders_by_broker == {b.broker_id: b.leaders for b in spread.brokers}
    assert health.preferred_ratio_by_broker == {b.broker_id: b.preferred_led / b.preferred for b in spread.brokers}


# ------------------------------------------------------------------------------------------ the gate


def test_preflight_refuses_a_skewed_cluster_with_the_numbers() -> None:
    result = preflight(snap(broker_leads_nothing(2)), 1, max_leader_imbalance=10)
    assert result.codes == ("leader_imbalance",)
    assert result.message() == (
        "refusing to stop broker 1: leadership is skewed past 10% per broker: broker 2 leads 0 of the 4 "
        "partitions it is preferred leader of (100% off) (leaders now/preferred: 1 4/4, 2 0/4 (100% off), 3 8/4)")
    assert "--max-leader-imbalance" in result.hint() and "--force" not in result.hint()
    with pytest.raises(SafetyRefusal):
        result.raise_if_refused()
    assert preflight(snap(broker_leads_nothing(2)), 1, max_leader_imbalance=100).ok
    assert preflight(snap(broker_leads_nothing(2)), 1).ok  # not asked for: no spread gate
    assert preflight(snap(broker_leads_nothing(2)), 1, max_leader_imbalance=10,
                            allow_urp=True).codes == ("leader_imbalance",)  # --force does not pass it


def test_the_target_and_brokers_rolled_earlier_are_exempt_with_a_warning() -> None:
    result = preflight(snap(broker_leads_nothing(2)), 2, max_leader_imbalance=10)
    assert result.ok
    assert any("broker 2 leads 0 of the 4" in w and "its election in this run restores it" in w
               for w in result.warnings)
    earlier = preflight(snap(broker_leads_nothing(2)), 3, max_leader_imbalance=10, leader_exempt=[2])
    assert earlier.ok and any("rolled earlier in this run" in w for w in earlier.warnings)


def test_election_candidates_leave_partitions_whose_preferred_replica_is_out_of_sync() -> None:
    parts = [P("t", 0, 2, (1, 2), (1, 2)), P("t", 1, 2, (1, 2), (2,)), P("t", 2, 1, (1, 2))]
    electable, blocked = election_candidates(snap(parts, (1, 2)))
    assert [p.partition for p in electable] == [0] and [p.partition for p in blocked] == [1]


# ------------------------------------------------------------------------------------------ the steps


def step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params}, **params})


class FakeEnv(Environment):
    """What the kafka steps ask of the environment: a snapshot, the hosts, registered brokers."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:  # no super().__init__: no inventory, no adapters
        self.state = snapshot
        self.cluster = cast(Any, SimpleNamespace(hosts=[self.host(t) for t in TARGETS]))  # the inventory's brokers

    @property
    def kafka(self) -> Any:
        return SimpleNamespace(snapshot=lambda with_configs=False: self.state)

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        return self.state  # no ZooKeeper to cross-check with

    def host(self, name: str) -> Any:
        return SimpleNamespace(name=name, broker_id=int(name.removeprefix("kafka")))

    def registered_brokers(self) -> list[int]:
        return list(self.state.brokers)


TARGETS = ("kafka1", "kafka2", "kafka3")


class DryRoll:
    """A dry-run of a roll: the steps observe the live snapshot through the projection earlier steps left."""

    def __init__(self, snapshot: ClusterSnapshot, **params: Any) -> None:
        self.env, self.params, self.projected = FakeEnv(snapshot), params, Projection()

    def ctx(self, target: str) -> RunContext:
        return RunContext(run_id="", operator="o", reason="r", task=None, target=target, params={}, env=self.env,
                          projected=self.projected, targets=TARGETS)

    def run(self, kind: str, target: str, **extra: Any) -> Noop | Action:
        params = {k: v for k, v in {**self.params, **extra}.items()
                  if k in {p.name for p in get_step_kind(kind).params}}  # type: ignore[union-attr]
        s = step(kind, **params)
        obs = s.observe(self.ctx(target))
        decision = s.plan(obs)
        if isinstance(decision, Action):
            for key, value in s.effects(obs, decision).items():
                self.projected.set(key, value, f"{target} ({kind})")
        return decision

    def host(self, target: str) -> dict[str, Noop | Action]:
        """One host of a roll: pre-flight, stop, back in sync, election, leadership check."""
        out = {"preflight": self.run("kafka.preflight", target)}
        broker = int(target.removeprefix("kafka"))
        self.projected.set(broker_key(broker), STOPPED, f"{target} (kafka.stop_broker)")
        self.projected.set(broker_key(broker), IN_SYNC, f"{target} (kafka.wait_in_sync)")
        out["election"] = self.run("kafka.preferred_election", target)
        out["verify"] = self.run("kafka.verify_leaders", target)
        return out

    def view(self) -> ClusterSnapshot:
        return project_snapshot(self.env.state, self.ctx("kafka1"))


def test_a_skewed_cluster_is_refused_by_the_pre_flight_step_whatever_the_scope_unless_it_is_whole() -> None:
    # Whole (every broker registered, every partition in sync): the gate elects broker 2's partitions first
    # (issue 41.6, tests/unit/test_leadership_restore.py). Not whole: nothing elected, refused as before.
    for scope in ("broker", "cluster"):
        restored = DryRoll(snap(broker_leads_nothing(2)), scope=scope).run("kafka.preflight", "kafka1")
        assert isinstance(restored, Action) and restored.data["partitions"] == [["t", i] for i in (1, 4, 7, 10)]
        lagging = [P("t", 1, 3, (2, 3, 1), (3, 1)) if p.partition == 1 else p for p in broker_leads_nothing(2)]
        roll = DryRoll(snap(lagging), scope=scope, allow_urp=True)
        with pytest.raises(SafetyRefusal, match=r"broker 2 leads 0 of the 4 partitions .*\(100% off\)"):
            roll.run("kafka.preflight", "kafka1")


def test_repairing_the_broker_that_leads_nothing_with_the_default_scope_ends_within_the_threshold() -> None:
    roll = DryRoll(snap(broker_leads_nothing(2)))
    plans = roll.host("kafka2")
    assert isinstance(plans["preflight"], Noop) and "0/4 (100% off)" in plans["preflight"].reason
    election = plans["election"]
    assert isinstance(election, Action) and election.data["partitions"] == [["t", i] for i in (1, 4, 7, 10)]
    assert isinstance(plans["verify"], Noop) and "leads all of its preferred" in plans["verify"].reason
    assert leader_spread(roll.view(), 0).within()


def test_no_election_plan_says_the_host_is_repooled_leading_nothing() -> None:
    roll = DryRoll(snap(balanced()), enabled=False)
    plans = roll.host("kafka1")
    election = plans["election"]
    assert isinstance(election, Noop)
    assert "kafka1 is repooled while leading nothing (0 of the 4 partitions it is preferred leader of" in \
        election.reason and "--no-election" in election.reason
    assert isinstance(plans["verify"], Noop) and "1 0/4 (100% off)" in plans["verify"].reason


def test_election_at_end_roll_plans_every_host_then_one_cluster_election() -> None:
    roll = DryRoll(snap(balanced()), at_end=True)
    first, second, last = (roll.host(t) for t in TARGETS)
    # host 2's pre-flight does not hold host 1's leading nothing against it: this run did that on purpose
    assert isinstance(second["preflight"], Noop) and "rolled earlier in this run" in second["preflight"].reason
    for plans, target in ((first, "kafka1"), (second, "kafka2")):
        assert isinstance(plans["election"], Noop)
        assert f"{target} is repooled while leading nothing" in plans["election"].reason
        assert "until the election after kafka3" in plans["election"].reason
    final = last["election"]
    assert isinstance(final, Action) and "whole cluster (--election-at-end)" in final.description
    # Each stop handed the partitions back to the first in-sync replica in assignment order, so only the
    # last host rolled leads nothing by then (Strimzi #5564): the closing election is for its partitions.
    assert final.data["partitions"] == [["t", i] for i in (2, 5, 8, 11)]
    assert roll.projected.get(CLUSTER_ELECTED) is True
    assert isinstance(last["verify"], Noop) and "every electable partition is led" in last["verify"].reason
    assert leader_spread(roll.view(), 0).within()


def test_cluster_scope_elects_every_partition_and_projects_later_hosts_leading_nothing_until_theirs() -> None:
    # Broker 3 is 25 % off before the roll (1 of its 4 partitions led by 2), accepted with a threshold of 30.
    parts = [P(p.topic, p.partition, 2, p.replicas) if p.partition == 2 else p for p in balanced()]
    roll = DryRoll(snap(parts), scope="cluster", max_leader_imbalance=30)
    first = roll.host("kafka1")
    election = first["election"]
    assert isinstance(election, Action) and "whole cluster (--election-scope cluster)" in election.description
    assert ["t", 2] in election.data["partitions"]  # the skew it found is repaired too
    assert CLUSTER_ELECTED not in roll.projected
    assert {roll.projected[broker_key(b)] for b in (1, 2, 3)} == {ELECTED}
    # host 2 stops and is back in sync: until its own election it leads nothing (not "elected" by host 1's)
    roll.projected.set(broker_key(2), STOPPED, "kafka2 (kafka.stop_broker)")
    roll.projected.set(broker_key(2), IN_SYNC, "kafka2 (kafka.wait_in_sync)")
    assert leader_spread(roll.view()).brokers[1].leaders == 0
    assert isinstance(roll.run("kafka.preferred_election", "kafka2"), Action)
    assert leader_spread(roll.view(), 0).within()


def test_verify_waits_while_any_broker_is_past_the_threshold_even_with_nothing_pending() -> None:
    obs = Observation({"broker": 1, "host": "kafka1", "mode": "broker", "pending": [], "leaders": "x",
                       "over": ["broker 2 leads 0 of the 4 partitions it is preferred leader of (100% off)"]})
    decision = step("kafka.verify_leaders").plan(obs)
    assert isinstance(decision, Action) and "broker 2 leads 0 of the 4" in decision.description
    done = step("kafka.verify_leaders").plan(Observation({**obs.data, "over": []}))
    assert isinstance(done, Noop)


def test_scope_must_be_broker_or_cluster() -> None:
    entry = get_step_kind("kafka.preferred_election")
    assert entry is not None and entry.check is not None
    assert entry.check({"scope": "cluster"}) is None
    assert "not one of broker, cluster" in (entry.check({"scope": "sideways"}) or "")
