"""The KRaft quorum: ``kafka-metadata-quorum`` output (recorded from Kafka 4.3.1 on the KRaft lab) read
strictly, and the controller-restart gate judged over it (:mod:`kafkaops.policy.quorum`)."""

from __future__ import annotations

import pytest

from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.quorum import QuorumReplica, parse_replication, parse_status
from kafkaops.policy.quorum import judge, leader_clock, majority, restart_refusals

STATUS = """ClusterId:              gUGQDWLfS0q7m7a7uiXiMg
LeaderId:               3001
LeaderEpoch:            2
HighWatermark:          685
MaxFollowerLag:         14
MaxFollowerLagTimeMs:   7255
CurrentVoters:          [{"id": 3001, "endpoints": ["CONTROLLER://127.0.30.4:9093"]}, {"id": 3002, "endpoints": \
["CONTROLLER://127.0.30.5:9093"]}, {"id": 3003, "endpoints": ["CONTROLLER://127.0.30.6:9093"]}]
CurrentObservers:       [{"id": 1003, "directoryId": "SnDvjXesmEKlk6sie3VI-A"}, {"id": 1001, "directoryId": \
"LTIlf6L9LuXnhVNwrvPhnA"}, {"id": 1002, "directoryId": "4rb8I9C1MS-OBoBOXm85sg"}]
"""

HEADER = "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t\n"

# kafka-ctrl3003 stopped 8 s earlier: 16 records behind, last caught up 8.1 s before the leader's "now".
ONE_DOWN = HEADER + """\
3001  \tAAAAAAAAAAAAAAAAAAAAAA\t687         \t0  \t1795560073050     \t1795560073050        \tLeader  \t
3002  \tAAAAAAAAAAAAAAAAAAAAAA\t687         \t0  \t1795560072965     \t1795560072965        \tFollower\t
3003  \tAAAAAAAAAAAAAAAAAAAAAA\t671         \t16 \t1795560065452     \t1795560064962        \tFollower\t
1003  \tSnDvjXesmEKlk6sie3VI-A\t687         \t0  \t1795560072965     \t1795560072965        \tObserver\t
1001  \tLTIlf6L9LuXnhVNwrvPhnA\t687         \t0  \t1795560072965     \t1795560072965        \tObserver\t
1002  \t4rb8I9C1MS-OBoBOXm85sg\t687         \t0  \t1795560072965     \t1795560072965        \tObserver\t
"""

ALL_CAUGHT_UP = HEADER + """\
3001  \tAAAAAAAAAAAAAAAAAAAAAA\t701         \t0  \t1795560079498     \t1795560079498        \tLeader  \t
3002  \tAAAAAAAAAAAAAAAAAAAAAA\t701         \t0  \t1795560079467     \t1795560079467        \tFollower\t
3003  \tAAAAAAAAAAAAAAAAAAAAAA\t701         \t0  \t1795560079472     \t1795560079472        \tFollower\t
1003  \tSnDvjXesmEKlk6sie3VI-A\t701         \t0  \t1795560079469     \t1795560079469        \tObserver\t
"""

# Kafka 3.x prints no DirectoryId column and bare voter ids: both still read.
KAFKA3_REPLICATION = """NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus
1\t120\t0\t1700000000500\t1700000000500\tLeader
2\t120\t0\t1700000000400\t1700000000400\tFollower
3\t-1\t121\t-1\t-1\tFollower
"""


def test_status_recorded_from_kafka_4() -> None:
    s = parse_status(STATUS)
    assert (s.leader_id, s.leader_epoch, s.high_watermark) == (3001, 2, 685)
    assert s.voters == (3001, 3002, 3003)
    assert s.observers == (1003, 1001, 1002)
    assert (s.max_follower_lag, s.max_follower_lag_ms) == (14, 7255)


def test_status_of_kafka_3_lists_bare_ids() -> None:
    text = STATUS.replace(STATUS.splitlines()[6], "CurrentVoters:          [1,2,3]")
    assert parse_status(text).voters == (1, 2, 3)


@pytest.mark.parametrize("text", [
    STATUS.replace("LeaderId:               3001", "LeaderId:               leader"),
    STATUS.replace("HighWatermark:          685\n", ""),
    STATUS + "Exception in thread main\n",
    STATUS.replace('[{"id": 1003', '[{"node": 1003'),
    "",
])
def test_status_of_another_shape_is_refused(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_status(text)


def test_replication_recorded_from_kafka_4() -> None:
    rows = parse_replication(ONE_DOWN)
    assert [r.node_id for r in rows] == [3001, 3002, 3003, 1003, 1001, 1002]
    assert rows[2] == QuorumReplica(3003, 671, 16, 1795560065452, 1795560064962, "Follower",
                                    "AAAAAAAAAAAAAAAAAAAAAA")  # a static quorum's voter: no directory id
    assert [r.voter for r in rows] == [True, True, True, False, False, False]


def test_replication_of_kafka_3_without_directory_ids() -> None:
    rows = parse_replication(KAFKA3_REPLICATION)
    assert [(r.node_id, r.lag, r.last_caught_up_ms) for r in rows] == [(1, 0, 1700000000500), (2, 0, 1700000000400),
                                                                       (3, 121, -1)]


@pytest.mark.parametrize("text", [
    ONE_DOWN.replace("Follower", "Candidate", 1),
    ONE_DOWN.replace("LastCaughtUpTimestamp", "LastCaughtUp"),
    ONE_DOWN.replace("\t16 \t", "\t\t"),
    ONE_DOWN.replace("Follower", "Leader", 1),
    ONE_DOWN.replace("\t16 \t", "\tsixteen\t"),
    "Connection to node -1 could not be established\n",
])
def test_replication_of_another_shape_is_refused(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_replication(text)


def test_a_stopped_voter_is_lagging_measured_on_the_leaders_clock() -> None:
    view = judge(parse_replication(ONE_DOWN))
    assert view.leader_id == 3001
    assert view.caught_up == (3001, 3002)
    (lagging,) = view.lagging
    assert (lagging.node_id, lagging.lag, lagging.behind_ms) == (3003, 16, 8088)
    assert "voter 3003: 16 record(s) behind, last caught up 8.1s ago" in view.summary()


def test_the_gate_refuses_while_another_voter_lags_and_names_it() -> None:
    view = judge(parse_replication(ONE_DOWN))
    problems = restart_refusals(view, 3002)
    assert any("voter 3003" in p for p in problems)
    assert any("without 3002, 1 of 3 voters are caught up; the quorum needs 2" in p for p in problems)
    # Restarting the lagging voter itself takes no caught-up vote away.
    assert restart_refusals(view, 3003) == []


def test_the_gate_passes_a_whole_quorum_for_every_voter() -> None:
    view = judge(parse_replication(ALL_CAUGHT_UP))
    for node in (3001, 3002, 3003):
        assert restart_refusals(view, node) == []
    assert restart_refusals(view, 1003) == ["node 1003 is not a voter of the quorum (voters: 3001, 3002, 3003)"]


def test_no_leader_refuses() -> None:
    rows = [r for r in parse_replication(ALL_CAUGHT_UP) if r.status != "Leader"]
    view = judge(rows)
    assert view.leader_id is None and view.caught_up == ()
    assert "the metadata quorum has no leader" in restart_refusals(view, 3002)


@pytest.mark.parametrize(("max_lag", "max_behind_ms", "caught_up"), [
    (1000, 5000, (3001, 3002)), (16, 8088, (3001, 3002, 3003)), (15, 60000, (3001, 3002)), (100, 8087, (3001, 3002)),
])
def test_thresholds_are_inclusive(max_lag: int, max_behind_ms: int, caught_up: tuple[int, ...]) -> None:
    assert judge(parse_replication(ONE_DOWN), max_lag=max_lag, max_behind_ms=max_behind_ms).caught_up == caught_up


def test_a_restarted_voter_counts_only_once_caught_up_after_its_start() -> None:
    before = parse_replication(ALL_CAUGHT_UP)
    started = leader_clock(before)
    assert started == 1795560079498
    voter = judge(before).voter(3003)
    assert voter is not None and voter.caught_up and not voter.caught_up_since(started)
    later = [QuorumReplica(r.node_id, r.log_end_offset, r.lag, r.last_fetch_ms + 900, r.last_caught_up_ms + 900,
                           r.status) for r in before]
    again = judge(later).voter(3003)
    assert again is not None and again.caught_up_since(started)


@pytest.mark.parametrize(("voters", "need"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)])
def test_majority(voters: int, need: int) -> None:
    assert majority(voters) == need
