"""A Spark standalone cluster on loopback for a bench: one master and N workers, started with pyspark's own
``spark-class`` and stopped by pid.

The post-check runs on ``local[2]`` on the lab, and on a standalone or YARN master (``--spark-master``) for a
fleet: a standalone cluster is where the scan's executors are separate JVMs that fetch from Kafka
themselves and the driver only collects one summary row per partition. Issue 47 measures the scan there
(two workers). Everything binds to one loopback address; the daemons' logs go to a directory of the
caller's, and a start that fails says so with the tail of the daemon's log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(log: Path, text: str, count: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: the daemon exited ({proc.returncode}): {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {text!r} (x{count}) within {timeout:.0f}s: {log.read_text()[-2000:]}")


@contextmanager
def standalone(workers: int, logs: Path, *, address: str = "127.0.0.1", port: int = 17077,
               cores: int = 1, memory: str = "1g", timeout: float = 120.0) -> Iterator[str]:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) on ``address``; yields the master
    URL (``spark://ADDRESS:PORT``) once every worker has registered, and stops them all after."""
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": address, "SPARK_MASTER_HOST": address, "SPARK_NO_DAEMONIZE": "1"}
    spark_class = str(_spark_class())
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = logs / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([spark_class, *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        procs.append(proc)
        return proc, log

    url = f"spark://{address}:{port}"
    try:
        master, master_log = start("master", "org.apache.spark.deploy.master.Master", "--host", address,
                                   "--port", str(port), "--webui-port", "0")
        _wait_for(master_log, "I have been elected leader", 1, master, timeout)
        for i in range(workers):
            start(f"worker-{i + 1}", "org.apache.spark.deploy.worker.Worker", "--host", address, "--cores",
                  str(cores), "--memory", memory, "--webui-port", "0", "--work-dir", str(logs / f"work-{i + 1}"),
                  url)
        _wait_for(master_log, "Registering worker", workers, master, timeout)
        yield url
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
