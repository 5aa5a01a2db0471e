"""What TLS + SASL cost: `status` and one broker's restart on the bench lab, secured and plaintext, side by side.

The bench lab (``bench/lab-bench.yaml``) is the default lab on 127.0.80.0/24: secured as the default lab is
(SASL_SSL listeners with SCRAM-SHA-512, kafkaops' ZooKeeper identity, etcd with client certificates,
Alertmanager behind basic auth). Its
plaintext twin is the same file with those three blocks removed, written to a temporary file. The same
machine runs both, one after the other (never together: one set of addresses):

1. ``lab up`` (timed: the CA, certificates and SCRAM users are part of the secured lab's start);
2. ``kafkaops status lab-bench -o json``, ``--status-runs`` times (whole processes, as an operator runs it);
3. ``kafkaops restart kafka1001 --yes --no-scan --syn-window 3s``, ``--restarts`` times (one broker's
   roll: depool, zero-SYN window, stop, start, wait in sync, election, repool);
4. ``lab down``.

The raw result goes to ``bench/results/security-cost-<date>.json``. Run by hand (about 10 minutes), with no
other lab using 127.0.80.0/24::

    python bench/bench_security.py [--status-runs 15] [--restarts 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result

REPO = Path(__file__).resolve().parents[1]
SECURED = REPO / "bench" / "lab-bench.yaml"


def plaintext_twin(text: str) -> str:
    """The bench lab's inventory without its security: ``kafka.security``, ``kafka.zookeeper_security``,
    ``conftool.tls`` and ``monitoring.auth`` (each an indented block) removed and etcd on http, the rest byte
    for byte."""
    out, skip = [], None
    for line in text.splitlines(keepends=True):
        indent = len(line) - len(line.lstrip(" "))
        if skip is not None:
            if line.strip() and indent <= skip:
                skip = None
            else:
                continue
        if re.match(r"\s*(security|zookeeper_security|auth|tls):", line) and indent > 0:
            skip = indent
            continue
        out.append(line.replace("etcd: https://", "etcd: http://"))
    return "".join(out)


def kafkaops(inventory: Path, *args: str, timeout: float = 900) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "-i", str(inventory), *args],
                          capture_output=True, text=True, timeout=timeout)
    return time.monotonic() - started, done


def measure(inventory: Path, status_runs: int, restarts: int) -> dict[str, Any]:
    up, done = kafkaops(inventory, "lab", "up")
    if done.returncode:
        raise SystemExit(f"lab up failed: {done.stderr[-2000:]}")
    try:
        kafkaops(inventory, "status", "lab-bench", "-o", "json")  # warm the page cache once
        status = []
        for _ in range(status_runs):
            seconds, done = kafkaops(inventory, "status", "lab-bench", "-o", "json")
            if done.returncode:
                raise SystemExit(f"status failed: {done.stderr[-2000:]}")
            status.append(round(seconds, 4))
        restart = []
        for _ in range(restarts):
            seconds, done = kafkaops(inventory, "restart", "kafka1001", "--yes", "--reason", "security bench",
                                     "--no-scan", "--syn-window", "3s")
            if done.returncode:
                raise SystemExit(f"restart failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
            restart.append(round(seconds, 2))
    finally:
        kafkaops(inventory, "lab", "down")
    return {"lab_up_s": round(up, 2), "status_s": status, "status_median_s": statistics.median(status),
            "restart_s": restart, "restart_median_s": statistics.median(restart)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--status-runs", type=int, default=15)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or raw_result.default_path("security-cost")
    result = raw_result.header("security-cost", vars(args), SECURED)
    with tempfile.TemporaryDirectory(prefix="kafkaops-bench-") as tmp:
        plain = Path(tmp) / "lab-bench.yaml"
        plain.write_text(plaintext_twin(SECURED.read_text()))
        for name, inventory in (("plaintext", plain), ("secured", SECURED)):
            print(f"{name}: lab up, {args.status_runs} status, {args.restarts} restarts ...", flush=True)
            result[name] = measure(inventory, args.status_runs, args.restarts)
            out.write_text(json.dumps(result, indent=1) + "\n")
    p, s = result["plaintext"], result["secured"]
    result["status_cost_s"] = round(s["status_median_s"] - p["status_median_s"], 4)
    result["restart_cost_s"] = round(s["restart_median_s"] - p["restart_median_s"], 2)
    result["complete"] = True
    result["finished"] = raw_result.now()
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"status median: plaintext {p['status_median_s']:.3f} s, secured {s['status_median_s']:.3f} s "
          f"(+{result['status_cost_s']:.3f} s)")
    print(f"restart median: plaintext {p['restart_median_s']:.1f} s, secured {s['restart_median_s']:.1f} s "
          f"(+{result['restart_cost_s']:.1f} s)")
    print(f"raw result: {out}")


if __name__ == "__main__":
    main()
