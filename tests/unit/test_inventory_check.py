"""``kafkaops inventory check FILE``: every error of an inventory at once, each with its file:line (issue 45).

A command still stops at the first error (``load_inventory``); ``check`` goes on to the next host, section
and key, so an operator writing an inventory sees every mistake in one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaops.errors import ConfigError
from kafkaops.inventory import check_inventory, load_inventory

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory" / "eqiad-main.example.yaml"


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


@pytest.fixture
def broken(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """The example with four independent mistakes: an unknown top-level key, a host's broker id that is
    not a number, another host's unknown key, and an environment that does not exist."""
    text = EXAMPLE.read_text()
    lines = text.splitlines()
    hosts = [i for i, line in enumerate(lines) if line.strip().startswith("broker_id:")]
    assert len(hosts) >= 2, "the example needs two hosts"
    lines[hosts[0]] = lines[hosts[0]].split("broker_id:")[0] + "broker_id: x1001"
    indent = lines[hosts[1]].split("broker_id:")[0]
    lines.insert(hosts[1] + 1, f"{indent}rakc: a")
    text = "\n".join(lines) + "\nflavour: vanilla\n"
    text = text.replace("environment: production", "environment: prod") if "environment:" in text \
        else "environment: prod\n" + text
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    return path, {"broker_id": _line(text, "broker_id: x1001"), "rakc": _line(text, "rakc: a"),
                  "flavour": _line(text, "flavour: vanilla"), "environment": _line(text, "environment: prod")}


def test_every_independent_error_is_reported_with_its_line(broken: tuple[Path, dict[str, int]]) -> None:
    path, at = broken
    errors = [str(e) for e in check_inventory(path)]
    assert len(errors) == 4, errors
    for key, line in at.items():
        assert any(e.startswith(f"{path}:{line}: ") and key in e for e in errors), (key, line, errors)
    with pytest.raises(ConfigError) as first:  # a command still stops at the first
        load_inventory(path)
    assert str(first.value) in errors


def test_a_good_inventory_has_no_error_and_loads() -> None:
    assert check_inventory(REPO / "inventory" / "lab.yaml") == []
    assert check_inventory(EXAMPLE) == []


def test_the_command_prints_one_line_each_and_exits_3(broken: tuple[Path, dict[str, int]]) -> None:
    from kafkaops.cli.main import register

    path, _ = broken
    result = CliRunner().invoke(register(), ["inventory", "check", str(path), str(EXAMPLE)], env={"COLUMNS": "300"})
    assert isinstance(result.exception, ConfigError) and result.exception.exit_code == 3, result.output
    assert str(result.exception).startswith("4 error(s) in 1 of 2 inventory file(s)")
    printed = result.stdout.splitlines()
    assert sum(line.startswith(f"{path}:") for line in printed) == 4, printed
    assert any(line.startswith(f"{EXAMPLE}: ok (cluster ") for line in printed), printed
    report = json.loads(CliRunner().invoke(register(), ["inventory", "check", str(path), "-o", "json"]).stdout)
    assert report["ok"] is False and len(report["files"][0]["errors"]) == 4
    assert CliRunner().invoke(register(), ["inventory", "check", str(EXAMPLE)]).exit_code == 0
    whole = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "inventory", "check", str(path)],
                           capture_output=True, text=True, timeout=60)
    assert whole.returncode == 3 and whole.stderr.startswith("error: 4 error(s) in 1 of 1"), whole.stderr


def test_a_file_that_is_not_yaml_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [unclosed\n")
    errors = check_inventory(bad)
    assert len(errors) == 1 and "invalid YAML" in str(errors[0])
