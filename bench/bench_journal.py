"""Journal overhead per step, fsync included. Target: <= 5 ms per step.

A step that applies something journals ``step_observed`` (not fsynced: a read-only fact), then
``step_applying``, ``step_applied`` and ``step_verified`` (each fsynced). This measures a full
engine run of no-op-cost steps (the runner's own overhead: journal + audit file sink, both fsynced) and
the raw journal append cost, in a temporary directory on the same filesystem as ``$TMPDIR``.

Usage: python bench/bench_journal.py [-n 200] [--dir PATH]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kafkaops.engine.audit import AuditLog, FileSink
from kafkaops.engine.binding import bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.engine.lock import FileLockBackend, LockBackend
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, isolated_registry, register_step

TARGET_MS = 5.0


class Flip(StepBase):
    """Set a key in a dict (always needs applying: the bench starts from an empty dict)."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({"v": ctx.env.get(self.params["key"])}, "")

    def plan(self, obs: Observation) -> Action | Noop:
        return Noop("set") if obs.data["v"] else Action(f"set {self.params['key']}")

    def apply(self, ctx: Any, action: Action) -> None:
        ctx.env[self.params["key"]] = True


class BenchWorld(dict[str, bool]):
    """The keys the steps flip; as the run's environment: the bench's file lock, nothing to journal as its
    identity, nothing to sample."""

    lock_label = ""

    def __init__(self, lock: LockBackend) -> None:
        super().__init__()
        self.lock = lock

    def identity(self) -> dict[str, Any]:
        return {}

    def run_sampler(self, run_dir: Path) -> None:
        return None


def bench_runner(n: int, base: Path, audit: bool) -> float:
    with isolated_registry():
        register_step("bench.flip", Flip, [Param("key", required=True)])
        rb = parse_runbook(
            {"name": "bench", "summary": "s", "steps": [{"bench.flip": {"key": f"k{i}"}} for i in range(n)]}
        )
        bound = bind_runbook(rb, cluster="bench")
        home = Path(tempfile.mkdtemp(dir=base))
        runner = Runner(
            home=home,
            audit=AuditLog([FileSink(home / "audit.log")] if audit else []),
            handle_sigint=False,
        )
        world = BenchWorld(FileLockBackend(home / "locks"))
        t0 = time.perf_counter()
        runner.start(bound, env=world, operator="bench@host", reason="bench")
        return (time.perf_counter() - t0) / n * 1000


def bench_append(n: int, base: Path, sync: bool) -> list[float]:
    home = Path(tempfile.mkdtemp(dir=base))
    j = Journal.create("bench", home)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        j.append("step_applied", sync=sync, target="h", step=i, kind="bench.flip")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--dir", type=Path, default=None, help="filesystem to measure (default $TMPDIR)")
    args = ap.parse_args()
    base = args.dir or Path(tempfile.gettempdir())
    synced = bench_append(args.n, base, True)
    unsynced = bench_append(args.n, base, False)
    print(
        f"journal append + fsync:   median {statistics.median(synced):.3f} ms  "
        f"p95 {sorted(synced)[int(len(synced) * 0.95)]:.3f} ms"
    )
    print(f"journal append, no fsync: median {statistics.median(unsynced):.3f} ms")
    eng = bench_runner(args.n, base, audit=False)
    full = bench_runner(args.n, base, audit=True)
    for label, ms in (("engine per step (journal only)", eng), ("engine per step (journal + audit)", full)):
        verdict = "OK" if ms <= TARGET_MS else "OVER TARGET"
        print(f"{label:36s} {ms:.3f} ms  (target {TARGET_MS:.0f} ms) {verdict}")


if __name__ == "__main__":
    main()
