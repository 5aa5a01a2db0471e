"""Coordination checkpoints: a named manual confirmation the operator gives before anything changes.

The EventBus runbook opens its reboot and its proxy restart with "Before starting please sync with the
Services team ... they might need to temporarily stop services like ChangeProp". No system can observe
that conversation, so kafkaops asks the operator to say it happened — and writes down who said it and
when. The checkpoints themselves are inventory data (``checkpoints: {changeprop: "The Services team
..."}``): the same runbook asks in production and says nothing in a lab that defines none.

How the operator confirms (``operator.confirm: {checkpoint: changeprop}``):

* ``--confirmed changeprop`` on the command line (procedure commands, ``run``, ``resume``, ``apply``);
* or, on a terminal, a prompt that shows the checkpoint's text.

``--yes`` does **not** confirm a checkpoint: it means "run the plan I reviewed", and a script that passes
it by habit must not claim a conversation with another team. Without either, the CLI refuses before the
run starts (:func:`pending_checkpoints` reads the plan; exit 13, one line naming the checkpoint and the
flag); a resumed run reaching the step unconfirmed pauses there instead (lock kept).

The confirmation goes to the run's facts and to the journal (``event`` ``checkpoint_confirmed`` with the
operator, the time and how), so a rolling run asks once per run, not once per host, and a resumed run
does not ask again. A dry-run projects it, so the plan of a roll shows the question at its first host.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed, NotConfirmed
from kafkaops.queries.checkpoints import KIND

#: The run's facts: checkpoint name -> {operator, at, via, text}.
FACTS_KEY = "checkpoints"


def checkpoint_text(cluster: Any, name: str) -> str | None:
    """What the inventory says the operator confirms for ``name`` (None: no such checkpoint)."""
    checkpoints: Mapping[str, str] = getattr(cluster, "checkpoints", None) or {}
    text = checkpoints.get(name)
    return " ".join(str(text).split()) if text is not None else None


def _facts(ctx: RunContext) -> Any:
    return ctx.facts


def _projection_key(name: str) -> str:
    return f"checkpoint/{name}"


class ConfirmCheckpoint(StepBase):
    """Ask the operator to confirm a named manual checkpoint of the inventory (once per run)."""

    def _text(self, ctx: RunContext) -> str | None:
        """The inventory's text for the checkpoint, else the runbook's own (a checkpoint every site needs, such
        as the migration's point of no return); None: nothing to confirm."""
        own = " ".join(str(self.params.get("text") or "").split())
        return checkpoint_text(getattr(ctx.env, "cluster", None), str(self.params["checkpoint"])) or own or None

    def observe(self, ctx: RunContext) -> Observation:
        name = str(self.params["checkpoint"])
        text = self._text(ctx)
        facts = _facts(ctx)
        done = (facts.get(FACTS_KEY) or {}).get(name) if facts is not None else None
        key = _projection_key(name)
        projected = ctx.projected.source(key) if key in ctx.projected else None
        data = {"checkpoint": name, "text": text, "confirmed": done, "projected": projected}
        if text is None:
            summary = f"checkpoint {name}: not defined by the inventory"
        elif done:
            summary = f"checkpoint {name}: confirmed by {done.get('operator')} at {done.get('at')}"
        elif projected:
            summary = f"checkpoint {name}: (projected: confirmed at {projected})"
        else:
            summary = f"checkpoint {name}: {text}"
        return Observation(data, summary=summary)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        name = d["checkpoint"]
        if d["text"] is None:
            return Noop(f"the inventory defines no checkpoint {name!r}: nothing to confirm")
        if d["confirmed"]:
            c = d["confirmed"]
            return Noop(f"checkpoint {name} confirmed for this run by {c.get('operator')} at {c.get('at')} "
                        f"({c.get('via')})")
        if d["projected"]:
            return Noop(f"checkpoint {name} is confirmed once for the run, at {d['projected']}")
        return Action(
            description=f"operator confirms: {d['text']}",
            commands=(f"--confirmed {name} on the command line, or answer the prompt on a terminal "
                      "(--yes does not confirm it)",),
            impact="read-only: a manual checkpoint; no system changes, the confirmation is journaled",
            data={"checkpoint": name, "text": d["text"]},
        )

    def effects(self, obs: Observation, action: Action) -> Mapping[str, Any]:
        return {_projection_key(str(obs.data["checkpoint"])): "confirmed"}

    def apply(self, ctx: RunContext, action: Action) -> None:
        name, text = str(action.data["checkpoint"]), str(action.data["text"])
        via = ctx.confirmed.get(name)
        if via is None and ctx.ask is not None:
            if not ctx.ask(f"Checkpoint {name}: {text}. Confirmed?"):
                raise NotConfirmed(f"checkpoint {name!r} was not confirmed at the prompt: {text}",
                                   hint=f"once it holds, answer yes or pass --confirmed {name}")
            via = "prompt"
        if via is None:
            raise NotConfirmed(f"checkpoint {name!r} is not confirmed: {text}",
                               hint=f"once it holds, pass --confirmed {name} (--yes does not confirm a "
                                    "checkpoint)")
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record = {"operator": ctx.operator, "at": at, "via": via, "text": text}
        facts = _facts(ctx)
        if facts is not None:  # before the journal event: a crash in between never asks twice
            facts.set(FACTS_KEY, {**(facts.get(FACTS_KEY) or {}), name: record})
        ctx.record("checkpoint_confirmed", checkpoint=name, **record)
        ctx.progress(f"  checkpoint {name}: confirmed by {ctx.operator} ({via})")

    def verify(self, ctx: RunContext) -> None:
        facts = _facts(ctx)
        name = str(self.params["checkpoint"])
        if self._text(ctx) is None:
            return  # nothing to confirm (the plan said so)
        if facts is not None and not (facts.get(FACTS_KEY) or {}).get(name):
            raise CheckFailed(f"checkpoint {name} was not recorded as confirmed")


register_step(KIND, ConfirmCheckpoint, [
    Param("checkpoint", "str", required=True,
          help="name of a checkpoint of the inventory's checkpoints: map (e.g. changeprop)"),
    Param("text", "str",
          help="what the operator confirms when the inventory's checkpoints: map does not name it (the runbook's "
               "own checkpoint); the inventory's text wins"),
], irreversible="nothing to undo: a confirmation changes no system (it stays in the journal)", effect="read-only")
