"""What an operator sees of a plan: golden renderings at 80 and 160 columns of a real plan (a dry-run of
``restart kafka-kraft1001`` on the KRaft lab, saved as JSON), and the rules the compact one keeps.

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
from kafkaops.engine.plan import Plan

GOLDEN = Path(__file__).parent / "golden"


def _plan() -> Plan:
    return Plan.from_dict(json.loads((GOLDEN / "plan-restart.json").read_text()))


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
