"""The lab load's reader: it must read every partition of its topic, or say why it cannot.

CI once saw a load report every acked message lost with 0 consumed: the reader had assigned the empty
partition list a broker gives for a topic it does not know yet. These tests drive the reader's metadata
step with recorded answers (librdkafka's own TopicMetadata shapes, no broker needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkaops.errors import UnreachableError
from kafkaops_lab.load import _Reader


@dataclass
class _Topic:
    partitions: dict[int, Any]
    error: Any = None


@dataclass
class _Metadata:
    topics: dict[str, _Topic]


@dataclass
class _Consumer:
    answers: list[_Metadata]
    asked: int = 0
    seen: list[str] = field(default_factory=list)

    def list_topics(self, topic: str, timeout: float) -> _Metadata:
        self.seen.append(topic)
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return answer


def _reader(consumer: _Consumer) -> _Reader:
    reader = object.__new__(_Reader)
    reader.consumer = consumer  # type: ignore[assignment]
    reader.errors = []
    return reader


def test_a_topic_the_broker_does_not_know_yet_is_asked_again_not_assigned_empty(monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    monkeypatch.setattr("kafkaops_lab.load.time.sleep", lambda _s: None)
    consumer = _Consumer([
        _Metadata({"lab.load": _Topic({}, error="UNKNOWN_TOPIC_OR_PART")}),
        _Metadata({}),
        _Metadata({"lab.load": _Topic({2: object(), 0: object(), 1: object()})}),
    ])
    assert _reader(consumer)._partitions("lab.load") == [0, 1, 2]
    assert consumer.asked == 3


def test_a_topic_that_never_appears_is_an_unreachable_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafkaops_lab.load.time.sleep", lambda _s: None)
    consumer = _Consumer([_Metadata({"lab.load": _Topic({}, error="UNKNOWN_TOPIC_OR_PART")})])
    with pytest.raises(UnreachableError, match=r"lab\.load.*UNKNOWN_TOPIC_OR_PART"):
        _reader(consumer)._partitions("lab.load", timeout=0)


def test_the_reader_keeps_each_distinct_error_once_and_at_most_twenty() -> None:
    reader = _reader(_Consumer([]))
    for _ in range(3):
        reader._note("KafkaError{code=NOT_LEADER_OR_FOLLOWER}")
    for n in range(40):
        reader._note(f"error {n}")
    assert len(reader.errors) == 20
    assert sum("NOT_LEADER_OR_FOLLOWER" in e for e in reader.errors) == 1
