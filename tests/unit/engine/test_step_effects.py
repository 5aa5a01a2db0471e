"""Guarantees by construction (issue 41.1, 41.2): what a step kind may do is declared once, at registration,
and the runner derives the fence, the precondition, the read-only guard and the renewal of expiring
effects from that declaration — no kind opts in.

The registry test enumerates every built-in kind against the table below: a new kind fails it until
someone decides, in review, what it may do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World

from kafkaops.catalog import load_plugins
from kafkaops.engine.binding import BoundRunbook, Target, bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.engine.lock import FileLockBackend, LockInfo
from kafkaops.engine.runbook import parse_runbook
from kafkaops.engine.runner import Runner
from kafkaops.engine.step import (
    Action,
    Noop,
    Observation,
    Param,
    StepBase,
    isolated_registry,
    register_step,
    step_kinds,
)
from kafkaops.engine.wait import FakeClock
from kafkaops.errors import Interrupted, LockHeldError, RunFailed
from kafkaops.stepkit.common import wait
from kafkaops.systems.guard import ReadOnlyViolation, write

OP = "alice@admin1"

#: Every built-in kind and what it may do. ``disruptive``: takes something out of service, stops, restarts,
#: deletes or rewrites (fenced + precondition); ``change``: any other change (fenced); ``read-only``: waits,
#: gates, checks (writes refused).
EXPECTED: dict[str, str] = {
    "alerts.gate": "read-only",
    "alerts.silence": "change",
    "roll_alerts.silence": "change",
    "alerts.unsilence": "change",
    "roll_alerts.unsilence": "change",
    "canary.confirm": "read-only",
    "conftool.depool": "disruptive",
    "conftool.repool": "change",
    "conftool.pool": "change",
    "deploy.deploy": "disruptive",
    "deploy.rollback": "disruptive",
    "deploy.verify_revision": "read-only",
    "discovery.depool": "disruptive",
    "discovery.pool": "change",
    "discovery.restore": "change",
    "env.reachable": "read-only",
    "failed_events.replay": "change",
    "health.baseline": "read-only",
    "health.post_check": "read-only",
    "host.reboot": "disruptive",
    "kafka.cluster_whole": "change",  # after a rollback it elects the leaders back
    "kafka.preferred_election": "change",
    "kafka.preflight": "change",  # restores the others' preferred leadership before it judges (41.6)
    "kafka.restore_broker": "change",
    "kafka.start_broker": "change",
    "kafka.stop_broker": "disruptive",
    "kafka.verify_leaders": "change",  # elects, then judges
    "kafka.verify_not_leader": "read-only",
    "kafka.verify_leads_nothing": "read-only",
    "kafka.verify_empty": "read-only",
    "kafka.wait_healthy": "read-only",
    "kafka.wait_in_sync": "read-only",
    "kafka.wait_stable": "read-only",
    "kraft.quorum_gate": "read-only",
    "kraft.start_controller": "change",
    "kraft.stop_controller": "disruptive",
    "kraft.unregister_broker": "disruptive",  # a registration deleted: the broker must be fenced, read now
    "kraft.wait_voter_caught_up": "read-only",
    "logs.mark_start": "read-only",
    "logs.scan_kafka": "read-only",
    "metrics.baseline": "read-only",
    "metrics.gate": "read-only",
    "migration.configure": "disruptive",
    "migration.deprovision": "disruptive",
    "migration.format": "disruptive",
    "migration.phase_gate": "read-only",
    "migration.acls_match": "read-only",
    "migration.release_zookeeper": "disruptive",
    "migration.start_controller": "change",
    "migration.stop_controller": "disruptive",
    "migration.wait_phase": "read-only",
    "mirror.wait_caught_up": "read-only",
    "offsets.translate": "disruptive",
    "operator.confirm": "read-only",
    "placement.cancel": "change",
    "placement.preflight": "read-only",
    "placement.reassign": "disruptive",
    "quorum.add_voter": "disruptive",  # the majority grows: gated again right before
    "quorum.format_controller": "disruptive",
    "quorum.healthy": "read-only",
    "quorum.membership_gate": "read-only",
    "quorum.remove_voter": "disruptive",
    "quorum.stop_removed": "disruptive",
    "quorum.wait_observer": "read-only",
    "replace.catch_up": "change",
    "replace.restore": "change",
    "replace.throttle": "change",
    "replace.wait_storage_replaced": "read-only",
    "service.restart": "disruptive",
    "service.scan_log": "read-only",
    "service.verify_health": "read-only",
    "sites.post_check": "read-only",
    "sites.preflight": "read-only",
    "traffic.wait_zero_syns": "read-only",
    "traffic.wait_zero_syns_at_site": "read-only",
    "upgrade.gate": "read-only",
    "upgrade.install": "disruptive",
    "upgrade.metadata_version": "disruptive",
}


def test_every_registered_kind_declares_what_it_may_do() -> None:
    load_plugins()
    kinds = {k: v for k, v in step_kinds().items() if not k.startswith("test.")}
    assert sorted(set(kinds) - set(EXPECTED)) == [], "a new kind: decide its effect and add it to EXPECTED"
    assert sorted(set(EXPECTED) - set(kinds)) == [], "a kind is gone: remove it from EXPECTED"
    wrong = {k: (v.effect, EXPECTED[k]) for k, v in kinds.items() if v.effect != EXPECTED[k]}
    assert wrong == {}
    for name, kind in kinds.items():
        if kind.disruptive:
            assert callable(getattr(kind.factory, "precondition", None)), name
        if kind.lease_until is not None:
            assert kind.lease_until in kinds, f"{name} is released by an unknown kind {kind.lease_until}"
            assert callable(getattr(kind.factory, "renew", None)), name


# --- the engine's rules, on in-memory kinds -------------------------------------------------------------


class Adapter:
    """An adapter with one write, as kafkaops.systems' are."""

    dry_run = False

    def __init__(self, world: World) -> None:
        self.world = world

    @write
    def set(self, key: str, value: Any) -> None:
        self.world.data[key] = value


class Pool(StepBase):
    """A plain change: pool the node (not disruptive, so no precondition: fenced all the same)."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({"pooled": ctx.env.data.get(f"pooled:{ctx.target}", False)})

    def plan(self, obs: Observation) -> Action | Noop:
        return Noop("pooled") if obs.data["pooled"] else Action("pool the node")

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"pool:{ctx.target}"] += 1
        world.data[f"pooled:{ctx.target}"] = True
        if world.on_apply is not None:
            world.on_apply(ctx.target)


class SneakyWait(StepBase):
    """A kind registered read-only whose apply writes through an adapter (the bug the guard catches)."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({})

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("wait", impact="read-only")

    def apply(self, ctx: Any, action: Action) -> None:
        Adapter(ctx.env).set(f"touched:{ctx.target}", True)


class SneakyObserve(Pool):
    """A change kind whose observe writes: observe is read-only for every kind."""

    def observe(self, ctx: Any) -> Observation:
        Adapter(ctx.env).set("observed", True)
        return super().observe(ctx)


class Silence(StepBase):
    """An expiring effect (a silence that ends at ``ends``) released by ``test.unsilence``."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({"ends": ctx.env.data.get(f"silence:{ctx.target}")})

    def plan(self, obs: Observation) -> Action | Noop:
        return Noop("silenced") if obs.data["ends"] else Action("silence for 100 s")

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        Adapter(world).set(f"silence:{ctx.target}", world.clock.now + 100)

    def renew(self, ctx: Any, at: int) -> str:
        world: World = ctx.env
        world.applies[f"renew:{ctx.target}@{at}"] += 1
        ends = world.data.get(f"silence:{ctx.target}") or 0
        if ends - world.clock.now < 50:
            Adapter(world).set(f"silence:{ctx.target}", world.clock.now + 100)  # writes allowed here
            return f"extended (it ended at {ends})"
        return "lasts"


class Unsilence(StepBase):
    def observe(self, ctx: Any) -> Observation:
        return Observation({"ends": ctx.env.data.get(f"silence:{ctx.target}")})

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("end the silence") if obs.data["ends"] else Noop("none")

    def apply(self, ctx: Any, action: Action) -> None:
        ctx.env.data[f"silence:{ctx.target}"] = None


class Stop(Pool):
    """A disruptive kind: stopping requires the silence to last (the world checks it at apply)."""

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("stop")

    def precondition(self, ctx: Any, action: Action) -> str:
        return "safe"

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"stop:{ctx.target}"] += 1
        world.data[f"silenced_at_stop:{ctx.target}"] = (world.data.get(f"silence:{ctx.target}") or 0) > world.clock.now


class LongWait(StepBase):
    """A read-only wait that takes ``seconds`` on the fake clock, polling every 10 s."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({})

    def plan(self, obs: Observation) -> Action | Noop:
        return Action("wait", impact="read-only")

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        start = world.clock.now

        def done() -> tuple[bool, str]:
            world.clock.advance(10)
            return world.clock.now - start >= float(self.params.get("seconds", 0)), "waiting"

        wait(ctx, done, what="a gate", timeout=10_000, interval=0)


@pytest.fixture(autouse=True)
def _kinds() -> Any:
    with isolated_registry():
        register_step("test.pool", Pool)
        register_step("test.sneaky_wait", SneakyWait, effect="read-only")
        register_step("test.sneaky_observe", SneakyObserve)
        register_step("test.silence", Silence, lease_until="test.unsilence")
        register_step("test.unsilence", Unsilence)
        register_step("test.stop", Stop, effect="disruptive")
        register_step("test.long_wait", LongWait, [Param("seconds", "int", default=0)], effect="read-only")
        yield


def _bound(*steps: Any, targets: tuple[str, ...] = ("n1", "n2", "n3")) -> BoundRunbook:
    rb = parse_runbook({"name": "r", "summary": "s", "targets": {"order": "inventory"}, "steps": list(steps)})
    return bind_runbook(rb, cluster="c1", targets=[Target(t) for t in targets])


def _records(home: Path) -> list[dict[str, Any]]:
    return list(Journal.open(os.listdir(home / "runs")[0], home).records())


def test_a_plain_change_is_fenced_a_lock_taken_mid_run_stops_the_next_one(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    """41.1: before, only ``destructive`` kinds were fenced, and a roll of repools went on under a lock
    another run had taken."""
    lock = FileLockBackend(home / "locks")

    def steal(target: str) -> None:
        if target == "n1":
            lock.force_unlock("c1")
            lock.acquire(LockInfo("c1", "other-run", "bob@admin2", "another roll", 0.0))

    world.on_apply = steal
    with pytest.raises(LockHeldError, match=r"paused before n2 .*held by run other-run") as paused:
        make_runner(lock=lock).start(_bound({"test.pool": {}}), env=world, operator=OP, reason="r")
    assert paused.value.exit_code == 7
    assert world.applies == {"pool:n1": 1}
    lock.force_unlock("c1")
    world.on_apply = None
    assert make_runner(lock=lock).resume(_records(home)[0]["run_id"], env=world).status == "finished"
    assert world.applies == {"pool:n1": 1, "pool:n2": 1, "pool:n3": 1}


def test_a_read_only_kind_cannot_write(make_runner: Callable[..., Runner], world: World) -> None:
    with pytest.raises(RunFailed, match="may change nothing"):
        make_runner().start(_bound({"test.sneaky_wait": {}}), env=world, operator=OP, reason="r")
    assert "touched:n1" not in world.data


def test_observe_cannot_write_whatever_the_kind(make_runner: Callable[..., Runner], world: World) -> None:
    with pytest.raises(ReadOnlyViolation, match=r"test\.sneaky_observe"):
        make_runner().dry_run(_bound({"test.sneaky_observe": {}}), env=world, operator=OP, reason="r")
    assert "observed" not in world.data


def test_a_resumed_run_renews_its_silence_before_the_next_change(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    """41.2: a run paused past its silence's end resumes, and the stop happens silenced."""
    clock: FakeClock = world.clock
    bound = _bound({"test.silence": {}}, {"test.pool": {}}, {"test.stop": {}}, {"test.unsilence": {}},
                   targets=("n1",))

    def pause_after_pool(target: str) -> None:
        clock.advance(3600)  # lunch: the silence (100 s) lapses
        raise Interrupted("Ctrl-C")

    world.on_apply = pause_after_pool
    with pytest.raises(Interrupted):
        make_runner().start(bound, env=world, operator=OP, reason="r")
    world.on_apply = None
    assert make_runner().resume(_records(home)[0]["run_id"], env=world).status == "finished"
    assert world.data["silenced_at_stop:n1"] is True
    at_stop = [r for r in _records(home) if r["type"] == "lease_renewed" and r["at"] == 3]
    assert at_stop and at_stop[-1]["kind"] == "test.silence" and "extended" in at_stop[-1]["found"]


def test_a_gate_holding_long_extends_the_silence(make_runner: Callable[..., Runner], world: World,
                                                 home: Path) -> None:
    bound = _bound({"test.silence": {}}, {"test.long_wait": {"seconds": 600}}, {"test.stop": {}},
                   {"test.unsilence": {}}, targets=("n1",))
    make_runner(clock=world.clock).start(bound, env=world, operator=OP, reason="r")
    assert world.data["silenced_at_stop:n1"] is True
    assert sum(1 for r in _records(home) if r["type"] == "lease_renewed") >= 5


def test_a_wait_renews_at_its_first_poll_only_when_this_process_has_not_renewed_lately(
        make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    """A change renews the host's silence right before its intent; a wait right after it need not ask again
    (issue 47: each renewal is a read of Alertmanager and a journal replay). A wait with no renewal before it
    in this process — the first step a resumed process runs, or the one right after the lease was taken —
    renews at its first poll."""
    after_change = _bound({"test.silence": {}}, {"test.pool": {}}, {"test.long_wait": {"seconds": 30}},
                          {"test.stop": {}}, {"test.unsilence": {}}, targets=("n1",))
    make_runner(clock=world.clock).start(after_change, env=world, operator=OP, reason="r")
    assert sorted(r["at"] for r in _records(home) if r["type"] == "lease_renewed") == [2, 4]
    for run in (home / "runs").iterdir():
        for f in run.iterdir():
            f.unlink()
        run.rmdir()
    first = _bound({"test.silence": {}}, {"test.long_wait": {"seconds": 30}}, {"test.stop": {}},
                   {"test.unsilence": {}}, targets=("n1",))
    make_runner(clock=world.clock).start(first, env=world, operator=OP, reason="r")
    assert sorted(r["at"] for r in _records(home) if r["type"] == "lease_renewed") == [2, 3]


def test_a_released_lease_is_not_renewed(make_runner: Callable[..., Runner], world: World, home: Path) -> None:
    bound = _bound({"test.silence": {}}, {"test.unsilence": {}}, {"test.pool": {}}, targets=("n1",))
    make_runner().start(bound, env=world, operator=OP, reason="r")
    assert not [r for r in _records(home) if r["type"] == "lease_renewed"]
    assert world.data["silence:n1"] is None


def test_a_lease_kind_must_say_how_it_renews() -> None:
    with pytest.raises(ValueError, match="must define renew"):
        register_step("test.bare_lease", Pool, lease_until="test.unsilence")
