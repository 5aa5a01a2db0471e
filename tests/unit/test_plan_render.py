"""What an operator sees of a plan: golden renderings at 80 and 160 columns of real plans (dry-runs of
``restart kafka-kraft1001`` on the KRaft lab and of ``rolling-reboot lab`` on the ZooKeeper lab, saved as
JSON), and the rules the compact one keeps.

``KAFKAOPS_UPDATE_GOLDEN=1 pytest tests/unit/test_plan_render.py`` rewrites the golden files after an
intended change; review their diff like code.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from kafkaops.cli.plan_render import render_plan, render_plan_text, wants_table
from kafkaops.engine.plan import Plan, PlannedStep

GOLDEN = Path(__file__).parent / "golden"


def _plan(name: str = "plan-restart.json") -> Plan:
    return Plan.from_dict(json.loads((GOLDEN / name).read_text()))


def _roll() -> Plan:
    """``rolling-reboot lab --dry-run -o json`` with the lab's own inventory (inventory/lab.yaml: its
    monitoring, metric gates and roll alerts): three hosts, 27 steps each and a gate between them, 83 steps.
    Re-record it from a running lab when the runbook or a step's text changes (issue 41.7: a plan recorded
    with an inventory without monitoring hid six lines past 80 columns)."""
    return _plan("plan-rolling-reboot.json")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _table(plan: Plan, width: int) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False, record=True)
    console.print(render_plan(plan))
    return console.export_text()


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KAFKAOPS_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed: review, then KAFKAOPS_UPDATE_GOLDEN=1"


def test_plain_at_80_columns_is_golden() -> None:
    _golden("plan-restart-80.txt", render_plan_text(_plan(), width=80))


def test_table_at_160_columns_is_golden() -> None:
    _golden("plan-restart-160.txt", _table(_plan(), 160))


@pytest.mark.parametrize("width", [60, 80, 100])
def test_the_compact_plan_wraps_between_words_and_never_inside_a_command(width: int) -> None:
    plan = _plan()
    text = render_plan_text(plan, width=width)
    lines = text.splitlines()
    for line in lines:  # past the width only a single word that is itself longer than the line
        assert len(line) <= width or " " not in line.strip(), line
    flat = re.sub(r"\s+", " ", text)
    for step in plan.steps:
        for cmd in (step.action or {}).get("commands") or []:
            assert "$ " + re.sub(r"\s+", " ", cmd) in flat, cmd  # every token whole, in order
    assert not any("\r" in line or "│" in line for line in lines)  # no boxes, no carriage returns
    assert sum(line.startswith("  [") for line in lines) == len(plan.steps)  # one block per step


def test_the_default_picks_the_table_only_on_a_wide_terminal() -> None:
    assert wants_table(True, 160) and wants_table(True, 120)
    assert not wants_table(True, 119) and not wants_table(False, 200)


def test_a_roll_at_80_columns_is_golden() -> None:
    _golden("plan-rolling-reboot-80.txt", render_plan_text(_roll(), width=80))


def test_a_three_host_roll_fits_a_review_at_80_columns_with_every_command_whole() -> None:
    """Issue 28: the same roll printed host by host was 389 lines, 9 of them past 80 columns. Issue 41.7:
    with the lab's monitoring its URLs and PromQL went past 80 again; a token too long for its indent now
    moves left, and commands name Alertmanager's API path (its URL is the gate's observation)."""
    plan = _roll()
    assert len(plan.targets) == 3 and len(plan.steps) == 83
    assert {"alerts.silence", "metrics.gate", "roll_alerts.silence"} <= {s.kind for s in plan.steps}
    text = render_plan_text(plan, width=80)
    lines = text.splitlines()
    assert len(lines) <= 4 * len(plan.steps) + 10, f"{len(lines)} lines for {len(plan.steps)} steps"
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    flat = _flat(text)
    commands = [c for s in plan.steps for c in (s.action or {}).get("commands") or []]
    assert len(commands) > 50
    for cmd in commands:
        assert "$ " + _flat(cmd) in flat, cmd  # whole, each token in order (a wrap is only whitespace)


def test_a_roll_loses_nothing_but_where_a_projection_came_from() -> None:
    """Every description, no-op reason, impact and observation of every target is there: as it is, or as
    the shared steps' line with that target's values for the placeholders."""
    from kafkaops.cli.plan_render import _fields, _host_values, _substitute

    plan = _roll()
    text = render_plan_text(plan, width=80)
    flat = _flat(text)
    blocks = {t: _flat(text.split(f"\n{t} (")[-1]) for t in plan.targets}  # from a target's heading on
    shown = 0
    for s in plan.steps:
        for what, text in _fields(s):
            if what == "$":
                continue
            templ = _flat(_substitute(text, _host_values(plan, s.target)))
            assert _flat(text) in blocks[s.target] or templ in flat, (s.key, text)
            shown += 1
    assert shown > 100
    # What differs per host is under the host: the leaders its stop moves, the controller's election.
    assert "[14] $ on kafka1001: hostctl stop kafka" in blocks["kafka1001"]
    assert "9 leader(s) move: 4 to 1001, 5 to 1003" in blocks["kafka1002"]
    assert "it is the controller: a controller election follows" in blocks["kafka1002"]


def test_the_shared_steps_name_their_parameters_and_placeholders() -> None:
    text = render_plan_text(_roll(), width=80)
    shared = _flat(text.split("\nkafka1001 (")[0])
    assert "[9] traffic.wait_zero_syns (port=0 timeout=300 window=10)" in shared
    assert "$ on {host}: hostctl stop kafka" in shared and "{broker}: its broker id" in shared
    assert "kafka1001 (FQDN kafka1001.lab.local, address 127.0.10.1, broker id 1001)" in text
    assert "(only kafka1001, kafka1003)" in shared  # no gate after the last host


def _with_steps(plan: Plan, steps: list[PlannedStep]) -> Plan:
    keep = ("runbook", "summary", "cluster", "operator", "reason", "task", "created_at", "bound", "notes",
            "environment")
    return Plan(**{k: getattr(plan, k) for k in keep}, steps=steps)


def test_targets_that_run_other_steps_are_grouped_apart() -> None:
    """A KRaft roll's controllers and brokers run different steps: each kind is shared among its own."""
    plan = _roll()
    steps = [s for s in plan.steps if not (s.target == "kafka1003" and s.index == 7)]
    text = render_plan_text(_with_steps(plan, steps), width=80)
    assert "kafka1001, kafka1002 each run these steps in turn" in _flat(text)
    alone = text.split("\nkafka1003\n")[1].split("\n\n")[0].splitlines()
    assert sum(line.startswith("  [") for line in alone) == 27  # its own steps and its gate, one block each
    assert all(len(line) <= 80 for line in text.splitlines())


def test_targets_that_share_no_steps_keep_one_block_per_step() -> None:
    plan = _roll()
    steps = [s for s in plan.steps if not (s.target == "kafka1003" and s.index == 7)
             and not (s.target == "kafka1002" and s.index == 8)]
    text = render_plan_text(_with_steps(plan, steps), width=80)
    assert "these steps" not in text
    assert sum(line.startswith("  [") for line in text.splitlines()) == len(steps)


def test_a_wide_log_of_a_roll_is_shared_too_and_keeps_every_command() -> None:
    plan = _roll()
    text = render_plan_text(plan, width=160)
    assert len(text.splitlines()) <= 3 * len(plan.steps) and max(len(line) for line in text.splitlines()) <= 160
    flat = _flat(text)
    for s in plan.steps:
        for cmd in (s.action or {}).get("commands") or []:
            assert "$ " + _flat(cmd) in flat, cmd


def test_a_batched_roll_says_which_targets_go_together() -> None:
    """Shared steps list targets one after another; a batch's go step by step together, which the
    per-target sections alone would hide."""
    plan = _roll()
    batched = Plan(**{**{k: getattr(plan, k) for k in ("runbook", "summary", "cluster", "operator", "reason",
                                                        "task", "created_at", "notes", "environment")},
                      "bound": {**plan.bound, "batches": [["kafka1001", "kafka1002"], ["kafka1003"]]},
                      "steps": plan.steps})
    text = _flat(render_plan_text(batched, width=80))
    assert "batches (a batch's targets go step by step together): kafka1001 + kafka1002, then kafka1003" in text
