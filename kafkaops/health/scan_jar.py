"""The scan's Spark data source (``jvm/KafkaRangeSource.java``): build it, and the jars a session ships.

Why our own reader and not Spark's Kafka source: that source builds a seven-column row per record
and measured ~3x kcat on 10M records here by itself; this one hands Spark column vectors of the three
or five values the kernel reads, one consumer per task over a balanced group of partitions
(``docs/health-check.md``, "Performance").

The jar is compiled locally against the installed pyspark and the cached ``kafka-clients`` (no
Maven artifact to trust or pin) and named after the source's hash, so an edited source is never
matched with a stale jar. ``scripts/install.sh`` runs ``python -m kafkaops.health.scan_jar``; only
that build needs a JDK (``javac``), Spark itself needs a JRE.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kafkaops.errors import ConfigError
from kafkaops.lab.paths import cache_dir, kafka_jars

SOURCE = Path(__file__).resolve().parent / "jvm" / "KafkaRangeSource.java"
#: The class Spark loads: ``spark.read.format(DATA_SOURCE)``.
DATA_SOURCE = "org.kafkaops.scan.KafkaRangeSource"


def jar_path() -> Path:
    """Where the jar for the current source lives (``$KAFKAOPS_CACHE/jars/scan/kafkaops-scan-<hash>.jar``)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return cache_dir() / "jars" / "scan" / f"kafkaops-scan-{digest}.jar"


def kafka_clients_jar() -> Path:
    """The Kafka client the reader runs with: the one the lab's Kafka install brought (its codecs are in pyspark)."""
    found = sorted(kafka_jars().glob("kafka-clients-*.jar"))
    if not found:
        raise ConfigError(f"kafka-clients jar missing from {kafka_jars()}", hint="run scripts/install.sh")
    return found[-1]


def spark_jars() -> list[str]:
    """The jars a scan session puts on ``spark.jars`` (shipped to executors).

    Raises:
        ConfigError: The reader is not built for this source, or kafka-clients is missing.
    """
    jar = jar_path()
    if not jar.is_file():
        raise ConfigError(f"the scan reader is not built ({jar.name} missing)",
                          hint="run scripts/install.sh (or: python -m kafkaops.health.scan_jar)")
    return [str(jar), str(kafka_clients_jar())]


def build(*, force: bool = False) -> Path:
    """Compile the source into :func:`jar_path` unless it is there already.

    Raises:
        ConfigError: No ``javac``/``jar`` (install a JDK), no pyspark, or the compiler failed.
    """
    target = jar_path()
    if target.is_file() and not force:
        return target
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar:
        raise ConfigError("javac not found: building the scan reader needs a JDK",
                          hint="apt-get install openjdk-17-jdk-headless")
    try:
        import pyspark
    except ImportError as exc:
        raise ConfigError("pyspark is not installed", hint="pip install 'kafkaops[spark]'") from exc
    classpath = os.pathsep.join([str(Path(pyspark.__file__).parent / "jars" / "*"), str(kafka_clients_jar())])
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafkaops-scan-") as tmp:
        classes = Path(tmp) / "classes"
        compiled = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", classpath, "-d", str(classes),
                                   str(SOURCE)], capture_output=True, text=True)
        if compiled.returncode != 0:
            first = next((line for line in compiled.stderr.splitlines() if "error" in line), compiled.stderr.strip())
            raise ConfigError(f"compiling {SOURCE.name} failed: {first}", hint="see `javac` output above")
        staged = target.parent / f".{target.name}.{os.getpid()}.tmp"  # same directory: the rename is atomic
        subprocess.run([jar, "cf", str(staged), "-C", str(classes), "."], check=True)
        os.replace(staged, target)
    for old in target.parent.glob("kafkaops-scan-*.jar"):
        if old != target:
            old.unlink()
    return target


def main() -> int:
    """``python -m kafkaops.health.scan_jar [--force]``: build the reader, print its path."""
    try:
        print(build(force="--force" in sys.argv[1:]))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
