"""`kafkaops status lab` latency vs the Kafka CLI and kcat on the same cluster.

Targets (issue: broker maintenance): median <= 0.5 s and >= 5x faster than
`kafka-topics --describe --under-replicated-partitions`; `kcat -L` reported beside it.

Run by hand with a lab up:  python bench/bench_status.py [--runs N] [--inventory bench/lab-bench.yaml]

Three floors are timed beside it, to show where the time goes: the interpreter alone (`python -c pass`,
site hooks included); a bare script that only imports confluent-kafka and makes status's two Kafka
requests (metadata, then the topics' configs), with the cluster's own client configuration (TLS, SASL:
the lab's brokers are secured, and a floor that does not authenticate does not reach them); and the same
script importing Typer and parsing the inventory's YAML first — the CLI framework the product is built on
and the file it is told the cluster by, which any Typer command that reads a YAML inventory pays before it
asks anything (Typer 0.26 no longer imports rich; `status -o json` never does). The package is byte-compiled
first, as a regular install is.

The commands are run in rounds, each round every command once (A B C A B C ...): on a shared machine the
noise of a round hits every command, and the medians compare. ``--before DIR`` adds the status of another
tree of kafkaops (``git archive REF kafkaops | tar -x -C DIR``) to the rounds. The raw times go to
``bench/results/status-bench-DATE.json`` (:mod:`raw_result`): docs/performance.md states only what those
files show.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafkaops.inventory import load_inventory
from kafkaops.systems.kafka_auth import java_properties, librdkafka_config, properties_text
from kafkaops_lab.dirs import kafka_jars

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_result  # bench/ is not a package

REPO = Path(__file__).resolve().parents[1]


def _once(argv: list[str], env: dict[str, str] | None, stdin: str | None) -> tuple[float, int]:
    t = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                          text=True, env=env)
    return time.perf_counter() - t, proc.returncode


# Only what `status` asks Kafka: the floor any Python status command built on confluent-kafka pays. The
# client configuration (bootstrap, TLS, SASL) comes on stdin: a password is never put on a command line.
_KAFKA_FLOOR = """
import json, sys
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
admin = AdminClient({**json.loads(sys.stdin.read()), "reconnect.backoff.ms": 20, "log_level": 2})
md = admin.list_topics(timeout=10)
futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in md.topics], request_timeout=10)
print({r.name: f.result()["min.insync.replicas"].value for r, f in futures.items()})
"""

# The same, with the CLI framework the product is built on imported and the inventory's YAML parsed first
# (libyaml, as kafkaops reads it): the floor of a status that is a Typer command told the cluster by a file.
_CLI_FLOOR = ("import sys, typer, yaml\n"
              "yaml.load(open(sys.argv[1]).read(), Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))\n"
              + _KAFKA_FLOOR)

STATUS = "kafkaops status -o json"
FLOOR = "floor: python + confluent-kafka, metadata + configs"
CLI_FLOOR = "floor: the same, Typer imported and the inventory YAML parsed first"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (each command once a round)")
    parser.add_argument("--inventory", type=Path, default=REPO / "inventory" / "lab.yaml")
    parser.add_argument("--before", type=Path, default=None,
                        help="another kafkaops tree (a directory holding kafkaops/) timed beside this one")
    parser.add_argument("--no-java", action="store_true", help="leave out kafka-topics (a JVM: ~1 s a run)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cluster = load_inventory(args.inventory)
    bootstrap = cluster.bootstrap_servers
    import kafkaops

    here = Path(kafkaops.__file__).parent
    for tree in (here, *([args.before / "kafkaops"] if args.before else [])):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True, stdout=subprocess.DEVNULL)
    entry = Path(sys.executable).parent / "kafkaops"  # the installed console script, not a shell shim
    status = [str(entry), "-i", str(args.inventory), "status", cluster.name, "-o", "json"]
    lab_path = str(REPO / "lab")
    this = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), lab_path])}
    cases: dict[str, tuple[list[str], dict[str, str] | None, str | None]] = {
        STATUS: (status, this, None),
        FLOOR: ([sys.executable, "-c", _KAFKA_FLOOR], None, json.dumps(librdkafka_config(cluster.kafka))),
        CLI_FLOOR: ([sys.executable, "-c", _CLI_FLOOR, str(args.inventory)], None,
                    json.dumps(librdkafka_config(cluster.kafka))),
        "floor: python -c pass": ([sys.executable, "-c", "pass"], None, None),
    }
    if args.before:
        before = {**os.environ, "PYTHONPATH": os.pathsep.join([str(args.before), lab_path])}
        cases[f"{STATUS} (before: {args.before.name})"] = (status, before, None)
    if shutil.which("kcat") and cluster.kafka.security is None:
        cases["kcat -L"] = (["kcat", "-L", "-b", bootstrap], None, None)
    private = Path(tempfile.mkdtemp(prefix="kafkaops-bench-"))  # the tool's client config: 0600, removed after
    if not args.no_java:
        config = private / "client.properties"
        config.touch(mode=0o600)
        config.write_text(properties_text(java_properties(cluster.kafka)))
        cases["kafka-topics --describe --under-replicated-partitions"] = (
            ["java", "-Dlog4j.configuration=file:/dev/null", "-cp", f"{kafka_jars()}/*",
             "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap.split(",")[0], "--describe",
             "--under-replicated-partitions", "--command-config", str(config)], None, None)
    path = args.out or raw_result.default_path("status-bench")
    result: dict[str, Any] = raw_result.header("status-bench", vars(args), args.inventory)
    times: dict[str, list[float]] = {name: [] for name in cases}
    exits: dict[str, list[int]] = {name: [] for name in cases}
    try:
        for _ in range(args.runs):
            for name, (argv, env, stdin) in cases.items():
                took, code = _once(argv, env, stdin)
                times[name].append(round(took, 4))
                exits[name].append(code)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    floor = statistics.median(times[FLOOR])
    cli_floor = statistics.median(times[CLI_FLOOR])
    summary = {name: {"median_s": round(statistics.median(t), 4), "min_s": min(t), "max_s": max(t),
                      "vs_floor": round(statistics.median(t) / floor, 3),
                      "vs_cli_floor": round(statistics.median(t) / cli_floor, 3), "exits": sorted(set(exits[name]))}
               for name, t in times.items()}
    result.update({"cluster": cluster.name, "rounds": args.runs, "order": list(cases), "times": times,
                   "summary": summary, "complete": True, "finished": raw_result.now()})
    raw_result.write(path, result)
    print(f"{'command':<62} {'median':>8} {'min':>8} {'max':>8}  vs floor  vs CLI floor")
    for name, row in summary.items():
        print(f"{name:<62} {row['median_s']:8.3f} {row['min_s']:8.3f} {row['max_s']:8.3f}  {row['vs_floor']:6.2f}x"
              f"  {row['vs_cli_floor']:6.2f}x"
              + ("" if row["exits"] == [0] else f"  exits {row['exits']}"))
    print(f"(rounds={args.runs}, cores={os.cpu_count()}, load at start {result['machine']['loadavg_at_start'][0]:.2f}; "
          f"floor = {FLOOR}) -> {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
