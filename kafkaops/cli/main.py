"""Entry point: builds the Typer app from one module per command group and maps errors to exit codes.

Only the module that owns the command being run is imported and registered (``--help`` registers all),
and each keeps heavy imports (confluent_kafka, kazoo, paramiko, pyspark) inside functions:
``kafkaops --help`` has to stay instant and ``kafkaops status`` fast.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from kafkaops import __version__
from kafkaops.errors import EXIT_CODES, KafkaOpsError

_EPILOG = "Exit codes: " + "; ".join(f"{code} {what}" for code, what in sorted(EXIT_CODES.items()))

app = typer.Typer(
    name="kafkaops",
    help=(
        "Kafka operators' runbooks as safe, resumable procedures.\n\n"
        "Every state-changing command shows its plan first (--dry-run to stop there), journals each "
        "step so `kafkaops resume RUN` continues after a crash, and refuses when a safety gate says "
        "the change would hurt availability."
    ),
    epilog=_EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kafkaops {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    inventory: str | None = typer.Option(
        None, "--inventory", "-i", metavar="FILE",
        help="Inventory for every command (else $KAFKAOPS_INVENTORY, else inventory/*.yaml is searched)."),
) -> None:
    """Kafka operators' runbooks as safe, resumable procedures."""
    if inventory:
        from pathlib import Path

        from kafkaops.errors import ConfigError

        if not Path(inventory).is_file():
            raise ConfigError(f"{inventory}: no such inventory file", hint="check the --inventory path")
        os.environ["KAFKAOPS_INVENTORY"] = str(Path(inventory).resolve())


# The module that registers each top-level command. Typer builds every command's click parameters on
# each start (~1 ms a command, plus the module's imports); `kafkaops status`, which operators and
# scripts run between every step, should pay only for its own. tests/unit/test_cli_dispatch.py
# fails when a command is missing here.
COMMAND_MODULES = {
    "lab": "lab",
    "reboot": "maintenance", "restart": "maintenance",
    "rolling-reboot": "maintenance", "rolling-restart": "maintenance",
    "status": "status",
    "runbooks": "runbooks",
    "runs": "runs", "resume": "runs", "apply": "runs",
    "check": "check", "snapshot": "check",
    "restart-service": "services", "rolling-restart-service": "services", "rolling-deploy": "services",
}


def requested_command(argv: list[str]) -> str | None:
    """The command word in ``argv`` (after the root options), or None for ``--help``/``--version``."""
    args = iter(argv)
    for arg in args:
        if arg in ("--inventory", "-i"):
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


_registered: set[str] = set()


def register(only: str | None = None) -> typer.Typer:
    """Register the command modules on ``app`` (idempotent) and return it: just the module that owns
    ``only``, or all of them (help, completion, unknown words — click then lists every command or
    suggests the closest)."""
    modules = list(dict.fromkeys(COMMAND_MODULES.values()))  # --help lists them in this order
    if only in COMMAND_MODULES:
        modules = [COMMAND_MODULES[only]]
    for name in modules:
        if name in _registered:
            continue
        _registered.add(name)
        importlib.import_module(f"kafkaops.cli.{name}").register(app)
    return app


def main() -> None:
    """Run the CLI; turn every expected failure into one line on stderr and its documented exit code."""
    register(only=requested_command(sys.argv[1:]))
    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:  # click returns (not raises) a command's typer.Exit(code) here
            sys.exit(rc)
    except KafkaOpsError as exc:
        from kafkaops.cli.common import err_console

        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # click usage errors and bugs
        # typer 0.26 ships its own copy of click (the version is pinned): `import click` would find
        # another package's click whose exception classes never match, and report a typo as a bug.
        from typer._click.exceptions import ClickException

        if isinstance(exc, ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("KAFKAOPS_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {exc!r} (re-run with KAFKAOPS_DEBUG=1 for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
