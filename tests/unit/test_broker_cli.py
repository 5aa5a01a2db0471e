"""``kafkaops broker demote|promote``: what is refused before any system is asked (issue 46)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _kafkaops(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(KAFKAOPS_INVENTORY=str(REPO / "inventory" / "lab.yaml"), KAFKAOPS_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "broker", *args], capture_output=True,
                          text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)


def test_promote_without_a_recorded_demote_is_refused_in_one_line(tmp_path: Path) -> None:
    result = _kafkaops(tmp_path, "promote", "kafka1002", "--dry-run")
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "no finished `broker demote kafka1002` run" in result.stderr


def test_an_unknown_host_is_refused(tmp_path: Path) -> None:
    for verb in ("demote", "promote"):
        result = _kafkaops(tmp_path, verb, "kafka9999", "--dry-run")
        assert result.returncode == 3 and "kafka9999" in result.stderr, (verb, result.stderr)


def test_a_change_needs_a_reason_before_any_system_is_asked(tmp_path: Path) -> None:
    inventory = (REPO / "inventory" / "lab.yaml").read_text().replace(
        "127.0.10.1:9092,127.0.10.2:9092,127.0.10.3:9092", "127.0.0.1:9")
    (tmp_path / "lab.yaml").write_text(inventory)  # a cluster nobody answers for: asking it would be exit 4
    for verb in ("demote", "promote"):
        result = _kafkaops(tmp_path, verb, "kafka1002", "--yes", "-i", str(tmp_path / "lab.yaml"))
        assert result.returncode == 2 and "--reason" in result.stderr, (verb, result.stderr)
