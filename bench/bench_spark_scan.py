"""Benchmark the post-check's Spark data scan against kcat and a single-process confluent-kafka consumer.

Produces N small records (default 10M) across >= 24 partitions of a dedicated topic with kcat (large
batches, lz4), then reads exactly the same offset ranges three ways:

* ``kcat -C ... -e`` to /dev/null (librdkafka in C, the floor for "just read it"),
* one Python process with confluent-kafka's ``Consumer.consume(10000)`` (what a naive checker does),
* the post-check's Spark scan (``kafkaops.health.spark_job.run_scan``) with each reader of
  ``--readers`` (``fast``: ours, ``builtin``: Spark's ``kafka`` source; both by default), with a new
  session (its start included; for the first size also the JVM's), and again warm (session reused: the
  per-scan cost on a long-lived driver). Both readers must count the same records.

Two floors explain where the scan's time goes (``--skip floors`` leaves them out):

* Kafka's own Java consumer (``org.apache.kafka.tools.ConsumerPerformance``, JVM start included): what
  the JVM's Kafka client costs, i.e. the floor for the scan's reader;
* Spark's own Kafka source alone (``spark.read.format("kafka")...count()``, warm session, connector
  jars from ``scripts/install.sh``): the reader the scan replaced, and why.

With ``--sizes 10000000,50000000`` it tops the topic up to each size and reports whether the scan time
grows near-linearly. The driver-side metadata checks have their own benchmark:
``bench/bench_metadata_checks.py`` (100,000 partitions).

Every client speaks the cluster's own security (TLS, SASL: the labs are secured); kcat and Kafka's Java
consumer get it from 0600 files removed after. ``--standalone 2`` runs the scan on a Spark standalone cluster
of two workers (1 core, 1 GiB each) started on 127.0.0.1 for the run (:mod:`spark_standalone`) instead of
``local[2]``. The rows go to ``bench/results/spark-scan-DATE.json`` as they are measured.

Run against your own lab (never a production cluster)::

    python bench/bench_spark_scan.py --inventory bench/lab-bench.yaml --standalone 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafkaops.health import scan_jar  # noqa: E402
from kafkaops.health.data import ScanRange  # noqa: E402
from kafkaops.health.spark_job import ScanSpec, _reader_options, run_scan  # noqa: E402
from kafkaops.health.spark_job import spark_session as scan_session  # noqa: E402
from kafkaops.inventory import load_inventory  # noqa: E402
from kafkaops.model import KafkaEndpoint  # noqa: E402
from kafkaops.systems.kafka_auth import java_properties, librdkafka_config, properties_text  # noqa: E402
from kafkaops_lab.kafka import LabKafka as KafkaAdmin  # noqa: E402
from kafkaops_lab.kafka import TopicSpec  # noqa: E402
from kafkaops_lab.security import admin_endpoint  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # noqa: E402  (bench/ is not a package)
from spark_standalone import standalone  # noqa: E402


def spark_session(master: str = "local[2]") -> Any:
    """The scan's session on ``master``: it carries both readers (ours and Spark's Kafka connector, our
    kafka-clients first), which the source floor uses too."""
    scan_jar.spark_jars()  # the fast reader must be built: this bench measures it
    return scan_session(master)


def ends(endpoint: KafkaEndpoint, topic: str, partitions: int) -> dict[int, int]:
    offs = KafkaAdmin(endpoint, timeout=15).list_offsets([(topic, p) for p in range(partitions)])
    return {p: int(offs[(topic, p)][1] or 0) for p in range(partitions)}


def lines(start: int, n: int, chunk: int = 200_000) -> Iterator[bytes]:
    for i in range(start, start + n, chunk):
        yield b"".join(b"m%011d\n" % j for j in range(i, min(i + chunk, start + n)))


@contextmanager
def kcat_config(endpoint: KafkaEndpoint) -> Iterator[list[str]]:
    """kcat's arguments for the cluster's client configuration (TLS, SASL): ``-F`` a 0600 file, removed
    after — the password never goes on a command line."""
    conf = {k: v for k, v in librdkafka_config(endpoint).items() if k != "bootstrap.servers"}
    with tempfile.TemporaryDirectory(prefix="kafkaops-bench-") as tmp:
        path = Path(tmp) / "kcat.conf"
        path.touch(mode=0o600)
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        yield ["-b", endpoint.bootstrap_servers, "-F", str(path)]


def produce(endpoint: KafkaEndpoint, topic: str, start: int, n: int) -> float:
    """Produce ``n`` 12-byte records with kcat (keyless: spread over partitions); return seconds."""
    t = time.monotonic()
    with kcat_config(endpoint) as kcat:
        proc = subprocess.Popen(
            ["kcat", "-P", *kcat, "-t", topic, "-z", "lz4", "-X", "linger.ms=50",
         "-X", "batch.num.messages=100000", "-X", "batch.size=4000000", "-X", "queue.buffering.max.messages=2000000",
             "-X", "queue.buffering.max.kbytes=2000000", "-X", "acks=1", "-X", "sticky.partitioning.linger.ms=5"],
            stdin=subprocess.PIPE)
        assert proc.stdin is not None
        for block in lines(start, n):
            proc.stdin.write(block)
        proc.stdin.close()
        if proc.wait() != 0:
            raise SystemExit(f"kcat producer failed with {proc.returncode}")
    return time.monotonic() - t


def time_kcat(endpoint: KafkaEndpoint, topic: str, end: dict[int, int]) -> float:
    """kcat reading every partition from offset 0 to its end (exit at end), output to /dev/null."""
    total = sum(end.values())
    with kcat_config(endpoint) as kcat:
        t = time.monotonic()
        subprocess.run(["kcat", "-C", *kcat, "-t", topic, "-o", "beginning", "-e", "-q", "-c", str(total)],
                       stdout=subprocess.DEVNULL, check=True)
        return time.monotonic() - t


def time_confluent(endpoint: KafkaEndpoint, topic: str, end: dict[int, int]) -> tuple[float, int]:
    """One Python process, confluent-kafka Consumer.consume(10000) until every partition is at its end."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**librdkafka_config(endpoint), "group.id": f"bench-{os.getpid()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                  "queued.max.messages.kbytes": 512 << 10, "log_level": 2})
    c.assign([TopicPartition(topic, p, 0) for p, e in end.items() if e > 0])
    remaining = {p for p, e in end.items() if e > 0}
    n = 0
    t = time.monotonic()
    while remaining:
        for m in c.consume(10000, timeout=1.0):
            if m.error():
                continue
            n += 1
            p, offset = m.partition(), m.offset()
            if p is not None and offset is not None and offset >= end[p] - 1:
                remaining.discard(p)
    elapsed = time.monotonic() - t
    c.close()
    return elapsed, n


def time_java_consumer(endpoint: KafkaEndpoint, topic: str, end: dict[int, int]) -> float:
    """Kafka's ConsumerPerformance tool reading the same records (JVM start included)."""
    from kafkaops_lab.dirs import kafka_jars

    with tempfile.TemporaryDirectory(prefix="kafkaops-bench-") as tmp:
        props = Path(tmp) / "consumer.properties"
        props.touch(mode=0o600)
        props.write_text(properties_text({**java_properties(endpoint), "max.poll.records": "100000"}))
        t = time.monotonic()
        subprocess.run(["java", "-cp", f"{kafka_jars()}/*", "org.apache.kafka.tools.ConsumerPerformance",
                        "--bootstrap-server", endpoint.bootstrap_servers, "--topic", topic,
                        "--messages", str(sum(end.values())),
                        "--timeout", "60000", "--consumer.config", str(props)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return time.monotonic() - t


def time_spark_source(endpoint: KafkaEndpoint, topic: str, end: dict[int, int], spark: Any) -> float:
    """Spark's Kafka source alone: ``count()`` over the same ranges, tuned as the scan once tuned it."""
    import json

    options = _reader_options(ScanSpec(endpoint.bootstrap_servers, (), security=endpoint.security))
    t = time.monotonic()
    n = (spark.read.format("kafka").options(**options).option("kafka.bootstrap.servers", endpoint.bootstrap_servers)
         .option("assign", json.dumps({topic: sorted(end)}))
         .option("startingOffsets", json.dumps({topic: {str(p): 0 for p in end}}))
         .option("endingOffsets", json.dumps({topic: {str(p): e for p, e in end.items()}}))
         .option("failOnDataLoss", "false").option("kafka.max.poll.records", "100000")
         .option("kafka.max.partition.fetch.bytes", str(4 << 20)).option("kafka.fetch.max.bytes", str(16 << 20))
         .load().count())
    elapsed = time.monotonic() - t
    assert n == sum(end.values()), (n, sum(end.values()))
    return elapsed


def time_spark(endpoint: KafkaEndpoint, topic: str, end: dict[int, int], spark: Any = None,
               reader: str = "fast") -> tuple[float, int]:
    ranges = tuple(ScanRange(topic, p, 0, e, 0) for p, e in sorted(end.items()))
    t = time.monotonic()
    res = run_scan(ScanSpec(endpoint.bootstrap_servers, ranges, reader=reader, security=endpoint.security),
                   spark=spark)
    elapsed = time.monotonic() - t
    bad = [s for s in res.partitions.values() if s.missing]
    assert not bad, f"the {reader} reader missed records: {bad[:2]}"
    assert res.records == sum(end.values()), (reader, res.records, sum(end.values()))
    return elapsed, res.records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default=os.environ.get("KAFKAOPS_TEST_INVENTORY", str(REPO / "inventory/lab.yaml")))
    ap.add_argument("--topic", default="bench.scan")
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--sizes", default="10000000", help="comma-separated record counts to scan")
    ap.add_argument("--replication", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated: kcat,confluent,floors,spark")
    ap.add_argument("--readers", default="fast,builtin", help="the scan's readers to measure (fast, builtin)")
    ap.add_argument("--standalone", type=int, default=0, metavar="WORKERS",
                    help="run the scan on a Spark standalone cluster of WORKERS workers (1 core, 1g each) started "
                         "on 127.0.0.1 for the bench, instead of local[2]")
    ap.add_argument("--out", type=Path, default=None,
                    help="the raw result (default bench/results/spark-scan-DATE.json)")
    args = ap.parse_args()
    if not shutil.which("kcat"):
        raise SystemExit("kcat is not installed")
    inventory = Path(args.inventory)
    cluster = load_inventory(inventory)
    path = args.out or raw_result.default_path("spark-scan")
    result: dict[str, Any] = raw_result.header("spark-scan", vars(args), inventory)
    with ExitStack() as stack:
        master = "local[2]"
        if args.standalone:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkaops-spark-")))
            master = stack.enter_context(standalone(args.standalone, logs))
            print(f"Spark standalone: {master}, {args.standalone} workers (1 core, 1g each)", flush=True)
        result.update(master=master, rows=[], complete=False)
        _measure(args, cluster.kafka, admin_endpoint(cluster), master, result, path)
    result.update(complete=True, finished=raw_result.now())
    raw_result.write(path, result)
    print("\n| records | reader | seconds | records/s | vs kcat |\n|---|---|---|---|---|")
    kcat = {r["records"]: r["seconds"] for r in result["rows"] if r["name"].startswith("kcat")}
    for row in result["rows"]:
        ratio = f"{row['seconds'] / kcat[row['records']]:.2f}x" if row["records"] in kcat else ""
        print(f"| {row['records']:,} | {row['name']} | {row['seconds']:.1f} | {row['records_per_s']:,.0f} | {ratio} |")
    print(f"-> {path}")


def _measure(args: argparse.Namespace, b: KafkaEndpoint, lab_admin: KafkaEndpoint, master: str,
             result: dict[str, Any], path: Path) -> None:
    """Every size, every reader: each row appended to ``result`` and written at once (a run stopped half-way
    keeps what it measured). The topic is the lab's set-up: created, written and deleted as the lab's super
    user (``lab_admin``); every reader reads as kafkaops, as the post-check does."""
    admin = KafkaAdmin(lab_admin, timeout=30)
    admin.create_topics([TopicSpec(args.topic, args.partitions, args.replication)])
    skip = set(filter(None, args.skip.split(",")))
    spark = None
    where = "local[2]" if master.startswith("local") else f"standalone, {args.standalone} workers"
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            end = ends(b, args.topic, args.partitions)
            have = sum(end.values())
            if have < size:
                secs = produce(lab_admin, args.topic, have, size - have)
                print(f"produced {size - have:,} records in {secs:.1f} s ({(size - have) / secs:,.0f}/s)", flush=True)
                end = ends(b, args.topic, args.partitions)
            total = sum(end.values())
            print(f"--- {total:,} records in {args.partitions} partitions", flush=True)
            runs: list[tuple[str, Callable[[], float]]] = []
            if "kcat" not in skip:
                def read_kcat(e: dict[int, int] = end) -> float:
                    return time_kcat(b, args.topic, e)

                runs.append(("kcat -C to /dev/null", read_kcat))
            if "confluent" not in skip:
                def confluent(e: dict[int, int] = end) -> float:
                    return time_confluent(b, args.topic, e)[0]

                runs.append(("confluent-kafka, 1 process", confluent))
            for reader in [r for r in args.readers.split(",") if r] if "spark" not in skip else []:
                def cold(e: dict[int, int] = end, reader: str = reader) -> float:
                    # A fresh session: getOrCreate would hand back the warm one of an earlier size.
                    nonlocal spark
                    if spark is not None:
                        spark.stop()
                        spark = None
                    t = time.monotonic()
                    s = spark_session(master)
                    time_spark(b, args.topic, e, s, reader)
                    s.stop()
                    return time.monotonic() - t

                def warm(e: dict[int, int] = end, reader: str = reader) -> float:
                    nonlocal spark
                    if spark is None:
                        spark = spark_session(master)
                    time_spark(b, args.topic, {0: min(e[0], 1000)}, spark, reader)  # warm the JVMs and the reader
                    return time_spark(b, args.topic, e, spark, reader)[0]

                runs.append((f"Spark scan {where}, {reader} reader, new session (start incl.)", cold))
                runs.append((f"Spark scan {where}, {reader} reader, warm session", warm))
            if "floors" not in skip:
                def java(e: dict[int, int] = end) -> float:
                    return time_java_consumer(b, args.topic, e)

                def source(e: dict[int, int] = end) -> float:
                    nonlocal spark
                    if spark is None:
                        spark = spark_session(master)
                        time_spark(b, args.topic, {0: min(e[0], 1000)}, spark)
                    return time_spark_source(b, args.topic, e, spark)

                runs.append(("floor: Java consumer (ConsumerPerformance)", java))
                runs.append((f"floor: Spark's Kafka source count() {where}, warm", source))
            for name, fn in runs:
                secs = fn()
                print(f"{name:<60} {secs:8.1f} s  {total / secs:>12,.0f} records/s", flush=True)
                result["rows"].append({"records": total, "name": name, "seconds": round(secs, 3),
                                       "records_per_s": round(total / secs)})
                raw_result.write(path, result)
    finally:
        if spark is not None:
            spark.stop()
        # An RF-1 topic below the lab's min.insync.replicas would make every later pre-flight refuse.
        from confluent_kafka.admin import AdminClient

        deleter = AdminClient(librdkafka_config(lab_admin))  # kept alive until its futures resolve
        for fut in deleter.delete_topics([args.topic]).values():
            fut.result(30)


if __name__ == "__main__":
    main()
