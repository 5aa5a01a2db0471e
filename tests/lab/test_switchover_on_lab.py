"""Issue 17 on the two-site lab: switchover of eventbus between main-eqiad and main-codfw, MirrorMaker 2
between them, consumer offsets translated by timestamp.

A producer posts numbered events through the eventbus of whichever site the discovery record names and a
consumer group reads both sites' streams where the record points (:mod:`kafkaops_lab.switch_load`). After
each switchover: every id produced was consumed (0 lost), the ids read twice are within the bound the
run's own translation journaled, and the consumer read none of the mirror copies' history at the target
(a translation to the wrong place would: the copies start with 25 records of their own per partition).

Each test switches from whichever site is active, so they run in any order.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import kafkaops, output, spawn
from invariants import ArgvWatch, holding_secrets, journal, kill_after_step, live_journal

from kafkaops.model import Cluster, KafkaEndpoint
from kafkaops.systems.kafka_auth import librdkafka_config
from kafkaops_lab.dirs import lab_dir
from kafkaops_lab.switch_load import SwitchLoad

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _records(sites: Cluster) -> dict[str, bool]:
    from kafkaops.systems.conftool import read_discovery

    assert sites.conftool_config is not None
    return read_discovery(sites.conftool_config, "eventbus")


def _active(sites: Cluster) -> tuple[str, str]:
    pooled = [dc for dc, p in _records(sites).items() if p]
    assert len(pooled) == 1, f"eventbus active in {pooled}"
    other = next(dc for dc in sites.sites if dc != pooled[0])
    return pooled[0], other


def _translated_bound(home: Path, run_id: str) -> int:
    """The duplicates the run's translation promised at most (journaled with its action)."""
    applied = [r for r in journal(home, run_id)
               if r.get("type") == "step_applying" and r.get("kind") == "offsets.translate"]
    assert applied, "the run did not translate any offset"
    return sum(g["duplicates"] for g in applied[-1]["action"]["data"]["groups"])


def _check(sites: Cluster, load: SwitchLoad, src: str, dst: str, bound: int) -> dict[str, Any]:
    report = load.report()
    assert not load.errors, load.errors
    assert report.produced > 100, report.to_dict()
    assert report.lost == [], f"{len(report.lost)} id(s) produced were never consumed: {report.lost[:10]}"
    # The bound counts every record of the margin before each position, an earlier load's events included.
    again = report.duplicates + report.earlier.get(dst, 0)
    assert again <= bound, f"{again} record(s) read again at {dst}, over the journaled bound {bound}"
    assert report.history.get(dst, 0) == 0, f"read the mirror copies' history at {dst}: wrong offsets"
    assert report.sites[-2:] == [src, dst], report.sites
    assert _active(sites) == (dst, src)
    return {**report.to_dict(), "bound": bound}


def test_status_shows_the_active_site_and_mirrormaker_lag(sites: Cluster, tmp_path: Path) -> None:
    src, _ = _active(sites)
    r = kafkaops(tmp_path, sites, "status", "lab-sites", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["services"]["eventbus"]["active"] == [src]
    assert set(data["mirror"]) == {"eqiad->codfw", "codfw->eqiad"}
    assert all(isinstance(m["lag"], int) and m["partitions"] > 0 for m in data["mirror"].values()), data["mirror"]
    assert set(data["clusters"]) == {"eqiad", "codfw"} and all(c["healthy"] for c in data["clusters"].values())


def test_switchover_planned_then_applied_under_load_loses_nothing(sites: Cluster, tmp_path: Path) -> None:
    """The change-review path: a saved plan, applied while the consumer's positions and MirrorMaker's lag
    move (the plan must not go stale on them), then the same invariants."""
    src, dst = _active(sites)
    plan = tmp_path / "switchover.json"
    passwords = _passwords(sites)
    with ArgvWatch(passwords) as argv, SwitchLoad(sites) as load:
        time.sleep(6)
        r = kafkaops(tmp_path, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--dry-run",
                     "--save-plan", str(plan), "-r", "lab test", "-o", "markdown")
        assert r.returncode == 0, r.stderr[-3000:]
        assert "zero loss" in r.stdout and "duplicates: at most" in r.stdout, r.stdout[-3000:]
        (tmp_path / "plan.md").write_text(r.stdout + r.stderr)
        time.sleep(5)  # positions and lags move under the load meanwhile
        r = kafkaops(tmp_path, sites, "apply", str(plan), timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        (tmp_path / "apply.out").write_text(r.stdout + r.stderr)
        time.sleep(6)
        load.finish()
    run_id = next(line.split()[1] for line in r.stderr.splitlines() + r.stdout.splitlines()
                  if line.startswith("run ") and "finished" in line)
    report = _check(sites, load, src, dst, _translated_bound(tmp_path, run_id))
    print(f"switchover {src}->{dst}: {report}")
    # Secured sites (SASL_SSL, SCRAM, ACLs): no password of either site in the plan, the journal, the audit,
    # the output, the labs' logs (MirrorMaker's too), nor on any process's command line during the run.
    assert argv.samples > 10 and not argv.seen, f"a password was on the command line of process(es) {argv.seen}"
    artifacts = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "journal.jsonl" for p in artifacts) and plan in artifacts, artifacts
    logs = [p for site in (sites, *sites.sites.values()) for p in lab_dir(site.name).rglob("*.log")]
    assert len(logs) >= 10, logs
    holding = holding_secrets([*artifacts, *logs], passwords)
    assert not holding, f"a password is in {holding}"


def _passwords(sites: Cluster) -> list[bytes]:
    """Every site's lab passwords (kafkaops', the brokers', the eventbus', the load's)."""
    found = [p.read_text().strip().encode() for site in sites.sites.values()
             for p in sorted((lab_dir(site.name) / "secrets").glob("*.password"))]
    assert len(found) >= 8, "the sites are not secured"
    return found


def test_each_site_refuses_a_plaintext_client(sites: Cluster) -> None:
    """The two-site lab is secured as the default lab is: each site's brokers refuse a plaintext client
    and answer the inventory's SASL_SSL one."""
    from kafkaops.errors import UnreachableError
    from kafkaops.systems.kafka import KafkaAdmin

    for site in sites.sites.values():
        assert site.kafka_security.protocol == "SASL_SSL"
        with pytest.raises(UnreachableError):
            KafkaAdmin(KafkaEndpoint(site.bootstrap_servers, cluster=site.name), timeout=3, attempts=1).metadata()
        assert KafkaAdmin.look(site).metadata().brokers


def _lock_holders(sites: Cluster) -> dict[str, str | None]:
    """Which run holds the lock of the sites' inventory and of each site's cluster (the one rolls take)."""
    from kafkaops.environment import Environment

    out: dict[str, str | None] = {}
    for cluster in (sites, *sites.sites.values()):
        env = Environment(cluster)
        try:
            holder = env.lock.holder(cluster.name)
        finally:
            env.close()
        out[cluster.name] = holder.run_id if holder else None
    return out


def _killed_after_depool(home: Path, sites: Cluster, src: str, dst: str) -> tuple[str, subprocess.Popen[str]]:
    """A switchover SIGKILLed right after its depool: no site active, the run's lock still held."""
    proc = spawn(home, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--yes", "-r", "lab test",
                 "-o", "plain")
    return kill_after_step(home, proc, "discovery.depool", "lab-sites"), proc


# A long scenario (bench/long_scenarios.py): the suite applies a switchover under load and rolls one back.
@pytest.mark.long
def test_switchover_killed_mid_way_and_resumed_loses_nothing(sites: Cluster, tmp_path: Path) -> None:
    src, dst = _active(sites)
    with SwitchLoad(sites) as load:
        time.sleep(6)
        run_id, proc = _killed_after_depool(tmp_path, sites, src, dst)
        assert not _records(sites)[src], "the source is still pooled after its depool step"
        time.sleep(3)  # killed with no site active: producers wait, the consumer has left the group
        assert not any(_records(sites).values())
        # Killed, the run still holds every site's lock: a roll of either site is refused, naming it.
        assert set(_lock_holders(sites).values()) == {run_id}, _lock_holders(sites)
        site = sites.site(dst)
        roll = kafkaops(tmp_path, site, "rolling-restart", site.name, "--dry-run")
        assert roll.returncode == 7 and f"cluster {site.name} is locked by run {run_id}" in roll.stderr, roll.stderr
        r = kafkaops(tmp_path, sites, "resume", run_id, timeout=600)
        assert r.returncode == 0, output(proc)[-2000:] + r.stdout[-3000:] + r.stderr[-3000:]
        assert set(_lock_holders(sites).values()) == {None}, _lock_holders(sites)
        time.sleep(6)
        load.finish()
    report = _check(sites, load, src, dst, _translated_bound(tmp_path, run_id))
    assert report["waited_s"] > 3, "the producer never saw the gap with no active site"
    print(f"switchover {src}->{dst}, killed after the depool and resumed: {report}")


def test_abort_with_rollback_switches_back(sites: Cluster, tmp_path: Path) -> None:
    src, dst = _active(sites)
    with SwitchLoad(sites) as load:
        time.sleep(6)
        run_id, _ = _killed_after_depool(tmp_path, sites, src, dst)
        r = kafkaops(tmp_path, sites, "runs", "abort", run_id, "--rollback", "--reason", "lab test: switch back")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert _active(sites) == (src, dst), "the rollback did not make the source the active site again"
        time.sleep(6)
        load.finish()
    report = load.report()
    assert not load.errors, load.errors
    assert report.lost == [], f"{len(report.lost)} id(s) lost across the rolled-back switchover"
    # The consumer never read anywhere but the source (it may have left it during the gap, or not even
    # seen the gap when the rollback came within its 0.5 s TTL): back there it resumes from its own commits.
    assert report.duplicates == 0, report.to_dict()
    assert set(report.sites) == {src}, report.sites


def test_translate_refuses_a_group_active_on_the_target(sites: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    from kafkaops.systems.groups import ConsumerGroups

    src, dst = _active(sites)
    target = sites.site(dst)
    group = "lab-translate-refusal"
    consumer = Consumer({**librdkafka_config(target.kafka), "group.id": group,
                         "auto.offset.reset": "latest", "log_level": 2})
    consumer.subscribe([f"{dst}.test.event"])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the test consumer never joined its group"
        before = ConsumerGroups(target.kafka).committed(group)
        r = kafkaops(tmp_path, sites, "offsets", "translate", group, "--from", sites.site(src).name,
                     "--to", target.name, "--yes", "-r", "lab test")
        after = ConsumerGroups(target.kafka).committed(group)
    finally:
        consumer.close()
    assert r.returncode == 6, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"refusing to translate {group}: it is active on {dst}" in r.stderr, r.stderr
    assert after == before


def test_translate_refuses_a_partition_the_target_topic_does_not_have(sites: Cluster, tmp_path: Path) -> None:
    """A topic with 3 partitions on the source and 1 on the target (not MirrorMaker's doing: a name outside
    its regex): the group's position in partition 2 has nowhere to go, so the translation is refused."""
    from kafkaops.systems.groups import ConsumerGroups
    from kafkaops_lab.kafka import LabKafka as KafkaAdmin
    from kafkaops_lab.kafka import TopicSpec
    from kafkaops_lab.security import admin_endpoint

    src, dst = _active(sites)
    source, target = sites.site(src), sites.site(dst)
    topic, group = "lab.narrow", "lab-translate-narrow"
    KafkaAdmin(admin_endpoint(source)).create_topics([TopicSpec(topic, 3, 1)])
    KafkaAdmin(admin_endpoint(target)).create_topics([TopicSpec(topic, 1, 1)])
    ConsumerGroups(source.kafka).set_offsets(group, {(topic, 0): 0, (topic, 2): 0})
    before = ConsumerGroups(target.kafka).committed(group)
    r = kafkaops(tmp_path, sites, "offsets", "translate", group, "--from", src, "--to", dst, "--topics",
                 r"lab\.narrow", "--yes", "-r", "lab test")
    assert r.returncode == 6, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"refusing to translate {group}: {target.name} has no partition {topic}-2 to translate" in r.stderr, r.stderr
    assert ConsumerGroups(target.kafka).committed(group) == before


def test_switchover_refuses_a_site_under_maintenance(sites: Cluster, tmp_path: Path) -> None:
    """A run holding the target site's lock (a roll, a reboot): the switchover refuses, naming it."""
    from kafkaops.engine.lock import LockInfo
    from kafkaops.environment import Environment

    src, dst = _active(sites)
    target = Environment(sites.site(dst))
    held = LockInfo(cluster=target.cluster.name, run_id="20261125-000000-rolling-reboot-beef", operator="alice@cumin",
                    reason="kernel upgrade", started_at=time.time())
    target.lock.acquire(held)
    try:
        planned = kafkaops(tmp_path, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--dry-run")
        applied = kafkaops(tmp_path, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--yes",
                           "-r", "lab test")
        holders = _lock_holders(sites)
    finally:
        target.lock.release(target.cluster.name, held.run_id)
        target.close()
    assert planned.returncode == 6, planned.stdout[-2000:] + planned.stderr[-2000:]
    assert (f"site {dst} is not healthy: run {held.run_id} (alice@cumin: kernel upgrade) holds its lock"
            in planned.stderr)
    # Applied, it is refused the same way, before it takes any lock or changes anything. (Were the site
    # locked between its plan and its start, taking the sites' locks would refuse it, exit 7, giving back
    # what it took: tests/unit/engine/test_site_locks.py.)
    assert applied.returncode == 6, applied.stdout[-2000:] + applied.stderr[-2000:]
    assert holders == {sites.name: None, sites.site(src).name: None, target.cluster.name: held.run_id}, holders
    assert _active(sites) == (src, dst)


class PinnedClient:
    """A client whose connections all land on one host of a site, opened from the site's VIP as the lab's
    balancer opens the connections it routes there: what a realserver behind an LVS in direct routing sees of
    a client that source hashing pins to it. It keeps opening a new connection (a health-path GET) every
    0.2 s until the ``with`` block ends."""

    def __init__(self, vip: str, address: str, port: int, path: str) -> None:
        self.vip, self.address, self.port, self.path = vip, address, port, path
        self.connections = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            conn = http.client.HTTPConnection(self.address, self.port, timeout=5, source_address=(self.vip, 0))
            try:
                conn.request("GET", self.path)
                conn.getresponse().read()
                self.connections += 1
            except OSError as exc:
                self.errors.append(str(exc))
            finally:
                conn.close()

    def __enter__(self) -> PinnedClient:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_the_syn_gate_watches_every_host_of_the_source_site(sites: Cluster, tmp_path: Path) -> None:
    """Issue 28: the gate captured on the site's first host only. Each host's capture sees only its own share
    of the VIP's connections (as each realserver behind LVS-DR does), so a client that keeps connecting to
    the *second* host went unseen and the cut was declared clean. The gate must hold, name that host, and
    stop safely (Ctrl-C pauses it, resumable; the rollback makes the source active again)."""
    src, dst = _active(sites)
    site = sites.site(src)
    service = site.hosts[0].services[0]
    assert service.vip and service.health_path and len(site.hosts) >= 2
    busy = site.hosts[1]
    window = 2

    plan = kafkaops(tmp_path, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--dry-run",
                    "-o", "plain")
    assert plan.returncode == 0, plan.stderr[-3000:]
    for host in site.hosts:  # the plan says where the gate captures: on every host behind the VIP
        assert f"on {host.name}: timeout 300 tcpdump" in plan.stdout and f"dst host {host.address} " in plan.stdout, \
            plan.stdout[-3000:]

    with PinnedClient(service.vip, busy.address, service.port, service.health_path) as client:
        proc = spawn(tmp_path, sites, "switchover", "eventbus", "--from", src, "--to", dst, "--syn-window",
                     f"{window}s", "--yes", "-r", "lab test: a client pinned to one host", "-o", "plain")
        held_since: float | None = None
        passed = False
        deadline = time.monotonic() + 300
        try:
            # Until the gate passes (the bug), or has held for several windows after naming the busy host.
            while proc.poll() is None and time.monotonic() < deadline:
                passed = any(r.get("type") == "step_verified" and r.get("kind") == "traffic.wait_zero_syns_at_site"
                             for r in live_journal(tmp_path))
                if passed:
                    break
                if held_since is None and f"{busy.name}: new SYN to {service.vip}:{service.port}" in output(proc):
                    held_since = time.monotonic()
                if held_since is not None and time.monotonic() - held_since > 5 * window:
                    break
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGINT)  # Ctrl-C: the run pauses at its next safe point
            proc.wait(120)
        connections = client.connections
    run_id = str(live_journal(tmp_path)[0]["run_id"])
    paused = any(r.get("type") == "paused" for r in journal(tmp_path, run_id))
    if paused:  # put the service back where it was, whatever the assertions below say
        undo = kafkaops(tmp_path, sites, "runs", "abort", run_id, "--rollback", "--reason", "lab test: switch back")
        assert undo.returncode == 0, undo.stdout[-3000:] + undo.stderr[-3000:]
    out = output(proc)
    assert not client.errors and connections > 5 * window, (connections, client.errors[:3])
    assert not passed, f"the gate passed while {busy.name} still received new SYNs to {service.vip}: {out[-3000:]}"
    assert held_since is not None, f"the gate never named {busy.name}: {out[-3000:]}"
    assert proc.returncode == 130 and paused, out[-3000:]
    assert f"{busy.name} still received SYNs in the last {window}s" in out, out[-3000:]
    assert _active(sites) == (src, dst), "the rollback did not make the source the active site again"
    assert set(_lock_holders(sites).values()) == {None}, _lock_holders(sites)
