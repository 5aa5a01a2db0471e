"""Post-maintenance log checks: the end of the seed's Host Reboot, "Check that everything looks good in
the logs" (``journalctl -u eventlogging-service-eventbus``, ``/var/log/kafka/kafka.log``), made checkable.

An eyeballed ``tail -f`` after the repool is how a broker that came back complaining, or an eventbus that
did not come back at all, ended up behind the VIP again. The broker runbooks therefore check *before* the
repool, and read every line logged since the run started disrupting the host:

* ``logs.mark_start`` records the host's own clock (its log lines are stamped by it, not by ours) in the
  run's facts just before the broker is stopped. A resumed run keeps the first mark, so a scan after a
  crash or a failed check still covers the whole maintenance.
* ``service.verify_health`` / ``service.scan_log`` without a ``service`` (in :mod:`kafkaops.steps.service`)
  check every service of the host from that mark: eventbus answers HTTP 200, and its log has none of the
  inventory's ``error_patterns`` (the seed's "Example of problems").
* ``logs.scan_kafka`` reads Kafka's log through the inventory's ``kafka_log`` template (``{since}``: epoch
  seconds; production ``journalctl -u kafka.service --since @{since}``) and stops the run on any ERROR or
  FATAL line — except the **known-benign** ones a controlled stop and start log by design
  (:data:`BENIGN_KAFKA_ERRORS`, each with the reason it is harmless; the step's ``ignore`` parameter adds
  site-specific ones). The set is explicit and small so that the scan stays strict: a new kind of ERROR
  stops the run until someone has read it.

A failed scan stops the run at a safe point with the host still depooled, showing the lines. Lines once
shown are remembered in the run's facts: after the operator has looked (and fixed what needed fixing),
``kafkaops resume RUN`` scans again and stops only on lines not reported before.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed
from kafkaops.facts.log_lines import (
    BATCH_PEER_NAME,
    BATCH_PEER_PATTERN,
    BENIGN_KAFKA_ERRORS,
    LogErrorsFound,
    LogMatch,
    compile_patterns,
    describe_matches,
)
from kafkaops.model import Host
from kafkaops.queries.service import disruption_key, disruption_name, host_time
from kafkaops.stepkit.common import environment, target_host
from kafkaops.stepkit.projection import fact_key, projected_fact, provenance

# --- pure helpers (unit-tested) -----------------------------------------------------------------------

#: A Kafka log entry at ERROR or FATAL: the level right after the bracketed log4j timestamp, as Kafka's
#: own ``log4j.properties`` writes it (``[%d] %p %m (%c)%n``), whether read from the file or from the
#: journal (``... kafka[812]: [2026-11-22 18:01:02,123] ERROR ...``).
#: A line that starts a log4j entry, after whatever prefix journald adds (anything else continues the entry
#: before it: a stack trace).
_ENTRY = re.compile(r"\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
#: How many continuation lines of an entry a benign pattern sees.
_CONTEXT = 3
#: The head of a stack trace: ``java.lang.NullPointerException: ...``, ``org.apache.kafka...Exception: ...``.
_EXCEPTION = re.compile(r"^\s*(?:Caused by: )?[\w$.]+(?:Exception|Error)\b")
KAFKA_LEVEL = re.compile(r"\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?\]\s+(ERROR|FATAL)\b")


@dataclass(frozen=True)
class KafkaScan:
    """The ERROR/FATAL lines of a Kafka log.

    Attributes:
        errors: Lines that stop the run (pattern: the level).
        ignored: Known-benign lines (pattern: the benign pattern that matched them).
        lines: How many lines were read.
    """

    errors: tuple[LogMatch, ...]
    ignored: tuple[LogMatch, ...]
    lines: int


def scan_kafka_lines(lines: Iterable[str], ignore: Sequence[str] = ()) -> KafkaScan:
    """Every ERROR or FATAL entry of Kafka's log, split into errors and known-benign ones.

    Continuation lines (a stack trace) carry no level and are not matched themselves: their entry is.

    Args:
        lines: The log, one line each (newlines are stripped).
        ignore: Patterns of benign lines, on top of :data:`BENIGN_KAFKA_ERRORS`.

    Raises:
        ConfigError: An ``ignore`` pattern is not a valid regular expression.
    """
    benign = compile_patterns([b.pattern for b in BENIGN_KAFKA_ERRORS] + list(ignore), "ignore")
    errors: list[LogMatch] = []
    ignored: list[LogMatch] = []
    text = [raw.rstrip("\r\n") for raw in lines]
    for index, line in enumerate(text):
        level = KAFKA_LEVEL.search(line)
        if level is None:
            continue
        # A benign pattern may name the entry's exception, on the line after it (a stack trace's head):
        # the same ERROR line with another exception (a storage error) must still stop the run.
        following = list(itertools.takewhile(lambda x: not _ENTRY.search(x),
                                             text[index + 1:index + 1 + _CONTEXT]))
        entry = "\n".join([line, *following])
        hit = next((p for p, rx in benign if rx.search(entry)), None)
        if hit is None:
            cause = following[0].strip() if following and _EXCEPTION.search(following[0]) else ""
            errors.append(LogMatch(index + 1, level.group(1), line, cause))
        else:
            ignored.append(LogMatch(index + 1, hit, line))
    count = len(text)
    return KafkaScan(tuple(errors), tuple(ignored), count)


# --- the mark --------------------------------------------------------------------------------------------


class MarkStart(StepBase):
    """Record the host's clock before the maintenance disrupts it: the log checks after it read from here."""

    def observe(self, ctx: RunContext) -> Observation:
        host = target_host(ctx)
        mark = projected_fact(ctx, disruption_name(host.name))
        return Observation({"host": host.name, "mark": mark},
                           summary=f"{host.name}: " + (f"maintenance started at {_when(mark)} (its clock)" if mark
                                                       else "no start recorded")
                           + provenance(ctx, [fact_key(disruption_name(host.name))]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["mark"]:
            return Noop(f"{d['host']}'s clock already recorded ({_when(d['mark'])}): the log checks read from there")
        return Action(
            description=f"record {d['host']}'s clock: the log checks after the maintenance read from this moment",
            commands=(f"on {d['host']}: date +%s",),
            impact="read-only on the host; written to the run's facts",
        )

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        """A dry-run cannot know the host's clock at the stop: later steps see :data:`PLANNED` (not a time of
        ours, which would make every saved plan stale by the time it is applied)."""
        return {fact_key(disruption_name(obs.data["host"])): PLANNED}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        if facts.get(disruption_key(host)) is None:
            facts.set(disruption_key(host), host_time(env, host))

    def verify(self, ctx: RunContext) -> None:
        host = target_host(ctx)
        if ctx.facts.get(disruption_key(host)) is None:
            raise CheckFailed(f"the start of the maintenance of {host.name} was not recorded")


# --- Kafka's log -----------------------------------------------------------------------------------------


#: The projected mark in a dry-run: recorded when the run gets there.
PLANNED = "at the stop"


def _epoch(value: Any) -> int | None:
    """A recorded mark (epoch seconds), or None for none or a projected one."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _when(value: Any) -> str:
    epoch = _epoch(value)
    if epoch is not None:
        return time.strftime("%H:%M:%S", time.localtime(epoch))
    return "the stop" if value == PLANNED else "?"


def _batch_benign(ctx: RunContext) -> list[str]:
    """In a batched roll, the controller failing to send to a broker of its own batch — stopped by this run
    at the same time — is the same benign line as its failing to send to itself (BENIGN_KAFKA_ERRORS)."""
    env = environment(ctx)
    others = [env.host(t).broker_id for t in getattr(ctx, "batch", ()) if t != ctx.target]
    return [f"{BATCH_PEER_PATTERN}{b} " for b in others]


def benign_name(pattern: str) -> str | None:
    """The name the plan shows for a known-benign pattern of ours (built in, or a batch peer's), else None:
    a site's own ``ignore`` pattern is shown as written."""
    named = next((b.name for b in BENIGN_KAFKA_ERRORS if b.pattern == pattern), None)
    ours = pattern.startswith(BATCH_PEER_PATTERN) and pattern.endswith(" ")
    peer = pattern.removeprefix(BATCH_PEER_PATTERN)[:-1] if ours else ""
    return named or (f"{BATCH_PEER_NAME}:{peer}" if peer.isdigit() else None)


def _reported_key(host: Host) -> str:
    """Fact: Kafka log lines a failed scan already showed (a resumed scan stops only on others)."""
    return f"kafka_log_reported/{host.name}"


class ScanKafkaLog(StepBase):
    """Scan Kafka's log since the maintenance started; stop the run on an ERROR/FATAL line (benign ones excepted).

    The run stops with the host still depooled, showing the lines; a resumed scan stops only on others."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        start = projected_fact(ctx, disruption_name(host.name))
        ignore = [b.pattern for b in BENIGN_KAFKA_ERRORS] + _batch_benign(ctx) + [str(p) for p in
                                                                                  self.params["ignore"]]
        compile_patterns(ignore, "ignore")  # a bad pattern is refused in the plan, not after the reboot
        epoch = _epoch(start)
        cmd = env.command(host, "kafka_log", since=epoch if epoch is not None else "<maintenance start>") \
            if "kafka_log" in host.commands else None
        data = {"host": host.name, "since": start, "command": cmd, "ignore": ignore,
                "resumed_after_report": bool(facts.get(_reported_key(host)))}
        return Observation(data, summary=f"Kafka log on {host.name} since "
                                         f"{_when(start) if start else 'the maintenance started'}"
                                         + provenance(ctx, [fact_key(disruption_name(host.name))]))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["command"] is None:
            return Noop(f"no kafka_log command template for {d['host']} in the inventory: Kafka's log is not "
                        "scanned (add commands.kafka_log, e.g. journalctl -u kafka.service --since @{since})")
        again = " (lines already reported to the operator excepted)" if d["resumed_after_report"] else ""
        since = f"since {_when(d['since'])}" if d["since"] else "since the maintenance started"
        # Named, not as regexes: printed whole for every host, they ran a roll's 80-column plan past 80
        # columns; the observation keeps the patterns (a changed one makes a saved plan stale) and
        # `kafkaops runbooks show` prints them.
        names = [n for p in d["ignore"] if (n := benign_name(p)) is not None]
        return Action(
            description=f"scan Kafka's log on {d['host']} {since}{again} for ERROR/FATAL lines "
                        f"({len(d['ignore'])} known-benign pattern(s) ignored)",
            commands=(f"on {d['host']}: {d['command']}", "match: ERROR | FATAL (the log4j level)",
                      *([f"ignore known-benign: {', '.join(names)}"] if names else []),
                      *(f"ignore: {p}" for p in d["ignore"] if benign_name(p) is None)),
            impact="read-only; an ERROR or FATAL line stops the run with the host still depooled",
        )

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        facts = ctx.facts
        start = facts.get(disruption_key(host))
        if not start:
            start = host_time(env, host) - int(self.params["lookback"])
            ctx.progress(f"  {host.name}: no recorded start of the maintenance; scanning the last "
                         f"{self.params['lookback']:.0f}s of Kafka's log")
        cmd = env.command(host, "kafka_log", since=int(start))
        out = env.run(host, cmd, timeout=60).stdout
        scan = scan_kafka_lines(out.splitlines(), _batch_benign(ctx) + [str(p) for p in self.params["ignore"]])
        reported = list(facts.get(_reported_key(host)) or [])
        errors = [m for m in scan.errors if m.line not in reported]
        benign = f"; {len(scan.ignored)} known-benign ERROR line(s) ignored" if scan.ignored else ""
        if not errors:
            ctx.progress(f"  {host.name}: Kafka log clean since {_when(start)} ({scan.lines} lines{benign})")
            return
        facts.set(_reported_key(host), (reported + [m.line for m in errors])[-1000:])
        raise KafkaLogErrorsFound(
            f"Kafka log scan failed: {len(errors)} ERROR/FATAL line(s) in Kafka's log on {host.name} since "
            f"{_when(start)} ({cmd}){benign}:\n{describe_matches(errors)}\n"
            f"{host.name} stays depooled. Once they are understood (a benign kind for this site: the step's "
            "`ignore` parameter), resuming scans again and stops only on lines not reported here",
        )


class KafkaLogErrorsFound(LogErrorsFound):
    """Kafka logged ERROR/FATAL lines since the maintenance started. Not retried: they stay in the log."""


register_step("logs.mark_start", MarkStart, [], effect="read-only")
register_step("logs.scan_kafka", ScanKafkaLog, [
    Param("ignore", "list", default=[], help="more known-benign ERROR line patterns (regular expressions), on "
                                             "top of the built-in ones"),
    Param("lookback", "duration", default=600.0, min=1, max=86400,
          help="without a recorded start of the maintenance: how far back to scan"),
], effect="read-only")
