"""The decisions step kinds make from what they observed (``plan`` is pure: no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import SafetyRefusal
from kafkaops.steps.kafka import _election_mode


def step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    defaults = {p.name: p.default for p in entry.params}
    return entry.create({**defaults, **params})


def pool(pooled: str, before: str | None = None, peers_pooled: tuple[str, ...] = ("b", "c"),
         peers_depooled: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"pooled": pooled, "weight": 10, "before_run": before, "peers_pooled": list(peers_pooled),
            "peers_depooled": list(peers_depooled)}


def test_depool_acts_on_a_pooled_host_and_names_the_confctl_command() -> None:
    decision = step("conftool.depool").plan(Observation({"host": "a.lab", "services": {"eventbus": pool("yes")}}))
    assert isinstance(decision, Action)
    assert decision.commands == ("confctl depool --hostname a.lab --service eventbus",)


def test_depool_is_a_noop_when_already_out() -> None:
    decision = step("conftool.depool").plan(Observation({"host": "a.lab", "services": {"eventbus": pool("no")}}))
    assert isinstance(decision, Noop) and "already out of the pool" in decision.reason


def test_depool_refuses_while_another_host_is_out() -> None:
    obs = Observation({"host": "a.lab", "services": {"eventbus": pool("yes", peers_pooled=("c",),
                                                                       peers_depooled=("b.lab",))}})
    with pytest.raises(SafetyRefusal, match=r"b\.lab is already out of the pool"):
        step("conftool.depool").plan(obs)


def test_repool_restores_only_what_this_run_depooled() -> None:
    repool = step("conftool.repool")
    ours = Observation({"host": "a.lab", "services": {"eventbus": pool("no", before="yes")}})
    assert isinstance(repool.plan(ours), Action)
    theirs = Observation({"host": "a.lab", "services": {"eventbus": pool("no", before=None)}})
    decision = repool.plan(theirs)
    assert isinstance(decision, Noop) and "leaving a.lab as found" in decision.reason
    was_out = Observation({"host": "a.lab", "services": {"eventbus": pool("no", before="no")}})
    assert isinstance(repool.plan(was_out), Noop)


def test_reboot_is_done_once_the_boot_id_changed() -> None:
    reboot = step("host.reboot")
    base = {"host": "a", "reboot": "hostctl reboot", "boot_id_cmd": "hostctl boot-id", "intent": None}
    assert isinstance(reboot.plan(Observation({**base, "boot_id_before": None, "boot_id": "x"})), Action)
    assert isinstance(reboot.plan(Observation({**base, "boot_id_before": "x", "boot_id": "x"})), Action)
    done = reboot.plan(Observation({**base, "boot_id_before": "x", "boot_id": "y"}))
    assert isinstance(done, Noop) and "already rebooted" in done.reason
    # unreachable right now (still booting) is not "done"
    assert isinstance(reboot.plan(Observation({**base, "boot_id_before": "x", "boot_id": None})), Action)


def test_a_reboot_already_sent_is_awaited_not_sent_again() -> None:
    reboot = step("host.reboot")
    base = {"host": "a", "reboot": "hostctl reboot", "boot_id_cmd": "hostctl boot-id", "boot_id_before": "x"}
    fresh = reboot.plan(Observation({**base, "boot_id": "x", "intent": None}))
    assert isinstance(fresh, Action) and "hostctl reboot" in fresh.commands[0] and not fresh.data
    pending = reboot.plan(Observation({**base, "boot_id": "x", "intent": {"at": 1.0, "boot_id": "x"}}))
    assert isinstance(pending, Action) and pending.data == {"pending": True}
    assert not any("hostctl reboot" in c for c in pending.commands)
    assert "already sent" in pending.description


def stop_obs(**impact: Any) -> Observation:
    base_impact = {"moves": {"2": 3}, "loses_isr": ["t-0"], "below_min_isr": [], "offline": [],
                   "is_controller": False}
    return Observation({"host": "a", "broker": 1, "active": True, "command": "hostctl stop kafka",
                        "state": {"registered": True, "leads": ["t-0"], "out_of_isr": [], "hosted": 1,
                                  "controller": 2},
                        "impact": {**base_impact, **impact}})


def test_stop_broker_describes_the_impact() -> None:
    decision = step("kafka.stop_broker").plan(stop_obs())
    assert isinstance(decision, Action)
    assert "3 leader(s) move: 3 to 2" in decision.impact and "1 partition(s) lose a replica" in decision.impact


def _cluster_ctx(tmp_path: Path, isr: dict[str, tuple[int, ...]], target: str = "kafka1001") -> Any:
    """A run context on the lab inventory whose Kafka answers one in-memory snapshot: topic t (RF 3, min
    ISR 2), one partition per ``isr`` entry, all led by 1001."""
    from kafkaops.environment import Environment
    from kafkaops.inventory import load_inventory
    from kafkaops.model import ClusterSnapshot, PartitionState, TopicConfig

    env = Environment(load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab.yaml"), home=tmp_path)
    snap = ClusterSnapshot("lab", 0.0, (1001, 1002, 1003), 1002,
                           tuple(PartitionState("t", int(n[2:]), 1001, (1001, 1002, 1003), i) for n, i in isr.items()),
                           {"t": TopicConfig("t", 2, 3)})
    env._kafka = SimpleNamespace(snapshot=lambda with_configs=False: snap)  # type: ignore[assignment]
    return SimpleNamespace(env=env, target=target, kind="", projected={})


def test_stop_broker_refuses_at_the_last_moment_if_min_isr_would_break(tmp_path: Path, lab_secrets: Path) -> None:
    """Its precondition (called by the runner right before the stop) reads a snapshot of its own."""
    stop = step("kafka.stop_broker")
    action = stop.plan(stop_obs())
    with pytest.raises(SafetyRefusal, match=r"stopping broker 1001 now .* below min\.insync\.replicas: t-3"):
        stop.precondition(_cluster_ctx(tmp_path, {"t-0": (1001, 1002, 1003), "t-3": (1001, 1002)}), action)
    ok = stop.precondition(_cluster_ctx(tmp_path, {"t-0": (1001, 1002, 1003), "t-3": (1001, 1002, 1003)}), action)
    assert "keeps every partition online" in ok


def test_reboot_refuses_when_its_broker_going_down_would_break_min_isr(tmp_path: Path, lab_secrets: Path) -> None:
    """A reboot takes the broker down too: started again since the run stopped it, it is checked as a stop."""
    reboot = step("host.reboot")
    action = Action("reboot kafka1001")
    with pytest.raises(SafetyRefusal, match=r"rebooting kafka1001 \(broker 1001\) now .* t-3"):
        reboot.precondition(_cluster_ctx(tmp_path, {"t-0": (1001, 1002, 1003), "t-3": (1001, 1002)}), action)
    # its broker stopped (out of every ISR), as the runbook leaves it before the reboot: nothing to lose
    assert "keeps every partition online" in reboot.precondition(
        _cluster_ctx(tmp_path, {"t-0": (1002, 1003), "t-3": (1002, 1003)}), action)


def test_stop_broker_is_a_noop_when_already_stopped() -> None:
    obs = stop_obs()
    data = {**obs.data, "active": False, "state": {**obs.data["state"], "registered": False}}
    assert isinstance(step("kafka.stop_broker").plan(Observation(data)), Noop)


@pytest.mark.parametrize(
    ("enabled", "at_end", "target", "expected"),
    [(False, False, "a", "off"), (True, False, "a", "broker"), (True, True, "a", "deferred"),
     (True, True, "c", "all")],
)
def test_election_mode(enabled: bool, at_end: bool, target: str, expected: str) -> None:
    s = step("kafka.preferred_election", enabled=enabled, at_end=at_end)
    ctx = SimpleNamespace(target=target, targets=("a", "b", "c"))
    assert _election_mode(s, ctx) == expected  # type: ignore[arg-type]


def test_election_only_for_partitions_not_led_by_their_preferred_leader() -> None:
    obs = Observation({"host": "a", "broker": 1, "mode": "broker", "total": 2, "todo": [["t", 1]], "blocked": [],
                       "leads": 1, "preferred": 2, "preferred_led": 1, "until": ""})
    decision = step("kafka.preferred_election").plan(obs)
    assert isinstance(decision, Action) and decision.data["partitions"] == [["t", 1]]
