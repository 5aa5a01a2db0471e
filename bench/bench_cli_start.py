"""Cold start of the CLI: `kafkaops --help` and `kafkaops runbooks list`, median of N subprocess runs.

Target: median <= 0.3 s. Operators type these constantly; a CLI that imports confluent_kafka, kazoo,
paramiko or pyspark at start-up feels broken. Prints figures; asserts nothing (CI machines vary).

Usage: python bench/bench_cli_start.py [-n 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET = 0.3
COMMANDS = {
    "kafkaops --help": [sys.executable, "-m", "kafkaops.cli.main", "--help"],
    "kafkaops runbooks list": [sys.executable, "-m", "kafkaops.cli.main", "runbooks", "list"],
}


def measure(cmd: list[str], n: int) -> list[float]:
    subprocess.run(cmd, capture_output=True, check=False)  # warm the OS page cache, not Python
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 3):
            sys.stderr.write(proc.stderr.decode()[-2000:])
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per command")
    args = ap.parse_args()
    base = measure([sys.executable, "-c", "pass"], args.n)
    print(f"python interpreter alone: median {statistics.median(base) * 1000:.0f} ms")
    for name, cmd in COMMANDS.items():
        times = measure(cmd, args.n)
        med = statistics.median(times)
        verdict = "OK" if med <= TARGET else "OVER TARGET"
        print(
            f"{name:28s} median {med * 1000:6.0f} ms  min {min(times) * 1000:6.0f} ms  "
            f"max {max(times) * 1000:6.0f} ms  (n={args.n}, target {TARGET * 1000:.0f} ms) {verdict}"
        )


if __name__ == "__main__":
    main()
