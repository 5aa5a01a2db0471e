"""docs/runbooks/ is generated from runbooks/*.yaml and must not drift from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_runbook_docs_are_up_to_date() -> None:
    result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "runbooks", "docs", "--check"],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, f"run `kafkaops runbooks docs`: {result.stdout}{result.stderr}"


def test_every_runbook_has_a_page() -> None:
    pages = {p.stem for p in (REPO / "docs" / "runbooks").glob("*.md")}
    assert {p.stem for p in (REPO / "runbooks").glob("*.yaml")} <= pages
