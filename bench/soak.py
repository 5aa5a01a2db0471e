"""Soak: N consecutive `rolling-reboot lab` under one continuous load, every invariant after every roll.

The load generator runs for the whole soak (acks=all, idempotent producer, the lab's RF 3 / min ISR 2
topic `lab.load`, plus HTTP requests through the balancer's VIP). After each roll: every host pooled, no
under-replicated partition, every partition led by its preferred replica. At the end every acked message
must have been read back exactly once. Per roll: wall time, the sum of the brokers' floors (stop → back in
every ISR, measured from the cluster's side by polling metadata, independently of kafkaops), the
configured safety windows, and the overhead = wall - floors - windows (issue 14's measure), with the time
per step kind from the run's journal.

Run by hand (the lab is started if it is down, and then stopped at the end):
    python bench/soak.py [--rolls 10] [--inventory bench/lab-bench.yaml] [--chart docs/soak.png]
                         [kafkaops args, e.g. --no-scan]
``--inventory bench/lab-bench.yaml`` runs it on the bench lab (127.0.80.0/24, its own directory), beside
the default lab. The raw result goes to bench/results/soak-<date>.json (``--json`` elsewhere), rewritten
after every roll.

A roll takes one to two minutes here; the default soak about 15-20 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package
from bench_roll import FloorWatch

REPO = Path(__file__).resolve().parents[1]

SYN_WINDOW, STABLE_FOR = 10.0, 5.0  # the runbook defaults; the windows below are counted from them


@dataclass
class Roll:
    number: int
    rc: int
    wall: float
    floors: float
    windows: float
    whole: bool
    by_kind: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        return self.wall - self.floors - self.windows


def step_times(journal: Path) -> dict[str, float]:
    """Seconds per step kind (first observe → verified), summed over hosts, from a run's journal."""
    by_kind: dict[str, float] = {}
    open_at: dict[tuple[str, int], tuple[float, str]] = {}
    for line in journal.read_text().splitlines():
        r = json.loads(line)
        key = (r.get("target", ""), r.get("step", 0))
        if r["type"] == "step_observed" and key not in open_at:
            open_at[key] = (r["ts"], r["kind"])
        elif r["type"] == "step_verified" and key in open_at:
            t0, kind = open_at.pop(key)
            by_kind[kind] = by_kind.get(kind, 0.0) + r["ts"] - t0
    return by_kind


def one_roll(cluster: Any, number: int, extra: list[str], workdir: Path) -> Roll:
    from kafkaops.health.status import collect

    home = workdir / f"roll-{number}"
    watch = FloorWatch(cluster)
    watch.start()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "rolling-reboot", cluster.name, "--yes",
                           "--reason", f"soak roll {number}", *extra], capture_output=True, text=True,
                          env={**os.environ, "KAFKAOPS_HOME": str(home), "KAFKAOPS_INVENTORY": cluster.source})
    wall = time.monotonic() - started
    time.sleep(1)
    watch.finish()
    hosts = len(cluster.hosts)
    windows = hosts * SYN_WINDOW + (hosts - 1) * STABLE_FOR
    runs = sorted((home / "runs").iterdir()) if (home / "runs").exists() else []
    by_kind = step_times(runs[0] / "journal.jsonl") if runs else {}
    data = collect(cluster)
    whole = bool(data["healthy"]) and all(b["pooled"] == "yes" for b in data["brokers"]) \
        and data["preferred_leader_ratio"] == 1.0
    roll = Roll(number, done.returncode, round(wall, 1), round(sum(watch.floor.values()), 1), windows, whole,
                {k: round(v, 1) for k, v in by_kind.items()})
    if done.returncode != 0:
        roll.problems.append(f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    if not whole:
        roll.problems.append(f"not whole after the roll: healthy={data['healthy']}, "
                             f"preferred={data['preferred_leader_ratio']}, "
                             f"pooled={[b['pooled'] for b in data['brokers']]}")
    return roll


def chart(rolls: list[Roll], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r.number for r in rolls]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(xs, [r.floors for r in rolls], label="broker floors (stop → back in every ISR)")
    ax.bar(xs, [r.windows for r in rolls], bottom=[r.floors for r in rolls], label="configured safety windows")
    ax.bar(xs, [max(r.overhead, 0) for r in rolls], bottom=[r.floors + r.windows for r in rolls],
           label="overhead (incl. post-check)")
    ax.set_xlabel("roll")
    ax.set_ylabel("seconds")
    ax.set_title("rolling-reboot lab under load: where each roll's time goes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=10)
    parser.add_argument("--inventory", type=Path, default=REPO / "inventory" / "lab.yaml",
                        help="the lab to run on (default inventory/lab.yaml; bench/lab-bench.yaml: beside it)")
    parser.add_argument("--json", type=Path, default=None,
                        help="the raw result (default bench/results/soak-<date>.json)")
    parser.add_argument("--chart", type=Path, default=None)
    args, extra = parser.parse_known_args()

    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.load import run_load

    inventory = args.inventory.resolve()
    cluster = load_inventory(inventory)
    base = lab_dir(cluster.name)
    out_path = args.json or raw_result.default_path("soak")
    result = raw_result.header("soak", {**vars(args), "kafkaops_args": extra}, inventory)
    result.update(seed=None, lab_dir=str(base), windows={"syn_window_s": SYN_WINDOW, "stable_for_s": STABLE_FOR})
    started_lab = not lab.is_up(base)
    if started_lab:
        lab.up(cluster)
    stop = threading.Event()
    report: dict[str, Any] = {}
    load = threading.Thread(target=lambda: report.update(r=run_load(cluster, 24 * 3600, rate=100, http_rate=8,
                                                                    stop=stop)), daemon=True)
    rolls: list[Roll] = []
    try:
        load.start()
        time.sleep(3)
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            for n in range(1, args.rolls + 1):
                roll = one_roll(cluster, n, extra, Path(tmp))
                rolls.append(roll)
                print(f"roll {n:2}/{args.rolls}: exit {roll.rc}, {roll.wall:6.1f} s wall, floors {roll.floors:5.1f} s, "
                      f"windows {roll.windows:4.0f} s, overhead {roll.overhead:5.1f} s "
                      f"({roll.overhead / len(cluster.hosts):4.1f} s/broker) {'; '.join(roll.problems)}", flush=True)
                result["rolls"] = [{**asdict(x), "overhead": round(x.overhead, 1)} for x in rolls]
                raw_result.write(out_path, result)
    finally:
        stop.set()
        load.join(900)
        if started_lab:
            lab.down(base)
    r = report.get("r")
    print("\n| roll | exit | wall s | floors s | windows s | overhead s | per broker s | whole |")
    print("|---|---|---|---|---|---|---|---|")
    for roll in rolls:
        print(f"| {roll.number} | {roll.rc} | {roll.wall} | {roll.floors} | {roll.windows:.0f} | {roll.overhead:.1f} | "
              f"{roll.overhead / len(cluster.hosts):.1f} | {'yes' if roll.whole else 'NO'} |")
    kinds: dict[str, float] = {}
    for roll in rolls:
        for k, v in roll.by_kind.items():
            kinds[k] = kinds.get(k, 0.0) + v / len(rolls)
    print("\nmean seconds per step kind per roll:")
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<28} {v:6.1f}")
    if r is not None:
        print(f"\nload: {r.produced_acked} acked, {r.consumed} read back, {r.lost} lost, {r.duplicated} duplicated, "
              f"{r.produce_errors} produce errors; HTTP {r.http_sent} sent, {r.http_failed} failed")
    ok = sum(1 for roll in rolls if roll.rc == 0 and roll.whole)
    print(f"{ok}/{len(rolls)} rolls whole")
    result.update(complete=True, finished=raw_result.now(), load=r.to_dict() if r is not None else None,
                  mean_seconds_per_step_kind={k: round(v, 1) for k, v in kinds.items()},
                  summary={"rolls": len(rolls), "whole": ok})
    raw_result.write(out_path, result)
    print(f"raw result: {out_path}")
    if args.chart and rolls:
        chart(rolls, args.chart)
    clean = r is not None and r.lost == 0 and r.duplicated == 0
    sys.exit(0 if ok == len(rolls) and clean else 1)


if __name__ == "__main__":
    main()
