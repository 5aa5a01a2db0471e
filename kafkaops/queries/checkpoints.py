"""Which operator checkpoints a plan still waits for (``operator.confirm`` steps with something to
confirm): the procedure asks before a run starts, ``runs show`` for a paused one."""

from __future__ import annotations

from collections.abc import Iterable

from kafkaops.engine.plan import PlannedStep

KIND = "operator.confirm"


def pending_checkpoints(steps: Iterable[PlannedStep]) -> list[tuple[str, str]]:
    """The checkpoints a plan will ask for (name, text), in order, each once: what the CLI must have
    confirmed before it starts the run (so an unconfirmed one refuses before any lock or change)."""
    out: dict[str, str] = {}
    for s in steps:
        if s.kind == KIND and s.action is not None:
            data = s.action.get("data") or {}
            out.setdefault(str(data.get("checkpoint")), str(data.get("text")))
    return list(out.items())
