"""Error lines in a service's or Kafka's log: the patterns, the matches, and the Kafka ERROR lines known to be harmless.

Pure: the log steps (``service.scan_log``, ``logs.scan_kafka``) read the lines from the host and hand them
here; ``kafkaops runbooks show`` prints :data:`BENIGN_KAFKA_ERRORS` with why each is harmless.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkaops.errors import CheckFailed, ConfigError


@dataclass(frozen=True)
class LogMatch:
    """One log line that matched an error pattern.

    Attributes:
        number: 1-based line number in the scanned output.
        pattern: The first pattern it matched (as written in the inventory).
        line: The line, without its newline.
        cause: The entry's exception, when the line after it is one (a stack trace's head): the ERROR line of
            a Kafka request handler names the request, the line after it says what went wrong.
    """

    number: int
    pattern: str
    line: str
    cause: str = ""


def compile_patterns(patterns: Iterable[str], what: str) -> list[tuple[str, re.Pattern[str]]]:
    """``patterns`` compiled, each with its text.

    Raises:
        ConfigError: One is not a valid regular expression (named with ``what``: "error", "ignore").
    """
    out = []
    for p in patterns:
        try:
            out.append((p, re.compile(p)))
        except re.error as exc:
            raise ConfigError(f"{what} pattern {p!r} is not a valid regular expression: {exc}") from exc
    return out


def find_error_lines(lines: Iterable[str], patterns: Sequence[str]) -> list[LogMatch]:
    """Every line matching any of ``patterns`` (regular expressions, searched anywhere in the line).

    Raises:
        ConfigError: A pattern is not a valid regular expression.
    """
    compiled = compile_patterns(patterns, "error")
    out: list[LogMatch] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        for pattern, rx in compiled:
            if rx.search(line):
                out.append(LogMatch(number, pattern, line))
                break
    return out


def describe_matches(matches: Sequence[LogMatch], *, limit: int = 10, width: int = 300) -> str:
    """The matched lines for an error message: pattern and line, the first ``limit`` of them."""
    shown = [f"    [{m.pattern}] {m.line[:width]}" + (f"\n      caused by: {m.cause[:width]}" if m.cause else "")
             for m in matches[:limit]]
    if len(matches) > limit:
        shown.append(f"    ... and {len(matches) - limit} more")
    return "\n".join(shown)


class LogErrorsFound(CheckFailed):
    """The service logged lines matching its error patterns. Not retried: the lines will still be there."""

    retryable = False


@dataclass(frozen=True)
class BenignError:
    """An ERROR line Kafka logs on a controlled stop or start of a healthy cluster.

    Attributes:
        name: What the plan shows instead of the pattern (a regex per host made the 80-column plan
            unreadable); ``kafkaops runbooks show`` prints the pattern and the reason with it.
        pattern: Regular expression searched in the line.
        why: Why it is harmless (shown by ``kafkaops runbooks show`` and in the docs).
        example: A line it was seen in (the tests check the pattern matches it, and only lines like it).
    """

    name: str
    pattern: str
    why: str
    example: str


#: What the lab's Kafka 3.9 brokers log at ERROR around a normal controlled shutdown and start
#: (measured on the lab: reboots, restarts and a rolling reboot, see docs/maintenance.md). Extend it
#: with the step's ``ignore`` parameter for a site's own, never by weakening :data:`KAFKA_LEVEL`.
BENIGN_KAFKA_ERRORS: tuple[BenignError, ...] = (
    BenignError(
        # Only a send from the controller to *its own* broker (the backreference), never to another one.
        name="controller-send-to-self",
        pattern=r"\[RequestSendThread controllerId=(\d+)\] Controller \1 fails to send a request to broker "
                r"\S+ \(id: \1 ",
        why="the controller's request thread to its own broker fails while that broker shuts down (a controlled "
            "stop of the controller, ZooKeeper mode); another broker takes over as controller",
        example="[2026-11-23 21:20:48,251] ERROR [RequestSendThread controllerId=1003] Controller 1003 fails to "
                "send a request to broker 127.0.10.3:9092 (id: 1003 rack: C) (kafka.controller.RequestSendThread)",
    ),
    BenignError(
        # Only with OutOfOrderSequenceException as the entry's exception: the same line with a storage
        # error (KafkaStorageException) is a failing disk and still stops the run.
        name="out-of-order-sequence",
        pattern=r"\] Error processing append operation on partition \S+ \(kafka\.server\.ReplicaManager\)\n"
                r"[^\n]*?\borg\.apache\.kafka\.common\.errors\.OutOfOrderSequenceException: ",
        why="an idempotent producer's in-flight batches reach a partition's new leader out of order right after "
            "a leadership move (the election after the host came back); the broker rejects them and the "
            "producer resends in order - nothing is lost or duplicated (the lab's load read-back checks it)",
        example="[2026-11-23 22:43:35,870] ERROR [ReplicaManager broker=1001] Error processing append operation "
                "on partition lab.load-0 (kafka.server.ReplicaManager)\n"
                "org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number for "
                "producer 12000 at offset 3845 in partition lab.load-0: 745 (incoming seq. number), 743 (current "
                "end sequence number)",
    ),
    BenignError(
        # Only a broker heartbeat answered NotControllerException: the same line with another exception
        # (a storage or authorization error) still stops the run.
        name="heartbeat-to-old-controller",
        pattern=r"\[ControllerApis nodeId=\d+\] Unexpected error handling request RequestHeader\(apiKey="
                r"BROKER_HEARTBEAT\b[^\n]*\n[^\n]*?\borg\.apache\.kafka\.common\.errors\.NotControllerException: ",
        why="KRaft: a broker's heartbeat reaches the active controller while it hands the quorum's leadership over "
            "(its controlled stop); the broker sends the next heartbeat to the new leader",
        example="[2026-11-24 22:59:08,159] ERROR [ControllerApis nodeId=3002] Unexpected error handling request "
                "RequestHeader(apiKey=BROKER_HEARTBEAT, apiVersion=2, clientId=1002, correlationId=94, "
                "headerVersion=2) -- BrokerHeartbeatRequestData(brokerId=1002, brokerEpoch=1862) with context "
                "RequestContext(...) (org.apache.kafka.controller.ControllerApis)\n"
                "org.apache.kafka.common.errors.NotControllerException: No controller appears to be active.",
    ),
    BenignError(
        # Only an ApiVersions or DescribeCluster request failing on a part of the controller not set yet (its
        # raft manager, its features publisher): any other exception of those requests, or this one on
        # another request, still stops the run.
        name="request-to-starting-controller",
        pattern=r"\[ControllerApis nodeId=\d+\] Unexpected error handling request RequestHeader\(apiKey="
                r"(?:API_VERSIONS|DESCRIBE_CLUSTER)\b[^\n]*\n[^\n]*?\bjava\.lang\.NullPointerException: [^\n]*"
                r"\"kafka\.server\.ControllerServer\.(?:raftManager|featuresPublisher)\(\)\" is null",
        why="KRaft (Kafka 4.x): a client's first requests to a controller node that is still starting - its "
            "listener accepts before its raft manager and features publisher are set - fail, and the client "
            "connects again; seen when kafka-metadata-quorum or an admin client asks the restarted controller "
            "within its first second",
        example="[2026-11-26 16:14:00,827] ERROR [ControllerApis nodeId=3003] Unexpected error handling request "
                "RequestHeader(apiKey=DESCRIBE_CLUSTER, apiVersion=2, clientId=adminclient-1, correlationId=1, "
                "headerVersion=2) -- DescribeClusterRequestData(includeClusterAuthorizedOperations=false, "
                "endpointType=2) with context RequestContext(...) (org.apache.kafka.controller.ControllerApis)\n"
                "java.lang.NullPointerException: Cannot invoke \"org.apache.kafka.metadata.publisher.FeaturesPublisher"
                ".features()\" because the return value of \"kafka.server.ControllerServer.featuresPublisher()\" "
                "is null",
    ),
    BenignError(
        # Only this NullPointerException (the error meter gone) on a request handler's exception: any other
        # exception while handling a request still stops the run.
        name="request-metrics-after-shutdown",
        pattern=r"\[Kafka Request Handler \d+ on (?:Controller|Broker) \d+\] Exception when handling request "
                r"\(kafka\.server\.KafkaRequestHandler\)\n[^\n]*?\bjava\.lang\.NullPointerException: Cannot invoke "
                r"\"org\.apache\.kafka\.network\.metrics\.RequestMetrics\$ErrorMeter\.getOrCreateMeter\(\)\"",
        why="Kafka 4.x, a controlled stop: RequestChannel.shutdown() removes the request metrics (their error "
            "meters cleared) while a request handler still finishes an in-flight request, whose error count then "
            "has no meter; the process is stopping anyway and the client retries against the quorum's leader "
            "(seen once in ~20 lab controller restarts)",
        example="[2026-11-26 08:47:13,949] ERROR [Kafka Request Handler 1 on Controller 3002] Exception when "
                "handling request (kafka.server.KafkaRequestHandler)\n"
                "java.lang.NullPointerException: Cannot invoke \"org.apache.kafka.network.metrics.RequestMetrics"
                "$ErrorMeter.getOrCreateMeter()\" because the return value of \"java.util.Map.get(Object)\" is null",
    ),
    BenignError(
        # Only with java.lang.InterruptedException as the entry's exception: the same line with a socket or
        # timeout error (a broker the controller cannot reach) still stops the run.
        name="controller-send-interrupted",
        pattern=r"\[RequestSendThread controllerId=(\d+)\] Controller \1 fails to send a request to broker "
                r"[^\n]*\(kafka\.controller\.RequestSendThread\)\n\s*java\.lang\.InterruptedException\b",
        why="ZooKeeper mode: the controller stops its request thread to a broker (it is shutting down or resigning) "
            "while that thread waits to send; the wait is interrupted and logged at ERROR. The next controller sends "
            "every broker the full state again, so the dropped request is not lost (seen once in CI: the "
            "controller's own controlled stop during a reboot)",
        example="[2026-11-26 23:34:50,421] ERROR [RequestSendThread controllerId=1002] Controller 1002 fails to "
                "send a request to broker 127.0.10.1:9092 (id: 1001 rack: A) (kafka.controller.RequestSendThread)\n"
                "java.lang.InterruptedException",
    ),
)


#: The controller failing to send to a broker of its own batch (:func:`_batch_benign`): this, the broker id, a space.
BATCH_PEER_PATTERN = (r"\[RequestSendThread controllerId=(\d+)\] Controller \1 fails to send a request to broker "
                      r"\S+ \(id: ")


#: What the plan calls it, followed by the broker id.
BATCH_PEER_NAME = "controller-send-to-batch-peer"
