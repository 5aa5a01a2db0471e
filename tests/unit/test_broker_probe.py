"""The direct probe of a broker's listener (issue 32): what counts as serving, its deadline, its reuse.

The wire format is checked against bytes written out by hand from Kafka's protocol guide (ApiVersions v0,
request header v1); the lab test checks it against real brokers (tests/lab/test_broker_faults_on_lab.py).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kafkaops.model import ClusterSnapshot, KafkaEndpoint, PartitionState
from kafkaops.systems.broker_probe import BrokerProbe, api_versions_request, is_api_versions_response, serves
from kafkaops.systems.stability_watch import StabilityWatch

PLAIN = KafkaEndpoint("")


def test_the_request_is_an_api_versions_v0_with_our_client_id() -> None:
    frame = api_versions_request(7)
    # size 24 | api key 18 | version 0 | correlation 7 | client id "kafkaops-probe" (14 bytes)
    assert frame == b"\x00\x00\x00\x18" + b"\x00\x12" + b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00\x0e" \
        + b"kafkaops-probe"


def _response(correlation_id: int, error: int = 0) -> bytes:
    body = struct.pack(">ihi", correlation_id, error, 1) + struct.pack(">hhh", 18, 0, 3)
    return struct.pack(">i", len(body)) + body


def test_only_a_whole_answer_to_our_request_counts() -> None:
    assert is_api_versions_response(_response(7), 7)
    assert not is_api_versions_response(_response(8), 7)  # another request's answer
    assert is_api_versions_response(_response(7, error=35), 7)  # UNSUPPORTED_VERSION: it answered all the same
    assert not is_api_versions_response(_response(7)[:-2], 7)  # cut short
    assert not is_api_versions_response(b"\x00\x00", 7)


@contextmanager
def _listener(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback listener whose every connection ``answer`` handles; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                answer(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def _answer_api_versions(conn: socket.socket, *, corr_delta: int = 0) -> None:
    head = conn.recv(4)
    (size,) = struct.unpack(">i", head)
    request = conn.recv(size)
    (corr,) = struct.unpack(">i", request[4:8])
    conn.sendall(_response(corr + corr_delta))


def test_a_broker_that_answers_serves() -> None:
    with _listener(_answer_api_versions) as port:
        assert serves(PLAIN, "127.0.0.1", port, timeout=2)


def test_a_listener_that_answers_someone_else_does_not_serve() -> None:
    with _listener(lambda c: _answer_api_versions(c, corr_delta=1)) as port:
        assert not serves(PLAIN, "127.0.0.1", port, timeout=2)


def test_a_closed_port_does_not_serve() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    assert not serves(PLAIN, "127.0.0.1", port, timeout=2)


def test_a_listener_that_accepts_and_stays_silent_does_not_serve_within_the_deadline() -> None:
    """A restarted broker binds its port before it serves: connected, never answered."""
    with _listener(lambda c: time.sleep(1.5)) as port:
        started = time.monotonic()
        assert not serves(PLAIN, "127.0.0.1", port, timeout=0.5)
        assert time.monotonic() - started < 1.4


def _answer_every_request(accepted: list[socket.socket], *,
                          then_wrong: bool = False) -> Callable[[socket.socket], None]:
    """A broker's connection: answers each ApiVersions request on it until the client closes it (the
    connections go to ``accepted``); ``then_wrong``: from the second request on, with another correlation id."""
    def answer(conn: socket.socket) -> None:
        accepted.append(conn)
        conn.settimeout(3)
        n = 0
        while True:
            try:
                head = conn.recv(4)
                if len(head) < 4:
                    return
                request = conn.recv(struct.unpack(">i", head)[0])
                (corr,) = struct.unpack(">i", request[4:8])
                n += 1
                conn.sendall(_response(corr + (1 if then_wrong and n > 1 else 0)))
            except OSError:
                return
    return answer


def test_a_kept_connection_asks_again_without_connecting_again() -> None:
    """The answer is asked afresh each time; the TLS connection (and the controller's SCRAM login) is not."""
    from kafkaops.systems.broker_probe import KeptConnections

    accepted: list[socket.socket] = []
    kept = KeptConnections()
    with _listener(_answer_every_request(accepted)) as port:
        assert all(serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept) for _ in range(3))
        kept.close()
    assert len(accepted) == 1


def test_a_probe_that_keeps_nothing_connects_for_each_question() -> None:
    """``kafkaops doctor``'s one-off probe (keep=False) asks without logging in, so each question connects;
    a run's probe (the default) reuses its connection."""
    for keep, connections in ((False, 3), (True, 1)):
        accepted: list[socket.socket] = []
        probe = BrokerProbe(PLAIN, keep=keep)
        with _listener(_answer_every_request(accepted)) as port:
            assert all(probe.serving({1: ("127.0.0.1", port)}) == {1} for _ in range(3))
            probe.close()
        assert len(accepted) == connections, keep


def test_a_kept_connection_the_broker_closed_is_replaced_within_the_same_question() -> None:
    """A restarted broker (or one that closed the connection idle): the same question, on a new connection."""
    from kafkaops.systems.broker_probe import KeptConnections

    kept = KeptConnections()
    with _listener(_answer_api_versions) as port:  # one answer per connection, then closed
        assert serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
        assert serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
        kept.close()


def test_a_broker_gone_since_the_last_question_does_not_serve_on_its_kept_connection() -> None:
    from kafkaops.systems.broker_probe import KeptConnections

    kept = KeptConnections()
    accepted: list[socket.socket] = []
    with _listener(_answer_every_request(accepted)) as port:
        assert serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
        for conn in accepted:  # the broker's process dies: its connections close with it
            conn.shutdown(socket.SHUT_RDWR)
    # the listener is gone too: the kept connection must not answer for it, nor may a new one
    assert not serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
    kept.close()


def test_a_kept_connection_that_answers_another_request_is_never_used_again() -> None:
    """A late answer to a request given up on must not pass for the next one's: the connection is dropped."""
    from kafkaops.systems.broker_probe import KeptConnections

    accepted: list[socket.socket] = []
    kept = KeptConnections()
    with _listener(_answer_every_request(accepted, then_wrong=True)) as port:
        assert serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
        # the kept connection answers another id: dropped, and the question asked on a new connection
        assert serves(PLAIN, "127.0.0.1", port, timeout=2, kept=kept)
        kept.close()
    assert len(accepted) == 2


def test_every_question_is_asked_afresh() -> None:
    """A crash a second ago must show: no answer is reused."""
    asked: list[tuple[str, int]] = []
    state = {"up": True}

    def ask(host: str, port: int, timeout: float) -> bool:
        asked.append((host, port))
        return state["up"] or port != 9092

    probe = BrokerProbe(PLAIN, ask=ask)
    endpoints = {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9093)}
    assert probe.serving(endpoints) == {1, 2}
    state["up"] = False
    assert probe.serving(endpoints) == {2}
    assert len(asked) == 4


def test_only_the_brokers_asked_for_are_probed_and_one_without_endpoint_is_kept() -> None:
    asked: list[int] = []

    def ask(host: str, port: int, timeout: float) -> bool:
        asked.append(port)
        return False

    probe = BrokerProbe(PLAIN, ask=ask)
    assert probe.serving({1: ("h", 1), 2: ("h", 2)}, brokers=[2, 3]) == {3}
    assert asked == [2]


def _snapshot(brokers: tuple[int, ...]) -> ClusterSnapshot:
    return ClusterSnapshot(cluster="c", taken_at=0.0, brokers=brokers, controller=1,
                           partitions=(PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3)),),
                           endpoints={b: ("h", 9000 + b) for b in brokers})


def test_the_stability_watch_is_unhealthy_while_a_registered_broker_does_not_answer() -> None:
    """The race the chaos soak found: broker 3's host crashed; ZooKeeper and the metadata still have it."""
    up = {1, 2, 3}
    watch = StabilityWatch(lambda: _snapshot((1, 2, 3)), frozenset({1, 2, 3}), registered=lambda: [1, 2, 3],
                        serving=lambda snap: up & set(snap.brokers))
    watch.sample()
    assert watch.reason() == ""
    up.discard(3)
    watch.sample()
    assert watch.reason() == "broker(s) 3 not answering on its listener"
    assert watch.stable_for() == 0.0


def test_the_runs_gates_judge_a_registered_broker_that_does_not_answer_as_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment.snapshot, what every health gate of a run reads: broker 1003's listener is closed (its
    host crashed) while the metadata still lists it in every ISR; its partitions are under-replicated."""
    from pathlib import Path

    from kafkaops.environment import Environment
    from kafkaops.inventory import load_inventory
    from kafkaops.policy.availability import cluster_health

    kraft = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-kraft.yaml")
    env = Environment(kraft, dry_run=True)
    with _listener(_answer_api_versions) as a, _listener(_answer_api_versions) as b:
        with socket.create_server(("127.0.0.1", 0)) as s:
            closed = s.getsockname()[1]
        meta = ClusterSnapshot(cluster="lab-kraft", taken_at=0.0, brokers=(1001, 1002, 1003), controller=None,
                               partitions=(PartitionState("t", 0, 1001, (1001, 1002, 1003), (1001, 1002, 1003)),
                                           PartitionState("t", 1, 1002, (1002, 1001), (1002, 1001))),
                               endpoints={1001: ("127.0.0.1", a), 1002: ("127.0.0.1", b), 1003: ("127.0.0.1", closed)})
        monkeypatch.setattr(env, "_kafka", SimpleNamespace(snapshot=lambda with_configs: meta))
        snap = env.snapshot(with_configs=False)
    assert snap.brokers == (1001, 1002)
    assert [p.isr for p in snap.partitions] == [(1001, 1002), (1002, 1001)]
    assert [f"{p.topic}-{p.partition}" for p in cluster_health(snap).under_replicated] == ["t-0"]


def _metadata_response(correlation_id: int, controller: int,
                       partitions: dict[tuple[str, int], tuple[int, ...]]) -> bytes:
    """A Metadata v4 response as Kafka's MetadataResponse.json lays it out (version 4 = version 3)."""
    def string(text: str | None) -> bytes:
        return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text.encode()

    def int32s(values: tuple[int, ...]) -> bytes:
        return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)

    body = struct.pack(">ii", correlation_id, 0)  # correlation id; throttle time
    body += struct.pack(">i", 2) + b"".join(struct.pack(">i", b) + string("127.0.10.1") + struct.pack(">i", 9092)
                                            + string(None) for b in (1001, 1002))
    body += string("cluster-id") + struct.pack(">i", controller)
    topics = sorted({t for t, _ in partitions})
    body += struct.pack(">i", len(topics))
    for topic in topics:
        mine = sorted((p, isr) for (t, p), isr in partitions.items() if t == topic)
        body += struct.pack(">h", 0) + string(topic) + struct.pack(">b", 0) + struct.pack(">i", len(mine))
        for p, isr in mine:
            body += struct.pack(">hii", 0, p, isr[0]) + int32s((1001, 1002, 1003)) + int32s(isr)
    return struct.pack(">i", len(body)) + body


def test_a_brokers_own_metadata_is_read_whole_or_not_at_all() -> None:
    from kafkaops.systems.broker_probe import metadata_request, parse_metadata_response

    assert metadata_request(5)[4:8] == b"\x00\x03\x00\x04"  # Metadata, version 4
    assert metadata_request(5)[-5:] == b"\xff\xff\xff\xff\x00"  # every topic, none created
    frame = _metadata_response(5, 1003, {("t", 0): (1001, 1002), ("t", 1): (1002, 1001, 1003), ("u", 0): (1003,)})
    view = parse_metadata_response(frame, 5, 1003)
    assert view is not None and view.broker == 1003 and view.controller == 1003
    assert dict(view.isr) == {("t", 0): (1001, 1002), ("t", 1): (1002, 1001, 1003), ("u", 0): (1003,)}
    assert parse_metadata_response(frame, 6, 1003) is None  # another request's answer
    assert parse_metadata_response(frame[:-3], 5, 1003) is None  # cut short: a partition would be missing
    assert parse_metadata_response(_metadata_response(5, -1, {}), 5, 1001).controller is None  # type: ignore[union-attr]


def test_a_replica_is_in_sync_only_where_the_controllers_own_view_agrees() -> None:
    from kafkaops.policy.availability import as_both_see

    stale = _snapshot((1, 2, 3))  # what a broker the controller cannot reach says: every ISR full
    narrowed = as_both_see(stale, {("t", 0): (1, 2)})
    assert [p.isr for p in narrowed.partitions] == [(1, 2)]
    assert as_both_see(stale, {("t", 0): (3, 2, 1)}) is stale  # the same set in another order: agreed
    assert as_both_see(stale, {}) is stale  # a partition the controller does not know yet: left as it is


class _ZooKeeperSays:
    def __init__(self, registered: list[int], controller: int | None) -> None:
        self._registered, self._controller = registered, controller

    def open(self) -> _ZooKeeperSays:
        return self

    def registered_brokers(self) -> list[int]:
        return self._registered

    def controller(self) -> int | None:
        return self._controller


def _zk_env(monkeypatch: pytest.MonkeyPatch, meta: ClusterSnapshot, zk: _ZooKeeperSays,
            look: Callable[[int, str, int, float], object]) -> object:
    from pathlib import Path

    from kafkaops.environment import Environment
    from kafkaops.inventory import load_inventory
    from kafkaops.systems.broker_probe import BrokerProbe

    lab = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab.yaml")
    env = Environment(lab, dry_run=True)
    monkeypatch.setattr(env, "_kafka", SimpleNamespace(snapshot=lambda with_configs: meta))
    monkeypatch.setattr(env, "_session", lambda: zk)
    monkeypatch.setattr(env, "_probe", BrokerProbe(PLAIN, ask=lambda host, port, timeout: True,
                                                   look=look))  # type: ignore[arg-type]
    return env


def test_in_zookeeper_mode_the_gates_judge_the_isr_as_the_controller_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broker 3 is cut off from its peers; the client happened to ask broker 1, which never heard of the
    shrinks the controller (broker 2) made: the gates see them anyway."""
    from kafkaops.systems.broker_probe import BrokerView

    asked: list[int] = []

    def look(broker: int, host: str, port: int, timeout: float) -> BrokerView:
        asked.append(broker)
        return BrokerView(broker, 2, {("t", 0): (1, 2)})

    env = _zk_env(monkeypatch, _snapshot((1, 2, 3)), _ZooKeeperSays([1, 2, 3], 2), look)
    snap = env.snapshot(with_configs=False)  # type: ignore[attr-defined]
    assert asked == [2]
    assert [p.isr for p in snap.partitions] == [(1, 2)]
    assert snap.brokers == (1, 2, 3)


def test_a_controller_that_does_not_answer_its_metadata_request_leaves_the_isrs_to_the_other_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = _zk_env(monkeypatch, _snapshot((1, 2, 3)), _ZooKeeperSays([1, 3], 2), lambda *a: None)
    snap = env.snapshot(with_configs=False)  # type: ignore[attr-defined]
    assert snap.brokers == (1, 3) and [p.isr for p in snap.partitions] == [(1, 3)]  # ZooKeeper's word


# --- one deadline for the whole exchange (issue 41) ----------------------------------------------------------

_DRIBBLE_FOR = 10.0  # seconds a dribbling listener keeps the exchange alive: what a per-recv timeout would wait
_DEADLINE = 1.0


def _dribble(stop: threading.Event) -> Callable[[socket.socket], None]:
    """A listener that reads the request, announces a 60-byte answer and sends it one byte every 0.2 s (for
    at most ``_DRIBBLE_FOR`` seconds): each recv gets a byte well within any per-recv timeout."""
    def answer(conn: socket.socket) -> None:
        conn.recv(1024)
        conn.sendall(struct.pack(">i", 60))
        until = time.monotonic() + _DRIBBLE_FOR
        while time.monotonic() < until and not stop.wait(0.2):
            try:
                conn.sendall(b"\x00")
            except OSError:  # the probe gave up and closed: stop dribbling
                return
    return answer


@pytest.mark.parametrize("ask", ["serves", "view_of"])
def test_a_listener_that_dribbles_one_byte_at_a_time_is_given_up_on_at_the_deadline(ask: str) -> None:
    """A listener sending a byte every 0.2 s held a probe for as long as it dribbled (the 2 s deadline was
    per recv): the deadline is the whole exchange's."""
    from kafkaops.systems.broker_probe import view_of

    stop = threading.Event()
    try:
        with _listener(_dribble(stop)) as port:
            started = time.monotonic()
            if ask == "serves":
                assert not serves(PLAIN, "127.0.0.1", port, timeout=_DEADLINE)
            else:
                assert view_of(PLAIN, 1, "127.0.0.1", port, timeout=_DEADLINE) is None
            elapsed = time.monotonic() - started
    finally:
        stop.set()
    assert elapsed < _DEADLINE * 5, f"the probe took {elapsed:.1f}s for a {_DEADLINE}s deadline"


def test_a_slow_resolver_is_bounded_by_the_same_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS counts against the deadline: a resolver that hangs (an unreachable name server) must not hold
    the probe beyond it, nor hold it for the resolver's own timeout."""
    release = threading.Event()
    real = socket.getaddrinfo
    asked: list[str] = []

    def slow(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        release.wait(_DRIBBLE_FOR)
        return real("127.0.0.1", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    with _listener(_answer_api_versions) as port:
        started = time.monotonic()
        try:
            assert not serves(PLAIN, "broker.example", port, timeout=_DEADLINE)
            elapsed = time.monotonic() - started
        finally:
            release.set()
    assert asked == ["broker.example"]
    assert elapsed < _DEADLINE * 5, f"the probe took {elapsed:.1f}s for a {_DEADLINE}s deadline"


def test_a_name_resolved_in_time_is_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounded resolution still resolves: a name that resolves at once is asked as its address."""
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo",
                        lambda host, *a, **k: real("127.0.0.1" if host == "broker.example" else host, *a, **k))
    with _listener(_answer_api_versions) as port:
        assert serves(PLAIN, "broker.example", port, timeout=2)
