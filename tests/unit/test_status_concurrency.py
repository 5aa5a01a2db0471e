"""``kafkaops status`` asks its questions at once, and waits for each no longer than its bound (issue 47).

An operator runs status before and after every step: its latency must be the slowest question's, not the
sum (Kafka, etcd's pools, Alertmanager), and a slow Alertmanager or etcd must not hold the verdict — it is
shown as unknown and named in ``timed_out``. Fakes stand in for every system (no lab): each records when
it was asked and when it answered, so the assertions are about overlap, not about tight timings.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kafkaops.health import status as status_mod
from kafkaops.inventory import load_inventory
from kafkaops.model import ClusterSnapshot, PartitionState

REPO = Path(__file__).resolve().parents[2]
SLOW = 0.3  # each fake system's answer time


@pytest.fixture
def lab() -> Any:
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    assert cluster.conftool_config and cluster.monitoring and cluster.monitoring.alertmanager  # all three asked
    return cluster


class _Admin:
    """Kafka: metadata that takes SLOW seconds, every partition in sync."""

    def __init__(self, spans: dict[str, tuple[float, float]]) -> None:
        self.spans = spans

    def snapshot(self, *, with_configs: bool = True) -> ClusterSnapshot:
        start = time.monotonic()
        time.sleep(SLOW)
        parts = tuple(PartitionState("t", i, 1001, (1001, 1002, 1003), (1001, 1002, 1003)) for i in range(3))
        self.spans["kafka"] = (start, time.monotonic())
        return ClusterSnapshot(cluster="lab", taken_at=0.0, brokers=(1001, 1002, 1003), controller=1002,
                               partitions=parts, topics={})

    def with_configs(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        return snap


def _fakes(monkeypatch: pytest.MonkeyPatch, *, pools_wait: threading.Event | None = None,
           alerts_wait: threading.Event | None = None) -> dict[str, tuple[float, float]]:
    """Kafka, pools and alerts faked, each taking SLOW seconds (or until its event is set); {name: (start, end)}."""
    from kafkaops.systems.kafka import KafkaAdmin

    spans: dict[str, tuple[float, float]] = {}

    def pools(cluster: Any) -> tuple[dict[str, Any], str]:
        start = time.monotonic()
        if pools_wait is not None:
            pools_wait.wait(30)
        else:
            time.sleep(SLOW)
        spans["pools"] = (start, time.monotonic())
        return {}, ""

    def alerts(cluster: Any) -> dict[str, Any]:
        start = time.monotonic()
        if alerts_wait is not None:
            alerts_wait.wait(30)
        else:
            time.sleep(SLOW)
        spans["alerts"] = (start, time.monotonic())
        return {"alertmanager": cluster.monitoring.alertmanager, "error": "", "firing": [], "silenced": [],
                "silences": []}

    monkeypatch.setattr(KafkaAdmin, "look", classmethod(lambda cls, c, timeout=5.0: _Admin(spans)))
    monkeypatch.setattr(status_mod, "_pool_states", pools)
    monkeypatch.setattr(status_mod, "alerts_state", alerts)
    return spans


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_kafka_pools_and_alerts_are_asked_at_once(monkeypatch: pytest.MonkeyPatch, lab: Any) -> None:
    spans = _fakes(monkeypatch)
    start = time.monotonic()
    data = status_mod.collect(lab)
    took = time.monotonic() - start
    assert set(spans) == {"kafka", "pools", "alerts"}
    # Each question was being answered while each other one was: none waited for another to finish.
    for a, b in (("kafka", "pools"), ("kafka", "alerts"), ("pools", "alerts")):
        assert _overlap(spans[a], spans[b]), (a, b, spans)
    assert took < 3 * SLOW, took  # the sum would be 0.9 s; at once ~0.3 s (generous: a loaded machine)
    assert data["healthy"] and "timed_out" not in data and data["alerts"]["error"] == ""


def test_a_question_past_its_bound_is_shown_as_timed_out_not_waited_for(monkeypatch: pytest.MonkeyPatch,
                                                                         lab: Any) -> None:
    """Alertmanager and etcd that never answer: the verdict comes after their bounds, not after them."""
    from kafkaops.cli.status import _notes

    hung = threading.Event()
    _fakes(monkeypatch, pools_wait=hung, alerts_wait=hung)
    monkeypatch.setitem(status_mod.BOUNDS, "pools", 0.5)
    monkeypatch.setitem(status_mod.BOUNDS, "alerts", 0.7)
    try:
        start = time.monotonic()
        data = status_mod.collect(lab)
        took = time.monotonic() - start
    finally:
        hung.set()  # the left-behind threads finish (daemons: they would not hold the process anyway)
    assert took < 10, took  # the fakes hang for 30 s: bounded, not waited for
    assert data["timed_out"] == ["pools", "alerts"]
    assert "did not answer within 0.7s" in data["alerts"]["error"]
    assert data["alerts"]["firing"] == [] and data["alerts"]["alertmanager"] == lab.monitoring.alertmanager
    assert "did not answer within 0.5s" in data["pool_error"]
    assert all(b["pooled"] == "unknown" for b in data["brokers"])
    # Shown, as any unread system is: the verdict stays Kafka's (alerts and pools are shown, not judged).
    notes = dict(_notes(data))
    assert "did not answer" in notes["alerts unknown"] and "did not answer" in notes["pool state unavailable"]
    assert data["healthy"]


def test_a_question_that_fails_is_not_swallowed(monkeypatch: pytest.MonkeyPatch, lab: Any) -> None:
    """A bug in a question (not a system's refusal, which each question turns into its own error) still
    surfaces: it is re-raised on the caller's thread, never mistaken for a timeout."""
    _fakes(monkeypatch)

    def broken(cluster: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(status_mod, "alerts_state", broken)
    with pytest.raises(KeyError, match="a bug"):
        status_mod.collect(lab)
