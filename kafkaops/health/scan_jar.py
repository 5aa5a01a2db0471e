"""The scan's readers: our Spark data source (``jvm/KafkaRangeSource.java``), build it; Spark's built-in
``kafka`` source; which one a scan uses, and the jars a session ships.

Two readers give the same figures (``docs/health-check.md``, "Readers"):

* ``fast`` (default): our columnar source. Spark's Kafka source builds a seven-column row per record
  and measured ~3x kcat on 10M records here by itself; this one hands Spark column vectors of the
  three or five values the kernel reads, one consumer per task over a balanced group of partitions.
* ``builtin``: Spark's standard ``kafka`` source (the connector jars ``scripts/install.sh`` caches in
  ``jars/spark``), one task per partition. Nothing of ours runs in the JVM: the reference the fast
  reader is compared with, and the fallback when the fast reader is not built.

:func:`choose_reader` decides (pure); :func:`resolve_reader` looks at what is installed.

The jar is compiled locally (the package ships the Java source) against the installed pyspark and
``kafka-clients`` and named after the source's hash, so an edited source is never matched with a stale
jar. ``kafka-clients`` is the product's own, pinned by Maven coordinates and sha256
(:data:`KAFKA_CLIENTS`), downloaded once into the user's cache (``$KAFKAOPS_CACHE/jars/reader``) and
verified, then verified again every time a build or a Spark session takes it: the cache is a directory of
the user's that anything running as the user can write, and the JVM that loads the jar reads production
topics — or, on an air-gapped admin host, taken from a directory the operator names
(``$KAFKAOPS_READER_JARS``, ``kafkaops check --jars DIR``; its newest ``kafka-clients-<version>.jar`` by
version number). The post-check never depends on the lab's
Kafka install. ``python -m kafkaops.health.scan_jar`` builds it (``scripts/install.sh`` runs it); only
that build needs a JDK (``javac``), Spark itself needs a JRE.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kafkaops.errors import ConfigError, KafkaOpsError, UnreachableError
from kafkaops.places import cache_dir, given

SOURCE = Path(__file__).resolve().parent / "jvm" / "KafkaRangeSource.java"
#: The class Spark loads: ``spark.read.format(DATA_SOURCE)``.
DATA_SOURCE = "org.kafkaops.scan.KafkaRangeSource"
#: Spark's own Kafka source: ``spark.read.format(BUILTIN_SOURCE)``.
BUILTIN_SOURCE = "kafka"
#: The readers a scan can use (``--reader``); the first is the default.
READERS = ("fast", "builtin")
BUILD_COMMAND = "python -m kafkaops.health.scan_jar"
JDK_PACKAGE = "openjdk-17-jdk-headless"
#: Names a directory holding ``kafka-clients-*.jar`` to use instead of the pinned download (air-gapped sites).
JARS_ENV = "KAFKAOPS_READER_JARS"
#: Where the pinned jar is downloaded from: Maven Central, or a site's mirror of it.
MAVEN_ENV = "KAFKAOPS_MAVEN_REPO"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class MavenArtifact:
    """A jar pinned by its coordinates and its sha256: what is downloaded is what was reviewed."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        group = self.group.replace(".", "/")
        return f"{repository.rstrip('/')}/{group}/{self.artifact}/{self.version}/{self.file_name}"


#: The Kafka client the reader is compiled and run with: the version the lab's brokers run (3.9.1; its
#: compression codecs are in pyspark), checked against Maven Central's published .sha256/.sha1.
KAFKA_CLIENTS = MavenArtifact("org.apache.kafka", "kafka-clients", "3.9.1",
                              "7568b998572d256f0b7bc0afdc1b7a2588b8b08415c62ce314c864a6851ae9d9")


def jar_path() -> Path:
    """Where the jar for the current source lives (``$KAFKAOPS_CACHE/jars/scan/kafkaops-scan-<hash>.jar``)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return cache_dir() / "jars" / "scan" / f"kafkaops-scan-{digest}.jar"


def reader_jars_dir() -> Path:
    """Where the reader's ``kafka-clients`` is: ``check --jars DIR`` or ``$KAFKAOPS_READER_JARS`` (an
    air-gapped site's), else the download cache ``$KAFKAOPS_CACHE/jars/reader``."""
    if (chosen := given().reader_jars) is not None:
        return chosen
    named = os.environ.get(JARS_ENV)
    return Path(named).expanduser() if named else cache_dir() / "jars" / "reader"


def _jars_named() -> bool:
    """Whether the operator named the reader's jars (``check --jars``, ``$KAFKAOPS_READER_JARS``): then
    the newest ``kafka-clients`` there is used and nothing is downloaded."""
    return given().reader_jars is not None or bool(os.environ.get(JARS_ENV))


_CLIENT_NAME = re.compile(r"kafka-clients-(\d+(?:\.\d+)*)\.jar")


def client_version(name: str) -> tuple[int, ...] | None:
    """The version of a ``kafka-clients-<version>.jar`` file name as numbers (``(3, 10, 0)``), so that
    3.10.0 is newer than 3.9.1 (as text it sorts before); ``None`` for any other name (``-latest``, a
    vendor suffix such as ``-ccs``: no number says which is newer)."""
    match = _CLIENT_NAME.fullmatch(name)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _newest_client(directory: Path) -> tuple[Path | None, str | None]:
    """The newest ``kafka-clients-<version>.jar`` of an operator's directory (``$KAFKAOPS_READER_JARS``),
    or why there is none (naming the files ignored for having no version in their name)."""
    candidates = sorted(directory.glob("kafka-clients-*.jar"))
    versioned = [(v, jar) for jar in candidates if (v := client_version(jar.name)) is not None]
    if versioned:
        return max(versioned)[1], None
    ignored = f" (ignored, no version in the name: {', '.join(j.name for j in candidates)})" if candidates else ""
    return None, f"no kafka-clients-<version>.jar in {directory} (${JARS_ENV}){ignored}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_cached(jar: Path, artifact: MavenArtifact) -> Path:
    """``jar`` if its bytes are still the pinned ones; refused otherwise.

    The download was verified, but the cache is only a directory of the user's: a jar changed there
    afterwards (by anything running as the user, or a disk that went bad) would run in the Spark JVM
    that reads production topics. So the digest is checked at every use, not only after the download.

    Raises:
        ConfigError: The digest differs: one line naming the file and the fix (download it again).
    """
    digest = sha256_of(jar)
    if digest != artifact.sha256:
        raise ConfigError(f"{jar}: sha256 {digest} is not the pinned {artifact.sha256} (the cached jar changed "
                          "after its download): refused",
                          hint=f"run `{BUILD_COMMAND} --force` to download it again and rebuild the reader")
    return jar


def _kafka_clients() -> tuple[Path | None, str | None]:
    """The ``kafka-clients`` jar the reader uses, or why there is none.

    Raises:
        ConfigError: The cached pinned jar is there but its bytes are not the pinned ones.
    """
    directory = reader_jars_dir()
    if _jars_named():
        return _newest_client(directory)
    jar = directory / KAFKA_CLIENTS.file_name
    if not jar.is_file():
        return None, f"{KAFKA_CLIENTS.file_name} not downloaded into {directory}"
    return verify_cached(jar, KAFKA_CLIENTS), None


def kafka_clients_jar() -> Path:
    """The Kafka client the reader is built and runs with (:func:`reader_jars_dir`).

    Raises:
        ConfigError: Not there: the pinned one is not downloaded yet, or the named directory has none;
            or the cached one changed since its download (:func:`verify_cached`).
    """
    jar, missing = _kafka_clients()
    if jar is None:
        raise ConfigError(f"kafka-clients missing: {missing}",
                          hint=f"run `{BUILD_COMMAND}` (downloads it), or set ${JARS_ENV} to a directory holding it")
    return jar


def fetch(artifact: MavenArtifact = KAFKA_CLIENTS, *, timeout: float = 60.0) -> Path:
    """Download ``artifact`` into the cache (``$KAFKAOPS_CACHE/jars/reader``) unless it is there, verify its
    sha256, and return its path. A jar whose digest differs is never kept: a mirror serving something else
    must not end up in a JVM that reads production topics.

    Raises:
        UnreachableError: The repository did not answer (an air-gapped site sets $KAFKAOPS_READER_JARS).
        ConfigError: The download's sha256 is not the pinned one.
    """
    import requests

    target = cache_dir() / "jars" / "reader" / artifact.file_name
    if target.is_file() and sha256_of(target) == artifact.sha256:
        return target
    url = artifact.url(os.environ.get(MAVEN_ENV) or MAVEN_CENTRAL)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.parent / f".{target.name}.{os.getpid()}.tmp"
    try:
        with requests.get(url, stream=True, timeout=timeout) as response:
            response.raise_for_status()
            with open(staged, "wb") as out:
                for chunk in response.iter_content(1 << 20):
                    out.write(chunk)
    except (requests.RequestException, OSError) as exc:
        staged.unlink(missing_ok=True)
        raise UnreachableError(f"cannot download {url}: {exc}",
                               hint=f"set ${JARS_ENV} to a directory holding {artifact.file_name}, or ${MAVEN_ENV} "
                                    "to a reachable mirror") from exc
    digest = sha256_of(staged)
    if digest != artifact.sha256:
        staged.unlink()
        raise ConfigError(f"{url}: sha256 {digest} is not the pinned {artifact.sha256}",
                          hint=f"check ${MAVEN_ENV} points at a faithful mirror of Maven Central")
    os.replace(staged, target)
    return target


def spark_jars() -> list[str]:
    """The jars a scan session puts on ``spark.jars`` (shipped to executors).

    Raises:
        ConfigError: The reader is not built for this source, or kafka-clients is missing or changed in
            the cache.
    """
    jar = jar_path()
    if not jar.is_file():
        raise ConfigError(f"the scan reader is not built ({jar.name} missing)",
                          hint="run scripts/install.sh (or: python -m kafkaops.health.scan_jar)")
    return [str(jar), str(kafka_clients_jar())]


def connector_jars() -> list[Path]:
    """Spark's Kafka connector (sql-kafka, token provider, commons-pool2, its kafka-clients), cached by
    ``scripts/install.sh`` in ``$KAFKAOPS_CACHE/jars/spark``; empty when not installed."""
    return sorted((cache_dir() / "jars" / "spark").glob("*.jar"))


def _fast_jars() -> tuple[list[str], str | None]:
    """The fast reader's jars, or why it cannot run (``"kafkaops-scan-<hash>.jar missing"``)."""
    jar = jar_path()
    if not jar.is_file():
        return [], f"{jar.name} missing"
    clients, missing = _kafka_clients()
    if clients is None:
        return [], missing
    return [str(jar), str(clients)], None


def session_jars() -> list[str]:
    """``spark.jars`` of a scan session: every reader that is installed, so one session (and one JVM:
    PySpark launches it once per process, with the first session's jars) serves both readers.

    Our kafka-clients goes first and the connector's own copy is left out when ours is there (one
    client version on the classpath; the connector runs with it, as the benchmark does).

    Raises:
        ConfigError: Neither reader is installed, or the cached kafka-clients changed (refused, not
            skipped: a fallback would hide it).
    """
    jars, _ = _fast_jars()
    connector = connector_jars()
    if jars:
        connector = [j for j in connector if not j.name.startswith("kafka-clients-")]
    jars += [str(j) for j in connector]
    if not jars:
        raise ConfigError("no Kafka reader for Spark is installed (neither the scan reader nor Spark's Kafka "
                          "connector)", hint="run scripts/install.sh")
    return jars


@dataclass(frozen=True)
class ReaderChoice:
    """Which reader a scan uses, and why.

    Attributes:
        requested: What was asked for (``fast`` or ``builtin``).
        reader: What reads (``builtin`` when ``fast`` was asked for and is not built).
        notice: One line for the operator when the choice differs from the request: why, and how to
            build the fast reader; ``None`` otherwise.
    """

    requested: str
    reader: str
    notice: str | None = None


def check_reader(name: str) -> str:
    """``name`` if it is a reader (``fast``, ``builtin``); a :class:`ConfigError` otherwise."""
    if name not in READERS:
        raise ConfigError(f"unknown scan reader {name!r}", hint=f"use one of: {', '.join(READERS)}")
    return name


def choose_reader(requested: str, *, fast_missing: str | None, connector: bool, javac: bool) -> ReaderChoice:
    """Decide which reader a scan uses (pure: the caller says what is installed).

    ``fast`` without its jar falls back to ``builtin`` with a one-line notice that says why (the jar
    is not built; without ``javac``, also that building it needs a JDK) and how to build it. The
    fallback reads the same records and gives the same report, only slower.

    Args:
        requested: ``fast`` or ``builtin``.
        fast_missing: Why the fast reader cannot run (``"kafkaops-scan-<hash>.jar missing"``), or
            ``None`` when it is built.
        connector: Whether Spark's Kafka connector (the built-in reader) is installed.
        javac: Whether a JDK compiler is on ``PATH`` (to say how to build the fast reader).

    Returns:
        The choice.

    Raises:
        ConfigError: Unknown reader, or no installed reader can do it.
    """
    check_reader(requested)
    if requested == "builtin":
        if not connector:
            raise ConfigError("Spark's Kafka connector (the built-in reader) is not installed "
                              f"(no spark-sql-kafka jar in {cache_dir() / 'jars' / 'spark'})",
                              hint="run scripts/install.sh, or use --reader fast")
        return ReaderChoice(requested, "builtin")
    if fast_missing is None:
        return ReaderChoice(requested, "fast")
    how = (f"build it with `{BUILD_COMMAND}`" if javac else
           f"building it needs a JDK (no javac here: apt-get install {JDK_PACKAGE}), then `{BUILD_COMMAND}`")
    if not connector:
        raise ConfigError(f"the fast scan reader is not built ({fast_missing}) and Spark's Kafka connector is "
                          "not installed either", hint=f"run scripts/install.sh, or {how}")
    return ReaderChoice(requested, "builtin",
                        f"notice: the fast scan reader is not built ({fast_missing}): scanning with Spark's "
                        f"built-in Kafka source instead (same report, slower); {how}")


def resolve_reader(requested: str) -> ReaderChoice:
    """:func:`choose_reader` with what is installed here (the jar, the connector, ``javac``)."""
    _, missing = _fast_jars()
    return choose_reader(requested, fast_missing=missing,
                         connector=any(j.name.startswith("spark-sql-kafka") for j in connector_jars()),
                         javac=shutil.which("javac") is not None)


def build(*, force: bool = False) -> Path:
    """Compile the source into :func:`jar_path` unless it is there already.

    Raises:
        ConfigError: No ``javac``/``jar`` (install a JDK), no pyspark, or the compiler failed.
    """
    target = jar_path()
    if target.is_file() and not force:
        return target
    if not _jars_named():
        fetch()
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar:
        raise ConfigError("javac not found: building the scan reader needs a JDK",
                          hint=f"apt-get install {JDK_PACKAGE}")
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
    """``python -m kafkaops.health.scan_jar [--force]``: fetch kafka-clients (pinned) unless
    $KAFKAOPS_READER_JARS names one, build the reader, print its path."""

    try:
        print(build(force="--force" in sys.argv[1:]))
    except KafkaOpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
