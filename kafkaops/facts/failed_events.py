"""Failed events: the EventError records eventbus appends to its failed-events log, parsed and grouped.

eventlogging-service-eventbus writes every event it could not produce to a local file instead of Kafka
(the runbook: "to make it more likely that we are able to capture events that fail due to Kafka
issues"), one EventError per line, the failed event kept as a JSON *string* in ``rawEvent``. Before
replaying them an operator needs to know what is in there: how many, for which streams, failing why,
since when — and replaying needs each event's exact content, its destination topic and a stable
identity, so that a resumed replay never sends one twice.

Two record shapes are read (both one JSON object per line):

* production eventlogging (``eventlogging.utils.create_event_error``)::

    {"schema": "EventError", "revision": 14035058, "uuid": "…", "recvFrom": "kafka1001.eqiad.wmnet",
     "timestamp": 1467760000, "event": {"rawEvent": "{\\"meta\\": {\\"topic\\": …}}", "message": "…",
                                         "code": "processor", "schema": "…", "revision": -1}}

* the lab's eventbus (:mod:`kafkaops_lab.eventbus`): ``{"rawEvent": "…", "message": "…", "dt": epoch}``.

The log is whatever the host holds: a line cut by a full disk or a crash, a stray banner, an editor's
leftovers. A line that is not an EventError is *counted and shown* (line number, first characters) and
never stops the listing; an EventError whose ``rawEvent`` is not a JSON object, or names no stream, is
an event that cannot be replayed: it goes to the replay's report, not to Kafka.

Everything here is pure (no command, no client library): :mod:`kafkaops.cli.failed_events` and
:mod:`kafkaops.steps.failed_events` hand the log's text over.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: How much of a malformed line is shown (never the whole line: it may be megabytes, or hostile).
HEAD_CHARS = 80
#: How much of an error message names its group (messages carry offsets and ids past this).
GROUP_MESSAGE_CHARS = 120
#: Kafka's legal topic names (``kafka.common.Topic``): a stream that does not make one is not sent.
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")


def canonical_json(event: Any) -> str:
    """The canonical JSON text of an event: sorted keys, no whitespace, UTF-8 kept.

    Two serialisations of one event (the client's, eventbus's ``json.dumps``, the failed log's
    re-encoding) have the same canonical text, so the content hash identifies the event wherever it is
    found — in the failed log, in the replay's ledger, in the destination topic.
    """
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(event: Any) -> str:
    """sha256 (hex) of :func:`canonical_json`: the event's identity for the replay's ledger."""
    return hashlib.sha256(canonical_json(event).encode()).hexdigest()


def value_hash(value: bytes | str) -> str | None:
    """The content hash of a Kafka record value, or None when the value is not JSON."""
    try:
        return content_hash(json.loads(value))
    except (ValueError, UnicodeDecodeError):
        return None


def event_stream(event: Any) -> str | None:
    """The event's stream: ``meta.stream`` (current schemas), else ``meta.topic`` (older EventBus)."""
    if not isinstance(event, dict):
        return None
    meta = event.get("meta")
    if not isinstance(meta, dict):
        return None
    for key in ("stream", "topic"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def destination_topic(dc: str, stream: str) -> str | None:
    """``<dc>.<stream>``, the topic eventbus and ``eventlogging-replay`` produce to, or None when that is
    not a legal Kafka topic name (a stream with a space or a slash is not sent anywhere)."""
    topic = f"{dc}.{stream}"
    return topic if _TOPIC_RE.fullmatch(topic) else None


@dataclass(frozen=True)
class FailedEvent:
    """One EventError of the log.

    Attributes:
        line: 1-based line number in the log.
        raw: The failed event as it was received (``rawEvent``), text.
        message: Why eventbus failed it.
        time: When (epoch seconds), None when the record does not say.
        event: The parsed event (a JSON object), None when ``raw`` is not one.
        stream: ``meta.stream`` or ``meta.topic`` of the event, None when it has neither.
        problem: Why the event cannot be replayed as is (not JSON, not an object, no stream), or "".
    """

    line: int
    raw: str
    message: str
    time: float | None
    event: dict[str, Any] | None
    stream: str | None
    problem: str = ""

    @property
    def key(self) -> str:
        """The event's identity: the hash of its canonical JSON, or of the raw text when it is not JSON
        (such an event is never sent, but is still reported once, not once per copy)."""
        if self.event is not None:
            return content_hash(self.event)
        return hashlib.sha256(self.raw.encode(errors="replace")).hexdigest()

    @property
    def replayable(self) -> bool:
        return not self.problem

    @property
    def topic_label(self) -> str:
        """The stream for grouping, or a placeholder saying why there is none."""
        return self.stream or ("(no stream)" if self.event is not None else "(not JSON)")


@dataclass(frozen=True)
class MalformedLine:
    """A line of the log that is not an EventError record.

    Attributes:
        line: 1-based line number.
        head: Its first :data:`HEAD_CHARS` characters (escaped by the renderer, never interpreted).
        why: What is wrong with it.
    """

    line: int
    head: str
    why: str


@dataclass(frozen=True)
class FailedEventsLog:
    """A parsed failed-events log: its EventErrors and the lines that are not."""

    events: tuple[FailedEvent, ...] = ()
    malformed: tuple[MalformedLine, ...] = ()
    lines: int = 0


def _time(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000.0 if value > 1e11 else float(value)  # epoch ms (Java writers) or s
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _decode_raw(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The event in ``rawEvent`` and why it is not replayable ("" when it is).

    ``rawEvent`` is the received body as text. A body that was itself a JSON *string* (double-encoded
    by an older lab eventbus) is unwrapped once.
    """
    try:
        value = json.loads(raw)
    except ValueError:
        return None, "rawEvent is not valid JSON"
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None, "rawEvent is not valid JSON"
    if not isinstance(value, dict):
        return None, f"rawEvent is a JSON {type(value).__name__}, not an event object"
    if event_stream(value) is None:
        return value, "event has no meta.stream or meta.topic"
    return value, ""


def _record(number: int, data: dict[str, Any]) -> FailedEvent | str:
    """The EventError of one parsed line, or why it is not one."""
    body: Any = data.get("event") if "rawEvent" not in data else data
    if not isinstance(body, dict) or "rawEvent" not in body:
        return "no rawEvent (neither an eventlogging EventError nor eventbus's failed-event record)"
    raw = body["rawEvent"]
    if not isinstance(raw, str):
        raw = json.dumps(raw)  # a writer that embedded the object itself: still the event
    message = body.get("message")
    when = _time(data.get("dt")) or _time(data.get("timestamp"))
    meta = data.get("meta")
    if when is None and isinstance(meta, dict):
        when = _time(meta.get("dt"))
    event, problem = _decode_raw(raw)
    return FailedEvent(line=number, raw=raw, message=str(message) if message is not None else "",
                       time=when, event=event, stream=event_stream(event), problem=problem)


def parse_failed_events(text: str) -> FailedEventsLog:
    """Parse a failed-events log (the output of the inventory's ``failed_events_read``).

    Never raises for what the file holds: a line that is not an EventError is a :class:`MalformedLine`.
    Blank lines are skipped (a trailing newline is not a record).
    """
    events: list[FailedEvent] = []
    malformed: list[MalformedLine] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        head = line[:HEAD_CHARS]
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            why = "not JSON (a line cut short?)" if line.lstrip().startswith("{") else f"not JSON ({exc.msg})"
            malformed.append(MalformedLine(number, head, why))
            continue
        if not isinstance(data, dict):
            malformed.append(MalformedLine(number, head, f"a JSON {type(data).__name__}, not a record"))
            continue
        record = _record(number, data)
        if isinstance(record, str):
            malformed.append(MalformedLine(number, head, record))
        else:
            events.append(record)
    return FailedEventsLog(tuple(events), tuple(malformed), len(lines))


def select(events: Iterable[FailedEvent], *, since: float | None = None, topic: re.Pattern[str] | None = None,
           now: float) -> list[FailedEvent]:
    """The events of the last ``since`` seconds (an event without a time is kept: it cannot be said to be
    older) whose stream matches ``topic`` (searched; events without a stream match only ``.*``-like
    patterns through their placeholder label)."""
    out = []
    for e in events:
        if since is not None and e.time is not None and e.time < now - since:
            continue
        if topic is not None and not topic.search(e.stream or e.topic_label):
            continue
        out.append(e)
    return out


def unique(events: Iterable[FailedEvent]) -> list[FailedEvent]:
    """The first occurrence of each distinct event (by :attr:`FailedEvent.key`), in log order.

    An event eventbus failed twice (a client retry, a replay through eventbus that failed again) is in
    the log twice; it is one event and is replayed once."""
    seen: set[str] = set()
    out = []
    for e in events:
        if e.key not in seen:
            seen.add(e.key)
            out.append(e)
    return out


def message_group(message: str) -> str:
    """The part of an error message that names its group: the first line, cut at
    :data:`GROUP_MESSAGE_CHARS`."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return first[:GROUP_MESSAGE_CHARS]


@dataclass
class Group:
    """Failed events of one host, stream and error.

    Attributes:
        host: Host name.
        topic: Stream (or a placeholder when the event names none).
        error: The error message's group (:func:`message_group`).
        count: Records (lines) in the group.
        first: Oldest record time (None: no record had one).
        last: Newest record time.
    """

    host: str
    topic: str
    error: str
    count: int = 0
    first: float | None = None
    last: float | None = None

    def add(self, e: FailedEvent) -> None:
        self.count += 1
        if e.time is not None:
            self.first = e.time if self.first is None else min(self.first, e.time)
            self.last = e.time if self.last is None else max(self.last, e.time)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "topic": self.topic, "error": self.error, "count": self.count,
                "first": self.first, "last": self.last}


def group(per_host: Sequence[tuple[str, Sequence[FailedEvent]]]) -> list[Group]:
    """Count events per (host, stream, error), largest groups first, then by host, stream and error."""
    groups: dict[tuple[str, str, str], Group] = {}
    for host, events in per_host:
        for e in events:
            key = (host, e.topic_label, message_group(e.message))
            groups.setdefault(key, Group(*key)).add(e)
    return sorted(groups.values(), key=lambda g: (-g.count, g.host, g.topic, g.error))


@dataclass(frozen=True)
class ReplayItem:
    """One distinct event to replay, with where it goes.

    Attributes:
        key: Content hash (the ledger's identity).
        event: The failed event.
        topic: Destination topic (``<dc>.<stream>``), None when the event cannot be sent.
        problem: Why it cannot be sent ("" when it can).
    """

    key: str
    event: FailedEvent
    topic: str | None
    problem: str = ""


@dataclass(frozen=True)
class ReplaySelection:
    """What a replay from one host would send: distinct events, and how many log lines they came from."""

    items: tuple[ReplayItem, ...] = ()
    records: int = 0
    duplicates: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)


def replay_items(events: Sequence[FailedEvent], *, dc: str, topics: Collection[str] | None = None) -> ReplaySelection:
    """The distinct events of ``events``, each with its destination topic (``<dc>.<stream>``) or the
    reason it cannot be sent, and the count per destination (``(rejected)`` for the unsendable).

    ``topics``: the topics the cluster has; an event for another is not sent (producing to a topic that
    does not exist waits out the producer's timeout, and would be created where auto-creation is on)."""
    items = []
    per_topic: dict[str, int] = {}
    distinct = unique(events)
    for e in distinct:
        topic = destination_topic(dc, e.stream) if e.stream else None
        problem = e.problem or ("" if topic else f"{dc}.{e.stream} is not a valid Kafka topic name")
        if not problem and topics is not None and topic not in topics:
            problem = f"topic {topic} does not exist"
        items.append(ReplayItem(e.key, e, topic if not problem else None, problem))
        label = topic if not problem and topic else "(rejected: not sendable)"
        per_topic[label] = per_topic.get(label, 0) + 1
    return ReplaySelection(tuple(items), len(events), len(events) - len(distinct), dict(sorted(per_topic.items())))
