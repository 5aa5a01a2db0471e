"""KRaft quorum membership (issue 46, KIP-853): the refusals of ``controllers add|remove`` as pure judgement over
``kafka-metadata-quorum`` answers (recorded from Kafka 4.3.1 on the KRaft lab, or derived from them), the
static-quorum refusal, the KAFKA-21426 guard on feature upgrades, and a retired broker's unregistration
(``kafka-cluster list-endpoints``). The lab adds and removes a controller for real
(tests/lab/test_kraft_quorum_on_lab.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import SafetyRefusal
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.features import parse_features, parse_mapping
from kafkaops.facts.quorum import QuorumReplica, parse_replication
from kafkaops.facts.registrations import parse_endpoints
from kafkaops.policy.quorum import judge
from kafkaops.policy.quorum_membership import (
    TO_DYNAMIC,
    add_refusals,
    kraft_version,
    remove_refusals,
    static_quorum_refusal,
    upgrade_refusal,
)

RECORDED = Path(__file__).parent / "recorded"
#: The KRaft lab's dynamic quorum (3 voters with directory ids, 3 brokers observing), recorded 2026-11-28.
DYNAMIC = (RECORDED / "kafka-metadata-quorum-replication-dynamic-4.3.1.txt").read_text()
FEATURES_STATIC = {n: f.finalized for n, f in
                   parse_features((RECORDED / "kafka-features-describe-4.3.1.txt").read_text()).items()}
FEATURES_DYNAMIC = {n: f.finalized for n, f in
                    parse_features((RECORDED / "kafka-features-describe-4.3.1-dynamic.txt").read_text()).items()}
MAPPING = parse_mapping((RECORDED / "kafka-features-version-mapping-4.3.txt").read_text())


def _rows(text: str = DYNAMIC) -> list[QuorumReplica]:
    return list(parse_replication(text))


def _with(rows: list[QuorumReplica], *extra: QuorumReplica) -> list[QuorumReplica]:
    return [*rows, *extra]


def _lagging(rows: list[QuorumReplica], node: int) -> list[QuorumReplica]:
    """``node`` 5000 records and 30 s behind the leader (stopped, or paused)."""
    now = next(r.last_caught_up_ms for r in rows if r.status == "Leader")
    return [QuorumReplica(r.node_id, r.log_end_offset - 5000, 5000, now - 30_000, now - 30_000, r.status,
                          r.directory_id) if r.node_id == node else r for r in rows]


def _voter(node: int, rows: list[QuorumReplica], directory: str = "Bq7Ew8TlSz6XjNiA8yq6Ew") -> QuorumReplica:
    """A fourth voter, caught up, as the leader would report it."""
    now = next(r.last_caught_up_ms for r in rows if r.status == "Leader")
    return QuorumReplica(node, 80, 0, now, now, "Follower", directory)


def _directory(rows: list[QuorumReplica], node: int) -> str:
    return next(r.directory_id for r in rows if r.node_id == node)


# --- facts -----------------------------------------------------------------------------------------------------


def test_the_directory_ids_are_read_and_checked() -> None:
    rows = _rows()
    assert [r.node_id for r in rows if r.voter] == [3003, 3001, 3002]
    assert all(len(r.directory_id) == 22 for r in rows)
    with pytest.raises(MalformedAnswer, match="DirectoryId"):
        parse_replication(DYNAMIC.replace(rows[1].directory_id, "x; reboot #############"))


def test_the_version_mapping_and_the_kraft_version_are_read() -> None:
    assert MAPPING["metadata.version"] == 30 and MAPPING["kraft.version"] == 1
    assert kraft_version(FEATURES_STATIC) == 0 and kraft_version(FEATURES_DYNAMIC) == 1
    assert kraft_version({"metadata.version": "3.9-IV0"}) == 0  # Kafka 3.x: no kraft.version line at all
    with pytest.raises(MalformedAnswer):
        parse_mapping("metadata.version=30 (4.3)\nkraft.version=1; reboot\n")


# --- static quorums ---------------------------------------------------------------------------------------------


def test_a_static_quorum_is_refused_with_the_documented_way_to_a_dynamic_one() -> None:
    assert "static (kraft.version 0" in (static_quorum_refusal(FEATURES_STATIC) or "")
    assert static_quorum_refusal(FEATURES_DYNAMIC) is None
    assert "kafka-features" in TO_DYNAMIC and "--feature kraft.version=1" in TO_DYNAMIC
    assert "controller.quorum.bootstrap.servers" in TO_DYNAMIC


@pytest.mark.parametrize("change", ["add", "remove"])
def test_the_membership_gate_refuses_a_static_quorum_up_front(change: str) -> None:
    gate = _step("quorum.membership_gate", change=change)
    obs = {"host": "kafka-ctrl3001", "node": 3001, "change": change, "voter": change == "remove",
           "voters": [3001, 3002, 3003], "summary": "", "refusals": [],
           "static": static_quorum_refusal(FEATURES_STATIC)}
    with pytest.raises(SafetyRefusal, match="the metadata quorum is static") as refused:
        gate.plan(Observation(obs))
    assert refused.value.hint == TO_DYNAMIC


# --- remove ---------------------------------------------------------------------------------------------------


def test_removing_a_voter_of_three_is_refused_never_below_the_minimum() -> None:
    rows = _rows()
    view = judge(rows)
    refused = remove_refusals(view, 3001, directory_id=_directory(rows, 3001))
    assert refused == ["removing 3001 would leave 2 voter(s); at least 3 stay (a quorum of 2 survives 0 failure(s))"]
    assert remove_refusals(view, 3001, min_voters=2, directory_id=_directory(rows, 3001)) == []


def test_removing_the_fourth_voter_is_allowed_while_every_voter_is_caught_up() -> None:
    rows = _with(_rows(), _voter(3004, _rows()))
    assert remove_refusals(judge(rows), 3004, directory_id="Bq7Ew8TlSz6XjNiA8yq6Ew") == []


def test_removing_a_voter_while_another_lags_is_refused_naming_it() -> None:
    rows = _lagging(_with(_rows(), _voter(3004, _rows())), 3002)
    refused = remove_refusals(judge(rows), 3004, directory_id="Bq7Ew8TlSz6XjNiA8yq6Ew")
    assert refused[0].startswith("lagging or down: voter 3002: 5000 record(s) behind")
    # ... and the smaller quorum: 3 voters left, 2 caught up — a majority, but one failure from none.
    assert len(refused) == 1


def test_removing_the_lagging_voter_itself_is_allowed() -> None:
    """A voter that is down is the one an operator removes (a dead machine): it costs no caught-up vote."""
    rows = _lagging(_with(_rows(), _voter(3004, _rows())), 3004)
    assert remove_refusals(judge(rows), 3004, directory_id="Bq7Ew8TlSz6XjNiA8yq6Ew") == []


def test_removing_is_refused_when_the_voters_left_hold_no_caught_up_majority() -> None:
    rows = _lagging(_lagging(_with(_rows(), _voter(3004, _rows()), _voter(3005, _rows(), "Cq7Ew8TlSz6XjNiA8yq6Ew")),
                             3001), 3002)
    refused = remove_refusals(judge(rows), 3005, directory_id="Cq7Ew8TlSz6XjNiA8yq6Ew")
    assert "without 3005, 2 of 4 voters are caught up; the smaller quorum needs 3" in refused


def test_removing_is_refused_without_a_leader_or_a_directory_id() -> None:
    rows = [r for r in _with(_rows(), _voter(3004, _rows())) if r.status != "Leader"]
    refused = remove_refusals(judge(rows), 3004, directory_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert "the metadata quorum has no leader" in refused
    assert any("has no directory id" in r for r in refused)


# --- add -------------------------------------------------------------------------------------------------------


def _observer(lag: int) -> QuorumReplica:
    now = next(r.last_caught_up_ms for r in _rows() if r.status == "Leader")
    return QuorumReplica(3004, 80 - lag, lag, now, now if lag == 0 else -1, "Observer", "Bq7Ew8TlSz6XjNiA8yq6Ew")


def test_adding_a_caught_up_observer_is_allowed() -> None:
    assert add_refusals(judge(_rows()), 3004, _observer(0), max_lag=1000) == []


def test_adding_a_node_that_is_not_replicating_or_behind_is_refused() -> None:
    view = judge(_rows())
    assert "not an observer of the quorum" in add_refusals(view, 3004, None, max_lag=1000)[0]
    assert "5000 record(s) behind the leader as an observer" in add_refusals(view, 3004, _observer(5000),
                                                                             max_lag=1000)[0]


def test_adding_while_a_voter_lags_is_refused() -> None:
    refused = add_refusals(judge(_lagging(_rows(), 3001)), 3004, _observer(0), max_lag=1000)
    assert refused[0].startswith("lagging or down: voter 3001")


def test_the_gate_plans_a_no_op_for_a_node_already_in_its_wanted_place() -> None:
    add = _step("quorum.membership_gate", change="add")
    base = {"host": "kafka-ctrl3004", "node": 3004, "voters": [3001, 3002, 3003, 3004], "summary": "",
            "refusals": ["never looked at"], "static": None}
    assert isinstance(add.plan(Observation({**base, "change": "add", "voter": True})), Noop)
    remove = _step("quorum.membership_gate", change="remove")
    assert isinstance(remove.plan(Observation({**base, "change": "remove", "voter": False})), Noop)
    with pytest.raises(SafetyRefusal, match="removing controller 3004") as refused:
        remove.plan(Observation({**base, "change": "remove", "voter": True,
                                 "refusals": ["removing 3004 would leave 2 voter(s); at least 3 stay"]}))
    assert "controllers add" in (refused.value.hint or "")


# --- KAFKA-21426 ------------------------------------------------------------------------------------------------


def test_an_upgrade_by_release_version_is_refused_on_a_static_quorum() -> None:
    refused = upgrade_refusal("upgrade --release-version 4.3", FEATURES_STATIC, MAPPING)
    assert refused is not None and "from 0 to 1" in refused and "KAFKA-21426" in refused
    assert upgrade_refusal("upgrade --feature kraft.version=1", FEATURES_STATIC, MAPPING) is not None
    assert upgrade_refusal("upgrade --feature metadata.version=30", FEATURES_STATIC, MAPPING) is None
    assert upgrade_refusal("upgrade --release-version 4.3", FEATURES_DYNAMIC, MAPPING) is None
    assert upgrade_refusal("describe", FEATURES_STATIC, MAPPING) is None


# --- kraft.unregister_broker -------------------------------------------------------------------------------------


def test_the_registrations_are_read_from_kafka_cluster_list_endpoints() -> None:
    fenced = parse_endpoints((RECORDED / "kafka-cluster-list-endpoints-fenced-4.3.1.txt").read_text())
    assert fenced == {1001: "unfenced", 1002: "unfenced", 1003: "fenced"}
    assert parse_endpoints((RECORDED / "kafka-cluster-list-endpoints-4.3.1.txt").read_text())[1003] == "unfenced"
    with pytest.raises(MalformedAnswer):
        parse_endpoints("ID HOST PORT RACK STATE ENDPOINT_TYPE\n1003 127.0.50.3 9092 C fenced; reboot broker\n")


def test_unregister_is_a_no_op_on_zookeeper_mode_and_refuses_a_running_broker() -> None:
    step = _step("kraft.unregister_broker")
    zk = step.plan(Observation({"host": "kafka1004", "node": 1004, "kraft": False}))
    assert isinstance(zk, Noop) and "left /brokers/ids by itself" in zk.reason
    base = {"host": "kafka-kraft1004", "node": 1004, "kraft": True, "via": "kafka-kraft1001",
            "command": "kafka-cluster unregister --bootstrap-server 127.0.50.1:9092 --id 1004"}
    assert isinstance(step.plan(Observation({**base, "state": None})), Noop)
    act = step.plan(Observation({**base, "state": "fenced"}))
    assert isinstance(act, Action) and act.commands == (f"on kafka-kraft1001: {base['command']}",)
    with pytest.raises(SafetyRefusal, match="is unfenced: a running broker is not unregistered"):
        step.plan(Observation({**base, "state": "unfenced"}))


def test_decommission_unregisters_right_after_the_stop() -> None:
    from kafkaops.catalog import find_runbook

    kinds = [s.kind for s in find_runbook("broker-decommission").steps]
    assert kinds[kinds.index("kafka.stop_broker") + 1] == "kraft.unregister_broker"


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params if p.default is not None}, **params})
