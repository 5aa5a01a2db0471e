"""A wait's progress: on a terminal a live status at every poll (cleared at the end); for logs one line
per change of state, at most one a second — never a line per poll, never a carriage return."""

from __future__ import annotations

import time

from kafkaops.engine.context import RunContext
from kafkaops.stepkit.common import wait


def test_one_line_per_change_of_state_and_a_live_status_per_poll() -> None:
    lines: list[str] = []
    statuses: list[str | None] = []
    ctx = RunContext(run_id="", operator="o", reason="r", task=None, target="kafka1001", params={}, env=None,
                     progress=lines.append, status=statuses.append)
    start = time.monotonic()

    def predicate() -> tuple[bool, str]:
        t = time.monotonic() - start
        if t < 1.2:
            return False, "in sync in 1/3 partitions"
        if t < 1.5:
            return False, "in sync in 2/3 partitions"
        return True, "in sync in 3/3 partitions"

    wait(ctx, predicate, what="broker 1001 back in every ISR", timeout=10, interval=0.05)
    assert [line.split(": ", 2)[2].split(" (")[0] for line in lines] == [
        "'in sync in 1/3 partitions'", "'in sync in 2/3 partitions'", "'in sync in 3/3 partitions'"], lines
    assert all(line.startswith("  kafka1001: broker 1001 back in every ISR: ") for line in lines)
    assert not any("\r" in line for line in lines)
    polls = [s for s in statuses if s is not None]
    assert len(polls) > 10 and statuses[-1] is None  # redrawn at every poll, cleared when the wait ends
    assert "(waiting, " in polls[0] and "s of 10s)" in polls[0]


def test_the_live_status_is_drawn_on_a_terminal_and_gone_after() -> None:
    import io

    from rich.console import Console

    from kafkaops.cli.common import LiveStatus

    out = io.StringIO()
    live = LiveStatus(Console(file=out, force_terminal=True, width=100))
    live("kafka1001: broker 1001 back in every ISR: 'in sync in 1/3' (waiting, 1s of 60s)")
    live("kafka1001: broker 1001 back in every ISR: 'in sync in [red]2/3' (waiting, 2s of 60s)")
    assert live._status is not None
    live(None)
    assert live._status is None
    live(None)  # clearing twice is harmless
    assert "in sync in [red]2/3" in out.getvalue()  # text from a host is shown literally, never as markup
