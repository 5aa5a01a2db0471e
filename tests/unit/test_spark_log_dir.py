"""The driver JVM's logging configuration and log live in a private directory (issue 28, item 3).

Another local user who could pre-create the shared ``/tmp/kafkaops-spark`` (or plant a symlink there)
could swap the log4j2 configuration the driver loads, or make our write clobber another file. These
tests plant exactly that, then check the post-check's directory is a fresh one of ours.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.health import spark_job


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory standing for /tmp, and no log directory made yet by this process."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setattr(spark_job, "_LOG_DIR", None)
    yield root


def test_a_planted_symlink_is_never_followed(tmp_root: Path, tmp_path: Path) -> None:
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    # What another local user could plant: the old fixed directory as a symlink to theirs, and inside
    # theirs the configuration file as a symlink to a file of ours.
    (tmp_root / "kafkaops-spark").symlink_to(attacker)
    (attacker / "log4j2.properties").symlink_to(victim)

    log_dir = spark_job.private_log_dir()

    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in attacker.iterdir()) == ["log4j2.properties"]
    assert (attacker / "log4j2.properties").is_symlink()
    mode = os.lstat(log_dir)
    assert stat.S_ISDIR(mode.st_mode) and not log_dir.is_symlink()
    assert log_dir.resolve().parent == tmp_root.resolve()
    assert log_dir.resolve() != attacker.resolve()
    assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == os.getuid()
    conf = log_dir / "log4j2.properties"
    assert not conf.is_symlink() and conf.read_text() == spark_job._LOG4J2
    assert stat.S_IMODE(os.lstat(conf).st_mode) == 0o600


def test_the_directory_is_made_once_per_process_and_its_files_refuse_symlinks(tmp_root: Path,
                                                                               tmp_path: Path) -> None:
    first = spark_job.private_log_dir()
    assert spark_job.private_log_dir() == first
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (first / "spark-driver.log").symlink_to(victim)
    with pytest.raises(OSError):
        spark_job._open_private(first / "spark-driver.log", os.O_APPEND)
    assert victim.read_text() == "precious\n"


def test_at_exit_the_directory_goes(tmp_root: Path) -> None:
    log_dir = spark_job.private_log_dir()
    with os.fdopen(spark_job._open_private(log_dir / "spark-driver.log", os.O_APPEND), "ab") as log:
        log.write(b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    spark_job._remove_log_dir(log_dir)
    assert list(tmp_root.iterdir()) == []
