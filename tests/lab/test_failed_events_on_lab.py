"""Failed events in the lab: a Kafka outage fills a host's failed-events log, then `kafkaops failed-events`
lists and replays it — each event exactly once, even when the replay is SIGKILLed and resumed.

The outage is the lab eventbus's ``eventbus_produce_fails`` knob: every produce fails as in a Kafka outage
(HTTP 500) and the event lands in the host's failed-events log. Counts are taken from Kafka itself, by
content (each test's events carry a marker of their own), never from what kafkaops says it did.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from harness import kafkaops, output, spawn
from invariants import only_run

from kafkaops.facts.failed_events import content_hash
from kafkaops.model import Cluster
from kafkaops_lab.eventbus import PRODUCE_FAILS_KNOB
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "kafka1002"
STREAMS = ("test.event", "mediawiki.revision-create")
TOPICS = tuple(f"eqiad.{s}" for s in STREAMS)


def _events(n: int) -> tuple[str, list[dict[str, object]]]:
    marker = uuid.uuid4().hex
    return marker, [{"meta": {"stream": STREAMS[i % 2], "id": str(uuid.uuid4()),
                              "dt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                     "marker": marker, "seq": i} for i in range(n)]


def _post(host: LabHost, body: bytes) -> int:
    url = f"http://{host.host.address}:{host.host.http_port}/v1/events"
    return requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=30).status_code


def _outage(host: LabHost, events: list[dict[str, object]], extra: list[bytes] = ()) -> None:  # type: ignore[assignment]
    """Fail ``events`` (and the ``extra`` bodies) into the host's failed-events log, which starts empty."""
    (host.dirs.log / "failed_events.log").write_text("")
    host.set_knob(PRODUCE_FAILS_KNOB, 1)
    try:
        codes = Counter(_post(host, json.dumps(e).encode()) for e in events)
        extra_codes = [_post(host, body) for body in extra]
    finally:
        host.set_knob(PRODUCE_FAILS_KNOB, None)
    assert codes == {500: len(events)}, codes  # Kafka's fault: the client may retry
    assert all(code == 400 for code in extra_codes), extra_codes  # the event's own fault
    assert _post(host, json.dumps({"meta": {"stream": "test.event"}, "probe": True}).encode()) == 201  # cleared


def _in_kafka(cluster: Cluster, marker: str, since_ms: int) -> Counter[str]:
    """Records of this test in the destination topics, counted by content hash."""
    from kafkaops.systems.events import find_values

    out: Counter[str] = Counter()
    for _topic, value in find_values(cluster.kafka, TOPICS, since_ms):
        try:
            event = json.loads(value)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("marker") == marker:
            out[content_hash(event)] += 1
    return out


@pytest.fixture
def lab(pooled_lab: Cluster) -> Iterator[Cluster]:
    """The lab, with the eventbus of HOST restarted (a process runs the code it started with: a lab
    brought up before the knob existed would ignore it); the knob is cleared afterwards."""
    host = LabHost.named(HOST)
    host.stop("eventbus")
    host.start("eventbus")
    yield pooled_lab
    host.set_knob(PRODUCE_FAILS_KNOB, None)


def test_an_outage_is_listed_grouped_and_replayed_through_eventbus_once(lab: Cluster, home: Path) -> None:
    n = 20
    host = LabHost.named(HOST)
    marker, events = _events(n)
    since_ms = int(time.time() * 1000)
    unknown = {"meta": {"stream": "no.such.stream", "id": "u1"}, "marker": marker}
    broken = [b'{"meta": {"stream": "test.event"', json.dumps({"marker": marker}).encode()]  # not JSON; no stream
    _outage(host, [*events, unknown], extra=broken)
    with open(host.dirs.log / "failed_events.log", "a") as f:
        f.write('{"rawEvent": "{\\"meta\\": {\\"str\n')  # a line cut short by a full disk

    listed = kafkaops(home, lab, "failed-events", "list", HOST, "-o", "json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    data = json.loads(listed.stdout)
    assert data["total"] == n + 3 and data["malformed"] == 1
    (h,) = data["hosts"]
    assert h["malformed"][0]["line"] == n + 4 and h["not_replayable"] == 2
    knob_groups = {g["topic"]: g["count"] for g in data["groups"] if "_MSG_TIMED_OUT" in g["error"]}
    assert knob_groups == {"test.event": n // 2, "mediawiki.revision-create": n // 2, "no.such.stream": 1}
    table = kafkaops(home, lab, "failed-events", "list", "lab", "--topic", "^test")
    assert table.returncode == 0 and f"{HOST}: {n // 2} of {n + 3} record(s) selected" in table.stdout, table.stdout

    report = home / "rejected.jsonl"
    started = time.monotonic()
    replay = kafkaops(home, lab, "failed-events", "replay", HOST, "--via", "http", "--rate", "100", "--yes",
                      "--reason", "lab test: replay through eventbus", "--output-invalid", str(report), "-o", "json")
    seconds = time.monotonic() - started
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"rejected events: 3, written to {report}" in replay.stderr, replay.stderr
    summary = json.loads(replay.stdout[replay.stdout.rindex('{\n  "replay"'):])["replay"]
    assert summary["hosts"][HOST] == {"sent": n, "found": 0, "rejected": 3}, summary
    seen = _in_kafka(lab, marker, since_ms)
    assert sorted(seen) == sorted(content_hash(e) for e in events) and set(seen.values()) == {1}, seen
    rejected = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["why"] for r in rejected) == ["event has no meta.stream or meta.topic",
                                                  "rawEvent is not valid JSON",
                                                  "topic eqiad.no.such.stream does not exist"]
    print(f"replay via http of {n} events + 3 rejected: {seconds:.1f}s end to end")


def _ledger(home: Path) -> Path:
    return home / "runs" / only_run(home) / f"replay-{HOST}.jsonl"


def test_a_replay_killed_mid_way_and_resumed_sends_each_event_exactly_once(lab: Cluster, home: Path) -> None:
    n, rate = 40, 8
    host = LabHost.named(HOST)
    marker, events = _events(n)
    since_ms = int(time.time() * 1000)
    _outage(host, events)
    proc = spawn(home, lab, "failed-events", "replay", HOST, "--via", "kafka", "--rate", str(rate), "--yes",
                 "--reason", "lab test: killed replay")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        runs = home / "runs"
        ledgers = list(runs.glob(f"*/replay-{HOST}.jsonl")) if runs.exists() else []
        if ledgers and ledgers[0].read_text().count('"s":"sent"') >= n // 3:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, output(proc)
    # Make the kill land between a send and its record, whatever moment it hit: the last acknowledged
    # batch loses its "sent" record, so its events are in Kafka with only their intent journaled.
    ledger = _ledger(home)
    lines = [line for line in ledger.read_text().splitlines() if line.startswith("{") and line.endswith("}")]
    last_sent = max(i for i, line in enumerate(lines) if '"s":"sent"' in line)
    acked = len(json.loads(lines[last_sent])["k"])  # in Kafka, with only its intent left in the ledger
    lines = lines[:last_sent] + lines[last_sent + 1:]
    ledger.write_text("\n".join(lines) + "\n")
    # The kill itself may also have landed between a later intent and its "sent" (CI, 2026-11-26): that send
    # is interrupted too, in Kafka or not. Every intent without a "sent" is one the resume must look for.
    records = [json.loads(line) for line in lines]
    sent = {k for r in records if r["s"] == "sent" for k in r["k"]}
    interrupted = len({k for r in records if r["s"] == "intent" for k in r["k"]} - sent)
    before = _in_kafka(lab, marker, since_ms)
    assert 0 < sum(before.values()) < n and set(before.values()) == {1}, before

    started = time.monotonic()
    resumed = kafkaops(home, lab, "resume", only_run(home))
    seconds = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    said = re.search(r"(\d+) interrupted send\(s\): (\d+) already in Kafka, (\d+) to send again", resumed.stderr)
    assert said is not None, resumed.stderr
    total, found, again = map(int, said.groups())
    assert total == interrupted and found >= acked and found + again == total, (acked, interrupted, resumed.stderr)
    seen = _in_kafka(lab, marker, since_ms)
    assert sorted(seen) == sorted(content_hash(e) for e in events), (len(seen), n)
    assert set(seen.values()) == {1}, {k[:12]: v for k, v in seen.items() if v > 1}
    print(f"killed after {sum(before.values())}/{n} events; resume sent {n - sum(before.values())} "
          f"at --rate {rate} in {seconds:.1f}s")
