"""Shell completion knows what an operator types most (issue 45): the inventory's clusters and hosts, and
the run ids on this admin host — asked through the shell's real completion protocol, as bash asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _complete(words: str, home: Path) -> list[str]:
    """What ``kafkaops`` answers bash for the command line ``words`` (the last word being completed)."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(_KAFKAOPS_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword),
               KAFKAOPS_INVENTORY=str(REPO / "inventory" / "lab.yaml"), KAFKAOPS_HOME=str(home))
    code = "import sys; sys.argv[0] = 'kafkaops'; from kafkaops.cli.main import main; main()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize(("words", "expected"), [
    ("kafkaops status ", ["lab"]),
    ("kafkaops rolling-reboot l", ["lab"]),
    ("kafkaops reboot kafka100", ["kafka1001", "kafka1002", "kafka1003"]),
    ("kafkaops run restart kafka1002", ["kafka1002"]),
    ("kafkaops runs unlock ", ["lab"]),
    ("kafkaops status x", []),
])
def test_clusters_and_hosts_come_from_the_inventory(tmp_path: Path, words: str, expected: list[str]) -> None:
    assert _complete(words, tmp_path) == expected


def test_run_ids_come_from_this_hosts_runs_newest_first(tmp_path: Path) -> None:
    for run in ("20261127-101500-reboot-aaaa", "20261128-091500-rolling-reboot-bbbb", "20261128-120000-reboot-cccc"):
        (tmp_path / "runs" / run).mkdir(parents=True)
    assert _complete("kafkaops resume ", tmp_path) == ["20261128-120000-reboot-cccc",
                                                       "20261128-091500-rolling-reboot-bbbb",
                                                       "20261127-101500-reboot-aaaa"]
    assert _complete("kafkaops runs show 20261128-09", tmp_path) == ["20261128-091500-rolling-reboot-bbbb"]
    assert _complete("kafkaops runs abort 2026112", tmp_path)[:1] == ["20261128-120000-reboot-cccc"]


def test_a_broken_inventory_completes_nothing_and_never_fails_the_shell(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts: [unclosed\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(_KAFKAOPS_COMPLETE="complete_bash", COMP_WORDS="kafkaops status ", COMP_CWORD="2",
               KAFKAOPS_INVENTORY=str(broken), KAFKAOPS_HOME=str(tmp_path))
    code = "import sys; sys.argv[0] = 'kafkaops'; from kafkaops.cli.main import main; main()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "", "")
