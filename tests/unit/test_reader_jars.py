"""The post-check's reader stands alone (issue 29): its kafka-clients is the product's own, pinned by Maven
coordinates and sha256 and downloaded into the user's cache — or taken from a directory an air-gapped site
names — never the lab's Kafka install. Downloads here are served from loopback by a real HTTP server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.health import scan_jar

ARTIFACT = scan_jar.MavenArtifact("org.example", "tiny-clients", "1.0",
                                  "0" * 64)  # digest replaced per test


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Maven-layout repository on 127.0.0.1: (its URL, its root directory)."""
    root = tmp_path / "repo"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def _publish(root: Path, artifact: scan_jar.MavenArtifact, content: bytes) -> None:
    url_path = artifact.url("").lstrip("/")
    target = root / url_path
    target.parent.mkdir(parents=True)
    target.write_bytes(content)


def test_the_pinned_jar_is_downloaded_into_the_cache_and_verified(repository: tuple[str, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    url, root = repository
    content = b"PK\x03\x04 a jar"
    artifact = scan_jar.MavenArtifact("org.example", "tiny-clients", "1.0", hashlib.sha256(content).hexdigest())
    _publish(root, artifact, content)
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(scan_jar.MAVEN_ENV, url)
    got = scan_jar.fetch(artifact)
    assert got == tmp_path / "cache" / "jars" / "reader" / "tiny-clients-1.0.jar"
    assert got.read_bytes() == content
    (root / artifact.url("").lstrip("/")).unlink()  # cached: not asked again
    assert scan_jar.fetch(artifact) == got


def test_a_download_with_another_digest_is_refused_and_not_kept(repository: tuple[str, Path], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    url, root = repository
    _publish(root, ARTIFACT, b"something else")
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(scan_jar.MAVEN_ENV, url)
    with pytest.raises(ConfigError, match="is not the pinned"):
        scan_jar.fetch(ARTIFACT)
    assert list((tmp_path / "cache" / "jars" / "reader").iterdir()) == []


def test_an_unreachable_repository_names_the_air_gapped_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(scan_jar.MAVEN_ENV, "http://127.0.0.1:9")  # discard: nothing listens
    with pytest.raises(UnreachableError, match=scan_jar.JARS_ENV):
        scan_jar.fetch(ARTIFACT, timeout=5)


def test_the_pin_is_the_version_the_lab_runs() -> None:
    """One kafka-clients on the machine: install.sh seeds the reader's cache with the lab's copy."""
    pom = (Path(__file__).resolve().parents[2] / "scripts" / "maven" / "kafka.pom.xml").read_text()
    assert f"<kafka.version>{scan_jar.KAFKA_CLIENTS.version}</kafka.version>" in pom


def test_an_air_gapped_directory_replaces_the_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    jars = tmp_path / "jars"
    jars.mkdir()
    monkeypatch.setenv(scan_jar.JARS_ENV, str(jars))
    with pytest.raises(ConfigError, match=f"no kafka-clients-<version>.jar in {jars}"):
        scan_jar.kafka_clients_jar()
    (jars / "kafka-clients-3.9.1.jar").write_bytes(b"PK")
    assert scan_jar.kafka_clients_jar() == jars / "kafka-clients-3.9.1.jar"
    monkeypatch.delenv(scan_jar.JARS_ENV)
    with pytest.raises(ConfigError, match="not downloaded"):
        scan_jar.kafka_clients_jar()  # the lab's jars are never looked at
