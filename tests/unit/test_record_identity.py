"""Offsets translated exactly, by the records themselves (kafkaops.policy.record_identity + translation.refine),
checked against recorded partitions: equal timestamps, repeated keys and values, out-of-order timestamps, a
mirror that delivered a batch twice, one that lags, one whose source head was deleted. Never a loss; exact
wherever the group's last records form a run found once on the target."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaops.policy.record_identity import TAIL, RecordId, locate, record_id, scan_gap, scan_start_ts
from kafkaops.policy.translation import PartitionMove, SourcePosition, refine, seek_times, translate

KEY = ("eqiad.test.event", 0)
MARGIN = 60_000


def _first_at_or_after(log: list[RecordId], ts: int) -> int:
    return next((i for i, r in enumerate(log) if r.timestamp >= ts), len(log))


def _move(source: list[RecordId], target: list[RecordId], committed: int, start: int = 0) -> PartitionMove:
    """The whole translation of a group at ``committed`` on ``source`` (records by offset, deleted below
    ``start``) to ``target`` (records by offset), as the step does it with its reads simulated."""
    pos = SourcePosition(*KEY, committed=committed, start=start, end=len(source))
    anchor_ts = {KEY: source[pos.anchor].timestamp} if pos.anchor is not None else {}
    seeks = seek_times([pos], anchor_ts, MARGIN)
    [margin] = translate([pos], anchor_ts, MARGIN,
                         target_at={k: _first_at_or_after(target, ts) for k, ts in seeks.items()},
                         source_at={k: _first_at_or_after(source, ts) for k, ts in seeks.items()},
                         target_end={KEY: len(target)})
    tail = source[max(start, committed - TAIL):committed]
    if not tail:
        return refine([margin], {})[0]
    begin = _first_at_or_after(target, scan_start_ts(tail, MARGIN))
    found = locate(tail, list(enumerate(target))[begin:])
    return refine([margin], {KEY: found})[0]


def _log(n: int, *, keys: int, values: int, ts_step: int, skew: int, seed: int) -> list[RecordId]:
    rng = random.Random(seed)
    return [record_id(1_000_000 + ts_step * i - rng.randint(0, skew), str(rng.randrange(keys)).encode(),
                      str(rng.randrange(values)).encode()) for i in range(n)]


def test_a_unique_tail_translates_exactly_with_no_duplicate() -> None:
    source = _log(400, keys=1000, values=10**6, ts_step=10, skew=0, seed=1)
    target = _log(30, keys=5, values=5, ts_step=1, skew=0, seed=2) + source  # the target's own older history
    move = _move(source, target, committed=240)
    assert move.method == "exact" and move.target_offset == 30 + 240 and move.duplicates == 0, move
    [margin_only] = refine([move], {})
    assert margin_only == move  # nothing located: unchanged


def test_the_margin_rule_would_have_sent_the_group_back_a_whole_minute() -> None:
    """The issue's observation, small: records 10 ms apart, a 60 s margin: the margin rule rereads everything
    before the position; the identity finds the position itself."""
    source = _log(4000, keys=50, values=10**6, ts_step=10, skew=0, seed=3)
    exact = _move(source, source, committed=2400)
    margin = translate([SourcePosition(*KEY, committed=2400, start=0, end=4000)],
                       {KEY: source[2400].timestamp}, MARGIN, target_at={KEY: 0}, source_at={KEY: 0},
                       target_end={KEY: 4000})[0]
    assert margin.duplicates == 2400 and margin.target_offset == 0
    assert exact.target_offset == 2400 and exact.duplicates == 0 and exact.method == "exact"


def test_a_group_at_the_end_resumes_right_after_its_last_record() -> None:
    source = _log(100, keys=100, values=10**6, ts_step=10, skew=0, seed=4)
    move = _move(source, source, committed=100)
    assert (move.method, move.target_offset, move.duplicates) == ("exact", 100, 0)


def test_equal_timestamps_and_repeated_records_fall_back_to_the_margin_and_lose_nothing() -> None:
    """Every record identical (same timestamp, key and value): the tail is on the target many times; which
    copy is the group's is unknown, so the margin rule decides, and says so."""
    source = [record_id(5_000, b"k", b"v")] * 50
    move = _move(source, source, committed=20)
    assert move.method == "margin" and "times" in move.why, move
    assert move.target_offset <= 20


def test_a_mirror_that_delivered_a_batch_twice_is_ambiguous_only_when_the_tail_is_in_the_batch() -> None:
    source = _log(300, keys=1000, values=10**6, ts_step=10, skew=0, seed=5)
    target = source[:200] + source[150:200] + source[200:]  # records 150..199 delivered again
    inside = _move(source, target, committed=180)
    assert inside.method == "margin" and inside.target_offset <= 180, inside
    after = _move(source, target, committed=260)
    assert after.method == "exact" and after.target_offset == 260 + 50, after


def test_a_lagging_mirror_or_a_deleted_head_falls_back_and_says_why() -> None:
    source = _log(300, keys=1000, values=10**6, ts_step=10, skew=0, seed=6)
    lagging = _move(source, source[:150], committed=200)
    assert lagging.method == "margin" and "not on the target" in lagging.why, lagging
    deleted = _move(source, source, committed=200, start=200)  # DeleteRecords up to the group's position
    assert deleted.method == "margin" and deleted.why == "", deleted
    assert deleted.target_offset <= 200
    # What the target holds between the offset and the position is read again, though the source lost it:
    assert deleted.duplicates == 200 - deleted.target_offset > 0


def test_a_match_before_the_margin_rules_offset_is_not_the_groups_copy() -> None:
    """The target holds, well before the margin rule's offset, a run equal to the tail (the same three
    events, produced long ago with their old timestamps), and the tail's own copy is missing (a lagging
    mirror): that old run is not trusted."""
    old = [record_id(10, b"a", b"1"), record_id(10, b"a", b"2"), record_id(10, b"a", b"3")]
    source = [record_id(1_000_000 + i, str(i).encode(), str(i).encode()) for i in range(100)] + old
    target = old + source[:100]
    found = locate(old, list(enumerate(target)))
    assert found.offset == 3  # the old run, taken alone, looks like an exact match...
    [move] = refine([PartitionMove(*KEY, 103, 103, 10, 0, 50, 0, "")], {KEY: found})
    assert move.method == "margin" and "not the group's copy" in move.why  # ...but lies before the margin rule's


@settings(max_examples=300)
@given(n=st.integers(5, 120), keys=st.integers(1, 3), values=st.integers(1, 3), skew=st.integers(0, 200),
       seed=st.integers(0, 10**6), history=st.integers(0, 20), redelivered=st.integers(0, 10),
       data=st.data())
def test_never_a_loss_exact_wherever_the_tail_is_unique(n: int, keys: int, values: int, skew: int, seed: int,
                                                         history: int, redelivered: int,
                                                         data: st.DataObject) -> None:
    """Recorded partitions with few keys and values (repeats everywhere), timestamps up to ``skew`` ms out of
    order and often equal, a target with history of its own and a batch the mirror delivered again."""
    source = _log(n, keys=keys, values=values, ts_step=data.draw(st.sampled_from([0, 1, 10])), skew=skew, seed=seed)
    own = _log(history, keys=keys, values=values, ts_step=1, skew=0, seed=seed + 1)
    cut = data.draw(st.integers(0, n))
    again = source[max(0, cut - redelivered):cut]
    target = own + source[:cut] + again + source[cut:]
    committed = data.draw(st.integers(0, n))
    move = _move(source, target, committed)
    # Where the group's position is on the target: the copy of the first record it has not read (the
    # second copy of a redelivered one is also fine to resume at: its first copy was read).
    true_position = history + committed + (len(again) if committed >= cut else 0)
    assert move.target_offset <= true_position, (move, true_position)
    if move.method == "exact":
        assert move.target_offset == true_position or (committed >= cut and move.target_offset >= true_position
                                                       - len(again)), (move, true_position)
    tail = source[max(0, committed - TAIL):committed]
    begin = _first_at_or_after(target, scan_start_ts(tail, MARGIN)) if tail else 0
    runs = sum(target[i:i + len(tail)] == tail for i in range(begin, len(target) - len(tail) + 1)) if tail else 0
    if tail and runs == 1:
        assert move.method == "exact" and move.duplicates == 0, (move, tail)


def test_an_empty_tail_is_a_caller_error() -> None:
    with pytest.raises(ValueError):
        locate([], [])


def test_a_mirrormaker_checkpoint_record_is_read_as_kafka_writes_it() -> None:
    """Kafka's ``Checkpoint`` serialization: key = group, topic (int16-length strings), partition (int32);
    value = version (int16), upstream offset, downstream offset (int64), metadata (string)."""
    import struct

    from kafkaops.systems.groups import parse_checkpoint

    def string(s: str) -> bytes:
        return struct.pack(">h", len(s.encode())) + s.encode()

    key = string("lab-switchover") + string("eqiad.test.event") + struct.pack(">i", 2)
    value = struct.pack(">hqq", 0, 1500, 1525) + string("")
    assert parse_checkpoint(key, value) == ("lab-switchover", "eqiad.test.event", 2, 1525)
    assert parse_checkpoint(key[:5], value) is None and parse_checkpoint(None, value) is None


# Issue 42.1(b): a replayed event, the target's head deleted; transaction markers and aborted records
# (offsets no record is delivered at) on both sites.

def _move_on(source: list[RecordId], target: list[tuple[int, RecordId]], committed: int, log_start: int,
             end: int) -> PartitionMove:
    """:func:`_move` against a target given as the records a consumer is given, ``(offset, id)`` in order,
    with holes (markers, aborted records) and its log start (what retention or DeleteRecords left)."""
    held = [(o, r) for o, r in target if o >= log_start]

    def first(ts: int) -> int:
        return next((o for o, r in held if r.timestamp >= ts), end)

    pos = SourcePosition(*KEY, committed=committed, start=0, end=len(source))
    anchor_ts = {KEY: source[pos.anchor].timestamp} if pos.anchor is not None else {}
    seeks = seek_times([pos], anchor_ts, MARGIN)
    [margin] = translate([pos], anchor_ts, MARGIN, target_at={k: first(ts) for k, ts in seeks.items()},
                         source_at={k: _first_at_or_after(source, ts) for k, ts in seeks.items()},
                         target_end={KEY: end})
    tail = source[max(0, committed - TAIL):committed]
    if not tail:
        return refine([margin], {})[0]
    begin = first(scan_start_ts(tail, MARGIN))
    first_held = next((o for o, _ in held), None)
    found = locate(tail, [(o, r) for o, r in held if o >= begin],
                   gap=scan_gap(begin=begin, log_start=log_start, first_held=first_held, compacted=False))
    return refine([margin], {KEY: found})[0]


def _with_holes(records: list[RecordId], holes: list[int]) -> tuple[list[tuple[int, RecordId]], int]:
    """``records`` laid out on offsets with ``holes[i]`` offsets no record is delivered at before record
    ``i`` (a commit marker, an aborted transaction); the log end."""
    out, at = [], 0
    for i, r in enumerate(records):
        at += holes[i % len(holes)] if holes else 0
        out.append((at, r))
        at += 1
    return out, at + 1  # a last commit marker


def test_a_replayed_run_found_once_after_the_targets_head_was_deleted_is_not_trusted() -> None:
    """The field case of issue 42: the group read ids 0..59; ids 57..59 were later produced again (a replayed
    event: same CreateTime, key and value) after id 99; on the target everything up to the group's own copy
    was deleted. The replay is the only run of the tail left there: trusting it skipped ids 60..99."""
    ids = [record_id(1_000_000 + 2000 * i, str(i).encode(), f'{{"id": {i}}}'.encode()) for i in range(100)]
    source = ids + ids[57:60]
    target, end = _with_holes(source, [1])  # a marker before each record: MirrorMaker's transactions
    copy_of_59 = target[59][0]
    move = _move_on(source, target, committed=60, log_start=copy_of_59 + 1, end=end)
    assert move.method == "margin", move
    assert "no longer holds the margin's offset" in move.why and "found once" in move.why, move.why
    assert move.target_offset <= target[60][0]  # at or before id 60's copy: nothing lost
    # With the head kept, both runs are found: which is the group's is unknown, the margin decides.
    kept = _move_on(source, target, committed=60, log_start=0, end=end)
    assert kept.method == "margin" and "2 times" in kept.why, kept
    # With no replay, a deleted head still holds a record before the scan's start: exact.
    plain, plain_end = _with_holes(ids, [1])
    exact = _move_on(ids, plain, committed=60, log_start=plain[10][0], end=plain_end)
    assert exact.method == "exact" and exact.target_offset == copy_of_59 + 1, exact


def test_a_compacted_target_or_an_unfinished_scan_trusts_no_single_match() -> None:
    tail = [record_id(5, b"k", b"v"), record_id(6, b"k", b"w")]
    target = [(10, tail[0]), (12, tail[1])]
    assert locate(tail, target).offset == 13
    compacted = locate(tail, target, gap=scan_gap(begin=10, log_start=0, first_held=10, compacted=True))
    assert compacted.offset is None and "compacted" in compacted.reason
    unfinished = locate(tail, target, complete=False, limit=2)
    assert unfinished.offset is None and "bound of 2 records" in unfinished.reason
    assert scan_gap(begin=10, log_start=10, first_held=10, compacted=False)  # head deleted up to the scan
    assert scan_gap(begin=11, log_start=10, first_held=11, compacted=False)  # ... and a marker is all before it
    assert not scan_gap(begin=11, log_start=10, first_held=10, compacted=False)  # a record before it is held
    assert not scan_gap(begin=0, log_start=0, first_held=0, compacted=False)  # nothing ever deleted


@settings(max_examples=300)
@given(n=st.integers(5, 100), keys=st.integers(1, 3), values=st.integers(1, 3), skew=st.integers(0, 200),
       seed=st.integers(0, 10**6), holes=st.lists(st.integers(0, 3), max_size=7), data=st.data())
def test_never_a_loss_with_markers_aborted_records_replays_and_a_deleted_head(
        n: int, keys: int, values: int, skew: int, seed: int, holes: list[int], data: st.DataObject) -> None:
    """Generated partitions: repeats everywhere, a run of the source produced again later (a replay),
    offsets with no record (markers, aborted transactions) on the target, and the target's head deleted
    anywhere up to the group's own position there (a deletion past it loses records on any translation)."""
    source = _log(n, keys=keys, values=values, ts_step=data.draw(st.sampled_from([0, 1, 10])), skew=skew, seed=seed)
    a = data.draw(st.integers(0, n - 1))
    source += source[a:data.draw(st.integers(a, n))]  # a replay of some run, with its CreateTimes
    target, end = _with_holes(source, holes)
    committed = data.draw(st.integers(0, len(source)))
    # The group's position on the target: right after its copy of the last record it read; nothing is lost
    # while it resumes at or before the copy of the first record it has not read.
    true_position = target[committed - 1][0] + 1 if committed else 0
    next_copy = target[committed][0] if committed < len(source) else end
    log_start = data.draw(st.integers(0, true_position))
    move = _move_on(source, target, committed, log_start, end)
    assert move.target_offset <= max(next_copy, log_start), (move, next_copy, log_start)
    if move.method == "exact":
        assert move.target_offset == true_position, (move, true_position)
