"""The CLI registers only the module that owns the command being run; this keeps that table honest.

Built-in commands are mapped to their module in ``COMMAND_MODULES``; the procedure commands are generated
from the runbooks that declare a ``command:``. Both kinds must be listed by ``kafkaops --help`` and be
runnable with only what they need loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from kafkaops.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]

#: The procedure commands operators and scripts use: each must stay a command (generated from its runbook).
PROCEDURES = ("reboot", "restart", "rolling-reboot", "rolling-restart", "restart-service",
              "rolling-restart-service", "rolling-deploy")
#: The built-in commands.
BUILTINS = ("status", "resume", "apply", "runs", "check", "snapshot", "run", "runbooks", "failed-events",
            "service", "placement", "switchover", "offsets", "migrate-to-kraft", "rolling-upgrade",
            "doctor", "docs", "inventory", "broker", "controllers")
#: Command groups other packages register through the entry-point group ``kafkaops.commands``: the lab's.
ENTRY_POINTS = ("lab",)


def _top_level_names(app: typer.Typer) -> set[str]:
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    return names | {g.name or "" for g in app.registered_groups}


def _app_with(module: str) -> typer.Typer:
    """A fresh root app with just ``module``'s commands."""
    import importlib

    app = typer.Typer()
    importlib.import_module(f"kafkaops.cli.{module}").register(app)
    return app


def test_every_builtin_command_is_mapped_to_the_module_that_registers_it() -> None:
    modules = set(cli_main.COMMAND_MODULES.values())
    owners = {name: module for module in modules for name in _top_level_names(_app_with(module))}
    assert owners == cli_main.COMMAND_MODULES
    assert set(owners) == set(BUILTINS)


def _help() -> str:
    result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "--help"], capture_output=True, text=True,
                            timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                                             "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_help_lists_every_command_builtin_and_generated() -> None:
    listed = {line.split()[0] for line in _help().split("Commands:")[1].split("Exit codes")[0].splitlines()
              if line.strip()}
    assert listed == set(BUILTINS) | set(PROCEDURES) | set(ENTRY_POINTS)


def test_every_runbook_with_a_command_declaration_is_a_command() -> None:
    """The generated commands are exactly the runbooks that declare `command:` (a missing or broken one
    fails here, not in an operator's terminal)."""
    from kafkaops.cli.runbook_commands import alias_names

    declared = sorted(p.stem for p in (REPO / "runbooks").glob("*.yaml")
                      if "\ncommand:" in p.read_text() and "\n  alias: false" not in p.read_text())
    assert alias_names() == declared
    assert set(PROCEDURES) <= set(declared)


@pytest.mark.parametrize(("argv", "expected"), [
    (["status", "lab"], "status"),
    (["-i", "inv.yaml", "reboot", "kafka1001"], "reboot"),
    (["--inventory", "inv.yaml", "runs", "list"], "runs"),
    (["--inventory=inv.yaml", "lab", "up"], "lab"),
    (["--runbooks", "/tmp/rb", "run", "x", "lab"], "run"),
    (["--runbooks=/tmp/rb", "-i", "inv.yaml", "drill", "lab"], "drill"),
    (["--help"], None),
    ([], None),
])
def test_requested_command_skips_root_options(argv: list[str], expected: str | None) -> None:
    assert cli_main.requested_command(argv) == expected


def test_requested_runbooks_reads_only_root_options() -> None:
    argv = ["--runbooks", "a", "--runbooks=b", "-i", "x.yaml", "run", "r", "--runbooks", "c"]
    assert cli_main.requested_runbooks(argv) == ["a", "b"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=60)


def test_a_mistyped_command_is_a_usage_error_with_a_suggestion() -> None:
    result = _run("stat", "lab")
    assert result.returncode == 2
    assert "No such command 'stat'" in result.stderr and "status" in result.stderr
    assert "internal error" not in result.stderr
    result = _run("rebot", "kafka1001")  # generated commands are suggested too
    assert result.returncode == 2 and "Did you mean 'reboot'?" in result.stderr


def _loaded_after(code: str) -> list[str]:
    code = f"import json, sys\nfrom kafkaops.cli import main\n{code}\n" \
           "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('kafkaops.cli.', 'kafkaops.steps', " \
           "'kafkaops.engine.runbook')))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def test_a_command_runs_with_only_its_module_registered() -> None:
    """`kafkaops status` pays for nothing else: no other command module, no runbook read (the completion
    helpers its CLUSTER argument names import nothing until a Tab asks)."""
    assert _loaded_after("main.register(only='status')") == [
        "kafkaops.cli.builtin", "kafkaops.cli.common", "kafkaops.cli.complete", "kafkaops.cli.main",
        "kafkaops.cli.status"]


def test_a_procedure_command_loads_only_its_runbook() -> None:
    """`kafkaops reboot HOST` builds its command from reboot.yaml alone: no built-in command module, no
    step kinds (they load when the run starts), no other runbook parsed."""
    code = ("import typer.main\ngroup = typer.main.get_command(main.register(only='reboot'))\n"
            "assert group.get_command(None, 'reboot') is not None\n"
            "from kafkaops import catalog\nassert len(catalog._parsed) == 1\n")
    assert _loaded_after(code) == ["kafkaops.cli.builtin", "kafkaops.cli.common", "kafkaops.cli.complete",
                                   "kafkaops.cli.main", "kafkaops.cli.runbook_commands", "kafkaops.engine.runbook"]


def test_the_lab_registers_itself_through_its_entry_point() -> None:
    """`kafkaops lab ...` loads the lab's command group from the entry point, and no built-in module; no
    other command imports the lab (the product does not know it: tests/unit/test_layers.py)."""
    assert "lab" not in cli_main.COMMAND_MODULES
    code = ("import typer.main\ngroup = typer.main.get_command(main.register(only='lab'))\n"
            "assert group.get_command(None, 'lab') is not None\n"
            "print(json.dumps('kafkaops_lab.cli' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", f"import json, sys\nfrom kafkaops.cli import main\n{code}"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) is True
    code = ("main.register(only='status')\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kafkaops_lab'))))")
    out = subprocess.run([sys.executable, "-c", f"import json, sys\nfrom kafkaops.cli import main\n{code}"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_status_never_reads_a_runbook(tmp_path: Path) -> None:
    """An unreadable runbook directory cannot slow or break `kafkaops status`."""
    (tmp_path / "broken.yaml").write_text("name: [\n")
    code = ("import sys\nfrom kafkaops.cli import main\nsys.argv = ['kafkaops', '--runbooks', sys.argv[1], 'status', "
            "'--help']\ntry:\n    main.main()\nexcept SystemExit:\n    pass\n"
            "print('RUNBOOK' if 'kafkaops.engine.runbook' in sys.modules else 'NONE')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().endswith("NONE"), out.stdout + out.stderr


def test_status_loads_no_module_its_main_thread_does_not_need() -> None:
    """`kafkaops status -o json` under a tool: what the main thread imports before asking Kafka is paid on every
    call (issue 47: status at its floor). rich (the spinner's check on a pipe answers without it), the HTTP
    client of Alertmanager (imported on that question's own thread), ssl (librdkafka does its own TLS) and
    the engine's step machinery (only the read-only scope is needed) stay out."""
    code = ("import json, sys\n"
            "from kafkaops.cli import main, status\n"
            "from kafkaops.cli.common import err_console, waiting\n"
            "import kafkaops.health.status, kafkaops.lookup, kafkaops.systems.audit_sinks, kafkaops.systems.kafka\n"
            "kafkaops.systems.audit_sinks.install()\n"
            "with waiting('asking'):\n    pass\n"
            "assert err_console.is_terminal is False\n"
            "print(json.dumps(sorted(m for m in ('rich', 'rich.console', 'urllib.request', 'http.client', 'ssl',"
            " 'kafkaops.engine.step', 'kafkaops.systems.alertmanager', 'kafkaops.policy.quorum', 'socket')"
            " if m in sys.modules)))")
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
