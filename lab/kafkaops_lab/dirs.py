"""Where the lab keeps its state, logs, keys and jars.

One directory (``$KAFKAOPS_LAB_DIR``, default ``~/.local/state/kafkaops/lab``) holds everything a lab
run creates, so ``lab down`` plus ``rm -rf`` of it leaves the machine as it was. Jars live in a cache
outside git (:func:`kafkaops.places.cache_dir`: ``$KAFKAOPS_CACHE``, default ``~/.cache/kafkaops``), filled by
``scripts/install.sh``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kafkaops.places import cache_dir as cache_dir  # the product decides where the cache is; the lab uses it

#: The default lab's cluster name; other lab inventories (``lab-stretch``) get their own directory.
DEFAULT_LAB = "lab"


def lab_dir_env(cluster: str = DEFAULT_LAB) -> str:
    """The variable naming ``cluster``'s lab directory: ``KAFKAOPS_LAB_DIR`` for the default lab,
    ``KAFKAOPS_LAB_DIR_LAB_STRETCH`` for ``lab-stretch`` — so two labs run side by side, each inventory's
    paths (``${KAFKAOPS_LAB_DIR_LAB_STRETCH:-...}``) naming its own."""
    return "KAFKAOPS_LAB_DIR" if cluster == DEFAULT_LAB else "KAFKAOPS_LAB_DIR_" + re.sub(r"\W", "_", cluster).upper()


def labs_root() -> Path:
    """Where every lab's directory is unless its variable names another: ``~/.local/state/kafkaops``."""
    return Path("~/.local/state/kafkaops").expanduser()


def lab_dir(cluster: str = DEFAULT_LAB) -> Path:
    return Path(os.environ.get(lab_dir_env(cluster)) or labs_root() / cluster).expanduser()


def lab_dirs() -> list[Path]:
    """Every lab directory this machine holds that this environment can name: each directory of
    :func:`labs_root` that a lab was started in (its ``lab.json``, or a multi-site lab's ``sites.json``),
    and each one a ``KAFKAOPS_LAB_DIR*`` variable names. Multi-site labs first: stopping one stops its
    sites' labs too, MirrorMaker before the clusters it reads.

    This is how ``lab down`` finds the labs a newcomer did not know they had started (``--mode kraft``,
    ``--sites ...`` each live in a directory of their own)."""
    named = [Path(v).expanduser() for k, v in sorted(os.environ.items())
             if (k == lab_dir_env() or k.startswith(lab_dir_env() + "_")) and v]
    root = labs_root()
    scanned = sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []
    out: list[Path] = []
    seen: set[Path] = set()
    for d in (*named, *scanned):
        real = d.resolve()
        if real not in seen and ((d / "lab.json").is_file() or (d / "sites.json").is_file()):
            seen.add(real)
            out.append(d)
    return sorted(out, key=lambda d: not (d / "sites.json").is_file())




def kafka_jars(*, kraft: bool = False) -> Path:
    """Kafka 3.9 (ZooKeeper mode, ``jars/kafka``) or Kafka 4.x (KRaft only, ``jars/kafka4``)."""
    return cache_dir() / "jars" / ("kafka4" if kraft else "kafka")


def jmx_agent() -> Path:
    """Prometheus' JMX exporter agent jar (``jars/jmx``, scripts/maven/jmx.pom.xml); the directory itself
    when no jar is there (``lab up``'s preflight says to run scripts/install.sh)."""
    jars = sorted((cache_dir() / "jars" / "jmx").glob("jmx_prometheus_javaagent-*.jar"))
    return jars[-1] if jars else cache_dir() / "jars" / "jmx"


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
