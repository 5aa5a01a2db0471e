"""The reader's kafka-clients at the moment it is used (issue 41, item 8): the cached jar is checked against
its pin every time a session or a build takes it, not only when it was downloaded; and a directory named by
``$KAFKAOPS_READER_JARS`` gives its newest version by number (3.10.0 over 3.9.1), not by text order."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.health import scan_jar

CONTENT = b"PK\x03\x04 the reviewed kafka-clients"


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A verified kafka-clients in a tmp cache, the pin made to match it (no download, no lab)."""
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(scan_jar.JARS_ENV, raising=False)
    pin = scan_jar.MavenArtifact("org.apache.kafka", "kafka-clients", "3.9.1", hashlib.sha256(CONTENT).hexdigest())
    monkeypatch.setattr(scan_jar, "KAFKA_CLIENTS", pin)
    jar = tmp_path / "cache" / "jars" / "reader" / pin.file_name
    jar.parent.mkdir(parents=True)
    jar.write_bytes(CONTENT)
    scan_jar.jar_path().parent.mkdir(parents=True)
    scan_jar.jar_path().write_bytes(b"PK")
    return jar


def test_the_verified_cached_jar_is_used(cached: Path) -> None:
    assert scan_jar.kafka_clients_jar() == cached
    assert scan_jar.spark_jars() == [str(scan_jar.jar_path()), str(cached)]
    assert scan_jar.resolve_reader("fast").reader == "fast"


def test_a_cached_jar_changed_after_its_download_is_refused_at_use(cached: Path) -> None:
    cached.write_bytes(CONTENT + b" and a class someone added")
    for use in (scan_jar.kafka_clients_jar, scan_jar.spark_jars, scan_jar.session_jars,
                lambda: scan_jar.resolve_reader("fast")):
        with pytest.raises(ConfigError) as err:
            use()
        line = str(err.value)
        assert "\n" not in line
        assert str(cached) in line and "not the pinned" in line
        assert f"{scan_jar.BUILD_COMMAND} --force" in line  # the fix: download it again, rebuild


def _air_gapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> Path:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in names:
        (jars / name).write_bytes(b"PK")
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(scan_jar.JARS_ENV, str(jars))
    return jars


def test_the_named_directory_gives_its_newest_version_by_number(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    jars = _air_gapped(tmp_path, monkeypatch, ["kafka-clients-3.9.1.jar", "kafka-clients-3.10.0.jar",
                                               "kafka-clients-3.2.3.jar"])
    assert scan_jar.kafka_clients_jar() == jars / "kafka-clients-3.10.0.jar"


def test_a_name_without_a_version_is_ignored_and_named_when_nothing_else_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = _air_gapped(tmp_path, monkeypatch, ["kafka-clients-latest.jar", "kafka-clients-3.9.1.jar"])
    assert scan_jar.kafka_clients_jar() == jars / "kafka-clients-3.9.1.jar"
    (jars / "kafka-clients-3.9.1.jar").unlink()
    with pytest.raises(ConfigError, match=r"no kafka-clients-<version>\.jar in .*kafka-clients-latest\.jar"):
        scan_jar.kafka_clients_jar()


def test_versions_parse_into_numbers() -> None:
    assert scan_jar.client_version("kafka-clients-3.10.0.jar") == (3, 10, 0)
    assert scan_jar.client_version("kafka-clients-3.9.1.jar") == (3, 9, 1)
    assert scan_jar.client_version("kafka-clients-4.0.jar") == (4, 0)
    for name in ("kafka-clients-latest.jar", "kafka-clients-7.6.0-ccs.jar", "kafka-clients-3..1.jar",
                 "kafka-streams-3.9.1.jar", "kafka-clients-3.9.1.jar.sha256"):
        assert scan_jar.client_version(name) is None
