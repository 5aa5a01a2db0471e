"""wait_until with a fake clock: timeouts, stability windows, progress, cancellation."""

from __future__ import annotations

import pytest

from kafkaops.engine.wait import FakeClock, WaitProgress, wait_until
from kafkaops.errors import Interrupted, WaitTimeout


def test_returns_value_as_soon_as_it_holds() -> None:
    clock = FakeClock()
    values = iter([3, 2, 0])

    def syn_rate() -> tuple[bool, int]:
        v = next(values)
        return v == 0, v

    assert wait_until(syn_rate, timeout=60, interval=5, clock=clock, what="new SYNs") == 0
    assert clock.now == 10 and clock.sleeps == [5, 5]


def test_timeout_names_what_and_last_value() -> None:
    clock = FakeClock()
    with pytest.raises(WaitTimeout) as info:
        wait_until(lambda: (False, 7), timeout=30, interval=10, clock=clock, what="ISR of kafka1001")
    assert "ISR of kafka1001" in str(info.value) and "last value: 7" in str(info.value)
    assert clock.now == 30  # never sleeps past the deadline
    assert info.value.exit_code == 10


def test_stable_for_resets_on_a_flap() -> None:
    clock = FakeClock()
    # holds at t=0,5 then flaps at t=10, holds again from t=15
    pattern = {0: True, 5: True, 10: False}

    def pred() -> bool:
        return pattern.get(int(clock.now), True)

    wait_until(pred, timeout=100, interval=5, stable_for=20, clock=clock)
    assert clock.now == 35  # 15 + 20: the window restarted after the flap


def test_stable_for_times_out_if_it_keeps_flapping() -> None:
    clock = FakeClock()
    with pytest.raises(WaitTimeout):
        wait_until(lambda: int(clock.now) % 10 != 5, timeout=60, interval=5, stable_for=15, clock=clock)


def test_progress_reports_value_and_elapsed() -> None:
    clock = FakeClock()
    seen: list[WaitProgress] = []
    n = iter(range(3, -1, -1))
    wait_until(
        lambda: (lambda v: (v == 0, v))(next(n)),
        timeout=60,
        interval=2,
        clock=clock,
        what="URP",
        progress=seen.append,
    )
    assert [p.value for p in seen] == [3, 2, 1, 0]
    assert [p.elapsed for p in seen] == [0, 2, 4, 6]
    assert seen[0].line() == "URP: 3 (waiting, 0s of 60s)"


def test_cancelled_interrupts_between_polls() -> None:
    clock = FakeClock()
    with pytest.raises(Interrupted):
        wait_until(lambda: False, timeout=600, interval=1, clock=clock, cancelled=lambda: clock.now >= 3)
    assert clock.now == 3


def test_adaptive_polls_back_off_while_nothing_moves_and_go_fast_when_it_does() -> None:
    clock = FakeClock()
    missing = iter([3, 3, 3, 3, 3, 2, 1, 0])  # partitions without the broker in their ISR, poll by poll

    def in_sync() -> tuple[bool, int]:
        n = next(missing)
        return n == 0, n

    assert wait_until(in_sync, timeout=100, interval=1.0, fast=0.1, clock=clock) == 0
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8, 1.0, 0.1, 0.1]  # doubling to the interval; fast once it moves


def test_without_fast_the_interval_is_fixed() -> None:
    clock = FakeClock()
    values = iter([2, 2, 1, 0])
    wait_until(lambda: (lambda n: (n == 0, n))(next(values)), timeout=100, interval=1.0, clock=clock)
    assert clock.sleeps == [1.0, 1.0, 1.0]
