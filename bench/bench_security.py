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

Each restart runs in a home of its own, and its journal says where the time went: per step kind, from the end
of the step before to its own end (``restart_steps_s``; medians per kind and the secured - plaintext
difference in ``restart_step_cost_s``). The raw result goes to ``bench/results/security-cost-<date>.json``.
Run by hand (about 10 minutes), with no other lab using 127.0.80.0/24::

    python bench/bench_security.py [--status-runs 15] [--restarts 3]
"""

from __future__ import annotations

import argparse
import json
import os
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


def kafkaops(inventory: Path, *args: str, timeout: float = 900,
             home: Path | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "KAFKAOPS_HOME": str(home)} if home else None
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "-i", str(inventory), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    return time.monotonic() - started, done


def step_seconds(home: Path) -> dict[str, float]:
    """Where one run's time went, per step kind: each step from the end of the one before it (its observation,
    waits and retries included) to its own end (verified, or skipped as a no-op), summed by kind."""
    journal = next((home / "runs").glob("*/journal.jsonl"))
    out: dict[str, float] = {}
    last = None
    for line in journal.read_text().splitlines():
        row = json.loads(line)
        if row.get("type") == "target_started":
            last = row["ts"]
        elif row.get("type") in ("step_verified", "step_skipped") and last is not None:
            out[row["kind"]] = round(out.get(row["kind"], 0.0) + row["ts"] - last, 3)
            last = row["ts"]
    return out


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
        restart, steps = [], []
        with tempfile.TemporaryDirectory(prefix="kafkaops-bench-home-") as homes:
            for n in range(restarts):
                home = Path(homes) / str(n)
                seconds, done = kafkaops(inventory, "restart", "kafka1001", "--yes", "--reason", "security bench",
                                         "--no-scan", "--syn-window", "3s", home=home)
                if done.returncode:
                    raise SystemExit(f"restart failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
                restart.append(round(seconds, 2))
                steps.append(step_seconds(home))
    finally:
        kafkaops(inventory, "lab", "down")
    kinds = sorted({k for s in steps for k in s})
    return {"lab_up_s": round(up, 2), "status_s": status, "status_median_s": statistics.median(status),
            "restart_s": restart, "restart_median_s": statistics.median(restart), "restart_steps_s": steps,
            "restart_step_median_s": {k: round(statistics.median(s.get(k, 0.0) for s in steps), 3) for k in kinds}}


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
    medians = (p["restart_step_median_s"], s["restart_step_median_s"])
    result["restart_step_cost_s"] = {k: round(medians[1].get(k, 0.0) - medians[0].get(k, 0.0), 3)
                                     for k in sorted(set(medians[0]) | set(medians[1]))}
    result["complete"] = True
    result["finished"] = raw_result.now()
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"status median: plaintext {p['status_median_s']:.3f} s, secured {s['status_median_s']:.3f} s "
          f"(+{result['status_cost_s']:.3f} s)")
    print(f"restart median: plaintext {p['restart_median_s']:.1f} s, secured {s['restart_median_s']:.1f} s "
          f"(+{result['restart_cost_s']:.1f} s)")
    costly = sorted(result["restart_step_cost_s"].items(), key=lambda kv: -abs(kv[1]))[:6]
    print("restart, median per step kind, secured - plaintext: " + ", ".join(f"{k} {v:+.2f} s" for k, v in costly))
    print(f"raw result: {out}")


if __name__ == "__main__":
    main()
