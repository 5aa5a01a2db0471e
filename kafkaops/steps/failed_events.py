"""Replay the events eventbus failed to produce, from each host's failed-events log, each event once.

The runbook's "Replaying failed events": ``cat failed_events.log | eventlogging-replay … kafka://…`` (or a
curl loop through eventbus). Done by hand it has three sharp edges, which this step removes:

* **duplicates**: a replay interrupted half-way (a lost SSH session, a Ctrl-C) and started again sends
  the first half twice, and nothing in Kafka says which. Here every event is journaled by its *content
  hash* (canonical JSON) in a per-run ledger beside the run's facts — the intent, fsynced, before it is
  sent, and the outcome after — so a resumed run skips what was acknowledged; for an event whose intent
  is recorded but not its outcome (killed between the send and the record, or a timeout that may have
  been written anyway), it first *looks for that content in the destination topic* since the intent
  and sends it again only when it is not there.
* **a flood**: replaying hours of events at full speed into a cluster that just recovered. Here the
  replay is rate-limited (``rate`` events/s).
* **silent rejects**: ``--output-invalid``'s file is easy to forget. Here events refused again (HTTP 4xx,
  a produce error that names the event or its topic, not JSON, no stream) go to a report file whose
  path is in the plan, in the progress and at the end, and are counted.

The selection (``since``, ``topic``) is made once: the first ``apply`` freezes the list of event hashes
in the run's facts, so a resume replays the same events even though "the last hour" moved on and the log
grew (a replay through eventbus that fails again appends the same event to the log again).

Why a ledger file and not :class:`~kafkaops.engine.run_facts.RunFacts`: facts are rewritten whole on each
``set`` (temp file, fsync, rename), which is right for a handful of values and quadratic for thousands
of events. The ledger is append-only JSON lines, one fsync per batch record, a torn last line ignored.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.state_files import runs_dir
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, format_duration, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, ConfigError, Interrupted, UnreachableError
from kafkaops.facts.failed_events import (
    FailedEventsLog,
    ReplayItem,
    parse_failed_events,
    replay_items,
    select,
    value_hash,
)
from kafkaops.model import Host, Service
from kafkaops.queries.failed_events import read_failed_log
from kafkaops.queries.service import service_of
from kafkaops.stepkit.common import environment, target_host
from kafkaops.systems.events import REJECTED, SENT, UNCERTAIN, find_values, replay_adapters

VIAS = ("kafka", "http")
#: After a send whose outcome was not recorded, how long the destination may still take to show it:
#: eventbus waits up to its produce timeout (10 s in the lab) before it gives up; our own producer died
#: with the process, so only requests already on the wire can still land.
GRACE = {"http": 15.0, "kafka": 5.0}
#: How far before the intent the destination is searched (record timestamps come from the producer's
#: clock: eventbus's host, or this one).
CLOCK_SLACK_MS = 60_000
REPORT_NAME = "rejected-events.jsonl"

# --- reading the log (shared with `kafkaops failed-events list`) ---------------------------------------


# --- the ledger ---------------------------------------------------------------------------------------


@dataclass
class Ledger:
    """The per-run, per-host record of each event's fate, by content hash (append-only, fsynced).

    Records: ``{"s": "intent", "t": ms, "k": [keys]}`` before a batch is sent; ``{"s": "sent", "k": [...]}``
    once acknowledged; ``{"s": "found", "k": [...]}`` when a resume found an interrupted send in the
    topic; ``{"s": "rejected", "k": key, "why": ...}`` when refused. ``path`` None: in memory (dry-run).
    """

    path: Path | None
    state: dict[str, str] = field(default_factory=dict)
    intent_ms: dict[str, int] = field(default_factory=dict)

    TERMINAL = ("sent", "found", "rejected")

    @classmethod
    def open(cls, path: Path | None) -> Ledger:
        ledger = cls(path)
        if path is None or not path.exists():
            return ledger
        for line in path.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line (killed mid-write): that record never happened
            if isinstance(rec, dict):
                ledger._fold(rec)
        return ledger

    def _fold(self, rec: Mapping[str, Any]) -> None:
        keys = rec.get("k")
        keys = [keys] if isinstance(keys, str) else list(keys or [])
        s = str(rec.get("s"))
        for k in keys:
            if s == "intent":
                if self.state.get(k) not in self.TERMINAL:
                    self.state[k] = "intent"
                    self.intent_ms[k] = int(rec.get("t") or 0)
            elif s in self.TERMINAL:
                self.state[k] = s

    def append(self, s: str, keys: list[str] | str, **fields: Any) -> None:
        rec = {"s": s, "t": int(time.time() * 1000), "k": keys, **fields}
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
            try:
                os.write(fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        self._fold(rec)

    def done(self, key: str) -> bool:
        return self.state.get(key) in self.TERMINAL

    def counts(self, keys: Iterable[str]) -> dict[str, int]:
        out = {"sent": 0, "found": 0, "rejected": 0, "interrupted": 0, "left": 0}
        for k in keys:
            s = self.state.get(k)
            out["interrupted" if s == "intent" else s if s in self.TERMINAL else "left"] += 1
        return out


def _run_dir(env: Environment, run_id: str) -> Path | None:
    return runs_dir(env.home) / run_id if run_id else None


def _ledger(env: Environment, run_id: str, host: Host) -> Ledger:
    d = _run_dir(env, run_id)
    return Ledger.open(d / f"replay-{host.name}.jsonl" if d is not None else None)


def _worklist_key(host: Host) -> str:
    return f"failed_events_worklist/{host.name}"


def report_path(env: Environment, run_id: str, given: str) -> str:
    """Where rejected events are written: the ``report`` parameter, else the run's directory."""
    if given:
        return given
    d = _run_dir(env, run_id)
    return str(d / REPORT_NAME) if d is not None else f"<the run's directory>/{REPORT_NAME}"


# --- the step -----------------------------------------------------------------------------------------


@dataclass
class _Selection:
    path: str
    log: FailedEventsLog
    items: list[ReplayItem]
    per_topic: dict[str, int]
    records: int
    duplicates: int
    frozen: bool
    missing: list[str]


def _select(ctx: RunContext, env: Environment, host: Host, service: Service, params: Mapping[str, Any]) -> _Selection:
    path, text, _exists = read_failed_log(env, host, service)
    log = parse_failed_events(text)
    worklist = ctx.facts.get(_worklist_key(host))
    if worklist is not None:  # a resumed run: the events the run set out to replay, whatever the clock says
        wanted = set(worklist)
        chosen = [e for e in log.events if e.key in wanted]
        missing = sorted(wanted - {e.key for e in chosen})
    else:
        pattern = re.compile(str(params["topic"])) if params["topic"] else None
        since = float(params["since"]) or None
        chosen, missing = select(log.events, since=since, topic=pattern, now=time.time()), []
    sel = replay_items(chosen, dc=host.dc, topics=set(env.kafka.metadata().topics))
    return _Selection(path, log, list(sel.items), dict(sel.per_topic), sel.records, sel.duplicates,
                      worklist is not None, missing)


def _destination(host: Host, service: Service, via: str) -> str:
    if via == "http":
        if not service.events_path:
            raise ConfigError(f"service {service.name} has no events_path in the inventory (needed by --via http)",
                              hint=f"add services.{service.name}.events_path, e.g. /v1/events; or use --via kafka")
        return f"http://{host.address}:{service.port}{service.events_path}"
    return "kafka"


class ReplayFailedEvents(StepBase):
    """Replay the host's failed events (selection frozen at the first apply), each once, rate-limited."""

    def observe(self, ctx: RunContext) -> Observation:

        env = environment(ctx)
        host = target_host(ctx)
        service = service_of(host, str(self.params["service"]))
        via = str(self.params["via"])
        dest = _destination(host, service, via)
        sel = _select(ctx, env, host, service, self.params)
        ledger = _ledger(env, ctx.run_id, host)
        counts = ledger.counts([i.key for i in sel.items] + sel.missing)
        unsendable = sum(1 for i in sel.items if i.problem and not ledger.done(i.key))
        data = {
            "host": host.name, "service": service.name, "path": sel.path, "lines": sel.log.lines,
            "records": len(sel.log.events), "malformed": len(sel.log.malformed), "selected": sel.records,
            "distinct": len(sel.items), "duplicates": sel.duplicates, "per_topic": sel.per_topic,
            "via": via, "destination": dest, "rate": float(self.params["rate"]),
            "report": report_path(env, ctx.run_id, str(self.params["report"])), "frozen": sel.frozen,
            "missing": len(sel.missing), "unsendable": unsendable, **counts,
            "since": float(self.params["since"]), "topic": str(self.params["topic"]),
        }
        what = (f"{len(sel.log.events)} failed event record(s) in {sel.path} on {host.name}"
                + (f", {len(sel.log.malformed)} malformed line(s)" if sel.log.malformed else "")
                + f"; {sel.records} selected, {len(sel.items)} distinct")
        if sel.frozen:
            what += (f"; this run: {counts['sent']} sent, {counts['found']} found in Kafka, {counts['rejected']} "
                     f"rejected, {counts['interrupted']} interrupted, {counts['left']} left")
        return Observation(data, summary=what)

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        todo = d["left"] + d["interrupted"]
        if d["distinct"] == 0 and not d["missing"]:
            return Noop(f"no failed events to replay on {d['host']} ({d['records']} record(s) in {d['path']}, "
                        "none selected)")
        if todo <= 0:
            return Noop(f"every selected event of {d['host']} was replayed once: {d['sent']} sent, {d['found']} "
                        f"found in Kafka, {d['rejected']} rejected (report: {d['report']})")
        sendable = todo - d["unsendable"]
        how = "produce (acks=all, idempotent producer)" if d["via"] == "kafka" else f"POST {d['destination']}"
        commands = [f"on {d['host']}: read {d['path']} ({d['records']} record(s), {d['malformed']} malformed "
                    f"line(s), {d['duplicates']} duplicate(s) sent once)"]
        for topic, n in d["per_topic"].items():
            if topic.startswith("(rejected"):
                commands.append(f"{n} event(s) not sendable (not JSON, no stream, no such topic) -> report "
                                f"{d['report']}")
            else:
                commands.append(f"{topic}: {n} event(s) -> {how}"
                                + (f" (eventbus produces to {topic})" if d["via"] == "http" else ""))
        if d["interrupted"]:
            commands.append(f"{d['interrupted']} interrupted send(s): look for them in their topic first, "
                            "send only those not there")
        seconds = sendable / d["rate"] if d["rate"] else 0
        return Action(
            description=f"replay {todo} failed event(s) of {d['host']} via {d['via']} at most "
                        f"{d['rate']:g}/s (~{format_duration(max(seconds, 1))})",
            commands=tuple(commands),
            impact=f"writes up to {sendable} event(s) to Kafka, each once (journaled by content hash); events "
                   f"refused again go to {d['report']}",
            rollback="none: replayed events stay in Kafka",
            data={"todo": todo},
        )

    def apply(self, ctx: RunContext, action: Action) -> None:

        env = environment(ctx)
        host = target_host(ctx)
        service = service_of(host, str(self.params["service"]))
        via = str(self.params["via"])
        dest = _destination(host, service, via)
        facts = ctx.facts
        sel = _select(ctx, env, host, service, self.params)
        if not sel.frozen:
            facts.set(_worklist_key(host), sorted({i.key for i in sel.items}))  # before the first send
        ledger = _ledger(env, ctx.run_id, host)
        report = report_path(env, ctx.run_id, str(self.params["report"]))
        replay = _Replay(ctx, env, host, via, dest, ledger, report, float(self.params["rate"]))
        try:
            for key in sel.missing:
                if not ledger.done(key):
                    replay.reject(key, None, "no longer in the failed-events log (rotated?)")
            for item in sel.items:
                if item.problem and not ledger.done(item.key):
                    replay.reject(item.key, item, item.problem)
            replay.resolve_interrupted([i for i in sel.items if ledger.state.get(i.key) == "intent"])
            replay.send([i for i in sel.items if not ledger.done(i.key)])
        finally:
            replay.close()
        c = ledger.counts([i.key for i in sel.items] + sel.missing)
        ctx.progress(f"  {host.name}: replayed {c['sent']} event(s), {c['found']} found already in Kafka, "
                     f"{c['rejected']} rejected" + (f" -> {report}" if c["rejected"] else ""))
        ctx.record("failed_events_replayed", host=host.name, report=report, **c)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        host = target_host(ctx)
        worklist = ctx.facts.get(_worklist_key(host))
        if worklist is None:
            return  # nothing was selected: the step was a no-op
        ledger = _ledger(env, ctx.run_id, host)
        left = [k for k in worklist if not ledger.done(k)]
        if left:
            raise CheckFailed(f"{len(left)} of {len(worklist)} selected event(s) of {host.name} have no recorded "
                              "outcome", hint="resume the run: it looks for them in Kafka before sending again")


class _Replay:
    """One apply's sending: rate, batches, ledger records, report lines."""

    def __init__(self, ctx: RunContext, env: Environment, host: Host, via: str, dest: str, ledger: Ledger,
                 report: str, rate: float) -> None:

        self.ctx, self.env, self.host, self.via, self.dest = ctx, env, host, via, dest
        self.ledger, self.report, self.rate = ledger, report, rate
        self.producer, self.poster = replay_adapters(env)
        # One intent and one outcome record (two fsyncs) per batch, not per event; a batch is what a
        # resume may have to look for in Kafka. Via http each event is still its own POST.
        self.batch = max(1, min(100, int(rate / 10)))

    def close(self) -> None:
        self.producer.close()
        self.poster.close()

    def reject(self, key: str, item: ReplayItem | None, why: str) -> None:
        """Report first, then the ledger: a crash between the two leaves a line twice (same ``key``), never
        a rejected event missing from the report."""
        line = {"host": self.host.name, "key": key, "why": why, "topic": item.topic if item else None,
                "line": item.event.line if item else None, "message": item.event.message if item else None,
                "rawEvent": item.event.raw if item else None, "time": time.time()}
        Path(self.report).parent.mkdir(parents=True, exist_ok=True)
        with open(self.report, "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.ledger.append("rejected", key, why=why[:300])

    def resolve_interrupted(self, items: list[ReplayItem]) -> None:
        """Sends whose outcome was never recorded: found in their topic -> done; else sent again below."""
        if not items:
            return

        newest = max(self.ledger.intent_ms.get(i.key, 0) for i in items) / 1000
        wait = newest + GRACE[self.via] - time.time()
        if wait > 0:
            self.ctx.progress(f"  {self.host.name}: {len(items)} interrupted send(s); waiting {wait:.0f}s for "
                              "any still in flight to land before looking for them")
            self._sleep(wait)
        since = min(self.ledger.intent_ms.get(i.key, 0) for i in items) - CLOCK_SLACK_MS
        wanted = {i.key: i for i in items}
        topics = sorted({i.topic for i in items if i.topic})
        found: list[str] = []
        for _topic, value in find_values(self.env.cluster.kafka, topics, since):
            h = value_hash(value)
            if h in wanted and h not in found:
                found.append(h)
        if found:
            self.ledger.append("found", found)
        self.ctx.record("failed_events_interrupted", host=self.host.name, interrupted=len(items), found=len(found))
        self.ctx.progress(f"  {self.host.name}: {len(items)} interrupted send(s): {len(found)} already in Kafka, "
                          f"{len(items) - len(found)} to send again")

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.ctx.pause_requested():
                raise Interrupted(f"replay on {self.host.name} interrupted by the operator")
            time.sleep(min(left, 0.2))

    def send(self, items: list[ReplayItem]) -> None:

        started, sent, last_line = time.monotonic(), 0, time.monotonic()
        uncertain: list[str] = []
        for start in range(0, len(items), self.batch):
            batch = items[start:start + self.batch]
            self._sleep(started + sent / self.rate - time.monotonic())
            keys = [i.key for i in batch]
            self.ledger.append("intent", keys)
            if self.via == "kafka":
                outcomes = self.producer.produce([(str(i.topic), i.event.raw.encode()) for i in batch])
            else:
                outcomes = [self.poster.post(self.dest, i.event.raw.encode()) for i in batch]
            ok = [i.key for i, o in zip(batch, outcomes, strict=True) if o.status == SENT]
            if ok:
                self.ledger.append("sent", ok)
            for i, o in zip(batch, outcomes, strict=True):
                if o.status == REJECTED:
                    self.reject(i.key, i, o.detail)
                elif o.status == UNCERTAIN:
                    uncertain.append(f"{i.key[:12]}: {o.detail}")
            sent += len(batch)
            if time.monotonic() - last_line >= 5:
                last_line = time.monotonic()
                self.ctx.progress(f"  {self.host.name}: {sent}/{len(items)} event(s) sent "
                                  f"({sent / max(time.monotonic() - started, 1e-3):.1f}/s)")
            if len(uncertain) >= 3 or (uncertain and start + self.batch >= len(items)):
                raise UnreachableError(
                    f"{len(uncertain)} replayed event(s) of {self.host.name} may not have been written "
                    f"({uncertain[0]})",
                    hint="the run looks for them in Kafka before sending them again; check Kafka/eventbus, "
                         "then resume")
        if uncertain:  # pragma: no cover - raised above
            raise UnreachableError(f"{len(uncertain)} event(s) may not have been written")


def _check(params: Mapping[str, Any]) -> str | None:
    if str(params.get("via")) not in VIAS:
        return f"via must be one of {', '.join(VIAS)}, not {params.get('via')!r}"
    topic = str(params.get("topic") or "")
    if topic:
        try:
            re.compile(topic)
        except re.error as exc:
            return f"topic {topic!r} is not a valid regular expression: {exc}"
    return None


register_step("failed_events.replay", ReplayFailedEvents, [
    Param("service", "str", required=True, help="service name from the inventory (services:), e.g. eventbus"),
    Param("since", "duration", default=0.0, min=0, max=30 * 86400.0,
          help="only events failed in the last DURATION (0: the whole log); frozen at the first apply"),
    Param("topic", "str", default="", help="only events whose stream matches this regular expression"),
    Param("via", "str", default="kafka", help="kafka: produce to <dc>.<stream>; http: POST to the host's eventbus"),
    Param("rate", "float", default=50.0, min=0.1, max=10000.0, help="at most this many events per second"),
    Param("report", "str", default="", help="file for events refused again (default: the run's directory)"),
], irreversible="replayed events stay in Kafka (a produce cannot be undone)", check=_check)
