"""host.reboot against a scripted host: a refused command stops at once; a pending reboot is not resent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkaops.engine.context import RunContext
from kafkaops.engine.run_facts import FACTS_FILE, RunFacts
from kafkaops.engine.step import get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import WaitTimeout
from kafkaops.inventory import load_inventory
from kafkaops.steps.host import RebootRefused
from kafkaops.systems.ssh import CommandResult, RemoteCommandError

REPO = Path(__file__).resolve().parents[2]
OLD, NEW = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


class ScriptedHost(Environment):
    """The lab inventory, with SSH replaced by a script: what boot id it answers, how it takes a reboot."""

    def __init__(self, home: Path, *, refuse: bool = False, reboots_after: int | None = None,
                 stopping: bool = False) -> None:
        super().__init__(load_inventory(REPO / "inventory" / "lab.yaml"), home=home)
        self.facts = RunFacts(home / "runs" / "r1" / FACTS_FILE)  # the run's, as the runner would open it
        self.refuse, self.reboots_after, self.stopping = refuse, reboots_after, stopping
        self.boot_id, self.reboot_commands, self.reads = OLD, 0, 0

    def run(self, host: Any, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        self.reads += 1
        if self.reboots_after is not None and self.reads > self.reboots_after:
            self.boot_id = NEW
        if "system-state" in command:
            return CommandResult(command, 0, "stopping\n" if self.stopping else "running\n", "", 0.0)
        return CommandResult(command, 0, self.boot_id + "\n", "", 0.0)

    def change(self, host: Any, command: str, *, timeout: float = 60.0, check: bool = True) -> CommandResult:
        self.reboot_commands += 1
        if self.refuse:
            raise RemoteCommandError(f"{command!r} on {host.name} exited 1: sudo: a password is required")
        return CommandResult(command, 0, "", "", 0.0)

    def reconnect(self, host: Any) -> None:
        return None


def _step(**params: Any) -> Any:
    entry = get_step_kind("host.reboot")
    assert entry is not None
    return entry.create({"timeout": 6.0, "grace": 4.0, **params})


def _ctx(env: ScriptedHost, events: list[tuple[str, dict[str, Any]]]) -> RunContext:
    return RunContext(run_id="r1", operator="o", reason="r", task=None, target="kafka1001", params={}, env=env,
                      record=lambda event, **f: events.append((event, f)), facts=env.facts)


@pytest.fixture(autouse=True)
def _steps() -> None:
    import kafkaops.steps  # noqa: F401 - registers host.reboot


def test_a_refused_reboot_command_stops_at_once(tmp_path: Path) -> None:
    env, events = ScriptedHost(tmp_path, refuse=True), []
    step = _step()
    ctx = _ctx(env, events)
    with pytest.raises(RebootRefused, match="refused the reboot command") as exc:
        step.apply(ctx, step.plan(step.observe(ctx)))
    assert exc.value.retryable is False
    assert env.reboot_commands == 1 and env.reads <= 2  # no waiting for a reboot that will not come
    assert [e for e, _ in events] == ["reboot_intent", "reboot_refused"]
    assert env.facts.get("reboot_outcome/kafka1001")["outcome"] == "refused"


def test_a_resumed_reboot_awaits_the_one_already_sent(tmp_path: Path) -> None:
    env, events = ScriptedHost(tmp_path, reboots_after=3), []
    facts = env.facts
    facts.set("boot_id_before_reboot/kafka1001", OLD)
    facts.set("reboot_intent/kafka1001", {"at": 1.0, "boot_id": OLD, "resent": False})
    step = _step()
    ctx = _ctx(env, events)
    action = step.plan(step.observe(ctx))
    assert action.data == {"pending": True}
    step.apply(ctx, action)
    assert env.reboot_commands == 0 and env.boot_id == NEW
    assert "reboot_pending_took_effect" in [e for e, _ in events]


def test_a_lost_reboot_command_is_sent_again_only_after_the_grace_period(tmp_path: Path) -> None:
    env, events = ScriptedHost(tmp_path), []  # never reboots by itself, never says "stopping"
    facts = env.facts
    facts.set("boot_id_before_reboot/kafka1001", OLD)
    facts.set("reboot_intent/kafka1001", {"at": 1.0, "boot_id": OLD, "resent": False})
    step = _step(grace=1.0, timeout=2.0)
    ctx = _ctx(env, events)
    with pytest.raises(WaitTimeout):  # the scripted host does not come back: the wait after the resend ends
        step.apply(ctx, step.plan(step.observe(ctx)))
    assert env.reboot_commands == 1
    assert [e for e, _ in events].count("reboot_resend") == 1


def test_a_host_still_shutting_down_is_never_sent_a_second_reboot(tmp_path: Path) -> None:
    env, events = ScriptedHost(tmp_path, stopping=True), []
    facts = env.facts
    facts.set("boot_id_before_reboot/kafka1001", OLD)
    facts.set("reboot_intent/kafka1001", {"at": 1.0, "boot_id": OLD, "resent": False})
    step = _step(grace=1.0, timeout=2.0)
    ctx = _ctx(env, events)
    with pytest.raises(WaitTimeout):
        step.apply(ctx, step.plan(step.observe(ctx)))
    assert env.reboot_commands == 0
    assert "reboot_pending_slow" in [e for e, _ in events]
