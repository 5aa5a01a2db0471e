"""The checks before a broker host is repooled (issue 13.1): Kafka's log scanned for ERROR/FATAL lines
since the maintenance started (known-benign ones explicit), every service of the host checked, the lab's
log selection by time and its ``eventbus_fails_on_boot`` knob. Pure parts; the lab test is
``tests/lab/test_reboot_checks.py``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.context import Projection
from kafkaops.engine.run_facts import FACTS_FILE, RunFacts
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import ConfigError, LabError
from kafkaops.facts.log_lines import describe_matches
from kafkaops.inventory import load_inventory
from kafkaops.queries.service import disruption_name
from kafkaops.steps import logs
from kafkaops.steps.logs import KafkaLogErrorsFound, scan_kafka_lines
from kafkaops_lab.host import KNOBS, LabHost
from kafkaops_lab.hostctl import line_time, read_since, select_lines

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventory" / "lab.yaml"

# Shapes recorded from the lab's Kafka 3.9 server log (log4j ``[%d] %p %m (%c)%n``) and as journald shows
# the same lines in production (``journalctl -u kafka.service``).
KAFKA_LOG = "".join(line + "\n" for line in (
    "[2026-11-23 20:40:01,100] INFO [KafkaServer id=1002] shutting down (kafka.server.KafkaServer)",
    "[2026-11-23 20:40:01,200] WARN [RequestSendThread controllerId=1001] Controller 1001's connection to broker "
    "127.0.10.2:9092 (id: 1002 rack: B) was unsuccessful (kafka.controller.RequestSendThread)",
    "[2026-11-23 20:40:02,300] INFO [Partition x-0 broker=1002] ISR updated to 1002,1003; ERROR counts reset "
    "(kafka.cluster.Partition)",
    "[2026-11-23 20:40:03,400] ERROR [ReplicaManager broker=1002] Error processing append operation on partition "
    "x-0 (kafka.server.ReplicaManager)",
    "org.apache.kafka.common.errors.KafkaStorageException: Disk error when trying to access log file on the disk.",
    "\tat kafka.log.UnifiedLog.append(UnifiedLog.scala:800)",
    "Nov 23 20:40:04 kafka1002 kafka[812]: [2026-11-23 20:40:04,500] FATAL Fatal error during KafkaServer startup. "
    "Prepare to shutdown (kafka.server.KafkaServer)",
    "[2026-11-23 20:40:05,600] ERROR [Controller id=1002 epoch=3] Controller 1002 epoch 3 failed to change state "
    "for partition y-1 from OfflinePartition to OnlinePartition (state.change.logger)",
))


def step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params}, **params})


# --- Kafka's log ------------------------------------------------------------------------------------------


def test_kafka_scan_finds_error_and_fatal_entries_by_their_log4j_level() -> None:
    scan = scan_kafka_lines(KAFKA_LOG.splitlines())
    assert [(m.number, m.pattern) for m in scan.errors] == [(4, "ERROR"), (7, "FATAL"), (8, "ERROR")]
    assert scan.errors[1].line.startswith("Nov 23 20:40:04 kafka1002 kafka[812]: ")  # the journal's prefix
    assert scan.ignored == () and scan.lines == 8


def test_the_word_error_elsewhere_in_a_line_and_stack_traces_are_not_entries() -> None:
    lines = ["[2026-11-23 20:40:02,300] INFO ISR updated; ERROR counts reset (kafka.cluster.Partition)",
             "[2026-11-23 20:40:02,301] WARN Partition x-0 marked as failed ERROR (kafka.server.ReplicaFetcherThread)",
             "org.apache.kafka.common.errors.NotLeaderOrFollowerException: ERROR in the message",
             "ERROR without a timestamp (a JVM message on stdout)"]
    assert scan_kafka_lines(lines).errors == ()


def test_benign_lines_are_ignored_only_when_they_match_an_ignore_pattern() -> None:
    ignore = [r"failed to change state for partition \S+ from OfflinePartition"]
    scan = scan_kafka_lines(KAFKA_LOG.splitlines(), ignore)
    assert [m.number for m in scan.errors] == [4, 7]
    assert [(m.number, m.pattern) for m in scan.ignored] == [(8, ignore[0])]


def test_the_built_in_benign_set_is_explicit_and_says_why() -> None:
    assert logs.BENIGN_KAFKA_ERRORS
    for benign in logs.BENIGN_KAFKA_ERRORS:
        scan = scan_kafka_lines(benign.example.splitlines())
        assert benign.why and scan.errors == () and len(scan.ignored) == 1, benign


def test_an_append_error_is_benign_only_when_its_exception_is_an_out_of_order_sequence() -> None:
    head = ("[2026-11-23 22:43:35,870] ERROR [ReplicaManager broker=1001] Error processing append operation on "
            "partition lab.load-0 (kafka.server.ReplicaManager)")
    reordered = [head, "org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number",
                 "[2026-11-23 22:43:35,900] INFO next entry"]
    disk = [head, "org.apache.kafka.common.errors.KafkaStorageException: Error while appending records to "
            "lab.load-0 in dir /srv/kafka/data", "[2026-11-23 22:43:35,900] INFO next entry"]
    alone = [head, "[2026-11-23 22:43:35,900] INFO next entry"]
    assert scan_kafka_lines(reordered).errors == () and len(scan_kafka_lines(reordered).ignored) == 1
    assert [m.number for m in scan_kafka_lines(disk).errors] == [1]
    assert [m.number for m in scan_kafka_lines(alone).errors] == [1]
    journald = [f"Nov 23 22:43:35 kafka1001 kafka[812]: {line}" for line in reordered]
    assert scan_kafka_lines(journald).errors == ()  # production reads it through journalctl
    # the exception of the *next* entry never excuses this one
    assert [m.number for m in scan_kafka_lines([head, reordered[2], reordered[1]]).errors] == [1]


def test_the_controller_failing_to_reach_another_broker_is_not_benign() -> None:
    own = ("[2026-11-23 21:20:48,251] ERROR [RequestSendThread controllerId=1003] Controller 1003 fails to send "
           "a request to broker 127.0.10.3:9092 (id: 1003 rack: C) (kafka.controller.RequestSendThread)")
    other = own.replace("127.0.10.3:9092 (id: 1003", "127.0.10.1:9092 (id: 1001")
    assert scan_kafka_lines([own]).errors == ()
    assert [m.number for m in scan_kafka_lines([other]).errors] == [1]



def test_the_controller_failing_to_reach_another_broker_is_benign_only_when_its_send_thread_was_interrupted() -> None:
    """CI at 1cc270b: the controller's own controlled stop interrupted its send thread to broker 1001. The same
    line caused by a timeout or an I/O error is a broker the controller cannot reach, and still stops the run."""
    head = ("[2026-11-26 23:34:50,421] ERROR [RequestSendThread controllerId=1002] Controller 1002 fails to send "
            "a request to broker 127.0.10.1:9092 (id: 1001 rack: A) (kafka.controller.RequestSendThread)")
    assert scan_kafka_lines([head, "java.lang.InterruptedException"]).errors == ()
    assert scan_kafka_lines([head, "java.lang.InterruptedException: sleep interrupted",
                             "\tat java.base/java.lang.Thread.sleep(Native Method)"]).errors == ()
    for cause in ("java.io.IOException: Connection to 1001 was disconnected before the response was read",
                  "java.net.SocketTimeoutException: Failed to connect within 30000 ms"):
        assert [m.number for m in scan_kafka_lines([head, cause]).errors] == [1], cause
    # another controller's line, or an interrupted exception belonging to the next entry, excuses nothing
    other = head.replace("controllerId=1002] Controller 1002", "controllerId=1002] Controller 1003")
    assert [m.number for m in scan_kafka_lines([other, "java.lang.InterruptedException"]).errors] == [1]
    nxt = "[2026-11-26 23:34:50,422] WARN [Something] interrupted (kafka.Foo)"
    assert [m.number for m in scan_kafka_lines([head, nxt, "java.lang.InterruptedException"]).errors] == [1]

def test_a_starting_controllers_api_versions_failure_is_benign_only_for_that_null_raft_manager() -> None:
    head = ("[2026-11-25 06:42:11,264] ERROR [ControllerApis nodeId=3001] Unexpected error handling request "
            "RequestHeader(apiKey=API_VERSIONS, apiVersion=4, clientId=adminclient-1, correlationId=0, "
            "headerVersion=2) -- ApiVersionsRequestData(clientSoftwareName='apache-kafka-java') with context x")
    npe = ('java.lang.NullPointerException: Cannot invoke "kafka.raft.KafkaRaftManager.client()" because the return '
           'value of "kafka.server.ControllerServer.raftManager()" is null')
    trace = "\tat kafka.server.ControllerServer.$anonfun$startup$7(ControllerServer.scala:165)"
    assert scan_kafka_lines([head, npe, trace]).errors == ()
    other_npe = npe.replace("ControllerServer.raftManager()", "ControllerServer.quorumControllerMetrics()")
    assert [m.number for m in scan_kafka_lines([head, other_npe, trace]).errors] == [1]
    on_fetch = head.replace("apiKey=API_VERSIONS", "apiKey=FETCH")
    assert [m.number for m in scan_kafka_lines([on_fetch, npe, trace]).errors] == [1]
    assert [m.number for m in scan_kafka_lines([head]).errors] == [1]  # no exception seen: not excused


def test_a_starting_controllers_describe_cluster_failure_is_benign_only_for_that_null_features_publisher() -> None:
    """Found by the CI on 2026-11-26: the admin client's DescribeCluster reached controller 3003 a second
    after its start, before its features publisher was set."""
    head = ("[2026-11-26 16:14:00,827] ERROR [ControllerApis nodeId=3003] Unexpected error handling request "
            "RequestHeader(apiKey=DESCRIBE_CLUSTER, apiVersion=2, clientId=adminclient-1, correlationId=1, "
            "headerVersion=2) -- DescribeClusterRequestData(endpointType=2) with context x")
    npe = ('java.lang.NullPointerException: Cannot invoke "org.apache.kafka.metadata.publisher.FeaturesPublisher'
           '.features()" because the return value of "kafka.server.ControllerServer.featuresPublisher()" is null')
    assert scan_kafka_lines([head, npe]).errors == ()
    other_npe = npe.replace("ControllerServer.featuresPublisher()", "ControllerServer.sharedServer()")
    assert [m.number for m in scan_kafka_lines([head, other_npe]).errors] == [1]
    on_create = head.replace("apiKey=DESCRIBE_CLUSTER", "apiKey=CREATE_TOPICS")
    assert [m.number for m in scan_kafka_lines([on_create, npe]).errors] == [1]


def test_an_error_is_reported_with_its_exception_line() -> None:
    head = ("[2026-11-25 06:42:11,264] ERROR [ControllerApis nodeId=3001] Unexpected error handling request "
            "RequestHeader(apiKey=FETCH, apiVersion=4)")
    cause = "java.lang.IllegalStateException: the log is closed"
    scan = scan_kafka_lines([head, cause, "\tat kafka.log.UnifiedLog.read(UnifiedLog.scala:1)"])
    assert [m.cause for m in scan.errors] == [cause]
    assert f"caused by: {cause}" in describe_matches(scan.errors)
    # a line after the entry that is not an exception is not called one
    assert scan_kafka_lines([head, "  more text of the entry"]).errors[0].cause == ""


def test_a_bad_ignore_pattern_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="ignore pattern '\\(unclosed' is not a valid regular expression"):
        scan_kafka_lines(["x"], ["(unclosed"])


# --- the lab's log selection ----------------------------------------------------------------------------------


def test_lab_log_lines_are_dated_in_both_formats() -> None:
    expected = time.mktime(time.strptime("2026-11-23T20:40:03", "%Y-%m-%dT%H:%M:%S"))
    assert line_time("[2026-11-23 20:40:03,400] ERROR x (y)") == expected
    assert line_time("2026-11-23T20:40:03.016 (MainThread) eventbus stopped") == expected
    assert line_time("\tat kafka.log.UnifiedLog.append(UnifiedLog.scala:800)") is None


def test_since_keeps_later_entries_with_their_stack_traces() -> None:
    # One second of slack: a line stamped 20:40:03 may have been written at 20:40:03.999.
    since = time.mktime(time.strptime("2026-11-23T20:40:04", "%Y-%m-%dT%H:%M:%S"))
    kept = list(select_lines(KAFKA_LOG.splitlines(), since))
    assert kept[0].startswith("[2026-11-23 20:40:03,400] ERROR")  # and not the earlier entries
    assert kept[1].startswith("org.apache.kafka.common.errors.KafkaStorageException")  # its trace goes with it
    assert len(kept) == 5
    assert list(select_lines(["\tat a continuation of an older entry"], since)) == []
    assert len(list(select_lines(KAFKA_LOG.splitlines(), None))) == 8


def test_a_log_read_since_a_time_is_the_whole_logs_lines_since_then(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's log scan seeks to the time asked for instead of reading the whole log: the same lines, for
    every second of the log and between them (stack traces, a line cut in two at every seek). The seek
    reads on below 256 bytes here, not 64 KiB, so that it halves down to single entries."""
    import kafkaops_lab.hostctl as hostctl

    monkeypatch.setattr(hostctl, "_SEEK_STOP", 256)
    start = time.mktime(time.strptime("2026-11-23T20:00:00", "%Y-%m-%dT%H:%M:%S"))
    lines = []
    for i in range(2100):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start + i // 7))
        lines.append(f"[{stamp},{i % 1000:03d}] INFO entry {i} " + "x" * (i % 90) + "\n")
        if i % 100 == 0:
            lines.append(f"java.lang.IllegalStateException: trace of entry {i}\n")
            lines.append("\tat kafka.log.UnifiedLog.append(UnifiedLog.scala:800)\n")
    log = tmp_path / "kafka-server.log"
    log.write_text("".join(lines))
    for second in range(-2, 303):
        for since in (start + second, start + second + 0.5):
            assert list(read_since(log, since)) == list(select_lines(lines, since)), second
    assert list(read_since(log, None)) == lines
    # a file last written before the time asked for is not even opened
    old = tmp_path / "kafka-server.log.1"
    old.write_text("".join(lines[:10]))
    os.utime(old, (start, start))
    assert list(read_since(old, start + 60)) == []


# --- the steps' decisions -----------------------------------------------------------------------------------


def test_a_host_without_services_has_no_health_or_service_log_to_check() -> None:
    health = step("service.verify_health").plan(Observation({"host": "kafka9", "checks": [], "timeout": 60.0}))
    assert isinstance(health, Noop) and "kafka9 runs no service" in health.reason
    scan = step("service.scan_log").plan(Observation({"host": "kafka9", "scans": [], "window": 0.0}))
    assert isinstance(scan, Noop) and "kafka9 runs no service" in scan.reason


def test_health_of_every_service_waits_only_for_those_not_answering() -> None:
    ok = {"service": "eventbus", "url": "http://h:8085/_info", "status": 200, "line": "HTTP 200"}
    down = {"service": "other", "url": "http://h:9000/_info", "status": None, "line": "no answer"}
    check = step("service.verify_health")
    assert isinstance(check.plan(Observation({"host": "h", "checks": [ok], "timeout": 60.0})), Noop)
    waits = check.plan(Observation({"host": "h", "checks": [ok, down], "timeout": 60.0}))
    assert isinstance(waits, Action) and waits.commands == ("GET http://h:9000/_info",)


def test_kafka_scan_without_a_kafka_log_template_says_so_and_lists_its_ignores_otherwise() -> None:
    base = {"host": "h", "since": 1_795_466_376, "ignore": ["benign one"], "resumed_after_report": False}
    none = step("logs.scan_kafka").plan(Observation({**base, "command": None}))
    assert isinstance(none, Noop) and "no kafka_log command template" in none.reason
    scan = step("logs.scan_kafka").plan(Observation({**base, "command": "hostctl log kafka --since @1795466376"}))
    assert isinstance(scan, Action) and "ignore: benign one" in scan.commands
    assert scan.commands[0] == "on h: hostctl log kafka --since @1795466376"


def test_the_mark_is_taken_once() -> None:
    mark = step("logs.mark_start")
    assert isinstance(mark.plan(Observation({"host": "h", "mark": None})), Action)
    assert isinstance(mark.plan(Observation({"host": "h", "mark": 1_795_466_376})), Noop)


def test_a_dry_run_projects_the_mark_without_a_time_of_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A saved plan is re-observed when applied: a projected clock value would make it stale at once."""
    ctx, _ = _ctx(tmp_path, monkeypatch, "")
    ctx.run_id, ctx.facts = "", RunFacts(None)  # a dry-run: facts in memory, nothing recorded yet
    mark = step("logs.mark_start")
    obs = mark.observe(ctx)
    for key, value in mark.effects(obs, mark.plan(obs)).items():
        ctx.projected.set(key, value, "kafka1002 step 7 (logs.mark_start)")
    scan = step("logs.scan_kafka").observe(ctx)
    assert scan.data["command"] == "hostctl log kafka --since @'<maintenance start>'"
    assert "since the stop" in scan.summary and "projected: after kafka1002 step 7" in scan.summary
    health = step("service.verify_health").observe(ctx)
    assert health.data["checks"][0]["status"] is None  # to be seen after the reboot, not now
    logs_ = step("service.scan_log").plan(step("service.scan_log").observe(ctx))
    assert isinstance(logs_, Action) and "eventbus log on kafka1002 since the stop" in logs_.description


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str) -> tuple[Any, list[str]]:
    """A run context on the lab inventory whose ``kafka_log`` command answers ``output``."""
    svc = Environment(load_inventory(LAB), home=tmp_path)
    asked: list[str] = []

    def run(host: Any, command: str, **kwargs: Any) -> Any:
        asked.append(command)
        return SimpleNamespace(stdout=output, exit_code=0)

    monkeypatch.setattr(svc, "run", run)
    facts = RunFacts(tmp_path / "runs" / "r1" / FACTS_FILE)
    facts.set(disruption_name("kafka1002"), 1_795_466_376)
    return SimpleNamespace(env=svc, target="kafka1002", run_id="r1", projected=Projection(), facts=facts,
                           progress=lambda line: None), asked


def test_kafka_scan_fails_naming_the_lines_then_a_resume_stops_only_on_new_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, asked = _ctx(tmp_path, monkeypatch, KAFKA_LOG)
    scan = step("logs.scan_kafka")
    with pytest.raises(KafkaLogErrorsFound) as failed:
        scan.apply(ctx, scan.plan(scan.observe(ctx)))
    assert asked == ["hostctl log kafka --since @1795466376"]  # from the mark, the host's clock
    message = str(failed.value)
    assert "Kafka log scan failed: 3 ERROR/FATAL line(s)" in message and "kafka1002 stays depooled" in message
    # the stack trace's head is the entry's cause, shown under it, never an error line of its own
    assert "Error processing append operation" in message and message.count("KafkaStorageException") == 1
    assert "caused by: org.apache.kafka.common.errors.KafkaStorageException: Disk error" in message
    assert scan.plan(scan.observe(ctx)).description.count("already reported") == 1
    scan.apply(ctx, scan.plan(scan.observe(ctx)))  # resumed after a look: the same lines pass
    ctx.env.run = lambda *a, **k: SimpleNamespace(stdout=KAFKA_LOG + "[2026-11-23 20:41:00,000] ERROR new (x)\n")
    with pytest.raises(KafkaLogErrorsFound, match=r"1 ERROR/FATAL line\(s\)[\s\S]*ERROR new"):
        scan.apply(ctx, scan.plan(scan.observe(ctx)))


# --- the runbooks and the lab host ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reboot", "restart", "rolling-reboot", "rolling-restart"])
def test_broker_runbooks_check_services_and_logs_before_the_repool(name: str) -> None:
    steps = [next(iter(s)) for s in yaml.safe_load((REPO / "runbooks" / f"{name}.yaml").read_text())["steps"]]
    repool = steps.index("conftool.repool")
    assert steps.index("logs.mark_start") < steps.index("kafka.stop_broker")
    for check in ("service.verify_health", "service.scan_log", "logs.scan_kafka"):
        assert steps.index("kafka.wait_in_sync") < steps.index(check) < repool, (check, steps)


def _lab_host(tmp_path: Path) -> LabHost:
    spec: Any = SimpleNamespace(lab_dir=str(tmp_path))
    host: Any = SimpleNamespace(name="kafka1002", address="127.0.10.2", http_port=8085, ssh_port=2222,
                                kafka_port=9092)
    h = LabHost(spec, host)
    h.dirs.root.mkdir(parents=True)
    return h


def test_knobs_are_known_by_name_and_written_whole(tmp_path: Path) -> None:
    h = _lab_host(tmp_path)
    assert {"slow_shutdown", "eventbus_fails_on_boot", "eventbus_produce_fails"} <= set(KNOBS)
    h.set_knob("eventbus_fails_on_boot", 1)
    h.set_knob("slow_shutdown", 20)
    h.set_knob("slow_shutdown", None)
    assert h.knobs() == {"eventbus_fails_on_boot": 1}
    assert [p.name for p in h.dirs.root.iterdir()] == ["knobs.json"]  # no temporary file left
    with pytest.raises(LabError, match="unknown knob 'eventbus_fail_on_boot'"):
        h.set_knob("eventbus_fail_on_boot", 1)


def test_a_unit_failing_at_boot_says_so_in_its_log(tmp_path: Path) -> None:
    h = _lab_host(tmp_path)
    h._fail_at_boot("eventbus")
    (line,) = h.dirs.logfile("eventbus").read_text().splitlines()
    assert "eventbus failed to start at boot: knob eventbus_fails_on_boot is set on kafka1002" in line
    assert "not listening on 127.0.10.2:8085" in line
    assert list(select_lines([line], time.time() - 5)) == [line]  # `hostctl log eventbus --since` shows it
    assert h.events("unit-failed")[0]["unit"] == "eventbus" and h.pid("eventbus") is None


def test_a_request_handler_exception_is_benign_only_for_the_error_meter_gone_at_shutdown() -> None:
    head = ("[2026-11-26 08:47:13,949] ERROR [Kafka Request Handler 1 on Controller 3002] Exception when handling "
            "request (kafka.server.KafkaRequestHandler)")
    npe = ('java.lang.NullPointerException: Cannot invoke "org.apache.kafka.network.metrics.RequestMetrics'
           '$ErrorMeter.getOrCreateMeter()" because the return value of "java.util.Map.get(Object)" is null')
    other = 'java.lang.NullPointerException: Cannot invoke "kafka.log.UnifiedLog.logEndOffset()"'
    assert scan_kafka_lines([head, npe]).errors == ()
    assert [m.number for m in scan_kafka_lines([head, other]).errors] == [1]
    assert [m.number for m in scan_kafka_lines([head]).errors] == [1]
