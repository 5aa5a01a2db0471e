"""Entry point: builds the Typer app from one sub-app per command group and maps errors to exit codes.

Sub-apps are imported here, so each of them must keep heavy imports (confluent_kafka, kazoo, paramiko,
pyspark) inside functions: ``kafkaops --help`` has to stay instant.
"""

from __future__ import annotations

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


def _register() -> None:
    from kafkaops.cli import lab as lab_cli

    app.add_typer(lab_cli.app, name="lab")
    for name in ("maintenance", "status", "runbooks", "runs", "check", "services"):
        try:
            module = __import__(f"kafkaops.cli.{name}", fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != f"kafkaops.cli.{name}":
                raise
            continue
        module.register(app)


_register()


def main() -> None:
    """Run the CLI; turn every expected failure into one line on stderr and its documented exit code."""
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
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if os.environ.get("KAFKAOPS_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {exc!r} (re-run with KAFKAOPS_DEBUG=1 for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
