"""What the docs promise must be what the code does (issue 28, item 7).

`host.reboot` resends a reboot when the first evidently never arrived (old boot id, never shutting down,
for a whole ``grace``): a page that says "a reboot is never sent twice" promises more than the step keeps.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_no_page_says_a_reboot_is_never_sent_twice() -> None:
    overclaims = [f"{p.relative_to(REPO)}: {line.strip()}" for p in PAGES for line in p.read_text().splitlines()
                  if re.search(r"reboot[^.]*never (sent|reboot)[^.]*twice", line, re.IGNORECASE)]
    assert not overclaims, overclaims


def test_the_maintenance_page_states_when_a_reboot_is_sent_again() -> None:
    from kafkaops.steps.host import Reboot

    page = (REPO / "docs" / "maintenance.md").read_text()
    rule = page[page.index("## When a reboot is sent, and when it is sent again"):]
    for condition in ("old boot id", "`grace`", "shutting down", "`reboot_resend`"):
        assert condition in rule.split("\n## ")[0], condition
    assert "never sent twice" not in (Reboot.__doc__ or "").lower()


def test_the_readme_opens_with_one_line_then_the_two_commands_and_ci_runs_the_second() -> None:
    """The README's first screen (issue 45): what kafkaops is in one line, then exactly the two set-up
    commands, the second the one CI runs; then how an admin host installs it."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert lines[0] == "# kafkaops" and lines[1] == ""
    assert lines[2].startswith("kafkaops ") and lines[2].endswith(".") and lines[3] == ""
    assert lines[4:8] == ["```", "scripts/demo.sh", "scripts/test.sh", "```"]
    assert "exec scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    admin = lines.index("## On an admin host")
    assert admin < 40 and any(line.startswith("pipx install ") for line in lines[admin:admin + 10])
    assert any(line.startswith("kafkaops doctor") for line in lines[admin:admin + 10])
