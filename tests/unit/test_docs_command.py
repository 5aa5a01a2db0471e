"""``kafkaops docs [TOPIC]``: the operator's docs as installed, and every hint that names a topic names one
that exists (an admin host has the wheel, not the checkout: "see docs/X.md" named a file it does not have)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from kafkaops.cli.docs import title, topics

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "kafkaops"

#: A hint naming a topic, as the product writes it: `kafkaops docs TOPIC`.
HINT = re.compile(r"kafkaops docs ([a-z][a-z0-9-]*)")


def _docs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "docs", *args], capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)


def test_the_topics_are_the_docs_with_their_titles() -> None:
    result = _docs()
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0]: line.split(None, 1)[1] for line in result.stdout.splitlines()}
    assert set(listed) == {p.stem for p in (REPO / "docs").glob("*.md")}
    assert listed["install"] == "Installing kafkaops on an admin host"
    assert listed["exit-codes"] == "Exit codes"


def test_a_topic_prints_its_doc_as_plain_text_off_a_terminal() -> None:
    result = _docs("security")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO / "docs" / "security.md").read_text(encoding="utf-8")


def test_an_unknown_topic_is_one_line_exit_2_naming_the_topics() -> None:
    result = _docs("securty")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: no documentation topic 'securty'; topics: ")
    assert "security" in lines[0] and "install" in lines[0]


def test_a_title_is_the_first_heading(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("intro\n## not this\n# The title\n# later\n")
    assert title(doc) == "The title"
    doc.write_text("no heading\n")
    assert title(doc) == "x"


def test_every_hint_naming_a_topic_names_an_installed_one() -> None:
    """The drift test: a doc renamed or removed must take its hints with it."""
    known = set(topics())
    named: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for topic in HINT.findall(line):
                if topic != "install" or "docs TOPIC" not in line:
                    named.setdefault(topic, []).append(f"{path.relative_to(REPO)}:{number}")
    assert {"security", "migration", "inventory", "install"} <= set(named), named  # the grep finds the hints
    unknown = {t: where for t, where in named.items() if t not in known}
    assert unknown == {}, f"hints name topics `kafkaops docs` does not have: {unknown}"


def _message_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path`` that are not docstrings (a docstring is a bare expression)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare]


def test_no_message_names_a_checkout_path() -> None:
    """No string the product shows (an error, a hint, a drafted inventory's comment) says ``docs/X.md`` (the
    generated runbook docs, ``docs/runbooks/``, are what ``runbooks docs --out`` writes in a checkout)."""
    offenders = [f"{path.relative_to(REPO)}:{line}: {text!r}" for path in sorted(PACKAGE.rglob("*.py"))
                 for line, text in _message_strings(path) if re.search(r"docs/(?!runbooks)[a-z-]+\.md", text)]
    assert offenders == [], "\n".join(offenders)
