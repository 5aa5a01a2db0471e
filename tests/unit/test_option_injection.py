"""A deploy message never becomes an option of the deploy tool (issue 28, item 8).

Shell quoting keeps a message one word, but ``scap deploy -l HOST '--force'`` still hands scap an option.
Two defences: the production example templates put ``--`` before free text (so scap reads whatever
follows as its message), and a message starting with ``-`` is refused before any command exists
(exit 3, one line) — for inventories whose tool has no ``--``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.queries.deploy_host import check_message

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "inventory").glob("*.example.yaml"))

#: Placeholders that carry free text from the operator.
FREE_TEXT = ("{message}", "{path}")
_SEPARATORS = {"&&", "||", ";", "|"}


def _templates(path: Path) -> list[tuple[str, str]]:
    cluster = load_inventory(path)
    hosts = [*cluster.hosts, *([cluster.deploy_host] if cluster.deploy_host else [])]
    found = {(name, t) for h in hosts for name, t in h.commands.items()}
    found |= set(cluster.commands.items())
    return sorted(found)


def test_there_are_production_examples_with_a_deploy_template() -> None:
    assert len(EXAMPLES) >= 2
    for path in EXAMPLES:
        assert any(name == "deploy" and "{message}" in t for name, t in _templates(path)), path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_free_text_follows_a_double_dash_in_every_example_template(path: Path) -> None:
    for name, template in _templates(path):
        words = template.split()
        for i, word in enumerate(words):
            if any(p in word for p in FREE_TEXT):
                command = words[:i]
                for j in range(len(command) - 1, -1, -1):
                    if command[j] in _SEPARATORS:
                        command = command[j + 1:]
                        break
                assert "--" in command, f"{path.name}: commands.{name}: {word} not after `--`: {template}"


@pytest.mark.parametrize("message", ["--force", "-l kafka1001.eqiad.wmnet", "-", " --help"])
def test_a_message_starting_with_a_dash_is_refused(message: str) -> None:
    with pytest.raises(ConfigError, match="starts with '-'") as info:
        check_message(message)
    assert info.value.exit_code == 3


@pytest.mark.parametrize("message", ["T123: deploy -x fix", "kernel upgrade - part 2", "r2 (--force not used)"])
def test_a_dash_inside_a_message_is_fine(message: str) -> None:
    assert check_message(message) == message


def test_the_cli_refuses_a_leading_dash_in_one_line_with_exit_3(tmp_path: Path) -> None:
    """The lab inventory moved to a loopback /24 where nothing listens: the refusal comes first."""
    inventory = tmp_path / "closed.yaml"
    text = (REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", "127.0.47.")
    assert "127.0.10." not in text
    inventory.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(KAFKAOPS_HOME=str(tmp_path / "home"), KAFKAOPS_LOCK_DIR=str(tmp_path / "locks"),
               KAFKAOPS_LAB_DIR=str(tmp_path / "nolab"), KAFKAOPS_INVENTORY=str(inventory))
    result = subprocess.run(
        [sys.executable, "-m", "kafkaops.cli.main", "rolling-deploy", "lab", "-s", "eventbus",
         "--message=--force", "--rev", "r1", "--dry-run"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    shown = f"exit {result.returncode}\nstderr:\n{result.stderr}\nstdout:\n{result.stdout[-2000:]}"
    assert result.returncode == 3, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "starts with '-'" in lines[0], shown
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.jsonl")), shown
