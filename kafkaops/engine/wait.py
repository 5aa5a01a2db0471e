"""Gate on observed state, not on fixed sleeps.

Fixed sleeps in rolling restarts were either wasteful or unsafe (WMF T346741, T229003): the broker was
not back in the ISR yet, or it had been for minutes. Every wait in kafkaops is ``wait_until``: poll a
predicate every ``interval`` until it holds continuously for ``stable_for`` seconds (a flapping ISR must
not pass the gate on one lucky sample), or raise :class:`~kafkaops.errors.WaitTimeout` saying what it
waited for and the last value it saw. A progress callback reports what is being waited for, the current
value and the elapsed time, so a 20-minute log recovery shows progress instead of silence.

The clock is injectable so tests run a 30-minute wait in microseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kafkaops.errors import Interrupted, WaitTimeout


class Clock(Protocol):
    """Monotonic time plus a sleeper; :class:`SystemClock` in production, :class:`FakeClock` in tests."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock whose ``sleep`` just advances time; records every sleep for assertions."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class WaitProgress:
    """One poll of a wait, for progress output."""

    what: str
    ok: bool
    value: Any
    elapsed: float
    timeout: float
    stable_for: float
    stable_elapsed: float  # how long the predicate has held continuously (0 when it does not hold)

    def line(self) -> str:
        state = (
            f"holding {self.stable_elapsed:.0f}/{self.stable_for:.0f}s"
            if self.ok and self.stable_for
            else ("ok" if self.ok else "waiting")
        )
        return f"{self.what}: {self.value!r} ({state}, {self.elapsed:.0f}s of {self.timeout:.0f}s)"


def _evaluate(result: Any) -> tuple[bool, Any]:
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        return result[0], result[1]
    return bool(result), result


def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 1.0,
    stable_for: float = 0.0,
    what: str = "condition",
    clock: Clock | None = None,
    progress: Callable[[WaitProgress], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    fast: float | None = None,
) -> Any:
    """Poll ``predicate`` until it holds for ``stable_for`` seconds in a row, or time out.

    Args:
        predicate: Returns a bool, or ``(ok, value)`` so progress and errors can show the value.
        timeout: Seconds before giving up.
        interval: Seconds between polls (the longest, when ``fast`` is given).
        stable_for: The predicate must hold continuously this long; any false poll resets it.
        what: What is being waited for, for progress and the timeout message.
        clock: Time source and sleeper (defaults to the real clock).
        progress: Called after every poll with a :class:`WaitProgress`.
        cancelled: Polled between polls; when it returns true the wait stops with ``Interrupted``
            (the runner wires the operator's Ctrl-C here; a wait is read-only, so stopping it is safe).
        fast: Adaptive polling for cheap predicates: poll every ``fast`` seconds at first and whenever the
            value just changed (a change is under way: a broker rejoining ISR after ISR), doubling the
            pause after each unchanged poll up to ``interval``. A wait then ends within ``fast`` of the
            moment its condition holds when the state is moving, instead of half an interval later on
            average — seconds over a roll's many waits — without polling hard through a long recovery.

    Returns:
        The value of the last poll.

    Raises:
        WaitTimeout: The predicate did not hold long enough before ``timeout``.
        Interrupted: ``cancelled()`` became true.
    """
    clk: Clock = clock or SystemClock()
    start = clk.monotonic()
    stable_since: float | None = None
    value: Any = None
    pause = fast if fast is not None else interval
    last: tuple[bool, Any] | None = None
    while True:
        seen = _evaluate(predicate())
        ok, value = seen
        if fast is not None:
            pause = fast if seen != last else min(pause * 2, interval)
        last = seen
        now = clk.monotonic()
        elapsed = now - start
        if ok:
            if stable_since is None:
                stable_since = now
        else:
            stable_since = None
        held = (now - stable_since) if stable_since is not None else 0.0
        if progress is not None:
            progress(WaitProgress(what, ok, value, elapsed, timeout, stable_for, held))
        if ok and held >= stable_for:
            return value
        if elapsed >= timeout:
            raise WaitTimeout(
                f"timed out after {elapsed:.0f}s waiting for {what} (last value: {value!r})",
                hint="the step can be resumed once the condition holds; raise the timeout if it is slow "
                "but progressing",
            )
        if cancelled is not None and cancelled():
            raise Interrupted(f"wait for {what} interrupted by the operator")
        # Do not oversleep the deadline nor the end of the stability window.
        remaining = timeout - elapsed
        step = min(pause, remaining) if remaining > 0 else pause
        if ok and stable_since is not None:
            step = min(step, max(stable_for - held, 0.0)) or step
        clk.sleep(step)
