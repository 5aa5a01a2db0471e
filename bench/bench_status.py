"""`kafkaops status lab` latency vs the Kafka CLI and kcat on the same cluster.

Targets (issue: broker maintenance): median <= 0.5 s and >= 5x faster than
`kafka-topics --describe --under-replicated-partitions`; `kcat -L` reported beside it.

Run by hand with the lab up:  python bench/bench_status.py [RUNS]

Two floors are timed beside it, to show where the time goes: the interpreter alone (`python -c pass`,
site hooks included) and a bare script that only imports confluent-kafka and makes status's two Kafka
requests (metadata, then the topics' configs). The package is byte-compiled first, as a regular
install is.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kafkaops.inventory import load_inventory
from kafkaops_lab.dirs import kafka_jars


def timed(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out.append(time.perf_counter() - t)
    return out


# Only what `status` asks Kafka: the floor any Python status command built on confluent-kafka pays.
_KAFKA_FLOOR = """
import sys
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
admin = AdminClient({"bootstrap.servers": sys.argv[1], "reconnect.backoff.ms": 20, "log_level": 2})
md = admin.list_topics(timeout=10)
futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in md.topics], request_timeout=10)
print({r.name: f.result()["min.insync.replicas"].value for r, f in futures.items()})
"""


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    cluster = load_inventory(Path(__file__).resolve().parents[1] / "inventory" / "lab.yaml")
    bootstrap = cluster.bootstrap_servers
    import kafkaops

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(kafkaops.__file__).parent)],
                   check=True, stdout=subprocess.DEVNULL)
    entry = Path(sys.executable).parent / "kafkaops"  # the installed console script, not a shell shim
    cases = {
        "kafkaops status lab -o json": [str(entry), "-i", cluster.source, "status", "lab", "-o", "json"],
        "kafka-topics --describe --under-replicated-partitions": [
            "java", "-Dlog4j.configuration=file:/dev/null", "-cp", f"{kafka_jars()}/*",
            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap.split(",")[0], "--describe",
            "--under-replicated-partitions"],
        "kcat -L": ["kcat", "-L", "-b", bootstrap],
        "floor: python -c pass": [sys.executable, "-c", "pass"],
        "floor: python + confluent-kafka, metadata + configs": [sys.executable, "-c", _KAFKA_FLOOR, bootstrap],
    }
    if not shutil.which("kcat"):
        del cases["kcat -L"]
    results = {name: timed(argv, runs) for name, argv in cases.items()}
    base = statistics.median(results["kafkaops status lab -o json"])
    print(f"{'command':<58} {'median':>8} {'min':>8} {'max':>8}  vs status")
    for name, times in results.items():
        med = statistics.median(times)
        print(f"{name:<58} {med:8.3f} {min(times):8.3f} {max(times):8.3f}  {med / base:6.1f}x")
    print(f"(runs={runs}, cores={os.cpu_count()}; status does more: configs for min ISR, pools, leaders per DC)")


if __name__ == "__main__":
    main()
