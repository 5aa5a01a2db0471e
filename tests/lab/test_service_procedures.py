"""Service procedures end to end on the lab (issue: HTTP proxy restart and rolling scap deploys).

The CLI runs in a subprocess under HTTP load through the balancer; witnesses that do not go through
kafkaops check the outcome: the load generator's failed-request count, a conftool poller (never more
than one host depooled), each host's own ``/_info`` (revision, pid), and the deploy host's own log of
every deploy it ran (``deploy/deploy.log``: no target deployed twice).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from harness import Load, kafkaops, output, spawn
from invariants import PoolWatch, journal, only_run

from kafkaops.catalog import find_runbook
from kafkaops.engine import Runner, Target, bind_runbook
from kafkaops.engine.journal import Journal
from kafkaops.errors import Interrupted, RunFailed
from kafkaops.model import Cluster, Host
from kafkaops.systems.conftool import Conftool, read_pools
from kafkaops_lab.deploy import add_release, deploy_log
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FAST = ["--syn-window", "3s", "--log-window", "1s"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def info(host: Host) -> dict[str, Any]:
    """What the host's eventbus says about itself, asked directly (not through kafkaops)."""
    r = requests.get(f"http://{host.address}:{host.services[0].port}/_info", timeout=5)
    return {**r.json(), "http": r.status_code}


def pooled(cluster: Cluster) -> dict[str, str]:
    assert cluster.conftool_config
    by_fqdn = {h.fqdn: h.name for h in cluster.hosts}
    return {by_fqdn[s.host]: s.pooled for s in read_pools(cluster.conftool_config, cluster.hosts[0].conftool_tags)}


def deployed(rev: str) -> dict[str, int]:
    """How many completed deploys of ``rev`` the deploy host ran, per target."""
    out: dict[str, int] = {}
    for r in deploy_log():
        if r["event"] == "deployed" and r["rev"] == rev:
            out[r["target"]] = out.get(r["target"], 0) + 1
    return out


def new_release(broken: str | None = None) -> str:
    rev = f"t{uuid.uuid4().hex[:8]}"
    add_release(rev, broken=broken)
    return rev


@pytest.fixture
def svc_lab(lab_cluster: Cluster, home: Path) -> Iterator[Cluster]:
    """A lab whose hosts all run eventbus, pooled; afterwards, any run the test left is rolled back."""
    cluster = lab_cluster
    if cluster.deploy_host is None:
        pytest.skip(f"{cluster.source} has no deploy_host")
    _restore(cluster)
    yield cluster
    runs = home / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.exists() else []:
        if not Journal.open(run_dir.name, home).replay().terminal:
            kafkaops(home, cluster, "runs", "abort", run_dir.name, "--rollback", "--reason", "test cleanup")
    _restore(cluster)


def _restore(cluster: Cluster) -> None:
    assert cluster.conftool_config
    conftool = Conftool(cluster.conftool_config)
    for h in cluster.hosts:
        LabHost.named(h.name).start("eventbus")
        conftool.set_pooled(h.fqdn, dict(h.conftool_tags), "yes")


def test_rolling_deploy_and_rolling_restart_under_load_lose_no_request(svc_lab: Cluster, home: Path) -> None:
    cluster = svc_lab
    rev = new_release()
    with Load(cluster, rate=20, http_rate=10) as load, PoolWatch(cluster) as pools:
        deploy = kafkaops(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev", rev,
                          "--message", f"deploy {rev}", "--yes", "--reason", "test deploy", *FAST)
        assert deploy.returncode == 0, deploy.stdout + deploy.stderr
        pids = {h.name: info(h)["pid"] for h in cluster.hosts}
        restart = kafkaops(home, cluster, "rolling-restart-service", "eventbus", "lab", "--yes",
                           "--reason", "test restart", *FAST)
        assert restart.returncode == 0, restart.stdout + restart.stderr
    assert load.report is not None and load.report.http_sent > 100, load.report
    assert load.report.http_failed == 0, load.report.http_errors
    assert load.report.lost == 0 and load.report.duplicated == 0, load.report
    assert pools.samples > 50 and pools.max_depooled == 1
    after = {h.name: info(h) for h in cluster.hosts}
    assert {n: (i["revision"], i["http"]) for n, i in after.items()} == {h.name: (rev, 200) for h in cluster.hosts}
    assert all(after[n]["pid"] != pids[n] for n in pids), "rolling-restart-service did not restart every host"
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}
    assert deployed(rev) == {h.name: 1 for h in cluster.hosts}
    # The same deploy again: every target already serves it, so nothing is deployed, depooled or restarted.
    again = kafkaops(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev", rev,
                     "--message", f"deploy {rev} again", "--yes", "--reason", "test deploy again", *FAST)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to deploy" in again.stderr
    assert deployed(rev) == {h.name: 1 for h in cluster.hosts}
    assert {h.name: info(h)["pid"] for h in cluster.hosts} == {n: i["pid"] for n, i in after.items()}


def test_sigkill_mid_deploy_then_resume_deploys_each_target_once(svc_lab: Cluster, home: Path) -> None:
    cluster = svc_lab
    rev = new_release()
    victim = cluster.hosts[1].name
    with Load(cluster, rate=20, http_rate=10) as load, PoolWatch(cluster) as pools:
        proc = spawn(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev", rev, "--canary", "0",
                     "--message", f"deploy {rev}", "--yes", "--reason", "kill test", *FAST)
        deadline = time.monotonic() + 300
        killed = False
        while time.monotonic() < deadline and proc.poll() is None:
            if any(r["event"] == "started" and r["rev"] == rev and r["target"] == victim for r in deploy_log()):
                os.killpg(proc.pid, signal.SIGKILL)  # while the deploy host is deploying to the victim
                killed = True
                break
            time.sleep(0.05)
        proc.wait(30)
        assert killed, f"the run ended before deploying to {victim}: {output(proc)}"
        run_id = only_run(home)
        assert pooled(cluster)[victim] == "no"
        resumed = kafkaops(home, cluster, "resume", run_id)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert load.report is not None and load.report.http_failed == 0, load.report.http_errors
    assert pools.max_depooled == 1
    assert deployed(rev) == {h.name: 1 for h in cluster.hosts}, deploy_log()
    assert {h.name: info(h)["revision"] for h in cluster.hosts} == {h.name: rev for h in cluster.hosts}
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}
    records = journal(home, run_id)
    assert [r["type"] for r in records].count("resumed") == 1 and records[-1]["type"] == "finished"


def test_bad_revision_stops_after_the_canary_and_the_printed_rollback_restores(svc_lab: Cluster, home: Path) -> None:
    cluster = svc_lab
    canary, others = cluster.hosts[0], cluster.hosts[1:]
    before = {h.name: info(h) for h in cluster.hosts}
    bad = new_release(broken="fails its health check on purpose")
    result = kafkaops(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev", bad,
                      "--message", f"deploy {bad}", "--canary", "1", "--yes", "--reason", "bad deploy test",
                      "--health-timeout", "8s", *FAST)
    out = result.stdout + result.stderr
    assert result.returncode == 11, out
    run_id = only_run(home)
    steps = find_runbook("rolling-deploy", check_kinds=False).steps
    verify = 1 + [s.kind for s in steps].index("deploy.verify_revision")
    assert f"stopped at {canary.name} step {verify} (deploy.verify_revision)" in out
    assert f"`kafkaops resume {run_id}`" in out
    prev = before[canary.name]["revision"]
    assert f"labdeploy -l {canary.fqdn} --rev {prev}" in out
    # The canary is depooled and serves the bad revision; nobody else was touched.
    now = {h.name: info(h) for h in cluster.hosts}
    assert (now[canary.name]["revision"], now[canary.name]["http"]) == (bad, 503)
    assert pooled(cluster) == {canary.name: "no", **{h.name: "yes" for h in others}}
    assert all(now[h.name]["pid"] == before[h.name]["pid"] for h in others)
    assert deployed(bad) == {canary.name: 1}
    match = re.search(r"Roll back: `(kafkaops runs abort [^`]+)`", out)
    assert match, out
    argv = shlex.split(match.group(1))
    rollback = kafkaops(home, cluster, *argv[1:])
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    restored = info(canary)
    assert (restored["revision"], restored["http"]) == (prev, 200)
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}


def _in_process(cluster: Cluster, home: Path, runbook: str, hosts: list[Host], params: dict[str, Any],
                **runner: Any) -> tuple[Runner, Any, Any]:
    from kafkaops.catalog import load_plugins
    from kafkaops.environment import Environment

    load_plugins()
    services = Environment(cluster, home=home)
    bound = bind_runbook(find_runbook(runbook), cluster=cluster, targets=[Target(h.name, host=h) for h in hosts],
                         params=params)
    return Runner(home=home, handle_sigint=False, **runner), services, bound


def test_error_lines_in_the_log_after_the_restart_fail_the_scan_and_name_the_lines(svc_lab: Cluster,
                                                                                   home: Path) -> None:
    cluster = svc_lab
    host = cluster.hosts[0]

    def bad_event_after_health_check(point: str, target: str, step: Any) -> None:
        if point == "after_verified" and step.kind == "service.verify_health":
            # A client that still had the address: the service fails to process its event.
            r = requests.post(f"http://{host.address}:{host.services[0].port}/v1/events", data=b"{not json",
                              timeout=10, headers={"Content-Type": "application/json"})
            assert r.status_code == 400

    runner, services, bound = _in_process(cluster, home, "restart-service", [host],
                                          {"service": "eventbus", "syn_window": "2s", "log_window": "0s"},
                                          hook=bad_event_after_health_check)
    try:
        with pytest.raises(RunFailed) as failed:
            runner.start(bound, env=services, operator="test", reason="log scan test")
        message = str(failed.value)
        assert re.search(r"stopped at kafka100\d step \d+ \(service.scan_log\)", message), message
        assert "[Failed processing event]" in message and "invalid JSON" in message
        assert re.search(r"\[0 out of \\d\+ events were accepted\] .*0 out of 1 events were accepted",
                         message), message
        assert f"{host.name} stays depooled" in message
        assert pooled(cluster)[host.name] == "no"
        # Someone looked: resuming scans again, ignores the lines already reported, finds no new one, repools.
        result = Runner(home=home, handle_sigint=False).resume(only_run(home), env=services)
    finally:
        services.close()  # the CLI closes its environment; an in-process run's caller does
    assert result.status == "finished"
    assert pooled(cluster)[host.name] == "yes"


def test_canary_pauses_the_roll_until_resumed(svc_lab: Cluster, home: Path) -> None:
    cluster = svc_lab
    pids = {h.name: info(h)["pid"] for h in cluster.hosts}
    runner, services, bound = _in_process(cluster, home, "rolling-restart-service", list(cluster.hosts),
                                          {"service": "eventbus", "canary": [cluster.hosts[0].name],
                                           "syn_window": "2s", "log_window": "0s"})
    services.confirm = lambda question: False  # the operator says "not yet"
    try:
        with pytest.raises(Interrupted, match=f"canary {re.escape(cluster.hosts[0].name)} done"):
            runner.start(bound, env=services, operator="test", reason="canary test")
    finally:
        services.close()
    now = {h.name: info(h)["pid"] for h in cluster.hosts}
    assert now[cluster.hosts[0].name] != pids[cluster.hosts[0].name]
    assert all(now[h.name] == pids[h.name] for h in cluster.hosts[1:]), "went past the canary"
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}
    resumed = kafkaops(home, cluster, "resume", only_run(home))  # resuming is the confirmation
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert all(info(h)["pid"] != pids[h.name] for h in cluster.hosts)
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}


def test_hostile_deploy_values_reach_the_deploy_host_as_literal_text(svc_lab: Cluster, home: Path,
                                                                     tmp_path: Path) -> None:
    """A revision is validated before any command exists; a message travels as one quoted word."""
    cluster = svc_lab
    rev = new_release()
    marker = tmp_path / "pwned"
    refused = kafkaops(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev",
                       f"{rev};touch {marker}", "--message", "m", "--canary", "0", "--yes", "--reason", "hostile",
                       *FAST)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "is not a revision" in refused.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
    message = f"fix token refresh\"; touch {marker}; echo \"$(touch {marker}) `touch {marker}` ' #"
    deploy = kafkaops(home, cluster, "rolling-deploy", "lab", "--service", "eventbus", "--rev", rev,
                      "--message", message, "--canary", "0", "--yes", "--reason", "hostile message", *FAST)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert {r["message"] for r in deploy_log() if r["rev"] == rev and r["event"] == "deployed"} == {message}
    assert not marker.exists()
    assert deployed(rev) == {h.name: 1 for h in cluster.hosts}


def test_a_service_roll_whose_lock_is_taken_mid_roll_makes_no_further_change_and_resumes(
        svc_lab: Cluster, home: Path) -> None:
    """Issue 41.1: every change is fenced, not only broker stops. Right after the first host's repool
    another run takes the cluster lock; before the fence covered every kind, this roll went on to silence,
    depool, restart and repool the two other hosts and exited 0."""
    from kafkaops.engine.lock import LockInfo
    from kafkaops.errors import LockHeldError

    cluster = svc_lab
    first, *others = cluster.hosts
    pids = {h.name: info(h)["pid"] for h in cluster.hosts}

    def take_the_lock(point: str, target: str, step: Any) -> None:
        if point == "after_verified" and step.kind == "conftool.repool" and target == first.name:
            lock = services.lock
            lock.force_unlock(cluster.name)  # an operator decided the run was dead ...
            lock.acquire(LockInfo(cluster.name, "other-run", "bob@admin2", "another maintenance", time.time()))

    runner, services, bound = _in_process(cluster, home, "rolling-restart-service", list(cluster.hosts),
                                          {"service": "eventbus", "syn_window": "2s", "log_window": "0s"},
                                          hook=take_the_lock)
    try:
        with PoolWatch(cluster) as pools, pytest.raises(LockHeldError) as paused:
            runner.start(bound, env=services, operator="test", reason="fence test")
        assert paused.value.exit_code == 7
        assert "held by run other-run by bob@admin2" in str(paused.value), paused.value
        assert "paused before" in str(paused.value) and "kafkaops resume" in str(paused.value), paused.value
        assert pools.max_depooled <= 1
        # No further change: the other hosts were never depooled, silenced or restarted.
        assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}
        assert all(info(h)["pid"] == pids[h.name] for h in others), "restarted a host under another run's lock"
        run_id = only_run(home)
        silenced = {s.matchers for s in services.alertmanager.run_silences(run_id)}
        assert len(silenced) == 1, silenced  # the first host's silence only
        records = journal(home, run_id)
        assert records[-1]["type"] == "paused" and records[-1]["target"] == first.name, records[-1]
        assert not any(r["type"] == "step_applying" and r["target"] != first.name for r in records)
        # The other run is done: its lock is free, and resume takes it back and finishes the roll.
        services.lock.force_unlock(cluster.name)
    finally:
        services.close()
    resumed = kafkaops(home, cluster, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert all(info(h)["pid"] != pids[h.name] for h in cluster.hosts)
    assert pooled(cluster) == {h.name: "yes" for h in cluster.hosts}
