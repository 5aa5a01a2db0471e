"""The CLI registers only the module that owns the command being run; this keeps that table honest."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

from kafkaops.cli import main as cli_main


def _top_level_names(app: typer.Typer) -> set[str]:
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    return names | {g.name or "" for g in app.registered_groups}


def _app_with(module: str) -> typer.Typer:
    """A fresh root app with just ``module``'s commands."""
    import importlib

    app = typer.Typer()
    importlib.import_module(f"kafkaops.cli.{module}").register(app)
    return app


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    modules = set(cli_main.COMMAND_MODULES.values())
    owners = {name: module for module in modules for name in _top_level_names(_app_with(module))}
    assert owners == cli_main.COMMAND_MODULES


@pytest.mark.parametrize(("argv", "expected"), [
    (["status", "lab"], "status"),
    (["-i", "inv.yaml", "reboot", "kafka1001"], "reboot"),
    (["--inventory", "inv.yaml", "runs", "list"], "runs"),
    (["--inventory=inv.yaml", "lab", "up"], "lab"),
    (["--help"], None),
    ([], None),
])
def test_requested_command_skips_root_options(argv: list[str], expected: str | None) -> None:
    assert cli_main.requested_command(argv) == expected


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=60)


def test_a_mistyped_command_is_a_usage_error_with_a_suggestion() -> None:
    result = _run("stat", "lab")
    assert result.returncode == 2
    assert "No such command 'stat'" in result.stderr and "status" in result.stderr
    assert "internal error" not in result.stderr


def test_a_command_runs_with_only_its_module_registered() -> None:
    code = ("import json, sys\nfrom kafkaops.cli import main\nmain.register(only='status')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kafkaops.cli.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == ["kafkaops.cli.common", "kafkaops.cli.main", "kafkaops.cli.status"]
