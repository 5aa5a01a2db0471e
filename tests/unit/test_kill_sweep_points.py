"""Where the kill sweep kills (bench/kill_sweep.py, issue 28 item 6): its points must spread over every host
of the roll and every kind of point (a step's intent, after its effect, inside its wait), not pile onto
the first host as the first 24-point sweep did (kafka1001 22 times, kafka1003 never).

The journal is a real one, recorded from `rolling-reboot lab-bench --syn-window 2s --stable-for 2s
--no-scan` (the sweep's reference roll) and cut down to the fields a kill point is chosen from.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from kill_sweep import choose_points  # noqa: E402 - bench/ is not a package

JOURNAL = REPO / "tests" / "fixtures" / "journals" / "rolling-reboot-lab.jsonl"
RECORDS: list[dict[str, Any]] = [json.loads(line) for line in JOURNAL.read_text().splitlines()]
HOSTS = ["kafka1001", "kafka1002", "kafka1003"]


def _where(point: Any) -> tuple[str, str, str]:
    """(host, kind of point, step kind) of a point, read from the journal record it kills after — not
    from what the point says about itself."""
    r = RECORDS[point.after - 1]
    if point.delay:
        kind = "inside-wait"
    elif r["type"] == "step_applying" or r.get("event", "").endswith("_intent"):
        kind = "intent"
    else:
        kind = "effect"
    return r["target"], kind, r["kind"]


def test_the_recorded_roll_is_a_three_host_roll() -> None:
    assert [r["target"] for r in RECORDS if r["type"] == "target_started"] == HOSTS


@pytest.mark.parametrize("n", [3, 6, 8, 20, 24, 40])
def test_points_cover_every_host_and_every_kind_of_point_evenly(n: int) -> None:
    points = choose_points(RECORDS, n)
    assert len(points) == n
    where = [_where(p) for p in points]
    per_host = Counter(host for host, _, _ in where)
    assert set(per_host) == set(HOSTS), per_host
    assert max(per_host.values()) <= n // len(HOSTS) + 1, per_host
    assert {kind for _, kind, _ in where} == {"intent", "effect", "inside-wait"}, where
    assert len({(p.after, p.delay) for p in points}) == n  # no point twice


def test_a_full_sweep_hits_every_step_that_acts_and_every_kind_of_point_on_every_host() -> None:
    where = [_where(p) for p in choose_points(RECORDS, 24)]
    assert {(host, kind) for host, kind, _ in where} == {(h, k) for h in HOSTS
                                                          for k in ("intent", "effect", "inside-wait")}
    acting = {r["kind"] for r in RECORDS if r["type"] == "step_applying"}
    assert len(acting) == 14
    assert {step for _, _, step in where} == acting, Counter(step for _, _, step in where)
    # the side effects the sweep counts: each at its intent and after its effect, the stop and the
    # reboot also inside
    hit = {(kind, step) for _, kind, step in where}
    for step in ("conftool.depool", "kafka.stop_broker", "host.reboot", "conftool.repool"):
        assert {("intent", step), ("effect", step)} <= hit, step
    assert {("inside-wait", "kafka.stop_broker"), ("inside-wait", "host.reboot")} <= hit


def test_points_are_chosen_deterministically_in_journal_order() -> None:
    points = choose_points(RECORDS, 24)
    assert points == choose_points(RECORDS, 24)
    assert [(p.after, p.delay) for p in points] == sorted((p.after, p.delay) for p in points)


def test_asking_for_more_points_than_the_journal_has_gives_each_once() -> None:
    everything = choose_points(RECORDS, 10_000)
    assert len({(p.after, p.delay) for p in everything}) == len(everything)
    assert choose_points(RECORDS, len(everything)) == everything


def test_the_bench_lab_inventory_is_the_lab_on_other_addresses_in_its_own_directory() -> None:
    """bench/lab-bench.yaml is inventory/lab.yaml moved to 127.0.80.0/24 and its own lab directory
    (so a sweep runs beside the default lab); a change to the lab inventory must reach it too."""
    lab = (REPO / "inventory" / "lab.yaml").read_text()
    bench = (REPO / "bench" / "lab-bench.yaml").read_text()
    body = lab.split("\ncluster: lab\n", 1)[1]
    want = body.replace("127.0.10.", "127.0.80.").replace(
        "${KAFKAOPS_LAB_DIR:-~/.local/state/kafkaops/lab}",
        "${KAFKAOPS_LAB_DIR_LAB_BENCH:-~/.local/state/kafkaops/lab-bench}")
    assert bench.split("\ncluster: lab-bench\n", 1)[1] == want
    assert not re.search(r"127\.0\.10\.|KAFKAOPS_LAB_DIR:", bench)


def test_a_bench_result_never_overwrites_an_earlier_one_of_the_same_day(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    import raw_result

    monkeypatch.setattr(raw_result, "RESULTS", tmp_path)
    day = dt.date(2026, 11, 26)
    first = raw_result.default_path("kill-sweep", day)
    raw_result.write(first, raw_result.header("kill-sweep", {"points": 3}, Path("bench/lab-bench.yaml")))
    second = raw_result.default_path("kill-sweep", day)
    assert (first.name, second.name) == ("kill-sweep-2026-11-26.json", "kill-sweep-2026-11-26-2.json")
    saved = json.loads(first.read_text())
    assert saved["args"] == {"points": 3} and saved["complete"] is False
    assert saved["machine"]["nproc"] and saved["commit"]
