"""A plan declined at the prompt is its own outcome (issue 45): exit 15, one line, nothing started — not
130, which is a run paused by Ctrl-C that ``kafkaops resume`` continues (no run exists here)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kafkaops.errors import EXIT_CODES, Declined, Interrupted

REPO = Path(__file__).resolve().parents[2]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _planned() -> Any:
    plan = SimpleNamespace(to_json=lambda: "{}")
    planned = SimpleNamespace(plan=plan, runbook=SimpleNamespace(name="reboot"),
                              hosts=[SimpleNamespace(name="kafka1001")], bound=SimpleNamespace(cluster="lab"),
                              checkpoints=lambda: [], closed=0)
    planned.close = lambda: setattr(planned, "closed", planned.closed + 1)
    return planned


@pytest.mark.parametrize(("answer", "started"), [("n\n", False), ("\n", False), ("y\n", True)])
def test_the_answer_at_the_prompt_decides(monkeypatch: pytest.MonkeyPatch, answer: str, started: bool) -> None:
    from kafkaops import procedure
    from kafkaops.cli import runbook_commands
    from kafkaops.cli.common import Output

    starts: list[Any] = []
    monkeypatch.setattr(procedure, "start",
                        lambda planned, **kw: starts.append(planned) or SimpleNamespace(journal="j"))
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    planned = _planned()
    if started:
        runbook_commands._show_and_run(planned, yes=False, dry_run=False, output=Output.json, save_plan=None,
                                       confirmed=())
    else:
        with pytest.raises(Declined, match=r"reboot on kafka1001 not started: declined at the prompt") as exc:
            runbook_commands._show_and_run(planned, yes=False, dry_run=False, output=Output.json,
                                           save_plan=None, confirmed=())
        assert exc.value.exit_code == 15 != Interrupted.exit_code
    assert len(starts) == int(started)
    assert planned.closed >= 1  # the plan's connections are closed on every way out, a declined prompt's too


def test_the_exit_code_is_documented() -> None:
    assert EXIT_CODES[15].startswith("the operator declined the plan at the prompt")
    assert "| 15 | `Declined` |" in (REPO / "docs" / "exit-codes.md").read_text()


def test_an_ended_prompt_is_not_a_paused_run(tmp_path: Path) -> None:
    """``typer.Abort`` (Ctrl-C or Ctrl-D at a prompt) leaves the CLI with 15 and one line, not 130."""
    code = ("import sys, typer\nfrom kafkaops.cli import main\n"
            "main.register = lambda **kw: None\n"
            "def boom(**kw):\n    raise typer.Abort()\n"
            "main.app = boom\nmain.main()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 15, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines() == ["error: nothing started: the prompt was ended before an answer"]
