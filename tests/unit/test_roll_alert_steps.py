"""Issue 41, item 3: the alerts a roll causes on the *other* brokers are silenced only while its broker is
down (``roll_alerts.silence`` / ``roll_alerts.unsilence``), and nothing else is.

Kafka's under-replicated-partitions alert is raised by the leaders, labelled with themselves, so the
stopped host's own silence never covers it. The steps run here against Debian's Alertmanager itself,
started on 127.0.0.1 and a free port; alerts are posted to it as Prometheus would. What a whole reboot
does on the lab (the page without the silence, none with it) is tests/lab/test_alerts_on_lab.py's.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from kafkaops.catalog import load_plugins
from kafkaops.engine.binding import BoundStep
from kafkaops.engine.context import Projection, RunContext
from kafkaops.engine.runbook import load_runbook
from kafkaops.engine.step import Action, Noop, step_kinds
from kafkaops.environment import Environment
from kafkaops.errors import WaitTimeout
from kafkaops.inventory import load_inventory
from kafkaops.model import Cluster
from kafkaops.queries.silences import silence_bound
from kafkaops.steps.alerts import Gate, SilenceHost
from kafkaops.steps.roll_alerts import RELEASE, SilenceRoll, UnsilenceRoll, roll_key
from kafkaops.systems.alertmanager import utc

REPO = Path(__file__).resolve().parents[2]
RUN = "20261102T100405-ab12"

#: A reboot's steps around the broker's stop, as runbooks/reboot.yaml orders them.
STEPS = (
    BoundStep(1, "alerts.silence", {"margin": 900.0}),
    BoundStep(2, "metrics.gate", {"timeout": 600.0}),
    BoundStep(3, "roll_alerts.silence", {"margin": 900.0}),
    BoundStep(4, "kafka.stop_broker", {"timeout": 300.0}),
    BoundStep(5, "kafka.verify_not_leader", {"timeout": 120.0}),
    BoundStep(6, "host.reboot", {"timeout": 900.0}),
    BoundStep(7, "kafka.wait_in_sync", {"timeout": 1800.0}),
    BoundStep(8, "roll_alerts.unsilence", {"timeout": 120.0}),
    BoundStep(9, "kafka.preferred_election", {}),
    BoundStep(10, "alerts.unsilence", {"timeout": 120.0}),
    BoundStep(11, "kafka.wait_healthy", {"timeout": 1800.0}, gate=True),
)


# --- the pure parts ------------------------------------------------------------------------------------------


def _ctx(env: object, index: int, *, target: str = "kafka1001", batch: tuple[str, ...] = (),
         projected: Projection | None = None) -> RunContext:
    return RunContext(run_id=RUN, operator="alice@admin", reason="kernel update", task="T41", target=target,
                      params={}, env=env, step_index=index, steps=STEPS, batch=batch,
                      projected=projected if projected is not None else Projection())


def test_the_roll_silence_lasts_while_the_broker_is_down_plus_the_margin() -> None:
    bound, covers = silence_bound(_ctx(None, 3), 900, after=4, until=RELEASE)
    assert bound == 300 + 120 + 900 + 1800 + 120 + 900  # not the election after it, nor the host's unsilence
    assert covers == ["kafka.stop_broker 5m", "kafka.verify_not_leader 2m", "host.reboot 15m",
                      "kafka.wait_in_sync 30m", "roll_alerts.unsilence 2m"]
    assert silence_bound(_ctx(None, 3, batch=("kafka1001", "kafka1002")), 900, after=4, until=RELEASE)[0] \
        == 2 * 3240 + 900
    assert silence_bound(_ctx(None, 3), 900, after=7, until=RELEASE)[0] == 1800 + 120 + 900  # resumed in sync


def _lab(alertmanager: str = "http://127.0.0.1:9", **changes: Any) -> Cluster:
    """The lab's cluster with an open Alertmanager of this test's (the lab's own is behind basic auth)."""
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    assert cluster.monitoring is not None
    changes.setdefault("auth", None)
    return dataclasses.replace(cluster, monitoring=dataclasses.replace(cluster.monitoring, alertmanager=alertmanager,
                                                                       **changes))


@pytest.mark.parametrize(("cluster", "why"), [
    (_lab(roll_alerts=()), "no monitoring.roll_alerts for cluster lab: no alert a broker's absence raises on its "
                           "peers is silenced"),
    (_lab(alertmanager=None), "no monitoring: configured for cluster lab (no monitoring.alertmanager)"),
    (dataclasses.replace(_lab(), monitoring=None), "no monitoring: configured for cluster lab (inventory "
                                                   "monitoring: block)"),
])
def test_without_roll_alerts_both_steps_are_noops_saying_so(cluster: Cluster, why: str) -> None:
    env = Environment(cluster, dry_run=True)  # nothing listens at its Alertmanager: a no-op asks nothing
    for step, index in ((SilenceRoll({"margin": 900.0}), 3), (UnsilenceRoll({"timeout": 120.0}), 8)):
        plan = step.plan(step.observe(_ctx(env, index)))
        assert isinstance(plan, Noop) and plan.reason == why
    assert SilenceRoll({"margin": 900.0}).renew(_ctx(env, 3), 4) == f"no roll silence to renew: {why}"


def test_every_runbook_that_stops_a_broker_silences_its_roll_alerts_only_while_it_is_down() -> None:
    load_plugins()
    found = []
    for path in sorted((REPO / "runbooks").glob("*.yaml")):
        kinds = [s.kind for s in load_runbook(path).steps]
        if "kafka.stop_broker" not in kinds:
            continue
        # back in every ISR: waited for, or caught up on a new disk (a replace)
        back = next((k for k in ("kafka.wait_in_sync", "replace.catch_up") if k in kinds), None)
        if back is None:  # stopped for good (a decommission): empty first, nothing to alert on
            assert kinds.index("kafka.verify_empty") < kinds.index("kafka.stop_broker"), path.name
            assert "roll_alerts.silence" not in kinds, path.name
            continue
        found.append(path.stem)
        stop, in_sync = kinds.index("kafka.stop_broker"), kinds.index(back)
        assert kinds[stop - 1] == "roll_alerts.silence", path.name
        assert kinds[in_sync + 1] == "roll_alerts.unsilence", path.name
        assert kinds.count("roll_alerts.silence") == kinds.count("roll_alerts.unsilence") == 1, path.name
    assert len(found) >= 6, found
    kind = step_kinds()["roll_alerts.silence"]
    assert kind.compensate is not None and kind.compensate.kind == "roll_alerts.unsilence"
    assert kind.roles == ("broker",) and callable(getattr(SilenceRoll, "renew", None))


# --- against a real Alertmanager ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's Alertmanager on 127.0.0.1:<free port>, notifying no one; its base URL."""
    binary = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
    if not os.path.exists(binary):
        pytest.fail("prometheus-alertmanager not found: run scripts/install.sh", pytrace=False)
    d = tmp_path_factory.mktemp("alertmanager")
    (d / "alertmanager.yml").write_text('route: {receiver: "null"}\nreceivers: [{name: "null"}]\n')
    port = _free_port()
    log = (d / "alertmanager.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={d / 'alertmanager.yml'}", f"--storage.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"alertmanager did not start: {(d / 'alertmanager.log').read_text()[-2000:]}", pytrace=False)
        time.sleep(0.1)
    try:
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()


@pytest.fixture
def am(alertmanager: str) -> Iterator[str]:
    """The Alertmanager with no silence and no alert left by the test before."""
    yield alertmanager
    for s in requests.get(f"{alertmanager}/api/v2/silences", timeout=5).json():
        if s["status"]["state"] != "expired":
            requests.delete(f"{alertmanager}/api/v2/silence/{s['id']}", timeout=5)
    ended = [{**{k: a[k] for k in ("labels", "annotations")}, "startsAt": a["startsAt"], "endsAt": utc(time.time() - 1)}
             for a in requests.get(f"{alertmanager}/api/v2/alerts", timeout=5).json()]
    if ended:
        requests.post(f"{alertmanager}/api/v2/alerts", json=ended, timeout=5).raise_for_status()


def _fire(url: str, name: str, instance: str, *, cluster: str = "lab", ended: bool = False) -> None:
    """Post one alert as Prometheus does (``ended``: resolved now)."""
    now = time.time()
    alert = {"labels": {"alertname": name, "instance": instance, "cluster": cluster},
             "annotations": {"summary": name}, "startsAt": utc(now - 60),
             "endsAt": utc(now - 1 if ended else now + 300)}
    requests.post(f"{url}/api/v2/alerts", json=[alert], timeout=5).raise_for_status()


def _silences(url: str) -> list[dict[str, Any]]:
    return [s for s in requests.get(f"{url}/api/v2/silences", timeout=5).json() if s["status"]["state"] != "expired"]


def _apply(step: Any, ctx: RunContext) -> Action | Noop:
    plan = step.plan(step.observe(ctx))
    if isinstance(plan, Action):
        step.apply(ctx, plan)
        step.verify(ctx)
    return plan


def test_one_bounded_silence_of_exactly_the_roll_alerts_found_again_on_resume(am: str) -> None:
    env = Environment(_lab(am, roll_alerts=("KafkaUnderReplicatedPartitions", "KafkaUnderMinIsrPartitions")))
    ctx = _ctx(env, 3)
    before = time.time()
    plan = _apply(SilenceRoll({"margin": 900.0}), ctx)
    assert isinstance(plan, Action)
    (silence,) = _silences(am)
    assert sorted((m["name"], m["value"], m["isRegex"]) for m in silence["matchers"]) == [
        ("alertname", "KafkaUnderReplicatedPartitions|KafkaUnderMinIsrPartitions", True), ("cluster", "lab", False)]
    assert silence["comment"] == f"kafkaops {RUN}: kernel update (T41) [roll alerts while kafka1001 is down]"
    assert silence["createdBy"] == "alice@admin"
    ends = env.alertmanager.silences()[0].ends_at
    assert ends is not None and before + 3240 + 900 - 5 <= ends <= time.time() + 3240 + 900 + 5
    # A resumed run (a new step object, the journal silent about the apply) finds it and makes no second one.
    again = _apply(SilenceRoll({"margin": 900.0}), ctx)
    assert isinstance(again, Noop) and silence["id"] in again.reason
    # The host's own silence is another one, and each step tells its own apart.
    host = _apply(SilenceHost({"margin": 900.0}), _ctx(env, 1))
    assert isinstance(host, Action) and len(_silences(am)) == 2
    assert isinstance(SilenceRoll({"margin": 900.0}).plan(SilenceRoll({"margin": 900.0}).observe(ctx)), Noop)
    # Another broker of the same roll gets its own (the first may be back in sync before it is down).
    assert isinstance(_apply(SilenceRoll({"margin": 900.0}), _ctx(env, 3, target="kafka1002")), Action)
    assert len(_silences(am)) == 3


def test_the_gate_still_sees_every_other_alert_of_the_cluster(am: str) -> None:
    env = Environment(_lab(am))
    _fire(am, "KafkaUnderReplicatedPartitions", "kafka1002.lab.local:7800")  # a leader of kafka1001's partitions
    _fire(am, "KafkaUnderReplicatedPartitions", "kafka1003.lab.local:7800")
    _fire(am, "EventbusErrorRatio", "kafka1003.lab.local:9102")  # not caused by the roll
    _fire(am, "KafkaUnderReplicatedPartitions", "other1001:7800", cluster="other")  # another cluster's
    gate = Gate({"timeout": 600.0, "at_end": False})
    assert sorted(gate.observe(_ctx(env, 2)).data["firing"]) == [
        "EventbusErrorRatio@kafka1003.lab.local:9102", "KafkaUnderReplicatedPartitions@kafka1002.lab.local:7800",
        "KafkaUnderReplicatedPartitions@kafka1003.lab.local:7800"]
    _apply(SilenceRoll({"margin": 900.0}), _ctx(env, 3))
    assert gate.observe(_ctx(env, 2)).data["firing"] == ["EventbusErrorRatio@kafka1003.lab.local:9102"]
    others = [a for a in env.alertmanager.alerts() if a.labels.get("cluster") == "other"]
    assert [a.state for a in others] == ["active"]  # the roll's silence stops at its cluster


def test_it_ends_only_once_none_of_its_alerts_fires_under_it(am: str) -> None:
    env = Environment(_lab(am))
    _apply(SilenceRoll({"margin": 900.0}), _ctx(env, 3))
    _fire(am, "KafkaUnderReplicatedPartitions", "kafka1002.lab.local:7800")
    unsilence = UnsilenceRoll({"timeout": 1.0})
    ctx = _ctx(env, 8)
    plan = unsilence.plan(unsilence.observe(ctx))
    assert isinstance(plan, Action)
    with pytest.raises(WaitTimeout, match=r"KafkaUnderReplicatedPartitions@kafka1002\.lab\.local:7800 still fire"):
        unsilence.apply(ctx, plan)
    assert len(_silences(am)) == 1  # ending it now would page: it stays, bounded
    _fire(am, "KafkaUnderReplicatedPartitions", "kafka1002.lab.local:7800", ended=True)  # back in sync
    assert isinstance(_apply(UnsilenceRoll({"timeout": 10.0}), ctx), Action)
    assert _silences(am) == []
    assert isinstance(_apply(UnsilenceRoll({"timeout": 10.0}), ctx), Noop)  # nothing left: resumed, a no-op


def test_renew_extends_a_silence_that_would_end_too_soon_and_remakes_a_lost_one(am: str) -> None:
    env = Environment(_lab(am))
    ctx = _ctx(env, 3)
    step = SilenceRoll({"margin": 900.0})
    _apply(step, ctx)
    (first,) = _silences(am)
    time.sleep(1.1)
    for at in (4, 7):  # right before the stop (the same steps, seconds later), resumed at the wait in sync
        said = step.renew(ctx, at)
        assert said.startswith(f"kafka1001: roll silence {first['id']} of this run lasts until"), said
    assert [s["id"] for s in _silences(am)] == [first["id"]]
    # It was made hours ago (a paused run): it ends in a minute, sooner than the steps it still covers.
    env.alertmanager.expire_silence(first["id"])
    now = time.time()
    short = env.alertmanager.create_silence(env.alertmanager.silences()[0].matchers, starts_at=now, ends_at=now + 60,
                                            created_by="alice@admin", comment=first["comment"])
    said = step.renew(ctx, 4)
    (renewed,) = _silences(am)
    assert renewed["id"] != short and said.startswith(f"kafka1001: roll silence {short} of this run ended at"), said
    assert renewed["comment"] == first["comment"]
    ends = env.alertmanager.silences()
    assert max(s.ends_at or 0 for s in ends) >= now + 3240 + 900 - 5
    # Gone altogether (expired by hand): made again, so the broker is not stopped with its peers unsilenced.
    env.alertmanager.expire_silence(renewed["id"])
    said = step.renew(ctx, 4)
    assert said.startswith("kafka1001: no roll silence of this run left"), said
    assert len(_silences(am)) == 1
    # Past its release step there is nothing to renew (the runner stops asking; a stray call changes nothing).
    env.alertmanager.expire_silence(_silences(am)[0]["id"])
    assert "nothing to renew" in step.renew(ctx, 9) and _silences(am) == []


def test_a_dry_run_plans_the_end_of_the_silence_it_plans(am: str) -> None:
    env = Environment(_lab(am), dry_run=True)
    step = UnsilenceRoll({"timeout": 120.0})
    assert isinstance(step.plan(step.observe(_ctx(env, 8))), Noop)  # no silence, none planned
    projected = Projection()
    projected.set(roll_key("kafka1001"), "planned", "kafka1001 step 3 (roll_alerts.silence)")
    plan = step.plan(step.observe(_ctx(env, 8, projected=projected)))
    assert isinstance(plan, Action) and plan.description.startswith("end this run's roll silence for kafka1001")
