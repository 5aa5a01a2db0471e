"""Where the lab keeps its state, logs, keys and jars.

One directory (``$KAFKAOPS_LAB_DIR``, default ``~/.local/state/kafkaops/lab``) holds everything a lab
run creates, so ``lab down`` plus ``rm -rf`` of it leaves the machine as it was. Jars live in a cache
outside git (``$KAFKAOPS_CACHE``, default ``~/.cache/kafkaops``), filled by ``scripts/install.sh``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: The default lab's cluster name; other lab inventories (``lab-stretch``) get their own directory.
DEFAULT_LAB = "lab"


def lab_dir_env(cluster: str = DEFAULT_LAB) -> str:
    """The variable naming ``cluster``'s lab directory: ``KAFKAOPS_LAB_DIR`` for the default lab,
    ``KAFKAOPS_LAB_DIR_LAB_STRETCH`` for ``lab-stretch`` — so two labs run side by side, each inventory's
    paths (``${KAFKAOPS_LAB_DIR_LAB_STRETCH:-...}``) naming its own."""
    return "KAFKAOPS_LAB_DIR" if cluster == DEFAULT_LAB else "KAFKAOPS_LAB_DIR_" + re.sub(r"\W", "_", cluster).upper()


def lab_dir(cluster: str = DEFAULT_LAB) -> Path:
    return Path(os.environ.get(lab_dir_env(cluster)) or f"~/.local/state/kafkaops/{cluster}").expanduser()


def cache_dir() -> Path:
    return Path(os.environ.get("KAFKAOPS_CACHE") or "~/.cache/kafkaops").expanduser()


def kafka_jars(*, kraft: bool = False) -> Path:
    """Kafka 3.9 (ZooKeeper mode, ``jars/kafka``) or Kafka 4.x (KRaft only, ``jars/kafka4``)."""
    return cache_dir() / "jars" / ("kafka4" if kraft else "kafka")


@dataclass(frozen=True)
class HostDirs:
    """The directories of one lab host: its 'disk'."""

    root: Path

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def kafka_data(self) -> Path:
        return self.root / "kafka-data"

    @property
    def boot_id_file(self) -> Path:
        return self.root / "boot_id"

    @property
    def release(self) -> Path:
        return self.root / "srv" / "eventbus"

    def pidfile(self, unit: str) -> Path:
        return self.run / f"{unit}.pid"

    def logfile(self, unit: str) -> Path:
        return self.log / f"{unit}.log"


def host_dirs(host: str, base: Path | None = None) -> HostDirs:
    return HostDirs((base or lab_dir()) / "hosts" / host)
