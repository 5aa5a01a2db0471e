"""Issue 34 on the two-site lab: consumer offsets translated exactly, by the records themselves.

Our own client, as in the issue: 4,000 ids produced on eqiad, a group that read (and committed) 60 % of each
partition, its offsets translated to codfw, the group read there from the translated offsets. Every id it
had not read is read on codfw (0 lost) and none it had read comes again (0 duplicates). Where the records
it read are gone from the source (DeleteRecords) or not yet on the target (MirrorMaker stopped), the plan
says the margin rule was used for those partitions, and nothing is lost either.

The topic is this test's own (``eqiad.exact-<token>``, mirrored to codfw under the same name), created on
both sites with records of codfw's own written first: a mirrored record's offset on codfw is not its offset
on eqiad, so a translation that copied offsets would fail.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops, wait_for

from kafkaops.model import Cluster, KafkaEndpoint
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops_lab import sites as sites_lab
from kafkaops_lab.security import admin_endpoint

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PARTITIONS = 3
IDS = 4000
OWN_HISTORY = 25  # records of codfw's own per partition, before any mirrored one


def _site(sites: Cluster, dc: str) -> KafkaEndpoint:
    """A site's brokers as the lab's super user: this test's own clients create topics, write, read, delete
    records and commit in groups of their own (kafkaops runs as itself, with its least privilege)."""
    return admin_endpoint(sites.site(dc))


def _ends(bootstrap: KafkaEndpoint, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**librdkafka_config(bootstrap), "group.id": f"probe-{uuid.uuid4()}", "log_level": 2})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        c.close()


@pytest.fixture
def topic(sites: Cluster) -> str:
    """A fresh ``eqiad.exact-*`` topic on both sites, codfw's copy starting with records of its own."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"eqiad.exact-{uuid.uuid4().hex[:8]}"
    # codfw first: MirrorMaker creates the mirror of an eqiad.* topic it finds (every 5 s), so created on eqiad
    # first the copy could exist before this test's create on codfw (TOPIC_ALREADY_EXISTS: seen in CI once
    # the sites were secured and each admin client's TLS and SCRAM handshakes widened that window).
    for dc in ("codfw", "eqiad"):
        admin = AdminClient(librdkafka_config(_site(sites, dc)))
        admin.create_topics([NewTopic(name, PARTITIONS, 2)])[name].result(30)
    producer = Producer({**librdkafka_config(_site(sites, "codfw")), "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(OWN_HISTORY):
            producer.produce(name, json.dumps({"own": i}).encode(), partition=p,
                             timestamp=int((time.time() - 3600) * 1000))
    assert producer.flush(30) == 0
    return name


def _produce(sites: Cluster, topic: str, ids: range, partition: int | None = None) -> None:
    """``ids`` on eqiad, keyed by id, a few ms apart (the issue's 4,000 over ~5 s): many share a millisecond."""
    from confluent_kafka import Producer

    producer = Producer({**librdkafka_config(_site(sites, "eqiad")), "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    for n in ids:
        producer.produce(topic, json.dumps({"id": n}).encode(), key=str(n).encode(),
                         partition=n % PARTITIONS if partition is None else partition)
        producer.poll(0)
        if n % 800 == 0:
            time.sleep(1)
    assert producer.flush(60) == 0


def _read(bootstrap: KafkaEndpoint, topic: str, partition: int, start: int, stop: int) -> list[int]:
    """The ids at offsets ``start``..``stop - 1`` of one partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**librdkafka_config(bootstrap), "group.id": f"reader-{uuid.uuid4()}", "log_level": 2,
                  "enable.auto.commit": False})
    read: list[int] = []
    try:
        c.assign([TopicPartition(topic, partition, start)])
        at, deadline = start, time.monotonic() + 60
        while at < stop and time.monotonic() < deadline:
            for msg in c.consume(500, timeout=1):
                offset = int(msg.offset() or 0)
                if msg.error() is None and offset < stop:
                    read.append(json.loads(msg.value() or b"{}")["id"])
                    at = offset + 1
        assert at == stop, (partition, at, stop)
    finally:
        c.close()
    return read


def _commit(bootstrap: KafkaEndpoint, topic: str, group: str, offsets: list[int]) -> None:
    """``group``'s position on each partition, as a consumer commits it after reading up to there."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_config(bootstrap))
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in enumerate(offsets)])
    admin.alter_consumer_group_offsets([request])[group].result(30)


def _read_from_committed(bootstrap: KafkaEndpoint, topic: str, group: str) -> list[Any]:
    """Read every partition to its end from ``group``'s committed offsets (a consumer resuming on codfw), to
    the reader's position: MirrorMaker writes codfw in transactions, so a partition ends on a commit marker."""
    from confluent_kafka import Consumer, TopicPartition

    from kafkaops.systems.records import RecordReader

    c = Consumer({**librdkafka_config(bootstrap), "group.id": group, "log_level": 2})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        c.close()
    out: list[Any] = []
    with RecordReader(bootstrap, timeout=60) as reader:
        bounds = reader.bounds((topic, p) for p in range(PARTITIONS))
        for tp in committed:
            assert tp.offset >= 0, f"{group} has no committed offset on {tp}"
            records, _ = reader.read(topic, tp.partition, tp.offset, bounds[(topic, tp.partition)].stable)
            out += [json.loads(r.value or b"{}").get("id", "own") for r in records]
    return out


def _mirrored(sites: Cluster, topic: str, produced_per_partition: list[int]) -> bool:
    ends = _ends(_site(sites, "codfw"), topic)
    return all(e >= OWN_HISTORY + n for e, n in zip(ends, produced_per_partition, strict=True))


def _translate(home: Path, sites: Cluster, group: str, *extra: str) -> str:
    """The plan (markdown, as pasted into a change review), then the translation applied."""
    args = ("offsets", "translate", group, "--from", "eqiad", "--to", "codfw", *extra)
    planned = kafkaops(home, sites, *args, "--dry-run", "-o", "markdown")
    assert planned.returncode == 0, planned.stderr[-3000:]
    done = kafkaops(home, sites, *args, "--yes", "-r", "issue 34")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return planned.stdout


def _moves(home: Path, group: str) -> list[dict[str, Any]]:
    """The moves the run journaled for ``group`` (with its action: method, why, offsets per partition)."""
    runs = sorted((home / "runs").iterdir())
    for run in reversed(runs):
        for line in (run / "journal.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row.get("type") == "step_applying" and row.get("kind") == "offsets.translate":
                for g in row["action"]["data"]["groups"]:
                    if g["group"] == group:
                        return list(g["methods"])
    raise AssertionError(f"no translation of {group} journaled")


def test_the_group_resumes_on_codfw_exactly_where_it_stopped(sites: Cluster, topic: str, tmp_path: Path) -> None:
    _produce(sites, topic, range(IDS))
    ends = _ends(_site(sites, "eqiad"), topic)
    assert sum(ends) == IDS
    group = f"exact-{uuid.uuid4().hex[:6]}"
    upto = [e * 6 // 10 for e in ends]
    consumed = [n for p, stop in enumerate(upto) for n in _read(_site(sites, "eqiad"), topic, p, 0, stop)]
    _commit(_site(sites, "eqiad"), topic, group, upto)
    wait_for("MirrorMaker to mirror the ids to codfw", lambda: _mirrored(sites, topic, ends))

    plan = _translate(tmp_path, sites, group, "--topics", topic)
    moves = _moves(tmp_path, group)
    assert [m["method"] for m in moves] == ["exact"] * PARTITIONS, moves
    assert plan.count(", exact (") == PARTITIONS and "0 duplicates" in plan, plan[-3000:]
    read = _read_from_committed(_site(sites, "codfw"), topic, group)
    assert "own" not in read, "read codfw's own records: wrong offsets"
    assert sorted(read) == sorted(set(range(IDS)) - set(consumed)), "lost or read again"
    assert len(read) == len(set(read)) == IDS - len(consumed)  # 0 duplicates
    print(f"exact: {len(consumed)} read on eqiad, {len(read)} on codfw, 0 lost, 0 duplicates; moves {moves}")


def test_a_deleted_head_or_a_lagging_mirror_falls_back_to_the_margin_and_loses_nothing(
        sites: Cluster, topic: str, tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    _produce(sites, topic, range(IDS))
    ends = _ends(_site(sites, "eqiad"), topic)
    wait_for("MirrorMaker to mirror the ids to codfw", lambda: _mirrored(sites, topic, ends))
    group = f"fallback-{uuid.uuid4().hex[:6]}"
    eqiad = _site(sites, "eqiad")
    upto = [e * 6 // 10 for e in ends]
    consumed = [n for p in (1, 2) for n in _read(eqiad, topic, p, 0, upto[p])]
    # Partition 0: every record up to the group's position deleted on eqiad (what it read is gone).
    consumed += _read(eqiad, topic, 0, 0, upto[0])
    admin = AdminClient(librdkafka_config(eqiad))
    [fut] = admin.delete_records([TopicPartition(topic, 0, upto[0])]).values()
    fut.result(30)
    # Partition 1: the group reads on, past what MirrorMaker (stopped) has copied.
    mirror = sites_lab.mirror_pid(sites_lab.sites_dir(sites))
    assert mirror is not None
    os.kill(mirror, signal.SIGSTOP)
    try:
        _produce(sites, topic, range(IDS, IDS + 300), partition=1)
        new_ends = _ends(eqiad, topic)
        consumed += _read(eqiad, topic, 1, upto[1], new_ends[1])
        _commit(eqiad, topic, group, [upto[0], new_ends[1], upto[2]])
        plan = _translate(tmp_path, sites, group, "--topics", topic)
    finally:
        os.kill(mirror, signal.SIGCONT)
    moves = {m["partition"]: m for m in _moves(tmp_path, group)}
    assert moves[0]["method"] == "margin" and "gone from the source" in moves[0]["why"], moves[0]
    assert moves[1]["method"] == "margin" and "not on the target" in moves[1]["why"], moves[1]
    assert moves[2]["method"] == "exact", moves[2]
    assert plan.count("by the margin (not exact: ") == 2 and plan.count(", exact (") == 1, plan[-3000:]
    wait_for("MirrorMaker to catch up", lambda: _mirrored(sites, topic, new_ends))
    read = _read_from_committed(_site(sites, "codfw"), topic, group)
    produced = set(range(IDS + 300))
    unread = produced - set(consumed)
    assert not unread - set(read), f"lost: {sorted(unread - set(read))[:20]}"
    again = [n for n in read if n in set(consumed)]
    assert len(again) <= sum(m["duplicates"] for m in moves.values()), (len(again), moves)
    print(f"fallback: {len(unread)} unread, all read on codfw; {len(again)} read again; moves {moves}")


def _caught_up(sites: Cluster, topic: str) -> bool:
    """MirrorMaker's lag on ``topic`` is 0, counted in records (the product's own reading: a source written
    in transactions ends each partition on a marker, which offsets would count as lag for ever)."""
    from kafkaops.systems.mirror import MirrorLag

    return all(p.lag == 0 for p in MirrorLag(sites, "eqiad", "codfw").partitions() if p.topic == topic)


def _transactional_load(bootstrap: KafkaEndpoint, topic: str, stop: threading.Event,
                        ids: dict[str, list[int]]) -> None:
    """A transactional producer, as a stream processor writes: 20 ids per transaction, every fifth aborted
    (after its records reached the log), until ``stop``. ``ids["committed"]``/``ids["aborted"]``."""
    from confluent_kafka import Producer

    producer = Producer({**librdkafka_config(bootstrap), "transactional.id": f"load-{topic}", "linger.ms": 5,
                         "log_level": 2})
    producer.init_transactions(30)
    n = 0
    while not stop.is_set():
        batch = list(range(n, n + 20))
        n += 20
        producer.begin_transaction()
        for i in batch:
            producer.produce(topic, json.dumps({"id": i}).encode(), key=str(i).encode(), partition=i % PARTITIONS)
        if n % 100 == 0:
            producer.flush(30)  # on the log, then aborted: markers and aborted records for every reader
            producer.abort_transaction(30)
            ids["aborted"] += batch
        else:
            producer.commit_transaction(30)
            ids["committed"] += batch
        time.sleep(0.01)


def test_a_transactional_topic_under_load_translates_with_nothing_lost(sites: Cluster, topic: str,
                                                                         tmp_path: Path) -> None:
    """Issue 42.1(a): a transactional producer on eqiad (commit markers, aborted records), MirrorMaker 2 with
    exactly-once writing codfw in transactions, a group that reads with read_committed and commits (often a
    marker's offset). The translation runs while the producer still writes (transactions open on eqiad and
    on codfw); on the code before the fix each of its reads waited for an offset never delivered."""
    from confluent_kafka import Consumer

    eqiad = _site(sites, "eqiad")
    ids: dict[str, list[int]] = {"committed": [], "aborted": []}
    stop = threading.Event()
    load = threading.Thread(target=_transactional_load, args=(eqiad, topic, stop, ids), daemon=True)
    load.start()
    group = f"txn-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({**librdkafka_config(eqiad), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 2})
    consumed: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 8  # a group past a few hundred transactions, markers and aborts
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(200, timeout=0.5) if m.error() is None]
            if batch:
                consumer.commit(asynchronous=False)
                consumed += [json.loads(m.value() or b"{}")["id"] for m in batch]
    finally:
        consumer.close()
    assert consumed and not set(consumed) & set(ids["aborted"])
    try:
        plan = _translate(tmp_path, sites, group, "--topics", topic)  # the producer still writing
    finally:
        stop.set()
        load.join(60)
    moves = _moves(tmp_path, group)
    wait_for("MirrorMaker to mirror every committed transaction (lag counted in records)",
             lambda: _caught_up(sites, topic))
    read = _read_from_committed(_site(sites, "codfw"), topic, group)
    unread = set(ids["committed"]) - set(consumed)
    assert "own" not in read, "read codfw's own records: wrong offsets"
    assert not unread - set(read), f"lost: {sorted(unread - set(read))[:20]}"
    assert not set(read) & set(ids["aborted"]), "an aborted transaction was mirrored"
    again = [n for n in read if n in set(consumed)]
    assert len(again) <= sum(m["duplicates"] for m in moves), (len(again), moves)
    # The dry-run observed the mirror a moment before the run did: it may say "by the margin" (the mirror
    # behind the producer then) where the run found every record and went exact. Either is an honest plan;
    # what the run promised is checked above against what was read again (0 for an exact partition).
    assert "0 duplicates" in plan or "by the margin" in plan, plan[-2000:]
    print(f"transactional: {len(ids['committed'])} committed, {len(ids['aborted'])} aborted, {len(consumed)} "
          f"read on eqiad, {len(read)} on codfw, 0 lost, {len(again)} read again; "
          f"methods {[m['method'] for m in moves]}")


def test_a_replayed_event_with_the_targets_head_deleted_falls_back_to_the_margin(sites: Cluster, topic: str,
                                                                                  tmp_path: Path) -> None:
    """Issue 42.1(b): the group read ids 0..199 of partition 0; ids 197..199 were produced again later (a
    replayed event: the same CreateTime, key and value) after id 299; on codfw everything up to the group's
    own copy of id 199 was deleted. The replay is the only run of the group's last records left there: the
    code before the fix resumed after it and lost ids 200..299."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    eqiad, codfw = _site(sites, "eqiad"), _site(sites, "codfw")
    base = int(time.time() * 1000) - 600_000
    producer = Producer({**librdkafka_config(eqiad), "acks": "all", "enable.idempotence": True, "log_level": 2})
    for i in [*range(300), 197, 198, 199]:
        producer.produce(topic, json.dumps({"id": i}).encode(), key=str(i).encode(), partition=0,
                         timestamp=base + 1000 * i)
    assert producer.flush(60) == 0
    wait_for("MirrorMaker to mirror the ids to codfw", lambda: _caught_up(sites, topic))
    group = f"replay-{uuid.uuid4().hex[:6]}"
    _commit(eqiad, topic, group, [200, 0, 0])
    from kafkaops.systems.records import RecordReader

    with RecordReader(codfw, timeout=30) as reader:
        stable = reader.bounds([(topic, 0)])[(topic, 0)].stable
        copy = next(r.offset for r in reader.read(topic, 0, 0, stable)[0]
                    if json.loads(r.value or b"{}").get("id") == 199)
    admin = AdminClient(librdkafka_config(codfw))  # held: a client collected never answers its futures
    [fut] = admin.delete_records([TopicPartition(topic, 0, copy + 1)]).values()
    fut.result(30)
    plan = _translate(tmp_path, sites, group, "--topics", topic)
    move = next(m for m in _moves(tmp_path, group) if m["partition"] == 0)
    assert move["method"] == "margin" and "no longer holds the margin's offset" in move["why"], move
    assert "not trusted" in plan, plan[-3000:]
    read = [n for n in _read_from_committed(codfw, topic, group) if n != "own"]
    assert not set(range(200, 300)) - set(read), f"lost: {sorted(set(range(200, 300)) - set(read))[:20]}"
    print(f"replay: resumed at {move['target_offset']} (the copy of 199 at {copy}), read {len(read)}, 0 lost")
