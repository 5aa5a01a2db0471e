"""Independent witnesses for maintenance runs: they watch the lab without going through kafkaops.

- ``PoolWatch`` polls conftool's etcd keys and records the most hosts ever depooled at once.
- ``ArgvWatch`` samples every process's command line and records those holding a secret.
- ``SynWatch`` runs its own tcpdump on ``lo`` and records every new SYN to a service port with its time,
  so a test can prove no client connection reached a host between its SYN gate and its repool.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kafkaops.model import Cluster
from kafkaops.systems.conftool import read_pools


class PoolWatch:
    def __init__(self, cluster: Cluster, interval: float = 0.2) -> None:
        self.cluster, self.interval = cluster, interval
        self.max_depooled = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        assert self.cluster.conftool_config
        tags = self.cluster.hosts[0].conftool_tags
        while not self._stop.is_set():
            states = read_pools(self.cluster.conftool_config, tags)
            self.max_depooled = max(self.max_depooled, sum(1 for s in states if not s.is_pooled))
            self.samples += 1
            time.sleep(self.interval)

    def __enter__(self) -> PoolWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_LINE = re.compile(r"^(\d+\.\d+) IP (\d+\.\d+\.\d+\.\d+)\.\d+ > (\d+\.\d+\.\d+\.\d+)\.(\d+):")


class ArgvWatch:
    """Every process's command line (``/proc/PID/cmdline``), sampled every 50 ms while the block runs; the
    pids of those that held one of ``secrets`` in :attr:`seen`."""

    def __init__(self, secrets: list[bytes]) -> None:
        assert secrets and all(len(s) >= 16 for s in secrets), "short or no secrets would match anything"
        self.secrets = secrets
        self.seen: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").iterdir():
                if proc.name.isdigit():
                    try:
                        if any(s in (proc / "cmdline").read_bytes() for s in self.secrets):
                            self.seen.append(proc.name)
                    except OSError:
                        pass
            self.samples += 1
            time.sleep(0.05)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def holding_secrets(files: list[Path], secrets: list[bytes]) -> list[str]:
    """The files among ``files`` that contain any of ``secrets``."""
    return [str(f) for f in files if any(s in f.read_bytes() for s in secrets)]


class SynWatch:
    """Every new SYN to ``port`` on ``lo``. Client connections are the ones the balancer makes from the
    VIP (``clients``); kafkaops' own health checks of a depooled host come from elsewhere."""

    def __init__(self, port: int, *, clients: str | None = None) -> None:
        self.port = port
        self.clients = clients
        self.syns: list[tuple[float, str, str]] = []  # (time, source, destination)
        self._proc: subprocess.Popen[str] | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            m = _LINE.match(line)
            if m:
                self.syns.append((float(m.group(1)), m.group(2), m.group(3)))

    def __enter__(self) -> SynWatch:
        self._proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-n", "-l", "-tt",
             f"dst port {self.port} and (tcp[tcpflags] & (tcp-syn|tcp-ack)) == tcp-syn"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread.start()
        time.sleep(1.0)  # let tcpdump attach before the run starts
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        time.sleep(0.5)
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(10)
        self._thread.join(5)

    def between(self, address: str, start: float, end: float) -> list[float]:
        """New client connections to ``address`` in [start, end]: from the VIP when ``clients`` is set, else
        from anywhere but the host itself."""
        return [t for t, src, dst in self.syns if dst == address and start <= t <= end
                and (src == self.clients if self.clients else src != address)]


def journal(home: Path, run_id: str) -> list[dict[str, Any]]:
    path = home / "runs" / run_id / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_live(path: Path) -> list[dict[str, Any]]:
    """The records of a journal read while it is being written (a line being written ends the list)."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def live_journal(home: Path) -> list[dict[str, Any]]:
    """The records of the only run under ``home`` so far, read while it is being written."""
    runs = list((home / "runs").glob("*/journal.jsonl")) if (home / "runs").exists() else []
    return read_live(runs[0]) if runs else []


def facts(home: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((home / "runs" / run_id / "facts.json").read_text()))


def only_run(home: Path) -> str:
    runs = sorted(p.name for p in (home / "runs").iterdir() if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0]


def quiet_windows_hold(cluster: Cluster, watch: SynWatch, home: Path, run_id: str) -> dict[str, int]:
    """SYNs seen by the independent capture between each host's SYN gate and its repool (want all 0)."""
    records = journal(home, run_id)
    gate = facts(home, run_id)
    out = {}
    for host in cluster.hosts:
        passed = gate.get(f"syn_gate_passed/{host.name}")
        repool = [r["ts"] for r in records if r["type"] == "step_applying" and r.get("kind") == "conftool.repool"
                  and r.get("target") == host.name]
        assert passed is not None and repool, f"{host.name}: no SYN gate or repool in the journal"
        out[host.name] = len(watch.between(host.address, float(passed), min(repool)))
    return out


def kill_after_step(home: Path, proc: subprocess.Popen[str], kind: str, target: str, *, timeout: float = 300) -> str:
    """SIGKILL the spawned run (its whole process group) right after ``target``'s ``kind`` step is verified
    in its journal, as a crash there would; return the run's id for the resume. Fails when the run ended
    first, or never got there."""
    deadline = time.monotonic() + timeout

    def reached() -> bool:
        return any(r.get("type") == "step_verified" and r.get("kind") == kind and r.get("target") == target
                   for r in live_journal(home))

    while time.monotonic() < deadline and proc.poll() is None and not reached():
        time.sleep(0.2)
    assert proc.poll() is None, f"the run ended before {target} {kind} could be interrupted"
    assert reached(), f"{target} {kind} not verified within {timeout:.0f}s"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    return str(live_journal(home)[0]["run_id"])
