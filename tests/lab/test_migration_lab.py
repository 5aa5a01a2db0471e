"""Issue 33's lab: a ZooKeeper cluster that really can be migrated to KRaft, by Kafka's own guide.

The migration lab (``lab up --mode migration``) is a Kafka 3.9 ZooKeeper-mode cluster with three KRaft
controller hosts prepared: sshd up, configured for the migration, storage not formatted, Kafka not
running — so nothing pages for them and nothing can use them by accident.

The long scenario walks Kafka's documented migration with the lab's own controls (what Puppet and a
runbook would do on real hosts), under continuous acks=all load: provision the controllers (storage
formatted with the ZooKeeper cluster's id, started: a quorum), roll the brokers into migration mode (the
quorum copies the metadata: ``/migration`` gets its offset, ``/controller`` a KRaft controller), roll them
into KRaft brokers, finalize (the controllers without ZooKeeper), stop ZooKeeper. 0 acked messages lost or
duplicated; the topics and their replicas the same before and after. It times each phase.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from harness import Load, pristine_migration_lab

from kafkaops.facts.quorum import parse_status
from kafkaops.model import Cluster
from kafkaops.systems.kafka import KafkaAdmin
from kafkaops.systems.zookeeper import ZooKeeper
from kafkaops_lab.host import LabHost
from kafkaops_lab.spec import LabSpec

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _quorum_leader(spec: LabSpec, cluster: Cluster) -> int | None:
    """The quorum's leader by Kafka's own tool, asked of every controller as kafkaops (SCRAM, a 0600
    ``--command-config`` removed after); None without an answer."""
    import tempfile

    from kafkaops.systems.kafka_auth import java_properties, properties_text

    first = LabHost(spec, spec.controllers[0])
    with tempfile.TemporaryDirectory() as private:
        config = Path(private) / "client.properties"
        config.write_text(properties_text(java_properties(cluster.kafka)))
        done = subprocess.run([str(first.dirs.bin / "kafka-metadata-quorum"), "--bootstrap-controller",
                               ",".join(f"{c.address}:{c.kafka_port}" for c in spec.controllers),
                               "--command-config", str(config), "describe", "--status"],
                              capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return None
    leader = parse_status(done.stdout).leader_id
    return leader if leader is not None and leader >= 0 else None


def _wait(what: str, probe: object, timeout: float = 180) -> float:
    """Seconds until ``probe()`` is true; fails naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while not probe():  # type: ignore[operator]
        assert time.monotonic() - started < timeout, f"not within {timeout:.0f}s: {what}"
        time.sleep(1)
    return time.monotonic() - started


def _whole(cluster: Cluster) -> bool:
    try:
        snap = KafkaAdmin(cluster.kafka, timeout=5).snapshot(with_configs=False)
    except Exception:  # a broker restarting: ask again
        return False
    return bool(snap.partitions) and all(p.leader is not None and len(p.isr) == len(p.replicas)
                                         for p in snap.partitions)


def _layout(cluster: Cluster) -> dict[tuple[str, int], tuple[int, ...]]:
    snap = KafkaAdmin(cluster.kafka, timeout=10).snapshot(with_configs=False)
    return {(p.topic, p.partition): tuple(p.replicas) for p in snap.partitions}


def test_the_migration_lab_is_a_zookeeper_cluster_with_its_controllers_prepared(migration: Cluster) -> None:
    from kafkaops_lab import lab

    spec = pristine_migration_lab(migration)
    rows = {c.name: c for c in lab.status(Path(spec.lab_dir))}
    assert rows["zookeeper"].healthy
    for c in spec.controllers:
        row = rows[f"{c.name}/kafka"]
        assert row.pid is None and row.healthy and "not provisioned" in row.detail, row
        assert rows[f"{c.name}/sshd"].healthy  # reachable: provisioning it is the migration's first change
        assert LabHost(spec, c).phase() == "migration"
    for b in spec.brokers:
        assert rows[f"{b.name}/kafka"].healthy and LabHost(spec, b).phase() == "zk"
    with ZooKeeper(spec.zk_connect) as zk:
        assert zk.cluster_id() and zk.migration_record() is None
        record = zk.controller_record()
        assert record is not None and int(record["brokerid"]) in {b.broker_id for b in spec.brokers}
        assert record.get("kraftControllerEpoch", -1) == -1  # a 3.9 broker's controllership says -1
    assert _whole(migration)


@pytest.mark.long
def test_kafkas_documented_migration_walks_through_under_load(migration: Cluster) -> None:
    spec = pristine_migration_lab(migration)
    controllers = [LabHost(spec, c) for c in spec.controllers]
    brokers = [LabHost(spec, b) for b in spec.brokers]
    before = _layout(migration)
    timings: dict[str, float] = {}

    def roll(hosts: list[LabHost], phase: str) -> None:
        for h in hosts:
            h.stop("kafka")
            h.configure(phase)
            h.start("kafka")
            if h.host.role == "broker":
                _wait(f"{h.host.name} back in every ISR", lambda: _whole(migration))
            else:
                _wait(f"the quorum with {h.host.name}", lambda: _quorum_leader(spec, migration) is not None)

    with Load(migration, rate=100, http_rate=4) as load:
        t = time.monotonic()
        with ZooKeeper(spec.zk_connect) as zk:
            cluster_id = zk.cluster_id()
        assert cluster_id
        for h in controllers:
            assert h.format_storage(cluster_id) is True
            h.start("kafka", wait=False)
        _wait("a KRaft quorum", lambda: _quorum_leader(spec, migration) is not None)
        timings["provision controllers"] = time.monotonic() - t

        t = time.monotonic()
        roll(brokers, "migration")

        def copied() -> bool:
            with ZooKeeper(spec.zk_connect) as zk:
                record, ctrl = zk.migration_record(), zk.controller_record()
            return bool(record and record.get("kraft_metadata_offset", -1) >= 0
                        and ctrl and ctrl.get("kraftControllerEpoch", -1) >= 0)
        _wait("the metadata copied (/migration) and a KRaft controller in charge (/controller)", copied)
        timings["brokers into migration mode, metadata copied"] = time.monotonic() - t

        t = time.monotonic()
        roll(brokers, "kraft")
        timings["brokers into KRaft mode"] = time.monotonic() - t

        t = time.monotonic()
        roll(controllers, "kraft")
        timings["finalize: controllers without ZooKeeper"] = time.monotonic() - t

        from kafkaops_lab import procs

        zk_pid = procs.live_pid(Path(spec.lab_dir) / "run" / "zookeeper.pid")
        assert zk_pid is not None
        import os
        import signal

        os.kill(zk_pid, signal.SIGTERM)
        _wait("ZooKeeper stopped", lambda: procs.live_pid(Path(spec.lab_dir) / "run" / "zookeeper.pid") is None, 30)
        time.sleep(10)  # the cluster goes on without it
        assert _whole(migration)
    report = load.report
    print("phases: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))
    print(f"load: {report}")
    assert report is not None and report.produced_acked > 1000
    assert report.lost == 0 and report.duplicated == 0, report
    after = _layout(migration)
    assert {k: after.get(k) for k in before} == before  # every partition, on the same replicas
    # ... and nothing else but the load's own consumer group's offsets topic, created while it ran
    assert {t for t, _ in after} - {t for t, _ in before} <= {"__consumer_offsets"}, sorted(after)
