"""Consumer offsets translated by timestamp (kafkaops.policy.translation): zero loss within the margin, the
duplicates counted exactly, checked against simulated source and mirror logs."""

from __future__ import annotations

import random

import pytest

from kafkaops.policy.translation import PartitionMove, SourcePosition, guarantee, seek_times, translate

KEY = ("eqiad.test.event", 0)


def _first_at_or_after(log: list[int], ts: int, base: int = 0) -> int:
    """ListOffsets by timestamp: the first offset whose timestamp is >= ts (the log end if none)."""
    return next((base + i for i, t in enumerate(log) if t >= ts), base + len(log))


def _translate(source: list[int], history: int, committed: int, margin: int,
               target: list[int] | None = None) -> PartitionMove:
    """The move for a group at ``committed`` on ``source`` (timestamps by offset), mirrored to a target
    whose copy starts with ``history`` records of its own (old timestamps); ``target``: another copy."""
    target = target if target is not None else [0] * history + source
    pos = SourcePosition(*KEY, committed=committed, start=0, end=len(source))
    anchor_ts = {KEY: source[pos.anchor]} if pos.anchor is not None else {}
    seeks = seek_times([pos], anchor_ts, margin)
    [move] = translate([pos], anchor_ts, margin,
                       target_at={k: _first_at_or_after(target, ts) for k, ts in seeks.items()},
                       source_at={k: _first_at_or_after(source, ts) for k, ts in seeks.items()},
                       target_end={KEY: len(target)})
    return move


def _skewed_log(n: int, skew: int, seed: int) -> list[int]:
    """Timestamps of ``n`` records written ~10 ms apart, each up to ``skew`` ms out of order."""
    rng = random.Random(seed)
    return [1_000_000 + 10 * i - rng.randint(0, skew) for i in range(n)]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("margin", [0, 300])
def test_no_unread_record_is_lost_from_an_order_keeping_copy(seed: int, margin: int) -> None:
    """MirrorMaker keeps each partition's order: the record at the group's position has the anchor's
    timestamp, so the first record at or after (anchor - margin) is at or before its copy — whatever the
    margin, and however far out of timestamp order the records are."""
    source = _skewed_log(500, skew=300, seed=seed)
    committed = random.Random(seed).randint(1, 499)
    move = _translate(source, history=25, committed=committed, margin=margin)
    # Every record the group had not read is at or after the translated offset on the target...
    assert move.target_offset - 25 <= committed
    # ...and everything between is exactly what the plan counted as read twice.
    assert committed - (move.target_offset - 25) == move.duplicates


def test_the_margin_covers_a_copy_that_reached_the_target_in_another_order() -> None:
    """A record written after the position but 500 ms older, which reached the target well before the
    position's copy (another path; seed 003's late events): lost with a 100 ms margin, kept with 1 s —
    a record at most the margin older than the position has a timestamp the lookup cannot skip."""
    source = [1_000_000 + 10 * i for i in range(100)]
    source[51] -= 500
    target = [0] * 25 + source[:30] + [source[51]] + source[30:51] + source[52:]  # 51's copy at offset 55
    short = _translate(source, history=25, committed=50, margin=100, target=target)
    assert short.target_offset > 55  # the unread record's copy is before the translated offset: lost
    wide = _translate(source, history=25, committed=50, margin=1000, target=target)
    assert wide.target_offset <= 55


def test_a_group_at_the_end_resumes_after_its_last_record_minus_the_margin() -> None:
    source = [1_000_000 + 10 * i for i in range(100)]
    move = _translate(source, history=25, committed=100, margin=0)
    assert move.anchor_ts == source[99] and move.target_offset == 25 + 99 and move.duplicates == 1
    assert "at the end of the source" in move.note


def test_an_empty_source_partition_resumes_at_the_target_log_end() -> None:
    pos = SourcePosition(*KEY, committed=0, start=0, end=0)
    [move] = translate([pos], {}, 60_000, target_at={}, source_at={}, target_end={KEY: 25})
    assert (move.target_offset, move.duplicates, move.anchor_ts) == (25, 0, None)


def test_a_position_before_the_log_start_anchors_on_the_first_record_there() -> None:
    pos = SourcePosition(*KEY, committed=3, start=10, end=20)
    assert pos.anchor == 10 and not pos.caught_up


def test_missing_answers_are_errors_not_guesses() -> None:
    pos = SourcePosition(*KEY, committed=5, start=0, end=10)
    with pytest.raises(ValueError, match="no timestamp"):
        translate([pos], {}, 0, target_at={}, source_at={}, target_end={})
    with pytest.raises(ValueError, match="no offset for timestamp"):
        translate([pos], {KEY: 5}, 0, target_at={KEY: None}, source_at={KEY: 2}, target_end={})


def test_the_guarantee_names_the_margin_and_the_total_duplicates() -> None:
    moves = [_translate([1_000_000 + 10 * i for i in range(100)], history=0, committed=50, margin=100)]
    text = guarantee("g1", "eqiad", "codfw", 100, moves)
    assert "zero loss" in text and "kept when at most 0.1s older" in text
    assert f"at most {moves[0].duplicates} record(s)" in text and moves[0].duplicates == 10


def test_an_unreadable_mirrormaker_checkpoint_is_said_and_does_not_fail_the_translation() -> None:
    """Issue 42.1(c): MirrorMaker's checkpoints are read for comparison only; a read that fails (the topic's
    leader down, a transaction left open) must not fail the translation, which never uses them."""
    from typing import Any, cast

    from kafkaops.errors import UnreachableError
    from kafkaops.steps.offsets import _checkpoints

    class Unreadable:
        def checkpoints(self, source_alias: str, group: str) -> dict[tuple[str, int], int]:
            raise UnreachableError(f"Kafka did not answer a read of {source_alias}.checkpoints.internal")

    class Readable:
        def checkpoints(self, source_alias: str, group: str) -> dict[tuple[str, int], int]:
            return {("eqiad.test.event", 0): 41}

    found, unread = _checkpoints(cast(Any, Unreadable()), "eqiad", "g")
    assert found == {} and unread.startswith("MirrorMaker's checkpoints not read: Kafka did not answer"), unread
    assert _checkpoints(cast(Any, Readable()), "eqiad", "g") == ({("eqiad.test.event", 0): 41}, "")
