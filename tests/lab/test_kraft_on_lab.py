"""Issue 16 on the KRaft lab (Kafka 4.3.1: three controller nodes, three brokers, no ZooKeeper).

* ``status`` shows the quorum as ``kafka-metadata-quorum describe --status`` does.
* A voter paused with SIGSTOP makes ``rolling-restart --role controllers`` refuse, naming it, before
  anything is stopped.
* ``rolling-restart --role all`` under continuous acks=all load, SIGKILLed right after the second
  controller's stop and resumed: 0 acked messages lost or duplicated, every node stopped exactly once
  (counted from the lab hosts' own logs), controllers before brokers, the active controller last among
  them, and the quorum never without a leader for longer than an election (polled with Kafka's own tool
  all along). The lock is etcd's: there is no ZooKeeper to hold it.
* Issue 28.4: a controllers roll killed right after a controller's quorum gate passed, resumed while
  another voter lags, refuses that controller's stop (the stop asks the quorum itself: a resume never
  re-runs a verified gate) and stops nothing; resumed once the voter caught up, it finishes.
* Issue 46 (KIP-853, the lab's quorum is dynamic): ``controllers add`` a fourth controller (``lab host add
  --controller``) → 4 voters, ``controllers remove`` it → 3 voters and stopped, under acks=all load, Kafka's
  own tool polled all along (a leader in every answer, one epoch, never fewer than 3 voters); removing a
  controller when 3 voters remain is refused (exit 6, one line), nothing changed.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from harness import Load, kafkaops, output, spawn
from invariants import kill_after_step, live_journal

from kafkaops.facts.quorum import parse_status
from kafkaops.model import Cluster
from kafkaops_lab.host import LabHost

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _tool(kraft: Cluster) -> list[str]:
    """Kafka's own kafka-metadata-quorum (a lab host's copy), bootstrapped on every controller node."""
    from kafkaops_lab.dirs import host_dirs, lab_dir

    first = kraft.controllers[0].name
    return [str(host_dirs(first, lab_dir(kraft.name)).bin / "kafka-metadata-quorum"), "--bootstrap-controller",
            ",".join(f"{c.address}:9093" for c in kraft.controllers)]


def _status(kraft: Cluster) -> dict[str, object]:
    done = subprocess.run([*_tool(kraft), "describe", "--status"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    s = parse_status(done.stdout)
    return {"leader": s.leader_id, "epoch": s.leader_epoch, "voters": sorted(s.voters)}


def _hosts(kraft: Cluster) -> dict[str, LabHost]:
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.spec import LabSpec

    spec = LabSpec.load(lab_dir(kraft.name))
    return {h.name: LabHost.named(h.name, spec) for h in (*kraft.controllers, *kraft.hosts)}


def test_status_shows_the_quorum_as_kafkas_own_tool_does(kraft: Cluster, home: Path) -> None:
    shown = kafkaops(home, kraft, "status", kraft.name, "-o", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    quorum = json.loads(shown.stdout)["quorum"]
    tool = _status(kraft)
    assert quorum["leader"] == tool["leader"] and quorum["epoch"] == tool["epoch"], (quorum, tool)
    assert sorted(v["node_id"] for v in quorum["voters"]) == tool["voters"]
    assert all(v["caught_up"] for v in quorum["voters"]), quorum
    assert sorted(o["node_id"] for o in quorum["observers"]) == sorted(h.broker_id for h in kraft.hosts)
    # No broker is "the controller" on KRaft: the quorum leader is.
    assert json.loads(shown.stdout)["controller"] == tool["leader"]


def test_a_lagging_voter_makes_the_controller_roll_refuse_naming_it(kraft: Cluster, home: Path) -> None:
    hosts = _hosts(kraft)
    leader = _status(kraft)["leader"]
    paused = next(c for c in kraft.controllers if c.broker_id != leader)
    stops = {n: len(h.events("kafka-stop")) for n, h in hosts.items()}
    pid = hosts[paused.name].pid("kafka")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(7)  # longer than the gate's 5 s: the leader's record of its last catch-up ages
        shown = kafkaops(home, kraft, "status", kraft.name, "-o", "json")
        assert shown.returncode == 9, shown.stdout  # a voter behind: not healthy
        refused = kafkaops(home, kraft, "rolling-restart", kraft.name, "--role", "controllers", "--yes",
                           "--no-scan", "--reason", "issue 16: must refuse")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert refused.returncode == 6, refused.stdout[-2000:] + refused.stderr
    said = refused.stdout + refused.stderr
    assert f"voter {paused.broker_id}:" in said and "lagging or down" in said, said[-2000:]
    assert {n: len(h.events("kafka-stop")) for n, h in hosts.items()} == stops


class QuorumWatch:
    """Kafka's own tool, run in a loop for the block: when the quorum had a leader, each epoch seen, and the
    voters of each answer."""

    def __init__(self, kraft: Cluster) -> None:
        self.argv = [*_tool(kraft), "describe", "--status"]
        self.samples: list[tuple[float, int | None, int | None]] = []
        self.voters: list[tuple[int, ...]] = []
        self.leaderless = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            done = subprocess.run(self.argv, capture_output=True, text=True, timeout=60)
            try:
                s = parse_status(done.stdout) if done.returncode == 0 else None
            except Exception:  # a half answer counts as no leader
                s = None
            ok = s is not None and s.leader_id >= 0
            if ok and s is not None:
                self.voters.append(tuple(sorted(s.voters)))
            if s is not None and s.leader_id < 0:
                self.leaderless += 1  # the quorum itself answered: no leader
            self.samples.append((time.monotonic(), s.leader_id if ok and s else None,
                                 s.leader_epoch if ok and s else None))

    def __enter__(self) -> QuorumWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(90)

    def longest_without_leader(self) -> float:
        """Seconds between a sample with a leader and the next one with a leader, at most."""
        led = [t for t, leader, _ in self.samples if leader is not None]
        return max((b - a for a, b in itertools.pairwise(led)), default=0.0)

    def epochs(self) -> list[int]:
        return sorted({e for _, _, e in self.samples if e is not None})


def _role_all_order(kraft: Cluster, home: Path) -> list[str]:
    """The order ``--role all`` plans, checked: the controllers first, the active one last of them (one
    leader election for the roll), then the brokers."""
    planned = kafkaops(home, kraft, "rolling-restart", kraft.name, "--role", "all", "--dry-run", "-o", "json",
                       "--no-scan")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    leader = _status(kraft)["leader"]
    names: dict[object, str] = {h.broker_id: h.name for h in (*kraft.controllers, *kraft.hosts)}
    order = [t["name"] for t in plan["bound"]["targets"]]
    controllers = [c.name for c in kraft.controllers]
    assert sorted(order[:3]) == sorted(controllers) and order[2] == names[leader], (order, leader)
    assert order[3:] == [h.name for h in kraft.hosts]
    assert any("lock: etcd http://127.0.50.11:2379" in n for n in plan["notes"]), plan["notes"]
    return order


def test_role_all_plans_the_controllers_first_the_active_one_last_then_the_brokers(kraft: Cluster,
                                                                                  tmp_path: Path) -> None:
    """The suite's short version of the roll below (a long scenario): its plan. The controllers' roll itself,
    killed and resumed, is in the suite: the lagging-voter test after the gate."""
    order = _role_all_order(kraft, tmp_path / "home")
    assert len(order) == len(kraft.controllers) + len(kraft.hosts), order


@pytest.mark.long
def test_role_all_rolls_controllers_then_brokers_killed_and_resumed(kraft: Cluster, tmp_path: Path) -> None:
    hosts = _hosts(kraft)
    home = tmp_path / "home"
    order = _role_all_order(kraft, home)

    stops = {n: len(h.events("kafka-stop")) for n, h in hosts.items()}
    with QuorumWatch(kraft) as watch, Load(kraft, rate=150, http_rate=4) as load:
        proc = spawn(home, kraft, "rolling-restart", kraft.name, "--role", "all", "--yes", "--no-scan",
                     "--syn-window", "2s", "--stable-for", "2s", "--reason", "issue 16 KRaft roll")
        run_id = kill_after_step(home, proc, "kraft.stop_controller", order[1])
        resumed = kafkaops(home, kraft, "resume", run_id)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr + output(proc)[-2000:]
    report = load.report
    assert report is not None and report.produced_acked > 0
    assert report.lost == 0 and report.duplicated == 0, report
    # Every node stopped exactly once, by the hosts' own count; controllers first, the leader last of them.
    assert {n: len(h.events("kafka-stop")) - stops[n] for n, h in hosts.items()} == dict.fromkeys(hosts, 1)
    when = {n: float(str(h.events("kafka-stop")[-1]["t"])) for n, h in hosts.items()}
    assert sorted(when, key=lambda n: when[n]) == order, when
    gap = watch.longest_without_leader()
    epochs = watch.epochs()
    print(f"quorum: longest without a leader {gap:.1f}s over {len(watch.samples)} samples; epochs {epochs}")
    assert gap < 15, (gap, watch.samples[-20:])
    # One leader election for the whole roll: only the active controller's restart moves the leadership.
    assert len(epochs) == 2, epochs


def test_a_voter_lagging_after_the_gate_makes_the_resumed_stop_refuse(kraft: Cluster, tmp_path: Path) -> None:
    hosts = _hosts(kraft)
    home = tmp_path / "home"
    stops = {n: len(h.events("kafka-stop")) for n, h in hosts.items()}

    def stopped() -> dict[str, int]:
        return {n: len(h.events("kafka-stop")) - stops[n] for n, h in hosts.items()}

    # --stable-for: the second controller's stability wait, between its gate and its stop, holds the run
    # there long enough to be killed right after the gate (the journal is polled every 50 ms).
    proc = spawn(home, kraft, "rolling-restart", kraft.name, "--role", "controllers", "--yes", "--no-scan",
                 "--stable-for", "12s", "--reason", "issue 28.4: a stale gate")
    try:
        deadline = time.monotonic() + 120
        while not live_journal(home) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        order = [t["name"] for t in live_journal(home)[0]["runbook"]["targets"]]
        target, lagging = order[1], order[0]  # order[2] is the active controller, rolled last
        run_id = kill_after_step(home, proc, "kraft.quorum_gate", target)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert stopped() == {**dict.fromkeys(hosts, 0), lagging: 1}, ("killed too late", stopped())

    node = next(c.broker_id for c in kraft.controllers if c.name == lagging)
    pid = hosts[lagging].pid("kafka")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(7)  # longer than the gate's 5 s: the leader's record of its last catch-up ages
        refused = kafkaops(home, kraft, "resume", run_id)
    finally:
        os.kill(pid, signal.SIGCONT)
    said = refused.stdout + refused.stderr
    # The gate passed before the voter fell behind; the stop asked again and was refused: nothing stopped.
    assert stopped() == {**dict.fromkeys(hosts, 0), lagging: 1}, (stopped(), said[-3000:])
    assert refused.returncode == 11, said[-3000:]
    assert f"stopped at {target} " in said and "kraft.stop_controller" in said, said[-3000:]
    assert f"voter {node}:" in said and "lagging or down" in said and "was not applied" in said, said[-3000:]

    for _ in range(60):  # the voter catches up once it runs again
        if kafkaops(home, kraft, "status", kraft.name, "-o", "json").returncode == 0:
            break
        time.sleep(2)
    finished = kafkaops(home, kraft, "resume", run_id)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr
    assert stopped() == dict.fromkeys(hosts, 0) | dict.fromkeys(order, 1)


def test_a_fourth_controllers_add_is_planned_and_a_removal_below_three_voters_is_refused(kraft: Cluster,
                                                                                          tmp_path: Path) -> None:
    """The suite's short version of the scenario below (each `kafka-metadata-quorum` call is a JVM start: the
    whole add and remove under load takes minutes, so it is a long scenario, bench/long_scenarios.py). Here: the
    fourth controller host up, `controllers add` planned for real against the dynamic quorum — the gate passes,
    the node's storage to format, the observer to wait for, the voter to add — and nothing changes; then the
    removal that would leave two voters refused at the plan, one line, exit 6."""
    home = tmp_path / "home"
    added = kafkaops(home, kraft, "lab", "--lab", kraft.name, "host", "add", "--controller")
    assert added.returncode == 0, added.stdout + added.stderr
    from kafkaops_lab.dirs import lab_dir

    inventory = lab_dir(kraft.name) / f"{Path(kraft.source).stem}-next-controller.yaml"
    try:
        planned = kafkaops(home, kraft, "-i", str(inventory), "controllers", "add", "kafka-ctrl3004", "--dry-run",
                           "-o", "json")
        refused = kafkaops(home, kraft, "-i", str(inventory), "controllers", "remove", kraft.controllers[0].name,
                           "--yes", "--reason", "issue 46: must refuse")
    finally:
        gone = kafkaops(home, kraft, "lab", "--lab", kraft.name, "host", "remove", "kafka-ctrl3004")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr
    steps = {s["kind"]: s for s in json.loads(planned.stdout)["steps"]}
    assert {"quorum.membership_gate", "quorum.format_controller", "quorum.wait_observer",
            "quorum.add_voter"} <= set(steps)
    assert steps["quorum.membership_gate"]["noop_reason"], steps["quorum.membership_gate"]  # the gate passes
    assert steps["quorum.add_voter"]["action"] is not None, steps["quorum.add_voter"]  # a change, planned
    assert refused.returncode == 6, refused.stdout[-2000:] + refused.stderr
    said = refused.stderr.strip().splitlines()
    assert len(said) == 1 and "would leave 2 voter(s); at least 3 stay" in said[0], refused.stderr
    assert _status(kraft)["voters"] == [3001, 3002, 3003]
    assert gone.returncode == 0, gone.stdout + gone.stderr


# A long scenario (bench/long_scenarios.py); the suite's short version is above.
@pytest.mark.long
@pytest.mark.timeout(1800)
def test_a_fourth_controller_is_added_then_removed_and_the_quorum_keeps_its_majority(kraft: Cluster,
                                                                                    tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = kafkaops(home, kraft, "lab", "--lab", kraft.name, "host", "add", "--controller")
    assert added.returncode == 0, added.stdout + added.stderr
    from kafkaops_lab.dirs import lab_dir

    inventory = lab_dir(kraft.name) / f"{Path(kraft.source).stem}-next-controller.yaml"
    node = "kafka-ctrl3004"
    hosts = _hosts(kraft)
    stops = {n: len(h.events("kafka-stop")) for n, h in hosts.items()}
    try:
        with QuorumWatch(kraft) as watch, Load(kraft, rate=100, http_rate=4) as load:
            add = kafkaops(home, kraft, "-i", str(inventory), "controllers", "add", node, "--yes",
                           "--reason", "issue 46: a fourth controller")
            assert add.returncode == 0, add.stdout[-3000:] + add.stderr
            with_four = _status(kraft)
            remove = kafkaops(home, kraft, "-i", str(inventory), "controllers", "remove", node, "--yes",
                              "--reason", "issue 46: back to three")
            assert remove.returncode == 0, remove.stdout[-3000:] + remove.stderr
            with_three = _status(kraft)
        # Three voters left: removing one more would leave two. Refused at the plan, one line, exit 6.
        refused = kafkaops(home, kraft, "-i", str(inventory), "controllers", "remove", kraft.controllers[0].name,
                           "--yes", "--reason", "issue 46: must refuse")
    finally:
        gone = kafkaops(home, kraft, "lab", "--lab", kraft.name, "host", "remove", node)
    assert with_four["voters"] == [3001, 3002, 3003, 3004], with_four
    assert with_three["voters"] == [3001, 3002, 3003], with_three
    assert refused.returncode == 6, refused.stdout[-2000:] + refused.stderr
    said = refused.stderr.strip().splitlines()
    assert len(said) == 1 and "would leave 2 voter(s); at least 3 stay" in said[0], refused.stderr
    assert _status(kraft)["voters"] == [3001, 3002, 3003]
    assert gone.returncode == 0, gone.stdout + gone.stderr
    # The three first controllers were never stopped; the quorum had a leader in every answer, never changed
    # it, and never had fewer than three voters.
    assert {n: len(h.events("kafka-stop")) - stops[n] for n, h in hosts.items()} == dict.fromkeys(hosts, 0)
    print(f"quorum: {len(watch.samples)} samples, longest without a leader {watch.longest_without_leader():.1f}s, "
          f"epochs {watch.epochs()}, voters seen {sorted(set(watch.voters))}")
    assert watch.voters and min(len(v) for v in watch.voters) >= 3, watch.voters
    assert (3001, 3002, 3003, 3004) in watch.voters, sorted(set(watch.voters))
    # One epoch: the leader never changed, so a majority stood behind it all along. (The gap between two
    # answers is the tool's own JVM start on a loaded machine here, not the quorum's: it is printed, not bound.)
    assert len(watch.epochs()) == 1 and watch.leaderless == 0, watch.samples[-20:]
    report = load.report
    assert report is not None and report.produced_acked > 0
    assert report.lost == 0 and report.duplicated == 0 and report.produce_errors == 0, report
