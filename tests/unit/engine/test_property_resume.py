"""Property: crash anywhere, resume, and the world ends exactly as an uninterrupted run leaves it.

Random runbooks mix idempotent ``test.set`` steps with non-idempotent ``test.raise_to`` steps (each
apply *adds* to a counter). A crash is injected as a BaseException (nothing catches it, nothing is
journaled: like SIGKILL) at random hook points: before apply (intent journaled), after apply but before
the ``step_applied`` record, after that record, after verify. Each resume uses a fresh Runner over the
same journal directory. Invariants: same final world, and every apply (in particular every
non-idempotent one) ran exactly as many times as the uninterrupted run needed it.
"""

from __future__ import annotations

import copy
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from engine_fakes import World
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaops.engine.audit import AuditLog, MemorySink
from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.lock import FileLockBackend
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import RetryPolicy, Runner
from kafkaops.engine.wait import FakeClock


class Crash(BaseException):
    """Simulated process death."""


set_step = st.builds(
    lambda k, v: {"test.set": {"key": f"k{k}", "value": v}}, st.integers(0, 2), st.integers(0, 3)
)
raise_step = st.builds(
    lambda k, t: {"test.raise_to": {"key": f"c{k}", "target": t}}, st.integers(0, 1), st.integers(0, 6)
)
runbooks = st.lists(st.one_of(set_step, raise_step), min_size=1, max_size=7)
initial_worlds = st.fixed_dictionaries(
    {},
    optional={
        "k0": st.integers(0, 3),
        "k1": st.integers(0, 3),
        "c0": st.integers(0, 4),
        "c1": st.integers(0, 4),
    },
)


def _bound(steps: list[dict[str, Any]], ntargets: int) -> BoundRunbook:
    rb = parse_runbook({"name": "prop", "summary": "s", "targets": {"order": "inventory"}, "steps": steps})
    return bind_runbook(rb, cluster="c", targets=[Target(f"h{i}") for i in range(ntargets)])


def _runner(home: Path, hook: Any = None) -> Runner:
    return Runner(
        home=home,
        lock=FileLockBackend(home / "locks"),
        audit=AuditLog([MemorySink()]),
        retry=RetryPolicy(attempts=2, backoff=0),
        clock=FakeClock(),
        hook=hook,
        handle_sigint=False,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=runbooks,
    ntargets=st.integers(1, 2),
    initial=initial_worlds,
    crash_at=st.sets(st.integers(1, 40), max_size=4),
)
def test_crash_anywhere_then_resume_converges(
    steps: list[dict[str, Any]], ntargets: int, initial: dict[str, int], crash_at: set[int]
) -> None:
    bound = _bound(steps, ntargets)

    # Reference: an uninterrupted run.
    ref = World(data=copy.deepcopy(initial))
    with tempfile.TemporaryDirectory() as d:
        _runner(Path(d)).start(bound, env=ref, operator="op@h", reason="ref")

    world = World(data=copy.deepcopy(initial))
    calls = Counter[str]()
    points: list[str] = []

    def hook(point: str, target: str, step: Any) -> None:
        calls["n"] += 1
        if calls["n"] in crash_at:
            points.append(point)
            raise Crash

    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        run_id: str | None = None
        for _ in range(len(crash_at) + 2):
            try:
                if run_id is None:
                    try:
                        _runner(home, hook).start(
                            bound, env=world, operator="op@h", reason="prop", run_id="prop-run"
                        )
                    finally:
                        run_id = "prop-run" if (home / "runs" / "prop-run").exists() else None
                else:
                    _runner(home, hook).resume(run_id, env=world)
                break
            except Crash:
                continue
        else:  # pragma: no cover - the loop always finishes
            raise AssertionError("run never finished")
        assert run_id is not None
        assert not (home / "locks" / "c.lock").exists(), "a finished run must release its lock"

    assert world.data == ref.data, f"crashed at {points}"
    # Each apply, idempotent or not, happened exactly as often as the uninterrupted run needed it.
    assert world.applies == ref.applies, f"crashed at {points}"
    for key, n in world.applies.items():
        if key.startswith("inc:"):
            assert n <= ref.applies[key]
