"""Where the lifecycle runbooks move leadership (issue 46, T373189's follow-up: leadership off first, no
preferred election mid-way): a decommission elects at the demote and once more after its moves — when
every new replica is in sync, before the emptiness check and the stop — and nowhere between."""

from __future__ import annotations

from pathlib import Path

from kafkaops.catalog import load_plugins
from kafkaops.engine.runbook import load_runbook

REPO = Path(__file__).resolve().parents[2]
ELECTS = ("kafka.preferred_election", "kafka.cluster_whole")


def test_a_decommission_elects_after_the_demote_and_once_after_its_moves_before_the_stop() -> None:
    load_plugins()
    kinds = [s.kind for s in load_runbook(REPO / "runbooks" / "broker-decommission.yaml").steps]
    demote = kinds.index("placement.reassign")
    moves = len(kinds) - 1 - kinds[::-1].index("placement.reassign")
    elections = [i for i, k in enumerate(kinds) if k in ELECTS]
    assert elections == [demote + 1, moves + 1], kinds  # one right after each reassignment, none between
    assert kinds[moves + 1] == "kafka.cluster_whole"  # waits for no URP (every new replica in sync) first
    assert moves + 1 < kinds.index("kafka.verify_empty") < kinds.index("kafka.stop_broker")


def test_an_add_elects_once_after_its_moves() -> None:
    load_plugins()
    kinds = [s.kind for s in load_runbook(REPO / "runbooks" / "broker-add.yaml").steps]
    assert [k for k in kinds if k in ELECTS] == ["kafka.cluster_whole"]
    assert kinds.index("placement.reassign") + 1 == kinds.index("kafka.cluster_whole")
