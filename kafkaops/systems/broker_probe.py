"""Ask each broker directly whether it serves requests: one Kafka ``ApiVersions`` request to its listener.

Why the cluster's own word is not enough before a stop: a broker whose host has just crashed (power
lost, kernel panic, the JVM killed) is, for a while, still alive to everyone else —

- still **registered**: ZooKeeper keeps its ephemeral ``/brokers/ids/N`` until the dead session expires
  (``zookeeper.session.timeout.ms``, 18 s by default); a KRaft controller fences it only after
  ``broker.session.timeout.ms`` (9 s);
- still **in every ISR**: the controller shrinks them when it declares the broker dead, the leaders after
  ``replica.lag.time.max.ms`` (30 s);
- still **listed** in every other broker's metadata.

A roll's gates that read only that pass during the window, and the run stops the next broker: two
brokers down at once, partitions under ``min.insync.replicas``, producers with ``acks=all`` refused. The
chaos soak (issue 32) found exactly that: a crash of a host already rolled, a second before the next
host's stop, left one broker of three registered.

A broker asked directly answers within milliseconds when it serves, refuses (its process gone) or stays
silent (its host gone, or restarted but not serving yet: a restarted ZooKeeper-mode broker enables
request processing only once it has registered, which waits for the dead session to expire). Any
answer other than an ``ApiVersions`` response with our correlation id is "not serving".

The same direct question gets **one broker's own metadata** (:func:`view_of`, a Metadata request to
that broker): in ZooKeeper mode the run reads the controller's view beside the metadata its client got
from any broker. A broker cut off from its peers but not from ZooKeeper stays registered and serving; the
leaders of its partitions cannot shrink their ISR through a controller they cannot reach, and a broker
the controller cannot reach never hears of the shrinks it did make — so which broker a client asks
decides whether the partitions look under-replicated. The controller's own view has them (every
shrink it accepted, and its own partitions'), and a partition is only in sync where both views agree.

Over TLS and SASL when the cluster's listeners want them (:mod:`kafkaops.systems.kafka_wire`). Probes run
in parallel, each bounded by its own deadline, and their answers are never cached: an
``ApiVersions`` request costs a broker far less than the Metadata request every gate's poll already sends.
The *connections* are kept (:class:`KeptConnections`): a roll of three brokers took about 45 snapshots, and
a new TLS connection per broker per snapshot, plus a SCRAM login for the controller's view, cost some 12 ms
each against about 1 ms kept (``bench/results/round-trips-2026-12-07.json``). What a kept connection proves
is the same: a broker whose process died resets it or closes it, and the question is asked again on a new
connection (refused: not serving); a host gone silent answers neither; any error or a missed deadline closes
the connection for good.
The deadline is the whole exchange's — name resolution, connect, send and every read — not each call's:
a half-alive listener that sends one byte every half second, or a name server that does not answer,
gets "not serving" at the deadline, never a gate held for as long as it dribbles.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from kafkaops.model import ClusterSnapshot, KafkaEndpoint
from kafkaops.policy.availability import as_both_see
from kafkaops.systems.kafka_wire import CORRELATION, open_connection, read_frame, remaining

if TYPE_CHECKING:
    from kafkaops.systems.zookeeper import ZooKeeper

#: Deadline of one probe, the whole exchange (name resolution, connect, send, answer). A serving broker
#: answers ApiVersions in milliseconds.
PROBE_TIMEOUT = 2.0
#: Kafka's ApiVersions API key; version 0 has an empty body and is answered by every broker since 0.10
#: (one that dropped it answers with UNSUPPORTED_VERSION: still an answer).
_API_VERSIONS = 18
_CLIENT_ID = b"kafkaops-probe"


def api_versions_request(correlation_id: int) -> bytes:
    """A size-prefixed ApiVersions v0 request (request header v1: key, version, correlation id, client id)."""
    body = struct.pack(">hhih", _API_VERSIONS, 0, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(body)) + body


def is_api_versions_response(frame: bytes, correlation_id: int) -> bool:
    """Whether ``frame`` (size prefix included) is a whole response to our ApiVersions request: its size
    and our correlation id. Any error code counts: a broker whose request handlers answer serves, and one
    that no longer speaks version 0 still answers it, with UNSUPPORTED_VERSION and its own ranges (how
    Kafka lets a client negotiate)."""
    if len(frame) < 10:
        return False
    size, corr = struct.unpack(">ii", frame[:8])
    return size == len(frame) - 4 and corr == correlation_id


#: Kafka's Metadata API key. Version 4 is the oldest Kafka 4.x still answers (KIP-896) and is answered by
#: every broker since 1.0: no flexible encoding, ISR per partition, the controller's id.
_METADATA = 3
_METADATA_VERSION = 4


@dataclass(frozen=True)
class BrokerView:
    """One broker's own metadata, asked of it directly (not of whichever broker a client picked).

    Attributes:
        broker: Whose view this is.
        controller: The controller it knows, None if none.
        isr: Every partition's in-sync replicas as it knows them, by (topic, partition).
    """

    broker: int
    controller: int | None
    isr: Mapping[tuple[str, int], tuple[int, ...]]


def metadata_request(correlation_id: int) -> bytes:
    """A size-prefixed Metadata v4 request for every topic, creating none."""
    body = struct.pack(">hhih", _METADATA, _METADATA_VERSION, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    body += struct.pack(">ib", -1, 0)  # topics: null (all); allow_auto_topic_creation: false
    return struct.pack(">i", len(body)) + body


class _Reader:
    """Kafka's non-flexible wire types, read in order from one response."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def int8(self) -> int:
        return self._take(">b")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        text = self.data[self.at:self.at + n].decode()
        self.at += n
        return text

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(max(0, self.int32())))


def parse_metadata_response(frame: bytes, correlation_id: int, broker: int) -> BrokerView | None:
    """The view in a size-prefixed Metadata v4 response to ``correlation_id``; None if it is not one (or is
    cut short: a view with a partition missing would hide it)."""
    try:
        r = _Reader(frame)
        if r.int32() != len(frame) - 4 or r.int32() != correlation_id:
            return None
        r.int32()  # throttle time
        for _ in range(r.int32()):  # brokers: id, host, port, rack
            r.int32(), r.string(), r.int32(), r.string()
        r.string()  # cluster id
        controller = r.int32()
        isr: dict[tuple[str, int], tuple[int, ...]] = {}
        for _ in range(r.int32()):
            r.int16()  # topic error
            name = r.string() or ""
            r.int8()  # is internal
            for _ in range(r.int32()):
                r.int16()  # partition error
                index = r.int32()
                r.int32()  # leader
                r.int32s()  # replicas
                isr[(name, index)] = r.int32s()
        return BrokerView(broker, controller if controller >= 0 else None, isr) if r.at == len(frame) else None
    except (struct.error, UnicodeDecodeError):
        return None


def view_of(endpoint: KafkaEndpoint, broker: int, host: str, port: int,
            timeout: float = PROBE_TIMEOUT, *, kept: KeptConnections | None = None) -> BrokerView | None:
    """Broker ``broker``'s own metadata, asked at ``host:port`` (authenticated, as Metadata needs); None if it
    does not answer in time. ``kept``: reuse (and keep) an authenticated connection to it."""
    answer = _exchange(endpoint, host, port, metadata_request, timeout, limit=64 << 20, authenticate=True,
                       kept=kept)
    return None if answer is None else parse_metadata_response(answer[1], answer[0], broker)


def serves(endpoint: KafkaEndpoint, host: str, port: int, timeout: float = PROBE_TIMEOUT, *,
           kept: KeptConnections | None = None) -> bool:
    """Whether the broker at ``host:port`` answers an ApiVersions request within ``timeout`` seconds.

    Over TLS when the cluster's listeners have it. Without ``kept``, never SASL: Kafka answers ApiVersions
    before authentication (a client needs it to choose the SaslHandshake version), and a probe that logged in
    would cost each broker a SCRAM exchange (4,096 PBKDF2 rounds) per gate poll. With ``kept``, on the kept
    *authenticated* connection (the one :func:`view_of` uses): a SASL listener closes a connection that sends
    anything but the handshake after its first ApiVersions, so only a logged-in connection can be asked
    again — one login per broker for the life of the probe, not one per poll."""
    answer = _exchange(endpoint, host, port, api_versions_request, timeout, limit=1 << 20,
                       authenticate=kept is not None, kept=kept)
    return answer is not None and is_api_versions_response(answer[1], answer[0])


class KeptConnections:
    """Open connections to brokers, at most one per (host, port, authenticated), each used by one request at a
    time: a request takes its connection out and gives it back only after a whole answer to *its* correlation
    id. A connection that failed, timed out or answered someone else is closed, never given back — so a late
    answer to a request given up on can never be read as the answer to the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[str, int, bool], socket.socket] = {}

    def take(self, key: tuple[str, int, bool]) -> socket.socket | None:
        with self._lock:
            return self._open.pop(key, None)

    def give(self, key: tuple[str, int, bool], sock: socket.socket) -> None:
        with self._lock:
            other = self._open.pop(key, None)
            self._open[key] = sock
        if other is not None:
            other.close()

    def close(self) -> None:
        with self._lock:
            socks, self._open = list(self._open.values()), {}
        for sock in socks:
            sock.close()


def _answered(sock: socket.socket, request: Callable[[int], bytes], deadline: float,
              limit: int) -> tuple[int, bytes] | None:
    """``request`` sent on ``sock`` with a correlation id of its own, and its answer: (id, frame); None when the
    frame answers another id (the connection is then not to be used again)."""
    correlation_id = next(CORRELATION) & 0x7FFFFFFF
    sock.settimeout(remaining(deadline))
    sock.sendall(request(correlation_id))  # one timeout for all of sendall (Python >= 3.5)
    frame = read_frame(sock, deadline, limit)
    return (correlation_id, frame) if frame[4:8] == struct.pack(">i", correlation_id) else None


def _exchange(endpoint: KafkaEndpoint, host: str, port: int, request: Callable[[int], bytes], timeout: float,
              limit: int, *, authenticate: bool, kept: KeptConnections | None = None) -> tuple[int, bytes] | None:
    """Send ``request(correlation_id)`` and return the correlation id and the response frame (size prefix
    included), or None when the broker did not answer it within ``timeout`` overall.

    ``timeout`` bounds the whole exchange — name resolution, connect, TLS and SASL, send and every recv —
    not each call: a listener that dribbles a byte every half second, or a name server that never answers,
    would otherwise hold a probe (and the gate waiting on it) for as long as it pleases.

    ``kept``: first on the kept connection, if any; when that one fails (the broker restarted, or closed it
    idle), once more on a new connection within what is left of the deadline. The connection that
    answered is kept for the next request.

    Raises:
        AuthError: The broker refused who kafkaops is (its certificate, the password): not "not serving".
    """
    deadline = time.monotonic() + timeout
    key = (host, port, authenticate)
    old = kept.take(key) if kept is not None else None
    if old is not None:
        try:
            answer = _answered(old, request, deadline, limit)
        except OSError:  # reset, closed, or the deadline passed
            answer = None
        if answer is not None and kept is not None:
            kept.give(key, old)
            return answer
        old.close()
        if time.monotonic() >= deadline:
            return None
    try:
        sock = open_connection(endpoint, host, port, deadline, authenticate=authenticate)
    except OSError:  # refused, reset, closed, or the deadline passed (TimeoutError)
        return None
    try:
        answer = _answered(sock, request, deadline, limit)
    except OSError:  # not a frame of ours, or the deadline passed
        answer = None
    if answer is not None and kept is not None:
        kept.give(key, sock)
    else:
        sock.close()
    return answer


class BrokerProbe:
    """Brokers asked directly: which serve (in parallel), and one broker's own metadata. Answers never cached: a
    gate's answer is what a stop is decided on, and a crash a second ago must show; connections kept
    (:class:`KeptConnections`).

    Args:
        endpoint: The cluster's brokers and how to connect to them (TLS, SASL).
        timeout: Deadline of each probe.
        keep: Keep (logged-in) connections between questions; False for a one-off question, which then asks
            "does it serve?" without logging in (``kafkaops doctor`` checks TLS first, the password after).
        ask: ``(host, port, timeout) -> bool`` (:func:`serves`; injectable for tests).
        look: ``(broker, host, port, timeout) -> BrokerView | None`` (:func:`view_of`; injectable).
    """

    def __init__(self, endpoint: KafkaEndpoint, *, timeout: float = PROBE_TIMEOUT, keep: bool = True,
                 ask: Callable[[str, int, float], bool] | None = None,
                 look: Callable[[int, str, int, float], BrokerView | None] | None = None) -> None:
        self._timeout = timeout
        self._kept = KeptConnections()
        kept = self._kept if keep else None
        self._ask = ask or partial(serves, endpoint, kept=kept)
        self._look = look or partial(view_of, endpoint, kept=kept)

    def serving(self, endpoints: Mapping[int, tuple[str, int]], brokers: Iterable[int] | None = None) -> set[int]:
        """The ids among ``brokers`` (default: every endpoint's) whose listener answers. A broker without
        an endpoint is not judged here (kept): the metadata names every broker it lists with one."""
        wanted = set(endpoints) if brokers is None else set(brokers)
        todo = sorted(wanted & set(endpoints))
        if not todo:
            return wanted
        with ThreadPoolExecutor(max_workers=min(16, len(todo)), thread_name_prefix="kafkaops-probe") as pool:
            answers = dict(zip(todo, pool.map(lambda b: self._ask(*endpoints[b], self._timeout), todo), strict=True))
        return {b for b in wanted if answers.get(b, True)}

    def view(self, broker: int, endpoint: tuple[str, int]) -> BrokerView | None:
        """Broker ``broker``'s own metadata (None: it did not answer in time)."""
        return self._look(broker, *endpoint, self._timeout)

    def close(self) -> None:
        """Close the kept connections (the next question opens new ones)."""
        self._kept.close()


def as_the_controller_sees(snap: ClusterSnapshot, zk: ZooKeeper, probe: BrokerProbe) -> ClusterSnapshot:
    """``snap`` with each ISR narrowed to the controller's own view (ZooKeeper mode; see
    :mod:`kafkaops.systems.broker_probe` for why). A controller that does not answer, or ZooKeeper that
    does not say which broker it is, leaves the snapshot as it is: the probe and the registrations judge
    those."""

    try:
        controller = zk.open().controller()
    except Exception:  # ZooKeeper silent from here: the fencing stops the run before its next stop
        return snap
    if controller is None or controller not in snap.endpoints:
        return snap
    view = probe.view(controller, snap.endpoints[controller])
    return snap if view is None else as_both_see(snap, view.isr)
