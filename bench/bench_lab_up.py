"""How long `kafkaops lab up` takes on a warm machine (jars cached). Target: <= 60 s.

Run by hand (it starts and stops the real lab; no lab may be up):  python bench/bench_lab_up.py [RUNS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ups, downs = [], []
    for i in range(runs):
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "lab", "up"], check=True, capture_output=True)
        ups.append(time.monotonic() - t)
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "lab", "down"], check=True, capture_output=True)
        downs.append(time.monotonic() - t)
        print(f"run {i + 1}: up {ups[-1]:.1f}s, down {downs[-1]:.1f}s", flush=True)
    print(f"lab up:   median {statistics.median(ups):.1f}s  min {min(ups):.1f}s  max {max(ups):.1f}s  (target <= 60 s)")
    print(f"lab down: median {statistics.median(downs):.1f}s")


if __name__ == "__main__":
    main()
