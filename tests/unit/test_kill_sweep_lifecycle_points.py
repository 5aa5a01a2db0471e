"""The lifecycle kill sweep's own logic (bench/kill_sweep_lifecycle.py, issue 46): where it kills, and how it
reads "each change done once" from a journal — a resumed reassignment numbers its batches from 1 again, so
the partitions are compared, not the batch numbers."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from kill_sweep_lifecycle import once_per_journal, points_of  # noqa: E402 - bench/ is not a package


def _steps(runbook: str) -> int:
    import yaml

    return len(yaml.safe_load((REPO / "runbooks" / f"{runbook}.yaml").read_text())["steps"])


def test_every_step_end_and_each_reassignment_batch_is_a_point_batches_first() -> None:
    add, retire = points_of("broker-add"), points_of("broker-decommission")
    assert len(add) == _steps("broker-add") + 1 and len(retire) == _steps("broker-decommission") + 2
    assert [p.label for p in retire[:2]] == [
        "inside step 5 placement.reassign, batch 1 (1 s after submitted)",
        "inside step 8 placement.reassign, batch 1 (1 s after submitted)"]
    assert retire[2].hit({"type": "step_verified", "step": 1, "kind": "env.reachable"})
    assert not retire[2].hit({"type": "step_skipped", "step": 1})
    assert retire[0].delay == 1.0 and retire[0].hit({"type": "event", "event": "batch_submitted", "step": 5,
                                                     "batch": 1})


def _submit(step: int, batch: int, *partitions: str) -> list[dict[str, object]]:
    return [{"type": "event", "event": "batch_submitting", "step": step, "batch": batch,
             "partitions": list(partitions)},
            {"type": "event", "event": "batch_submitted", "step": step, "batch": batch}]


def test_a_resumed_batch_numbering_is_not_a_second_submission_but_a_partition_twice_is() -> None:
    killed = [*_submit(8, 1, "t-0", "t-1"), {"type": "step_applying", "step": 8}]
    resumed = [{"type": "step_applying", "step": 8}, *_submit(8, 1, "t-2"), {"type": "step_applied", "step": 8}]
    assert once_per_journal(killed + resumed) == []
    assert once_per_journal(killed + _submit(8, 1, "t-1")) == ["step 8: t-1 submitted more than once"]
    # submitting journaled, the kill before Kafka took it: not a submission
    assert once_per_journal(_submit(8, 1, "t-0")[:1] + _submit(8, 1, "t-0")) == []
    assert once_per_journal([{"type": "step_applied", "step": 4}] * 2) == ["step 4 applied 2 times"]
