"""The Spark job of the post-check: read exactly the records produced since the baseline, measure them.

Why Spark: a post-check has to read everything written during a maintenance window — on a large fleet
that is hundreds of millions of records — and must finish while the operator is still at the keyboard.
The same code runs on ``local[2]`` for the lab and a small cluster, and on any standalone or YARN
master (``--spark-master``) when the fleet is large; the driver stays small (it only collects one
summary per partition).

How: a reader reads exact offset ranges per partition (pinned, so the scan is reproducible and never
races the producers): by default our columnar Kafka reader (:mod:`kafkaops.health.scan_jar`, reader
``fast``), in as many tasks as the cluster has cores, each task one consumer over a group of
partitions balanced by record count; or Spark's built-in ``kafka`` source (reader ``builtin``, one
task per partition), which is also the fallback when ours is not built. Both hand the same columns
to the rest of the job, which does not know which one read: JSON parsing of event topics in the JVM
(``from_json``), then one pass per task through :mod:`kafkaops.health.scan_kernel` (``mapInArrow``:
no shuffle, no sort). Deleted or compacted records do not fail the job: holes are what we are
looking for, and the kernel counts them.

It can also be submitted on its own (``spark-submit kafkaops/health/spark_job.py --spec SPEC.json
--out RESULT.json``) when the driver must run inside the cluster (YARN cluster mode).

pyspark is imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kafkaops.errors import ConfigError, KafkaOpsError, UnreachableError
from kafkaops.health import scan_jar, scan_kernel
from kafkaops.health.data import ScanRange, ScanResult, Thresholds, merge_segments, segments_from_json
from kafkaops.model import PLAINTEXT, KafkaEndpoint, KafkaSecurity, Secret
from kafkaops.systems.kafka_auth import java_properties

__all__ = ["DEFAULT_MASTER", "ScanSpec", "prestart", "run_scan", "spark_session", "task_groups"]

DEFAULT_MASTER = "local[2]"

_LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n%ex
"""


@dataclass(frozen=True)
class ScanSpec:
    """Everything the job needs; serialisable, so it can be handed to ``spark-submit``.

    Attributes:
        bootstrap: Kafka bootstrap servers as the executors reach them.
        ranges: Offset ranges per partition.
        event_topics: Topics whose records must be JSON with ``meta.dt``.
        thresholds: Tolerances used by the kernel.
        scan_time_ms: The scan's "now" (future-timestamp check).
        kafka_options: Extra ``kafka.*`` consumer options for the source.
        reader: ``fast`` (our columnar source) or ``builtin`` (Spark's ``kafka`` source).
        security: How the readers connect (TLS, SASL): the cluster's ``kafka.security``. Only where its
            secrets live is kept here; the password is read when the reader is built, into the JVM's
            options, never into the spec (its ``to_dict`` may be written to a file).
    """

    bootstrap: str
    ranges: tuple[ScanRange, ...]
    event_topics: frozenset[str] = frozenset()
    thresholds: Thresholds = field(default_factory=Thresholds)
    scan_time_ms: int = 0
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    reader: str = "fast"
    security: KafkaSecurity = PLAINTEXT

    def to_dict(self) -> dict[str, Any]:
        return {
            "bootstrap": self.bootstrap,
            "ranges": [r.to_dict() for r in self.ranges],
            "event_topics": sorted(self.event_topics),
            "thresholds": asdict(self.thresholds),
            "scan_time_ms": self.scan_time_ms,
            "kafka_options": dict(self.kafka_options),
            "reader": self.reader,
            "security": asdict(self.security),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScanSpec:
        th = dict(d.get("thresholds", {}))
        if "parity_pairs" in th:
            th["parity_pairs"] = tuple(tuple(p) for p in th["parity_pairs"])
        return cls(
            bootstrap=str(d["bootstrap"]),
            ranges=tuple(ScanRange(**r) for r in d["ranges"]),
            event_topics=frozenset(d.get("event_topics", ())),
            thresholds=Thresholds(**th),
            scan_time_ms=int(d.get("scan_time_ms", 0)),
            kafka_options=dict(d.get("kafka_options", {})),
            reader=scan_jar.check_reader(str(d.get("reader", "fast"))),
            security=_security(d.get("security")),
        )


def _security(d: Mapping[str, Any] | None) -> KafkaSecurity:
    if not d:
        return PLAINTEXT
    password = d.get("password")
    return KafkaSecurity(**{**d, "password": Secret(**password) if password else None})


def _reader_options(spec: ScanSpec) -> dict[str, str]:
    """The source's ``kafka.*`` options: the cluster's security (Java client properties), then the spec's
    own extra options."""

    endpoint = KafkaEndpoint(spec.bootstrap, spec.security)
    options = {f"kafka.{k}": v for k, v in java_properties(endpoint).items()}
    options.update({k if k.startswith("kafka.") else f"kafka.{k}": v for k, v in spec.kafka_options.items()})
    return options


def _loopback(master: str) -> bool:
    return master.startswith("local") or any(h in master for h in ("127.0.0.1", "localhost"))


#: Sessions being started in the background, by (master, extra settings): see :func:`prestart`.
_WARMING: dict[tuple[str, tuple[tuple[str, str], ...]], Future[Any]] = {}
_WARMING_LOCK = threading.Lock()


def _warm_key(master: str, conf: Mapping[str, str] | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    return master, tuple(sorted((conf or {}).items()))


def prestart(master: str = DEFAULT_MASTER, *, conf: Mapping[str, str] | None = None,
             on_error: Callable[[str], None] | None = None) -> bool:
    """Start the post-check's Spark session now, on a background thread, so the scan at the end of a
    maintenance only scans.

    Starting the driver JVM and the session takes 10-20 s of a 2-core host; a maintenance spends far
    longer than that waiting on brokers, so the start is hidden behind the roll (issue 14). The session
    is handed to the first :func:`spark_session` call for the same master and settings. A start that
    fails calls ``on_error`` at once with the reason — the run says so while the operator can still act,
    not at its end — and the post-check's own :func:`spark_session` call raises it again.

    Returns:
        True when this call started it (False: already starting or started).
    """
    key = _warm_key(master, conf)
    with _WARMING_LOCK:
        if key in _WARMING:
            return False
        future: Future[Any] = Future()
        _WARMING[key] = future

    def start() -> None:
        try:
            session = _new_session(master, conf=conf, app_name="kafkaops-check")
            _warm_up(session)
            future.set_result(session)
        except BaseException as exc:  # handed to the post-check, which raises it
            future.set_exception(exc)
            if on_error is not None:
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
                on_error(f"Spark did not start on {master}: {first}")

    threading.Thread(target=start, name="kafkaops-spark-prestart", daemon=True).start()
    return True


def _warm_up(spark: Any) -> None:
    """Run one tiny job through the scan's own path (Arrow batches into a Python function).

    A session's first job pays for starting the Python workers and for the first use of Arrow and of
    the JIT: on the lab's 2 cores the post-check's scan took 9.6 s cold and 4.6 s after this (same
    data, measured). Paid in :func:`prestart`'s background thread, it is hidden behind the roll; it
    also proves, at the start of the run, that executors can run the kernel's Python.
    """

    def passthrough(batches: Any) -> Any:
        yield from batches

    spark.range(2).mapInArrow(passthrough, "id long").collect()


def spark_session(master: str = DEFAULT_MASTER, *, conf: Mapping[str, str] | None = None,
                  app_name: str = "kafkaops-check") -> Any:
    """A quiet, small-driver SparkSession with the scan's Kafka readers on ``spark.jars`` (both, when both
    are installed: :func:`kafkaops.health.scan_jar.session_jars`) — the one :func:`prestart` began, when
    it began one for this master and these settings (waiting for it to finish starting).

    Args:
        master: ``local[N]``, ``spark://host:7077``, ``yarn``...
        conf: Extra Spark settings (they win over the defaults here).
        app_name: Application name shown by the cluster manager.

    Returns:
        The session (call ``.stop()`` when done).
    """
    with _WARMING_LOCK:
        warm = _WARMING.pop(_warm_key(master, conf), None)
    if warm is not None:
        return warm.result()
    return _new_session(master, conf=conf, app_name=app_name)


_LOG4J2_NAME = "log4j2.properties"
_DRIVER_LOG_NAME = "spark-driver.log"
_LOG_DIR: Path | None = None
_LOG_DIR_LOCK = threading.Lock()


def _open_private(path: Path, flags: int) -> int:
    """Open ``path`` for writing, created 0600 if absent, never through a symlink (``O_NOFOLLOW``)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | flags, 0o600)


def private_log_dir() -> Path:
    """This process's private directory for the driver JVM's log4j2 configuration and its log.

    The JVM reads its logging configuration from a file path, and a fixed shared path
    (``/tmp/kafkaops-spark``, checked then written) let any other local user pre-create it: swap the
    configuration the driver loads (log4j2 can be told to write files, or load classes), read the
    driver's log, or plant a symlink so that our write clobbers a file of ours elsewhere. So the
    directory is made per user and per run by :func:`tempfile.mkdtemp` — one ``mkdir`` of an
    unpredictable name, mode 0700, which fails rather than follow anything already there — and the files
    in it are created ``O_EXCL``/``O_NOFOLLOW``. It is removed at exit: the driver's log holds only its
    start-up chatter (its errors reach the scan through py4j), and one directory per run would pile up.
    """
    global _LOG_DIR
    with _LOG_DIR_LOCK:
        if _LOG_DIR is not None and _LOG_DIR.is_dir():
            return _LOG_DIR
        log_dir = Path(tempfile.mkdtemp(prefix=f"kafkaops-spark-{os.getuid()}-"))
        with os.fdopen(_open_private(log_dir / _LOG4J2_NAME, os.O_EXCL), "w") as f:
            f.write(_LOG4J2)
        atexit.register(_remove_log_dir, log_dir)
        _LOG_DIR = log_dir
        return log_dir


def _remove_log_dir(log_dir: Path) -> None:
    shutil.rmtree(log_dir, ignore_errors=True)


def _new_session(master: str, *, conf: Mapping[str, str] | None, app_name: str) -> Any:
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("pyspark is not installed", hint="pip install 'kafkaops[spark]'") from exc

    log_dir = private_log_dir()
    java_opts = f"-Dlog4j2.configurationFile={log_dir / _LOG4J2_NAME}"
    settings: dict[str, str] = {
        "spark.jars": ",".join(scan_jar.session_jars()),
        # In local mode the executors live in the driver JVM: it needs the executor's share too.
        "spark.driver.memory": "1g" if master.startswith("local") else "512m",
        "spark.executor.memory": "1g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
    }
    if _loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                         "spark.pyspark.python": sys.executable})
    settings.update(conf or {})
    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    # The driver JVM's own output (start-up chatter, log4j before our config applies) goes to a log file
    # given to the JVM process itself, never by redirecting *our* stderr: a session started in the
    # background must not swallow the run's progress lines (errors still reach us through py4j).
    with SparkContext._lock:
        if SparkContext._gateway is None:
            with os.fdopen(_open_private(log_dir / _DRIVER_LOG_NAME, os.O_APPEND), "ab") as log:
                SparkContext._ensure_initialized(gateway=launch_gateway(
                    spark_conf, popen_kwargs={"stdout": log, "stderr": log}), conf=spark_conf)
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def task_groups(ranges: Sequence[ScanRange], tasks: int) -> list[list[ScanRange]]:
    """Split ranges into at most ``tasks`` groups of near-equal record counts (largest first, to the lightest).

    One task per group, one consumer per task: fewer, fuller tasks than one per partition, so a
    consumer is not created per partition and a task's partitions on different brokers are fetched
    in parallel.
    """
    groups: list[list[ScanRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    loads = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        i = loads.index(min(loads))
        groups[i].append(r)
        loads[i] += r.end - r.start
    return [g for g in groups if g]


def _source(spark: Any, spec: ScanSpec, ranges: Sequence[ScanRange], tid: Mapping[str, int], *,
            events: bool) -> Any:
    """The reader's DataFrame: ``key``, ``offset``, ``ts`` (+ ``ts_type``, ``value`` for event topics)."""
    if spec.reader == "builtin":
        return _builtin_source(spark, spec, ranges, tid, events=events)
    groups = task_groups(ranges, int(spark.sparkContext.defaultParallelism))
    encoded = "|".join(";".join(f"{r.topic}:{r.partition}:{r.start}:{r.end}:"
                                f"{scan_kernel.make_key(tid[r.topic], r.partition)}" for r in g) for g in groups)
    reader = (spark.read.format(scan_jar.DATA_SOURCE)
              .option("kafka.bootstrap.servers", spec.bootstrap)
              .option("ranges", encoded)
              .option("withValue", str(events).lower()))
    for k, v in _reader_options(spec).items():
        reader = reader.option(k, v)
    return reader.load()


def _builtin_source(spark: Any, spec: ScanSpec, ranges: Sequence[ScanRange], tid: Mapping[str, int], *,
                    events: bool) -> Any:
    """Spark's own Kafka source over the same pinned ranges, shaped like ours.

    Its rows (topic, partition, offset, a ``timestamp`` column, ``timestampType``, key, value...) become
    the fast reader's columns: ``key`` is the kernel's packed topic id and partition, ``ts`` the
    record's milliseconds (``-1`` for a record without a timestamp, as ours), ``ts_type`` 1 for
    LogAppendTime and 0 otherwise. ``failOnDataLoss=false``: records deleted or compacted away are
    skipped, as ours skips them, and become holes in the kernel's figures instead of a failed job.
    One task per partition, each reading its range in offset order (what the kernel needs).
    """
    from pyspark.sql import functions as F

    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
        starting.setdefault(r.topic, {})[str(r.partition)] = r.start
        ending.setdefault(r.topic, {})[str(r.partition)] = r.end
    reader = (spark.read.format(scan_jar.BUILTIN_SOURCE)
              .option("kafka.bootstrap.servers", spec.bootstrap)
              .option("assign", json.dumps({t: sorted(ps) for t, ps in assign.items()}))
              .option("startingOffsets", json.dumps(starting))
              .option("endingOffsets", json.dumps(ending))
              .option("failOnDataLoss", "false"))
    for k, v in _reader_options(spec).items():
        reader = reader.option(k, v)
    df = reader.load()
    ids = F.create_map(*[x for t in sorted(assign) for x in (F.lit(t), F.lit(tid[t]))])
    key = F.shiftleft(ids[F.col("topic")].cast("long"), 32).bitwiseOR(F.col("partition").cast("long"))
    cols = [key.alias("key"), F.col("offset"), F.unix_millis(F.col("timestamp")).alias("ts")]
    if events:
        cols += [F.when(F.col("timestampType") == 1, F.lit(1)).otherwise(F.lit(0)).cast("int").alias("ts_type"),
                 F.col("value")]
    return df.select(*cols)


def _columns(df: Any, *, events: bool) -> Any:
    """Add the JSON verdict of event topics (the reader already gives ``key``, ``offset``, ``ts``)."""
    from pyspark.sql import functions as F

    cols = [F.col("key"), F.col("offset"), F.col("ts")]
    if not events:
        return df.select(*cols)
    parsed = F.from_json(F.col("value").cast("string"), "meta struct<dt:string>, _corrupt string",
                         {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"})
    dt = F.try_to_timestamp(parsed["meta"]["dt"])
    json_state = (F.when(F.col("value").isNull() | parsed["_corrupt"].isNotNull(), F.lit(scan_kernel.JSON_INVALID))
                  .when(dt.isNull(), F.lit(scan_kernel.JSON_NO_DT))
                  .otherwise(F.lit(scan_kernel.JSON_OK)))
    return df.select(
        *cols,
        F.col("ts_type"),
        json_state.cast("byte").alias("json_state"),
        F.unix_millis(dt).alias("dt_ms"),
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_scan(spec: ScanSpec, *, master: str = DEFAULT_MASTER, spark: Any = None,
             conf: Mapping[str, str] | None = None, notify: Callable[[str], None] | None = None) -> ScanResult:
    """Scan the ranges of ``spec`` on Spark and merge the figures.

    The reader is ``spec.reader``. With a new session, a ``fast`` reader that is not built falls back
    to ``builtin`` (:func:`kafkaops.health.scan_jar.resolve_reader`): ``notify`` gets the one-line
    notice and the result records it. A session passed in is used as it is (its jars are the caller's:
    ``spark-submit --jars``).

    Args:
        spec: What to read, with which reader, and the tolerances.
        master: Spark master (ignored when ``spark`` is given).
        spark: An existing session to reuse (it is then not stopped).
        conf: Extra Spark settings for a new session.
        notify: Where the fallback notice goes (default: a line on stderr).

    Returns:
        The merged figures; partitions with an empty range get zero counts without being read.

    Raises:
        ConfigError: Unknown reader, or no reader installed.
        UnreachableError: The job failed (Kafka unreachable from the executors, a lost executor...).
    """
    th = spec.thresholds
    to_read = [r for r in spec.ranges if r.end > r.start]
    scan_time = spec.scan_time_ms or int(time.time() * 1000)
    result = ScanResult(master=master, scan_time_ms=scan_time, reader=scan_jar.check_reader(spec.reader))
    if spark is None and to_read:
        choice = scan_jar.resolve_reader(spec.reader)
        if choice.notice:
            (notify or _stderr)(choice.notice)
        spec = replace(spec, reader=choice.reader)
        result.reader, result.reader_notice = choice.reader, choice.notice
    if not to_read:
        result.partitions, result.minutes = merge_segments([], spec.ranges, back_tolerance_ms=0)
        return result
    own = spark is None
    session = spark_session(master, conf=conf) if own else spark
    result.master = str(session.sparkContext.master)
    topics = sorted({r.topic for r in to_read})
    tid = {t: i for i, t in enumerate(topics)}
    started = time.monotonic()
    try:
        from pyspark import cloudpickle

        # Ship the kernel by value: executors need numpy + pyarrow, not kafkaops.
        cloudpickle.register_pickle_by_value(scan_kernel)
        kernel = scan_kernel.make_kernel(
            {scan_kernel.make_key(tid[r.topic], r.partition): r.check_from for r in to_read},
            back_tolerance_ms=int(th.back_tolerance_s * 1000),
            drift_tolerance_ms=int(th.drift_tolerance_s * 1000),
            future_limit_ms=scan_time + int(th.future_tolerance_s * 1000),
        )
        # Event topics and the others are read by two sources (disjoint partitions) so that only
        # event topics pay for JSON parsing and the extra columns; one job reads both.
        outputs = []
        for events in (True, False):
            part = [r for r in to_read if (r.topic in spec.event_topics) == events]
            if part:
                df = _columns(_source(session, spec, part, tid, events=events), events=events)
                outputs.append(df.mapInArrow(kernel, scan_kernel.OUTPUT_SCHEMA))
        union = outputs[0] if len(outputs) == 1 else outputs[0].unionAll(outputs[1])
        rows = union.collect()
    except KafkaOpsError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnreachableError(f"the Spark scan on {master} ({spec.reader} reader) failed: {first[:400]}",
                               hint="check the Spark master and that executors reach the brokers") from exc
    finally:
        result.seconds = time.monotonic() - started
        if own:
            session.stop()
    segments = segments_from_json([r["segment"] for r in rows], topics)
    result.partitions, result.minutes = merge_segments(
        segments, spec.ranges, back_tolerance_ms=int(th.back_tolerance_s * 1000))
    result.records = sum(s.count + s.context_count for s in result.partitions.values())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_job.py --spec SPEC.json --out RESULT.json`` (driver inside the cluster)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--spec", required=True, help="ScanSpec JSON (ScanSpec.to_dict)")
    ap.add_argument("--out", required=True, help="where to write the ScanResult JSON")
    args = ap.parse_args(argv)
    spec = ScanSpec.from_dict(json.loads(Path(args.spec).read_text()))
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()  # master and jars come from spark-submit
    result = run_scan(spec, spark=spark)
    Path(args.out).write_text(json.dumps(result.to_dict()))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
