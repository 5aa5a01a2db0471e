"""The rolling upgrade's decisions, from observations (issue 33): what ``kafka-features describe`` says,
which nodes the roll still installs the release on, and that ``metadata.version`` is raised only once every
node runs the release — and never by the roll itself. The lab proves the upgrade end to end
(tests/lab/test_migrate_to_kraft_on_lab.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import SafetyRefusal
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.features import parse_features, parse_mapping_level, release_of

#: ``kafka-features ... describe`` of the migrated lab cluster, recorded 2026-11-27: Kafka 4.3.1's tool (padded
#: with spaces) and 3.9.1's asking the same 4.3.1 nodes (tab-separated; a level it has no name for:
#: ``UNKNOWN 30``).
RECORDED = Path(__file__).parent / "recorded"
DESCRIBE_4 = (RECORDED / "kafka-features-describe-4.3.1.txt").read_text()
DESCRIBE_3 = (RECORDED / "kafka-features-describe-3.9.1-tool.txt").read_text()


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params if p.default is not None}, **params})


@pytest.mark.parametrize("text", [DESCRIBE_4, DESCRIBE_3])
def test_the_metadata_version_is_read_from_kafkas_own_output(text: str) -> None:
    found = parse_features(text)
    assert found["metadata.version"].finalized == "3.9-IV0"
    assert release_of(found["metadata.version"].finalized) == (3, 9)
    assert found["kraft.version"].supported_max == "1"


def test_the_level_of_a_release_is_read_from_the_version_mapping() -> None:
    assert parse_mapping_level("metadata.version=30 (4.3)\nkraft.version=1\ngroup.version=1\n") == 30
    with pytest.raises(MalformedAnswer):
        parse_mapping_level("metadata.version=30; reboot (4.3)\n")


@pytest.mark.parametrize("text", [
    "Feature: metadata.version\tFinalizedVersionLevel: 3.9-IV0; rm -rf /\tEpoch: 1",
    "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: 3",
    "nothing here",
])
def test_anything_else_a_node_prints_is_refused(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_features(text)


def test_the_gate_refuses_zookeeper_mode_and_a_downgrade_and_names_the_nodes_left() -> None:
    gate = _step("upgrade.gate", version="4.3.1")
    with pytest.raises(SafetyRefusal, match="not finalized") as refused:
        gate.plan(Observation({"versions": {"a": "3.9.1"}, "want": "4.3.1",
                               "kraft": "lab's migration to KRaft is in phase dual-write, not finalized"}))
    assert "migrate-to-kraft" in (refused.value.hint or "")
    with pytest.raises(SafetyRefusal, match=r"b already run a release newer than 4\.3\.1"):
        gate.plan(Observation({"versions": {"a": "3.9.1", "b": "4.10.0"}, "want": "4.3.1", "kraft": None}))
    ok = gate.plan(Observation({"versions": {"a": "4.3.1", "b": "3.9.1"}, "want": "4.3.1", "kraft": None}))
    assert isinstance(ok, Noop) and "1 of 2 nodes run 4.3.1; the roll installs it on b" in ok.reason


def test_install_changes_only_a_node_on_another_release() -> None:
    step = _step("upgrade.install", version="4.3.1")
    assert isinstance(step.plan(Observation({"host": "h", "now": "4.3.1", "want": "4.3.1", "command": "i"})), Noop)
    act = step.plan(Observation({"host": "h", "now": "3.9.1", "want": "4.3.1", "command": "i 4.3.1"}))
    assert isinstance(act, Action) and act.commands == ("on h: i 4.3.1",) and "install 3.9.1 again" in act.rollback


def test_metadata_version_is_raised_only_once_every_node_runs_the_release() -> None:
    step = _step("upgrade.metadata_version", version="4.3.1")
    with pytest.raises(SafetyRefusal, match=r"b do not run Kafka 4\.3\.1"):
        step.plan(Observation({"done": False, "want": "4.3.1", "level": "3.9-IV0",
                               "versions": {"a": "4.3.1", "b": "3.9.1"}}))
    act = step.plan(Observation({"done": False, "want": "4.3.1", "level": "3.9-IV0",
                                 "versions": {"a": "4.3.1", "b": "4.3.1"}}))
    assert isinstance(act, Action) and "version-mapping --release-version 4.3" in act.commands[0]
    assert "upgrade --feature metadata.version=N" in act.commands[1]
    assert isinstance(step.plan(Observation({"done": False, "want": "4.3.1", "level": "4.3-IV0",
                                             "versions": {}})), Noop)


def test_a_version_that_is_not_a_release_is_refused_when_bound() -> None:
    install = get_step_kind("upgrade.install")
    assert install is not None and install.check is not None
    assert install.check({"version": "4.3.1"}) is None
    assert "not a Kafka release version" in (install.check({"version": "4.3.1; reboot"}) or "")
    assert "not a Kafka release version" in (install.check({"version": "latest"}) or "")
