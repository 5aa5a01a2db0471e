"""In-memory step kinds over a fake "world" dict, so the engine is tested without Kafka."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.engine.context import Sampler
from kafkaops.engine.step import Action, Compensation, Noop, Observation, Param, StepBase, register_step
from kafkaops.engine.wait import FakeClock, wait_until
from kafkaops.errors import CheckFailed

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class World:
    """The fake systems: a key/value store, pool states and a log of every apply. As a run's environment
    it implements the engine's whole :class:`~kafkaops.engine.context.RunEnvironment` protocol."""

    data: dict[str, Any] = field(default_factory=dict)
    applies: Counter[str] = field(default_factory=Counter)
    verify_failures: dict[str, int] = field(default_factory=dict)  # key -> remaining failures
    clock: FakeClock = field(default_factory=FakeClock)
    on_apply: Callable[[str], None] | None = None
    lock: Any = None  # the environment's lock (tests usually give the runner its own)
    lock_label: str = ""  # the plan names no lock

    def identity(self) -> Mapping[str, Any]:
        """The fake world has no inventory: nothing to journal, nothing that can change under a run."""
        return {}

    def run_sampler(self, run_dir: Path) -> Sampler | None:
        """Nothing to sample for a chart."""
        return None

    def close(self) -> None:
        return None


class SetValue(StepBase):
    """Set a key to a value (idempotent)."""

    def observe(self, ctx: Any) -> Observation:
        world: World = ctx.env
        cur = world.data.get(self.params["key"])
        return Observation({"key": self.params["key"], "value": cur}, f"{self.params['key']}={cur!r}")

    def plan(self, obs: Observation) -> Action | Noop:
        if obs.data["value"] == self.params["value"]:
            return Noop(f"{self.params['key']} is already {self.params['value']!r}")
        return Action(
            f"set {self.params['key']} to {self.params['value']!r}",
            commands=(f"kv set {self.params['key']} {self.params['value']}",),
            impact="none",
        )

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"set:{self.params['key']}"] += 1
        if world.on_apply:
            world.on_apply(self.params["key"])
        world.data[self.params["key"]] = self.params["value"]

    def verify(self, ctx: Any) -> None:
        world: World = ctx.env
        left = world.verify_failures.get(self.params["key"], 0)
        if left:
            world.verify_failures[self.params["key"]] = left - 1
            raise CheckFailed(f"{self.params['key']} not settled yet")
        if world.data.get(self.params["key"]) != self.params["value"]:
            raise CheckFailed(f"{self.params['key']} is {world.data.get(self.params['key'])!r}")


class RaiseTo(StepBase):
    """Raise a counter to at least ``target`` with non-idempotent increments."""

    def observe(self, ctx: Any) -> Observation:
        world: World = ctx.env
        return Observation({"counter": world.data.get(self.params["key"], 0)}, "")

    def plan(self, obs: Observation) -> Action | Noop:
        cur = obs.data["counter"]
        if cur >= self.params["target"]:
            return Noop(f"counter {cur} >= {self.params['target']}")
        return Action(
            f"add {self.params['target'] - cur}", data={"by": self.params["target"] - cur}, idempotent=False
        )

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"inc:{self.params['key']}"] += 1
        world.data[self.params["key"]] = world.data.get(self.params["key"], 0) + action.data["by"]


class Depool(StepBase):
    """Depool a host."""

    want = "no"

    def observe(self, ctx: Any) -> Observation:
        world: World = ctx.env
        pools = world.data.setdefault("pool", {})
        key = f"pool/{ctx.target}"
        pooled = ctx.projected.get(key, pools.get(ctx.target, "yes"))
        where = ctx.projected.source(key)
        return Observation(
            {"target": ctx.target, "pooled": pooled},
            f"{ctx.target} pooled={pooled}" + (f" (projected: after {where})" if where else ""),
        )

    def plan(self, obs: Observation) -> Action | Noop:
        if obs.data["pooled"] == self.want:
            return Noop(f"already pooled={self.want}")
        return Action(f"set pooled={self.want}", commands=(f"confctl pooled={self.want}",))

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {f"pool/{obs.data['target']}": self.want}

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        world.applies[f"{type(self).__name__.lower()}:{ctx.target}"] += 1
        world.data.setdefault("pool", {})[ctx.target] = self.want


class Repool(Depool):
    """Repool a host."""

    want = "yes"


class Fail(StepBase):
    """Fail (non-retryable) while world['broken'] is true."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({}, "")

    def plan(self, obs: Observation) -> Action | Noop:
        return Noop("nothing to change")

    def apply(self, ctx: Any, action: Action) -> None:  # pragma: no cover - never planned
        raise AssertionError

    def verify(self, ctx: Any) -> None:
        world: World = ctx.env
        if world.data.get("broken"):
            exc = CheckFailed("the thing is broken")
            exc.retryable = False
            raise exc


class WaitFor(StepBase):
    """Wait until world[key] is truthy (read-only)."""

    def observe(self, ctx: Any) -> Observation:
        return Observation({}, "")

    def plan(self, obs: Observation) -> Action | Noop:
        return Action(f"wait for {self.params['key']}")

    def apply(self, ctx: Any, action: Action) -> None:
        world: World = ctx.env
        wait_until(
            lambda: bool(world.data.get(self.params["key"])),
            timeout=self.params["timeout"],
            interval=1,
            what=self.params["key"],
            clock=world.clock,
            cancelled=ctx.pause_requested,
        )


def register_test_kinds() -> None:
    register_step(
        "test.set", SetValue, [Param("key", "str", required=True), Param("value", "any", required=True)]
    )
    register_step(
        "test.raise_to", RaiseTo, [Param("key", "str", required=True), Param("target", "int", required=True)]
    )
    register_step("test.repool", Repool, [Param("services", "list", default=[])])
    register_step(
        "test.depool",
        Depool,
        [Param("services", "list", default=[]), Param("window", "duration", default="10s")],
        compensate=Compensation("test.repool", params={}, note="repool what was depooled"),
    )
    register_step("test.fail", Fail, [])
    register_step(
        "test.wait_for",
        WaitFor,
        [Param("key", "str", required=True), Param("timeout", "duration", default="5m")],
    )
