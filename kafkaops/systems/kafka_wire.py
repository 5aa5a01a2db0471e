"""A raw connection to one broker, for the few requests no Kafka client library offers: TCP within one
deadline, then TLS and SASL as the cluster's listeners require.

kafkaops speaks Kafka's protocol itself in two places: the broker probe (``ApiVersions``, and one broker's
own ``Metadata``: :mod:`kafkaops.systems.broker_probe`) and ``DescribeLogDirs`` (the AdminClient has
none). On a secured cluster those connections must do what every client does:

* **TLS** with the inventory's CA and hostname checking (the standard library's ``ssl``);
* **SASL** before any request but ``ApiVersions`` (which Kafka answers before authentication: the probe's
  "does it serve?" needs no password). ``SaslHandshake`` v1 then ``SaslAuthenticate`` v1 frames carry the
  mechanism's messages. PLAIN is one message. SCRAM's (RFC 5802) are made by ``scramp``, the SCRAM
  implementation pg8000 uses: nonces, salted passwords, the client proof and, above all, *checking the
  server's signature* are where hand-written SCRAM goes wrong, and a well-kept library is cheaper to trust
  than 80 lines of ours. Kafka does not SASLprep passwords and scramp does: the two agree on every ASCII
  password (docs/security.md).

The whole exchange — name resolution, connect, handshakes and every read — shares one deadline. A refusal
(a certificate that does not verify, a wrong password) is :class:`~kafkaops.errors.AuthError`, never "not
serving": waiting does not fix a credential.
"""

from __future__ import annotations

import ipaddress
import itertools
import socket
import ssl
import struct
import threading
import time
from typing import Any

from kafkaops.errors import AuthError
from kafkaops.model import KafkaEndpoint
from kafkaops.systems.kafka_auth import password, tls_context

_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
#: Correlation ids of this process's requests, never reused: on a kept connection (:mod:`kafkaops.systems.
#: broker_probe`) the id is what tells the answer to this request from a late one to an earlier request.
CORRELATION = itertools.count(1)
_CLIENT_ID = b"kafkaops"

#: One resolved address: family, socket type, protocol, the address ``connect`` takes.
_Address = tuple[socket.AddressFamily, socket.SocketKind, int, Any]


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (a ``time.monotonic()`` value).

    Raises:
        TimeoutError: None left.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def resolve(host: str, port: int, deadline: float) -> list[_Address]:
    """``host``'s TCP addresses, resolved before ``deadline``. A literal IP address is not looked up
    (``AI_NUMERICHOST``: no name server asked); a name is resolved in a worker thread, joined with the time
    left: ``getaddrinfo`` takes no timeout, and a silent name server blocks it for the resolver's own
    (``resolv.conf``: 5 s per try and server). The worker, if abandoned, ends with that lookup.

    Raises:
        TimeoutError: The name was not resolved in time.
        OSError: It does not resolve (``socket.gaierror``).
    """
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    else:
        return [(family, kind, proto, addr) for family, kind, proto, _, addr
                in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)]
    answer: list[list[_Address]] = []
    failure: list[OSError] = []

    def lookup() -> None:
        try:
            answer.append([(family, kind, proto, addr) for family, kind, proto, _, addr
                           in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)])
        except OSError as exc:
            failure.append(exc)

    worker = threading.Thread(target=lookup, name=f"kafkaops-resolve-{host}", daemon=True)
    worker.start()
    worker.join(remaining(deadline))
    if failure:
        raise failure[0]
    if not answer:
        raise TimeoutError(f"{host} not resolved before the deadline")
    return answer[0]


def connect_tcp(host: str, port: int, deadline: float) -> socket.socket:
    """A TCP connection to ``host:port`` made before ``deadline``: each resolved address tried in turn,
    as ``socket.create_connection`` does, with only the time left."""
    error: OSError = TimeoutError("deadline passed")
    for family, kind, proto, addr in resolve(host, port, deadline):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(remaining(deadline))
            sock.connect(addr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
            if isinstance(exc, TimeoutError):
                break  # the deadline is spent: no time left for the next address
    raise error


def read_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < n:
        sock.settimeout(remaining(deadline))
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket, deadline: float, limit: int) -> bytes:
    """One size-prefixed response frame, size prefix included.

    Raises:
        ConnectionError: A size outside ``[6, limit]``: not a Kafka answer we asked for.
    """
    head = read_exactly(sock, 4, deadline)
    (size,) = struct.unpack(">i", head)
    if not 6 <= size <= limit:
        raise ConnectionError(f"a {size}-byte frame is not an answer to our request")
    return head + read_exactly(sock, size, deadline)


def open_connection(endpoint: KafkaEndpoint, host: str, port: int, deadline: float, *,
                    authenticate: bool = True) -> socket.socket:
    """A connection to the broker at ``host:port`` ready for requests: TLS when the cluster's protocol has
    it, SASL when it has it and ``authenticate`` (only ``ApiVersions`` may be sent without).

    Raises:
        AuthError: The broker's certificate does not verify, or it refused the credentials.
        OSError: No connection within the deadline (TimeoutError), refused or closed.
    """
    sec = endpoint.security
    sock = connect_tcp(host, port, deadline)
    try:
        if sec.tls:

            sock.settimeout(remaining(deadline))
            try:
                sock = tls_context(sec).wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                raise AuthError(f"cluster {endpoint.name}: broker {host}:{port}'s certificate does not verify: "
                                f"{exc.verify_message}", hint=f"check kafka.security.ca_file ({sec.ca_file}) and "
                                "the broker's certificate (CA, expiry, name)") from None
        if sec.sasl and authenticate:
            _sasl(sock, endpoint, host, port, deadline)
        return sock
    except BaseException:
        sock.close()
        raise


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    frame = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID + body
    return struct.pack(">i", len(frame)) + frame


def _bytes_field(data: bytes, at: int) -> tuple[bytes | None, int]:
    (n,) = struct.unpack_from(">i", data, at)
    at += 4
    return (None, at) if n < 0 else (data[at:at + n], at + n)


def _string_field(data: bytes, at: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, at)
    at += 2
    return (None, at) if n < 0 else (data[at:at + n].decode(), at + n)


def _sasl(sock: socket.socket, endpoint: KafkaEndpoint, host: str, port: int, deadline: float) -> None:
    """Authenticate ``sock`` with the cluster's SASL mechanism (SaslHandshake v1, SaslAuthenticate v1)."""

    sec = endpoint.security
    mechanism = sec.sasl_mechanism or ""

    def refused(why: str) -> AuthError:
        return AuthError(f"cluster {endpoint.name}: broker {host}:{port} refused SASL {mechanism} as "
                         f"{sec.principal}: {why}", hint="check kafka.security.sasl (user, password, mechanism)")

    corr = next(CORRELATION) & 0x7FFFFFFF
    name = mechanism.encode()
    sock.sendall(_request(_SASL_HANDSHAKE, 1, corr, struct.pack(">h", len(name)) + name))
    frame = read_frame(sock, deadline, 1 << 16)
    (got, error) = struct.unpack_from(">ih", frame, 4)
    if got != corr:
        raise ConnectionError("SaslHandshake: answer to another request")
    if error:
        raise refused(f"the listener does not offer {mechanism} (error {error})")

    def authenticate(message: bytes) -> bytes:
        corr = next(CORRELATION) & 0x7FFFFFFF
        sock.sendall(_request(_SASL_AUTHENTICATE, 1, corr, struct.pack(">i", len(message)) + message))
        frame = read_frame(sock, deadline, 1 << 16)
        (got, error) = struct.unpack_from(">ih", frame, 4)
        text, at = _string_field(frame, 10)
        answer, _ = _bytes_field(frame, at)
        if got != corr:
            raise ConnectionError("SaslAuthenticate: answer to another request")
        if error:
            raise refused(text or f"error {error}")
        return answer or b""

    secret = password(sec, endpoint.name)
    if mechanism == "PLAIN":
        authenticate(b"\0" + (sec.username or "").encode() + b"\0" + secret.encode())
        return
    from scramp import ScramClient, ScramException

    client = ScramClient([mechanism], sec.username or "", secret)
    try:
        client.set_server_first(authenticate(client.get_client_first().encode()).decode())
        client.set_server_final(authenticate(client.get_client_final().encode()).decode())
    except ScramException as exc:
        raise refused(f"the broker's SCRAM answer does not verify ({exc})") from None
