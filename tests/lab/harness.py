"""How lab tests drive kafkaops: the real CLI in a subprocess (own KAFKAOPS_HOME), and background load."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kafkaops.model import Cluster
from kafkaops_lab.load import LoadReport, run_load
from kafkaops_lab.spec import LabSpec


def _env(home: os.PathLike[str] | str, cluster: Cluster) -> dict[str, str]:
    return {**os.environ, "KAFKAOPS_HOME": str(home), "KAFKAOPS_INVENTORY": cluster.source}


def kafkaops(home: os.PathLike[str] | str, cluster: Cluster, *args: str,
             timeout: float = 900, group: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``kafkaops ARGS`` to completion against ``cluster``'s inventory (``group``: as that group id,
    e.g. the lab's admin, whom ``kafkaops lab net partition admin ...`` cuts off)."""
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(home, cluster), group=group)


def spawn(home: os.PathLike[str] | str, cluster: Cluster, *args: str,
          group: int | None = None) -> subprocess.Popen[str]:
    """Start ``kafkaops ARGS`` in its own process group (so a test can SIGKILL all of it); ``group``: as
    that group id (see :func:`kafkaops`).

    Its output goes to a file, never to a pipe nobody reads while it runs: a roll prints more than a
    pipe holds (64 KiB), and a blocked write would hang the run. :func:`output` reads it.
    """
    log = tempfile.NamedTemporaryFile("w+", prefix="kafkaops-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "kafkaops.cli.main", *args], stdout=log,
                            stderr=subprocess.STDOUT, text=True, env=_env(home, cluster), start_new_session=True,
                            group=group)
    log.close()
    _LOGS[proc.pid] = log.name
    return proc


_LOGS: dict[int, str] = {}


def output(proc: subprocess.Popen[str]) -> str:
    """What a :func:`spawn`ed process printed so far (stdout and stderr)."""
    try:
        with open(_LOGS[proc.pid], errors="replace") as f:
            return f.read()
    except (KeyError, FileNotFoundError):
        return ""


class Load:
    """The load generator in a background thread for the duration of a ``with`` block."""

    def __init__(self, cluster: Cluster, *, rate: float = 100, http_rate: float = 8) -> None:
        self.cluster, self.rate, self.http_rate = cluster, rate, http_rate
        self.stop = threading.Event()
        self.report: LoadReport | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.report = run_load(self.cluster, 3600, rate=self.rate, http_rate=self.http_rate, stop=self.stop)

    def __enter__(self) -> Load:
        self.thread.start()
        time.sleep(2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(400)


T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 120.0) -> T:
    """``probe()`` once a second until it returns something truthy (an HTTP error counts as nothing yet);
    fail naming ``what`` after ``timeout``."""
    import pytest
    import requests

    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except requests.RequestException:
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not seen within {timeout:.0f}s: {what}")
        time.sleep(1)



def pristine_migration_lab(cluster: Cluster) -> LabSpec:
    """The migration lab as ``lab up --mode migration`` leaves it — a ZooKeeper cluster on Kafka 3.9, its
    controllers prepared but not provisioned — started again when an earlier test of the module group migrated
    or upgraded it."""
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.host import LabHost

    spec = LabSpec.load(lab_dir(cluster.name))
    controllers = [LabHost(spec, h) for h in spec.controllers]
    brokers = [LabHost(spec, h) for h in spec.brokers]
    upgraded = any(str(h.jars) != spec.kafka_jars for h in (*controllers, *brokers))
    if any(c.provisioned for c in controllers) or any(b.phase() != "zk" for b in brokers) or upgraded:
        lab.down(lab_dir(cluster.name))
        lab.up(cluster)
        spec = LabSpec.load(lab_dir(cluster.name))
    return spec
