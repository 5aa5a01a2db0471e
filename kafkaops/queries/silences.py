"""Alertmanager silences a run makes: how long one must last, when one may end (no alert held under it),
and how a plan shows the ending. Shared by ``alerts.*`` (a host's silence) and ``roll_alerts.*`` (the
cluster's roll alerts while a host is down)."""

from __future__ import annotations

import time

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import (
    Observation,
    format_duration,
)
from kafkaops.errors import WaitTimeout
from kafkaops.stepkit.common import environment, names, wait
from kafkaops.systems.alertmanager import Alert, Silence

#: Added to the timeouts a silence covers: the steps without a timeout (depool, election, log scans)
#: and the seconds between steps.
DEFAULT_MARGIN = 15 * 60


def silence_bound(ctx: RunContext, margin: float, after: int | None = None,
                  until: str = "alerts.unsilence") -> tuple[float, list[str]]:
    """How long a host's silence lasts: the timeouts of the steps it covers, times the hosts that go
    together, plus ``margin``.

    ``bound = batch_size x sum(timeout of each step after alerts.silence, up to and including
    alerts.unsilence) + margin``. Every wait of the host's maintenance is bounded by its step's timeout,
    so a run that goes on never outlives its silence; a batch's hosts go step by step together, so each
    host's span is the batch's. A run that dies leaves a silence that still ends by itself. Returns the
    bound (seconds) and the covered steps (``kafka.stop_broker 5m``) for the plan. ``after``: count only
    the steps from that index on (a renewal: what is left of the maintenance); ``until``: the kind that
    ends the silence (``roll_alerts.unsilence`` for the roll's silence).
    """
    covered = []
    first = ctx.step_index + 1 if after is None else after
    for step in ctx.steps:
        if step.index < first or step.gate:
            continue
        covered.append(step)
        if step.kind == until:
            break
    timeouts = [(s.kind, float(t)) for s in covered
                if isinstance(t := s.params.get("timeout"), int | float) and not isinstance(t, bool)]
    batch = max(1, len(ctx.batch))
    total = sum(t for _, t in timeouts) * batch + margin
    return total, [f"{kind} {format_duration(t)}" for kind, t in timeouts]


def clock(ts: float | None) -> str:
    """An epoch time as the plan and the journal show it (``14:05:09Z``)."""
    return time.strftime("%H:%M:%SZ", time.gmtime(ts)) if ts else "?"


def end_when_quiet(ctx: RunContext, silences: list[Silence], *, what: str, timeout: float, event: str,
                   stuck: str, hint: str) -> None:
    """Expire ``silences`` once no alert they hold still fires: ending a silence over a firing alert pages
    at once. Waits ``timeout`` at most, then raises ``WaitTimeout`` (``stuck`` names what fires; the
    silences stay, bounded as they are); each expiry journaled as ``event``."""
    am = environment(ctx).alertmanager
    ids = {s.id for s in silences}
    if not ids:
        return
    last: list[str] = []

    def clear() -> tuple[bool, str]:
        last[:] = [a.line() for a in held(am.alerts(), ids)]
        return not last, ("still firing under the silence: " + names(last)) if last else "no alert held"

    try:
        wait(ctx, clear, what=what, timeout=timeout, interval=2.0)
    except WaitTimeout:
        raise WaitTimeout(f"{ctx.target}: {names(last)} {stuck} after {format_duration(timeout)} under this run's "
                          f"silence; ending it now would page, so it stays (until {clock(silences[0].ends_at)})",
                          hint=hint) from None
    for s in silences:
        am.expire_silence(s.id)
        ctx.record(event, silence=s.id, host=ctx.target)
    ctx.progress(f"  {ctx.target}: silence {', '.join(sorted(ids))} ended")


def ending_observation(ctx: RunContext, found: list[Silence], planned: bool, name: str, otherwise: str) -> Observation:
    """What a step that ends this run's silence sees: the silences ``found`` (their ``name``: "silence",
    "roll silence") and the alerts they still hold, or ``otherwise`` when none is live."""
    am = environment(ctx).alertmanager
    lines = [a.line() for a in held(am.alerts(), {s.id for s in found})] if found else []
    data = {"host": ctx.target, "alertmanager": am.url, "mine": [s.to_dict() for s in found], "planned": planned,
            "held": lines}
    if found:
        summary = (f"{ctx.target}: {name} {', '.join(s.id for s in found)} of this run until "
                   f"{clock(found[0].ends_at)}; " + (f"holding {names(lines)}" if lines else "holding nothing"))
    else:
        summary = f"{ctx.target}: {otherwise}"
    return Observation(data, summary=summary)


def held(alerts: list[Alert], ids: set[str]) -> list[Alert]:
    """The active alerts one of the silences ``ids`` suppresses."""
    return [a for a in alerts if set(a.silenced_by) & ids]
