"""Which Kafka reader the scan uses: the fallback decision (pure), what is installed, how it reaches the job."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.health import scan_jar, spark_job
from kafkaops.health.data import ScanRange
from kafkaops.health.spark_job import ScanSpec, run_scan


def test_fast_when_built_builtin_when_asked() -> None:
    assert scan_jar.choose_reader("fast", fast_missing=None, connector=True, javac=True) == \
        scan_jar.ReaderChoice("fast", "fast", None)
    assert scan_jar.choose_reader("fast", fast_missing=None, connector=False, javac=False).reader == "fast"
    assert scan_jar.choose_reader("builtin", fast_missing=None, connector=True, javac=True) == \
        scan_jar.ReaderChoice("builtin", "builtin", None)


def test_fast_not_built_falls_back_with_a_one_line_notice_saying_why_and_how() -> None:
    choice = scan_jar.choose_reader("fast", fast_missing="kafkaops-scan-abc.jar missing", connector=True, javac=True)
    assert (choice.requested, choice.reader) == ("fast", "builtin")
    assert choice.notice is not None and "\n" not in choice.notice
    assert "not built (kafkaops-scan-abc.jar missing)" in choice.notice
    assert "built-in Kafka source" in choice.notice and "python -m kafkaops.health.scan_jar" in choice.notice
    assert "JDK" not in choice.notice


def test_without_a_jdk_the_notice_says_building_needs_one() -> None:
    choice = scan_jar.choose_reader("fast", fast_missing="x.jar missing", connector=True, javac=False)
    assert choice.reader == "builtin" and choice.notice is not None
    assert "needs a JDK" in choice.notice and "openjdk-17-jdk-headless" in choice.notice


def test_no_reader_at_all_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"not built .* connector is not installed either") as err:
        scan_jar.choose_reader("fast", fast_missing="x.jar missing", connector=False, javac=True)
    assert "install.sh" in (err.value.hint or "")
    with pytest.raises(ConfigError, match=r"built-in reader\) is not installed"):
        scan_jar.choose_reader("builtin", fast_missing=None, connector=False, javac=True)
    with pytest.raises(ConfigError, match="unknown scan reader 'spark'"):
        scan_jar.choose_reader("spark", fast_missing=None, connector=True, javac=True)


def _install(cache: Path, *, fast: bool, connector: bool) -> None:
    if fast:
        (cache / "jars" / "reader").mkdir(parents=True)  # where the pinned kafka-clients is downloaded
        (cache / "jars" / "reader" / "kafka-clients-3.9.1.jar").write_bytes(b"")
        scan_jar.jar_path().parent.mkdir(parents=True)
        scan_jar.jar_path().write_bytes(b"")
    if connector:
        d = cache / "jars" / "spark"
        d.mkdir(parents=True)
        for name in ("commons-pool2-2.12.0.jar", "kafka-clients-3.9.0.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar",
                     "spark-token-provider-kafka-0-10_2.13-4.0.0.jar"):
            (d / name).write_bytes(b"")


def test_resolve_looks_at_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path))
    _install(tmp_path, fast=False, connector=True)
    choice = scan_jar.resolve_reader("fast")
    assert choice.reader == "builtin" and choice.notice and scan_jar.jar_path().name in choice.notice
    # The session then carries the connector with its own kafka-clients.
    assert [Path(j).name for j in scan_jar.session_jars()] == [
        "commons-pool2-2.12.0.jar", "kafka-clients-3.9.0.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.0.0.jar"]


def test_one_session_carries_both_readers_with_one_kafka_client(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path))
    _install(tmp_path, fast=True, connector=True)
    # The cached kafka-clients is verified at use: pin the empty stand-in's digest.
    monkeypatch.setattr(scan_jar, "KAFKA_CLIENTS", scan_jar.MavenArtifact(
        "org.apache.kafka", "kafka-clients", "3.9.1", hashlib.sha256(b"").hexdigest()))
    assert scan_jar.resolve_reader("fast") == scan_jar.ReaderChoice("fast", "fast", None)
    assert scan_jar.resolve_reader("builtin").reader == "builtin"
    jars = [Path(j).name for j in scan_jar.session_jars()]
    assert jars[:2] == [scan_jar.jar_path().name, "kafka-clients-3.9.1.jar"]
    assert "kafka-clients-3.9.0.jar" not in jars and "spark-sql-kafka-0-10_2.13-4.0.0.jar" in jars


def test_nothing_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path))
    with pytest.raises(ConfigError):
        scan_jar.session_jars()
    with pytest.raises(ConfigError):
        scan_jar.resolve_reader("builtin")


def test_the_spec_carries_the_reader() -> None:
    spec = ScanSpec("127.0.0.1:9092", (ScanRange("t", 0, 0, 10, 5),), reader="builtin")
    assert spec.to_dict()["reader"] == "builtin"
    assert ScanSpec.from_dict(spec.to_dict()) == spec
    old = spec.to_dict()
    del old["reader"]
    assert ScanSpec.from_dict(old).reader == "fast"  # specs written before readers were selectable
    with pytest.raises(ConfigError):
        ScanSpec.from_dict({**old, "reader": "nope"})


def test_run_scan_says_the_notice_before_starting_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path))
    _install(tmp_path, fast=False, connector=True)
    said: list[str] = []

    def no_spark(*_: object, **__: object) -> None:
        raise RuntimeError("no Spark in a unit test")

    monkeypatch.setattr(spark_job, "spark_session", no_spark)
    with pytest.raises(RuntimeError, match="no Spark"):
        run_scan(ScanSpec("127.0.0.1:9", (ScanRange("t", 0, 0, 10, 0),)), notify=said.append)
    assert len(said) == 1 and said[0].startswith("notice: the fast scan reader is not built")
    # Nothing to read: no session, no notice; the result names the reader asked for.
    empty = run_scan(ScanSpec("127.0.0.1:9", (ScanRange("t", 0, 10, 10, 10),), reader="builtin"),
                     notify=said.append)
    assert empty.reader == "builtin" and empty.to_dict()["reader"] == "builtin" and len(said) == 1


def test_unknown_reader_is_refused_before_kafka_is_asked() -> None:
    from kafkaops.health.check import run_post_check
    from kafkaops.model import Cluster

    with pytest.raises(ConfigError, match="unknown scan reader"):
        run_post_check(Cluster(name="x", bootstrap_servers="127.0.0.1:9", hosts=()), None, reader="slow")


def test_cli_offers_both_readers() -> None:
    out = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "check", "lab", "--reader", "slow"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "fast" in out.stderr and "builtin" in out.stderr
