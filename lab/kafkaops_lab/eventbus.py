"""An eventbus-like HTTP service (the runbook's eventlogging-service-eventbus) for one lab host.

``POST /v1/events`` takes one event or a JSON list, produces each to Kafka topic ``<dc>.<meta.stream>``
with ``acks=all`` and answers only after the brokers acknowledged: 201 all accepted, 207 some; none
accepted is 400 when the events were at fault (invalid JSON, no ``meta.stream``, unknown topic) and 500
when Kafka was (a timeout, a broker error): the client may retry a 500, never a 400.
Failures are appended to the host's ``failed_events.log`` as ``{"rawEvent": <the event as JSON text>,
"message": ..., "dt": epoch}`` (rawEvent kept for replay: ``kafkaops failed-events``) and logged with the
same phrases as the production service ("Failed processing event", "0 out of 1 events were accepted"),
so the log-scanning step of the HTTP-proxy runbook has something real to find.

The host knob ``eventbus_produce_fails`` (``LabHost.set_knob``; ``kafkaops lab host knob``), when
non-zero, makes every produce fail with a Kafka-like error: the failed-events log fills as it does in a
Kafka outage, for rehearsing ``kafkaops failed-events list`` and ``replay``. It is read at request time
(the knobs file is re-read only when its mtime changes), so setting or clearing it needs no restart.
``GET /_info`` reports host, revision, boot id and pid. SIGTERM drains in-flight requests, then exits.

``GET /metrics`` on a port of its own (:data:`~kafkaops_lab.monitoring.EVENTBUS_METRICS_PORT`, the host's
address) answers Prometheus' text format: requests by method, path and status code, events accepted and
failed, and a request latency histogram — what the lab's Prometheus scrapes and alerts on (5xx ratio).
Not on the service port: the depool gates count the connections made to that one.

The revision is the one deployed in ``<host>/srv/eventbus/REVISION`` when the process *started* (the
code a process runs does not change when files are replaced under it; a deploy restarts the service).
A release with a ``BROKEN`` file starts and listens, but ``/_info`` answers 503: a deploy that "works"
and fails its health check, as the deploy runbook's canary must catch.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops.systems.producing import WRITE_ONCE
from kafkaops_lab import security
from kafkaops_lab.host import LabHost
from kafkaops_lab.monitoring import EVENTBUS_METRICS_PORT

PRODUCE_TIMEOUT = 10.0
#: The knob that makes every produce fail (see the module docstring).
PRODUCE_FAILS_KNOB = "eventbus_produce_fails"
#: What a produce failure says while the knob is set: librdkafka's words for a Kafka outage.
KNOB_ERROR = 'KafkaError{code=_MSG_TIMED_OUT,val=-192,str="Local: Message timed out"}'


#: Upper bounds (seconds) of the request latency histogram's buckets: a produce acked in a few ms up to
#: the produce timeout.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The service's counters, written by the request threads, rendered in Prometheus' text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = {}
        self.events = {"accepted": 0, "failed": 0}
        self.buckets = [0] * len(LATENCY_BUCKETS)
        self.count = 0
        self.total = 0.0

    def observe(self, method: str, path: str, code: int, seconds: float, accepted: int = 0, failed: int = 0) -> None:
        path = path if path in ("/v1/events", "/_info", "/v1/_info") else "other"  # bounded label values
        with self._lock:
            key = (method, path, str(code))
            self.requests[key] = self.requests.get(key, 0) + 1
            self.events["accepted"] += accepted
            self.events["failed"] += failed
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            self.count += 1
            self.total += seconds

    def render(self) -> str:
        with self._lock:
            lines = ["# HELP eventbus_http_requests_total HTTP requests answered, by method, path and status code.",
                     "# TYPE eventbus_http_requests_total counter"]
            lines += [f'eventbus_http_requests_total{{method="{m}",path="{p}",code="{c}"}} {n}'
                      for (m, p, c), n in sorted(self.requests.items())]
            lines += ["# HELP eventbus_events_total Events received, by outcome (accepted: acked by Kafka).",
                      "# TYPE eventbus_events_total counter"]
            lines += [f'eventbus_events_total{{outcome="{k}"}} {n}' for k, n in self.events.items()]
            lines += ["# HELP eventbus_http_request_duration_seconds Time to answer a request.",
                      "# TYPE eventbus_http_request_duration_seconds histogram"]
            lines += [f'eventbus_http_request_duration_seconds_bucket{{le="{b}"}} {n}'
                      for b, n in zip(LATENCY_BUCKETS, self.buckets, strict=True)]
            lines += [f'eventbus_http_request_duration_seconds_bucket{{le="+Inf"}} {self.count}',
                      f"eventbus_http_request_duration_seconds_sum {self.total}",
                      f"eventbus_http_request_duration_seconds_count {self.count}"]
        return "\n".join(lines) + "\n"


class _Service:
    def __init__(self, host: LabHost) -> None:
        from confluent_kafka import Producer


        self.host = host
        self.log_lock = threading.Lock()
        self.producer = Producer({
            **librdkafka_config(security.endpoint(host.spec, "eventbus")),
            **WRITE_ONCE,
            "linger.ms": 2,
            "message.timeout.ms": int(PRODUCE_TIMEOUT * 1000),
            "client.id": f"eventbus-{host.host.name}",
            "log_level": 2,  # brokers come and go in the lab; delivery errors are reported per event
        })
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()
        release = self.host.dirs.release
        revision = release / "REVISION"
        self.revision = (revision.read_text().strip() if revision.exists() else "") or "r1"
        broken = release / "BROKEN"
        self.broken = (broken.read_text().strip() or "broken release") if broken.exists() else ""

        self._knobs: tuple[tuple[int, int], dict[str, float]] = ((-1, -1), {})
        self.metrics = Metrics()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.1)

    def produce_fails(self) -> bool:
        """The ``eventbus_produce_fails`` knob, read again only when the knobs file changed (a stat per
        request, not a JSON parse)."""
        try:
            st = os.stat(self.host.dirs.root / "knobs.json")
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, 0)
        if stamp != self._knobs[0]:
            try:
                self._knobs = (stamp, self.host.knobs() if stamp != (0, 0) else {})
            except ValueError:  # a knobs file being written: keep the previous answer until it is whole
                return bool(self._knobs[1].get(PRODUCE_FAILS_KNOB))
        return bool(self._knobs[1].get(PRODUCE_FAILS_KNOB))

    def log(self, line: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
        with self.log_lock:
            sys.stdout.write(f"{stamp} ({threading.current_thread().name}) {line}\n")
            sys.stdout.flush()

    def fail(self, raw: Any, why: str) -> None:
        """Log and append one EventError; ``raw`` is the event (or, unparsable, the body's text as is)."""
        self.log(f"Failed processing event: {why}")
        record = {"rawEvent": raw if isinstance(raw, str) else json.dumps(raw), "message": why, "dt": time.time()}
        with self.log_lock, open(self.host.dirs.log / "failed_events.log", "a") as f:
            f.write(json.dumps(record) + "\n")

    def produce(self, events: list[Any]) -> tuple[int, int]:
        """Produce every valid event and wait for the acks; return how many were accepted, and how many
        failed for Kafka's reasons (not the event's)."""
        pending: list[tuple[Any, threading.Event, list[str]]] = []
        kafka_failed = 0
        fails = self.produce_fails()
        for event in events:
            meta = event.get("meta") if isinstance(event, dict) else None
            stream = meta.get("stream") if isinstance(meta, dict) else None
            if not isinstance(stream, str) or not stream:
                self.fail(event, "event lacks meta.stream")
                continue
            if fails:
                self.fail(event, KNOB_ERROR)
                kafka_failed += 1
                continue
            done, err = threading.Event(), list[str]()

            def on_delivery(error: Any, _msg: Any, done: threading.Event = done, err: list[str] = err) -> None:
                if error is not None:
                    err.append(str(error))
                done.set()

            try:
                self.producer.produce(f"{self.host.host.dc}.{stream}", json.dumps(event).encode(),
                                      on_delivery=on_delivery)
            except BufferError as exc:
                self.fail(event, str(exc) or "producer queue full")
                kafka_failed += 1
                continue
            except Exception as exc:  # KafkaException (unknown topic...): the event's topic is at fault
                self.fail(event, str(exc))
                continue
            pending.append((event, done, err))
        accepted = 0
        for event, done, err in pending:
            if not done.wait(PRODUCE_TIMEOUT + 2):
                self.fail(event, "timed out waiting for Kafka acknowledgement")
                kafka_failed += 1
            elif err:
                self.fail(event, err[0])
                kafka_failed += 0 if "UNKNOWN_TOPIC" in err[0] else 1
            else:
                accepted += 1
        return accepted, kafka_failed

    def close(self) -> None:
        self.producer.flush(5)
        self._stop.set()


def _handler(service: _Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: Any, started: float, accepted: int = 0, failed: int = 0) -> None:
            service.metrics.observe(self.command, self.path, code, time.monotonic() - started, accepted, failed)
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            service.log(f"{code} {self.command} {self.path} ({self.client_address[0]}) "
                        f"{(time.monotonic() - started) * 1000:.2f}ms")

        def do_GET(self) -> None:
            started = time.monotonic()
            if self.path in ("/_info", "/v1/_info"):
                info = {"host": service.host.host.fqdn, "revision": service.revision,
                        "boot_id": service.host.boot_id(), "pid": __import__("os").getpid()}
                if service.broken:
                    self._reply(503, {**info, "status": "unhealthy", "error": service.broken}, started)
                else:
                    self._reply(200, {**info, "status": "ok"}, started)
            else:
                self._reply(404, {"error": "not found"}, started)

        def do_POST(self) -> None:
            started = time.monotonic()
            if self.path != "/v1/events":
                self._reply(404, {"error": "not found"}, started)
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError as exc:
                service.fail(raw.decode(errors="replace"), f"invalid JSON: {exc}")
                service.log("0 out of 1 events were accepted.")
                self._reply(400, {"error": "invalid JSON"}, started)
                return
            events = body if isinstance(body, list) else [body]
            accepted, kafka_failed = service.produce(events)
            if accepted < len(events):
                service.log(f"{accepted} out of {len(events)} events were accepted.")
            code = 201 if accepted == len(events) else (207 if accepted else 500 if kafka_failed else 400)
            self._reply(code, {"accepted": accepted, "total": len(events)}, started, accepted, len(events) - accepted)

    return Handler


def _metrics_handler(service: _Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            data = service.metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eventbus")
    parser.add_argument("--host", required=True)
    args = parser.parse_args(argv)
    host = LabHost.named(args.host)
    Path(host.dirs.log).mkdir(parents=True, exist_ok=True)
    service = _Service(host)
    server = ThreadingHTTPServer((host.host.address, host.host.http_port), _handler(service))
    server.daemon_threads = False  # SIGTERM waits for in-flight requests
    server.block_on_close = True
    metrics = ThreadingHTTPServer((host.host.address, EVENTBUS_METRICS_PORT), _metrics_handler(service))
    metrics.daemon_threads = True
    threading.Thread(target=metrics.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()

    def on_term(_sig: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    service.log(f"eventbus {service.revision} listening on {host.host.address}:{host.host.http_port}")
    if service.broken:
        service.log(f"health check will fail: {service.broken}")
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    service.close()
    service.log("eventbus stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
