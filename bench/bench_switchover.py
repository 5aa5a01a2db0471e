"""Benchmark: switchovers of eventbus back and forth on the two-site lab (issue 17), under the switch load.

For each margin given, one switchover from the active site to the other and one back, while a producer
posts numbered events through the active site's eventbus and a consumer group follows the discovery
record (kafkaops_lab.switch_load). Per switchover: events produced, lost, read twice (this load's, and
an earlier load's), the duplicate bound the run's translation journaled, the gap with no active site as
the producer saw it, and the run's duration.

Run: ``python bench/bench_switchover.py [--margins 60s,5s] [--rate 40]`` (starts the lab when it is down,
stops it after).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster
from kafkaops.systems.conftool import read_discovery
from kafkaops_lab import sites as sites_lab
from kafkaops_lab.switch_load import SwitchLoad

REPO = Path(__file__).resolve().parent.parent


def _active(sites: Cluster) -> tuple[str, str]:
    assert sites.conftool_config is not None
    pooled = [dc for dc, p in read_discovery(sites.conftool_config, "eventbus").items() if p]
    return pooled[0], next(dc for dc in sites.sites if dc != pooled[0])


def _bound(home: Path) -> int:
    journal = next((home / "runs").glob("*/journal.jsonl"))
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    applied = [r for r in records if r.get("type") == "step_applying" and r.get("kind") == "offsets.translate"]
    return sum(g["duplicates"] for g in applied[-1]["action"]["data"]["groups"]) if applied else 0


def switchover(sites: Cluster, margin: str, rate: float) -> dict[str, object]:
    src, dst = _active(sites)
    home = Path(tempfile.mkdtemp(prefix="kafkaops-bench-"))
    env = {**os.environ, "KAFKAOPS_HOME": str(home), "KAFKAOPS_INVENTORY": sites.source}
    with SwitchLoad(sites, rate=rate) as load:
        time.sleep(10)
        started = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "switchover", "eventbus", "--from", src,
                            "--to", dst, "--margin", margin, "--yes", "-r", "bench", "-o", "plain"],
                           env=env, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - started
        if r.returncode:
            raise SystemExit(f"switchover failed ({r.returncode}): {r.stderr[-2000:]}")
        time.sleep(10)
        load.finish()
    report = load.report()
    return {"switchover": f"{src}->{dst}", "margin": margin, "produced": report.produced, "lost": len(report.lost),
            "duplicates": report.duplicates, "earlier_read_again": report.earlier.get(dst, 0),
            "journaled_bound": _bound(home), "no_site_active_s": round(report.waited, 1),
            "run_s": round(took, 1), "history_read_at_target": report.history.get(dst, 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--margins", default="60s,5s")
    ap.add_argument("--rate", type=float, default=40.0)
    args = ap.parse_args()
    sites = load_inventory(REPO / "inventory" / "lab-sites.yaml")
    started = sites_lab.mirror_pid(sites_lab.sites_dir(sites)) is None
    if started:
        print(f"lab up in {sites_lab.up(sites):.1f}s", flush=True)
    try:
        for margin in args.margins.split(","):
            for _ in range(2):
                print(json.dumps(switchover(sites, margin, args.rate)), flush=True)
    finally:
        if started:
            sites_lab.down(sites)


if __name__ == "__main__":
    main()
