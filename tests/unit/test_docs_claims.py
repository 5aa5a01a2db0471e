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
