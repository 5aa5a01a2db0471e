"""Failed-events parsing, grouping and the replay's bookkeeping, from recorded-looking log lines.

The log is whatever a host holds: the lab eventbus's records, production eventlogging's EventErrors (the
event as a JSON *string* in ``event.rawEvent``), a line cut short by a crash, a stray banner. Listing
never crashes on any of it; replay identifies each event by its content, however it was serialised.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kafkaops.engine.step import Observation
from kafkaops.facts.failed_events import (
    canonical_json,
    content_hash,
    destination_topic,
    event_stream,
    group,
    parse_failed_events,
    replay_items,
    select,
    unique,
    value_hash,
)
from kafkaops.model import KafkaEndpoint

NOW = 1_700_000_000.0

EVENT_A = {"meta": {"stream": "mediawiki.revision-create", "id": "a1", "dt": "2023-11-14T22:13:20Z"}, "rev_id": 1}
EVENT_B = {"meta": {"topic": "mediawiki.page-delete", "id": "b2"}, "page_id": 7}

#: The lab eventbus's records (kafkaops_lab.eventbus), as `cat` returns them.
LAB_LINES = [
    json.dumps({"rawEvent": json.dumps(EVENT_A), "message": 'KafkaError{code=_MSG_TIMED_OUT,val=-192,str="Local: '
                'Message timed out"}', "dt": NOW - 30}),
    json.dumps({"rawEvent": json.dumps(EVENT_A, indent=1), "message": 'KafkaError{code=_MSG_TIMED_OUT,val=-192,str="'
                'Local: Message timed out"}',
                "dt": NOW - 20}),  # the same event failed again (a client retry), serialised differently
    json.dumps({"rawEvent": "{not json", "message": "invalid JSON: Expecting property name", "dt": NOW - 10}),
    json.dumps({"rawEvent": json.dumps({"meta": {"id": "x"}}), "message": "event lacks meta.stream", "dt": NOW - 5}),
]

#: Production eventlogging's EventError (eventlogging.utils.create_event_error): rawEvent is the body text.
PROD_LINE = json.dumps({
    "schema": "EventError", "revision": 14035058, "wiki": "", "uuid": "5f1d0b2a9c5e11e6a4f2141877614309",
    "recvFrom": "kafka1001.eqiad.wmnet", "timestamp": int(NOW - 3600),
    "event": {"rawEvent": json.dumps(EVENT_B), "message": "Failed sending event: KafkaTimeoutError",
              "code": "processor", "schema": "unknown", "revision": -1},
})


def test_lab_and_production_records_parse_into_events() -> None:
    log = parse_failed_events("\n".join([*LAB_LINES, PROD_LINE]) + "\n")
    assert log.malformed == ()
    assert [e.line for e in log.events] == [1, 2, 3, 4, 5]
    a, a_again, bad, nostream, prod = log.events
    assert a.stream == "mediawiki.revision-create" and a.problem == "" and a.time == NOW - 30
    assert a.key == a_again.key == content_hash(EVENT_A)  # same content, whatever the whitespace
    assert bad.event is None and bad.problem == "rawEvent is not valid JSON" and bad.topic_label == "(not JSON)"
    assert nostream.problem == "event has no meta.stream or meta.topic" and nostream.topic_label == "(no stream)"
    assert prod.stream == "mediawiki.page-delete"  # meta.topic, older EventBus schemas
    assert prod.time == NOW - 3600 and prod.message.startswith("Failed sending event")
    assert prod.event == EVENT_B


def test_malformed_lines_are_counted_with_their_line_number_and_head_never_raised() -> None:
    text = "\n".join([
        LAB_LINES[0],
        '{"rawEvent": "{\\"meta\\": {\\"stream\\": \\"x\\"', # cut short by a crash
        "eventbus started",                                   # a stray banner
        "[1, 2, 3]",                                          # JSON, not a record
        json.dumps({"message": "no raw event here"}),         # a record of something else
        "",
        "x" * 5000,                                           # long garbage: only its head is kept
        LAB_LINES[1],
    ])
    log = parse_failed_events(text)
    assert [e.line for e in log.events] == [1, 8]
    assert [(m.line, m.why.split(" (")[0]) for m in log.malformed] == [
        (2, "not JSON"), (3, "not JSON"), (4, "a JSON list, not a record"), (5, "no rawEvent"), (7, "not JSON")]
    assert log.malformed[0].why == "not JSON (a line cut short?)"
    assert all(len(m.head) <= 80 for m in log.malformed)
    assert log.lines == 8


def test_a_double_encoded_raw_event_is_unwrapped_once() -> None:
    line = json.dumps({"rawEvent": json.dumps(json.dumps(EVENT_A)), "message": "m", "dt": NOW})
    (e,) = parse_failed_events(line).events
    assert e.event == EVENT_A and e.problem == ""


def test_raw_event_that_is_not_an_object_is_not_replayable() -> None:
    (e,) = parse_failed_events(json.dumps({"rawEvent": "[1,2]", "message": "m"})).events
    assert e.problem == "rawEvent is a JSON list, not an event object" and e.time is None


@pytest.mark.parametrize("dt,expected", [(NOW, NOW), (NOW * 1000, NOW), ("2023-11-14T22:13:20Z", NOW),
                                         (str(NOW), NOW), ("yesterday", None), (True, None)])
def test_record_times_in_every_shape(dt: object, expected: float | None) -> None:
    (e,) = parse_failed_events(json.dumps({"rawEvent": json.dumps(EVENT_A), "message": "m", "dt": dt})).events
    assert e.time == expected


def test_canonical_json_ignores_key_order_and_whitespace() -> None:
    reordered = json.loads('{"rev_id": 1, "meta": {"dt": "2023-11-14T22:13:20Z", "id": "a1", '
                           '"stream": "mediawiki.revision-create"}}')
    assert canonical_json(reordered) == canonical_json(EVENT_A)
    assert value_hash(json.dumps(EVENT_A, indent=2).encode()) == content_hash(EVENT_A)
    assert value_hash(b"\xff not json") is None
    assert content_hash({**EVENT_A, "rev_id": 2}) != content_hash(EVENT_A)


def test_stream_and_destination_topic() -> None:
    assert event_stream(EVENT_A) == "mediawiki.revision-create"
    assert event_stream({"meta": {"stream": " ", "topic": "t"}}) == "t"
    assert event_stream({"meta": "x"}) is None and event_stream([1]) is None
    assert destination_topic("eqiad", "mediawiki.revision-create") == "eqiad.mediawiki.revision-create"
    assert destination_topic("eqiad", "bad stream/name") is None


def test_select_by_time_and_stream() -> None:
    events = parse_failed_events("\n".join([*LAB_LINES, PROD_LINE])).events
    recent = select(events, since=25, now=NOW)
    assert [e.line for e in recent] == [2, 3, 4]
    assert [e.line for e in select(events, topic=re.compile("page-delete"), now=NOW)] == [5]
    assert [e.line for e in select(events, topic=re.compile("^mediawiki"), since=3600, now=NOW)] == [1, 2, 5]
    assert [e.line for e in unique(events)] == [1, 3, 4, 5]


def test_groups_count_per_host_stream_and_error() -> None:
    events = parse_failed_events("\n".join(LAB_LINES)).events
    prod = parse_failed_events(PROD_LINE).events
    groups = group([("kafka1001", events), ("kafka1002", prod)])
    rows = [(g.host, g.topic, g.error[:25], g.count) for g in groups]
    assert rows[0] == ("kafka1001", "mediawiki.revision-create", "KafkaError{code=_MSG_TIME", 2)
    assert sorted(rows[1:]) == [("kafka1001", "(no stream)", "event lacks meta.stream", 1),
                                ("kafka1001", "(not JSON)", "invalid JSON: Expecting p", 1),
                                ("kafka1002", "mediawiki.page-delete", "Failed sending event: Kaf", 1)]
    assert groups[0].first == NOW - 30 and groups[0].last == NOW - 20
    assert groups[0].to_dict()["count"] == 2


def test_replay_items_send_each_event_once_and_count_per_destination() -> None:
    events = parse_failed_events("\n".join([*LAB_LINES, PROD_LINE])).events
    sel = replay_items(events, dc="eqiad")
    assert sel.records == 5 and sel.duplicates == 1 and len(sel.items) == 4
    assert sel.per_topic == {"(rejected: not sendable)": 2, "eqiad.mediawiki.page-delete": 1,
                             "eqiad.mediawiki.revision-create": 1}
    assert [i.topic for i in sel.items if not i.problem] == ["eqiad.mediawiki.revision-create",
                                                              "eqiad.mediawiki.page-delete"]
    known = replay_items(events, dc="eqiad", topics={"eqiad.mediawiki.revision-create"})
    assert [i.problem for i in known.items if i.event.stream == "mediawiki.page-delete"] == [
        "topic eqiad.mediawiki.page-delete does not exist"]
    assert known.per_topic["(rejected: not sendable)"] == 3


# --- the replay's ledger and plan ---------------------------------------------------------------------


def test_the_ledger_survives_a_torn_last_line_and_keeps_terminal_states(tmp_path: Path) -> None:
    from kafkaops.steps.failed_events import Ledger

    path = tmp_path / "replay-kafka1001.jsonl"
    ledger = Ledger.open(path)
    ledger.append("intent", ["a", "b", "c"])
    ledger.append("sent", ["a"])
    ledger.append("rejected", "c", why="HTTP 400")
    with open(path, "a") as f:
        f.write('{"s": "sent", "k": ["b"')  # killed mid-write: that record never happened
    again = Ledger.open(path)
    assert again.state == {"a": "sent", "b": "intent", "c": "rejected"}
    assert again.counts(["a", "b", "c", "d"]) == {"sent": 1, "found": 0, "rejected": 1, "interrupted": 1, "left": 1}
    again.append("intent", ["a"])  # an intent never reopens an event already done
    assert again.done("a") and not again.done("b")


def _obs(**over: object) -> Observation:
    data: dict[str, object] = {
        "host": "kafka1001", "service": "eventbus", "path": "/srv/log/failed.log", "lines": 6, "records": 5,
        "malformed": 1, "selected": 5, "distinct": 4, "duplicates": 1,
        "per_topic": {"(rejected: not sendable)": 2, "eqiad.mediawiki.page-delete": 1,
                      "eqiad.mediawiki.revision-create": 1},
        "via": "kafka", "destination": "kafka", "rate": 50.0, "report": "/tmp/r.jsonl", "frozen": False,
        "missing": 0, "unsendable": 2, "sent": 0, "found": 0, "rejected": 0, "interrupted": 0, "left": 4,
        "since": 0.0, "topic": "",
    }
    data.update(over)
    return Observation(data, summary="")


def test_the_plan_shows_counts_per_destination_and_the_report() -> None:
    from kafkaops.engine.step import Action
    from kafkaops.steps.failed_events import ReplayFailedEvents

    step = ReplayFailedEvents({})
    action = step.plan(_obs())
    assert isinstance(action, Action)
    assert action.description.startswith("replay 4 failed event(s) of kafka1001 via kafka at most 50/s")
    assert "eqiad.mediawiki.revision-create: 1 event(s) -> produce (acks=all, idempotent producer)" in action.commands
    assert "2 event(s) not sendable (not JSON, no stream, no such topic) -> report /tmp/r.jsonl" in action.commands
    assert "writes up to 2 event(s)" in action.impact
    http = step.plan(_obs(via="http", destination="http://127.0.10.1:8085/v1/events"))
    assert isinstance(http, Action)
    assert any(c.startswith("eqiad.mediawiki.page-delete: 1 event(s) -> POST http://127.0.10.1:8085/v1/events")
               for c in http.commands)
    resumed = step.plan(_obs(frozen=True, sent=2, rejected=1, interrupted=1, left=0, unsendable=0))
    assert isinstance(resumed, Action)
    assert resumed.description.startswith("replay 1 failed event(s)")
    assert any("look for them in their topic first" in c for c in resumed.commands)


def test_the_plan_is_a_noop_when_everything_is_done_or_nothing_is_selected() -> None:
    from kafkaops.engine.step import Noop
    from kafkaops.steps.failed_events import ReplayFailedEvents

    step = ReplayFailedEvents({})
    done = step.plan(_obs(frozen=True, sent=2, rejected=2, left=0))
    assert isinstance(done, Noop) and "2 sent, 0 found in Kafka, 2 rejected" in done.reason
    empty = step.plan(_obs(distinct=0, left=0, per_topic={}))
    assert isinstance(empty, Noop) and "no failed events to replay" in empty.reason


def test_the_replay_parameters_are_checked_when_the_runbook_is_bound() -> None:
    from kafkaops.steps.failed_events import _check

    assert _check({"via": "kafka", "topic": ""}) is None
    assert _check({"via": "smtp", "topic": ""}) == "via must be one of kafka, http, not 'smtp'"
    assert "not a valid regular expression" in str(_check({"via": "http", "topic": "("}))


def test_the_replay_adapters_refuse_to_send_in_a_dry_run() -> None:
    from kafkaops.systems.events import EventPoster, EventProducer
    from kafkaops.systems.guard import DryRunViolation, write_methods

    assert write_methods(EventProducer) == ["produce"] and write_methods(EventPoster) == ["post"]
    with pytest.raises(DryRunViolation):
        EventProducer(KafkaEndpoint("192.0.2.1:9092"), dry_run=True).produce([("t", b"{}")])
    with pytest.raises(DryRunViolation):
        EventPoster(dry_run=True).post("http://192.0.2.1/v1/events", b"{}")


# --- command-line values -------------------------------------------------------------------------------


def test_rate_and_since_values() -> None:
    from kafkaops.cli.common import CommandLineError
    from kafkaops.cli.failed_events import parse_rate, parse_since

    assert parse_rate("50") == 50.0 and parse_rate("2.5/s") == 2.5
    for bad in ("0", "fast", "20000/s"):
        with pytest.raises(CommandLineError):
            parse_rate(bad)
    assert parse_since(None) == 0.0 and parse_since("2h") == 7200.0
    for bad in ("0s", "31d", "soon"):
        with pytest.raises(CommandLineError):
            parse_since(bad)
