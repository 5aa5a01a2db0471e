"""Entry point: builds the Typer app from one module per command group and maps errors to exit codes.

Only the module that owns the command being run is imported and registered (``--help`` registers all),
and each keeps heavy imports (confluent_kafka, kazoo, paramiko, pyspark) inside functions:
``kafkaops --help`` has to stay instant and ``kafkaops status`` fast.

The procedure commands (``reboot``, ``rolling-deploy``, ...) are not written here: they are generated
from the runbooks that declare a ``command:`` (:mod:`kafkaops.cli.runbook_commands`). The root group asks for
one only when its name is not a built-in command, and reads only that runbook's file; ``--help`` lists
them all. ``kafkaops status`` never reads a runbook.

Command groups of other packages register through the entry-point group ``kafkaops.commands``
(:data:`~kafkaops.cli.builtin.ENTRY_POINT_GROUP`): ``kafkaops lab`` is the lab's, which the product never
imports. They are looked up only when the command word is neither built in nor a runbook (or for
``--help``): reading every installed distribution's metadata costs tens of milliseconds.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, cast

import typer
from typer.core import TyperGroup

from kafkaops import __version__
from kafkaops.cli.builtin import COMMAND_MODULES, ENTRY_POINT_GROUP
from kafkaops.errors import EXIT_CODES, KafkaOpsError

_EPILOG = "Exit codes: " + "; ".join(f"{code} {what}" for code, what in sorted(EXIT_CODES.items()))


class KafkaopsGroup(TyperGroup):
    """The root command group: the built-in commands, plus one command per runbook that declares one."""

    def list_commands(self, ctx: Any) -> list[str]:
        from kafkaops.cli.runbook_commands import alias_names

        builtin = super().list_commands(ctx)
        return [n for n in alias_names() if n not in self.commands] + builtin

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name not in COMMAND_MODULES:  # a built-in never falls back to a runbook
            from kafkaops.cli.runbook_commands import alias_command

            cmd = alias_command(cmd_name)
        return cmd

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        from kafkaops.cli.common import USAGE_ERROR

        try:
            return super().resolve_command(ctx, args)
        except USAGE_ERROR as error:
            exc = cast(Any, error)
            if args and "Did you mean" not in exc.message:
                import difflib

                from kafkaops.cli.runbook_commands import is_runbook

                if is_runbook(args[0]):
                    exc.message += (f" Runbook {args[0]} declares no command of its own: "
                                    f"`kafkaops run {args[0]} TARGET`.")
                else:
                    close = difflib.get_close_matches(args[0], self.list_commands(ctx), n=1)
                    if close:
                        exc.message = exc.message.rstrip(".") + f". Did you mean {close[0]!r}?"
            raise


app = typer.Typer(
    cls=KafkaopsGroup,
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


def _runbooks(value: list[str] | None) -> list[str] | None:
    """``--runbooks DIR``: where runbooks are read (:func:`kafkaops.places.use`), set while the root
    options are parsed (an eager option) so the command named after them is found there."""
    from pathlib import Path

    from kafkaops import places

    for d in value or ():
        if not Path(d).is_dir():
            from kafkaops.errors import ConfigError

            raise ConfigError(f"{d}: no such runbook directory", hint="check the --runbooks path")
    places.use(places.Given(runbooks=tuple(Path(d).resolve() for d in value or ())))
    return value


#: ``-v`` was given: an internal error shows its traceback.
_verbose = False


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    inventory: str | None = typer.Option(
        None, "--inventory", "-i", metavar="FILE|DIR",
        help="Inventory (a file, or a directory of them) for every command. Else $KAFKAOPS_INVENTORY, else the "
             "first of $XDG_CONFIG_HOME/kafkaops/inventory/ (~/.config/...) and /etc/kafkaops/inventory/ that "
             "holds a *.yaml; never the lab's (`kafkaops doctor` shows which is in use)."),
    runbooks: list[str] | None = typer.Option(
        None, "--runbooks", metavar="DIR", callback=_runbooks, is_eager=True,
        help="Read the runbooks (the procedure commands, `run`, `runbooks`) from DIR instead of those shipped "
             "with kafkaops (repeatable: the first wins; else $KAFKAOPS_RUNBOOKS)."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v",
        help="Show what kafkaops and its client libraries (librdkafka, kazoo, paramiko, HTTP) log, on stderr as "
             "it happens (secrets redacted), and an internal error's traceback. Every run also keeps this "
             "log in its directory: debug.log beside journal.jsonl."),
) -> None:
    """Kafka operators' runbooks as safe, resumable procedures."""
    from dataclasses import replace
    from pathlib import Path

    from kafkaops import places

    if verbose:
        from kafkaops.engine import debug_log

        global _verbose
        _verbose = True
        debug_log.verbose()

    if inventory and not Path(inventory).exists():
        from kafkaops.errors import ConfigError

        raise ConfigError(f"{inventory}: no such inventory file or directory", hint="check the --inventory path")
    places.use(replace(places.given(), inventory=Path(inventory).resolve() if inventory else None))


_VALUED_ROOT_OPTIONS = ("--inventory", "-i", "--runbooks")


def requested_command(argv: list[str]) -> str | None:
    """The command word in ``argv`` (after the root options), or None for ``--help``/``--version``."""
    args = iter(argv)
    for arg in args:
        if arg in _VALUED_ROOT_OPTIONS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def requested_runbooks(argv: list[str]) -> list[str]:
    """The ``--runbooks DIR`` values among the root options of ``argv``."""
    out = []
    args = iter(argv)
    for arg in args:
        if arg in _VALUED_ROOT_OPTIONS:
            value = next(args, None)
            if arg == "--runbooks" and value is not None:
                out.append(value)
        elif arg.startswith("--runbooks="):
            out.append(arg.split("=", 1)[1])
        elif not arg.startswith("-"):
            break
    return out


def _is_procedure(word: str, runbooks: list[str]) -> bool:
    """Is ``word`` a runbook's name (then its generated command is all ``kafkaops WORD`` needs)?"""
    from pathlib import Path

    from kafkaops.catalog import runbook_dirs, runbook_file

    dirs = [Path(d) for d in runbooks] if runbooks else runbook_dirs()
    return runbook_file(word, dirs) is not None


_registered: set[str] = set()


def command_entry_points() -> dict[str, Any]:
    """The command groups other packages add: name -> entry point (the first installed wins on a name; a
    built-in command's name is never taken over)."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in COMMAND_MODULES:
            found.setdefault(ep.name, ep)
    return found


def _register_entry_point(name: str, ep: Any) -> None:
    if f"ep:{name}" in _registered:
        return
    _registered.add(f"ep:{name}")
    app.add_typer(ep.load(), name=name)


def register(only: str | None = None, *, runbooks: list[str] | None = None) -> typer.Typer:
    """Register the command modules on ``app`` (idempotent) and return it: just the module that owns
    ``only``; none when ``only`` names a runbook (its command is generated by the root group); or all
    of them (help, completion, unknown words — click then lists every command or suggests the
    closest)."""
    modules = list(dict.fromkeys(COMMAND_MODULES.values()))  # --help lists them in this order
    plugins: dict[str, Any] | None = None
    if only in COMMAND_MODULES:
        modules = [COMMAND_MODULES[only]]
    elif only is not None and _is_procedure(only, runbooks or []):
        modules = []
    else:
        plugins = command_entry_points()
        if only in plugins:
            modules, plugins = [], {only: plugins[only]}
    for name, ep in (plugins or {}).items():
        _register_entry_point(name, ep)
    for name in modules:
        if name in _registered:
            continue
        _registered.add(name)
        importlib.import_module(f"kafkaops.cli.{name}").register(app)
    return app


def main() -> None:
    """Run the CLI; turn every expected failure into one line on stderr and its documented exit code."""
    from kafkaops.systems.audit_sinks import install

    # Every audit log a command builds relays to the sinks KAFKAOPS_AUDIT_TCP / KAFKAOPS_AUDIT_WEBHOOK
    # configure (the engine imports no network client: the program that wires kafkaops does it, once).
    install()
    register(only=requested_command(sys.argv[1:]), runbooks=requested_runbooks(sys.argv[1:]))
    try:
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:  # click returns (not raises) a command's typer.Exit(code) here
            sys.exit(rc)
    except KafkaOpsError as exc:
        from rich.text import Text

        from kafkaops.cli.common import err_console

        # The message may carry remote stderr or observed values: text, never console markup
        # (a "[/usr/...]" must not crash this handler, a "[error]" must not vanish).
        err_console.print(Text.assemble(("error:", "bold red"), " ", str(exc)), highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:  # a prompt ended (Ctrl-C or Ctrl-D at it): nothing was started
        from kafkaops.errors import Declined

        sys.stderr.write("error: nothing started: the prompt was ended before an answer\n")
        sys.exit(Declined.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:  # click usage errors and bugs
        # typer ships its own copy of click: `import click` would find another package's click whose
        # exception classes never match, and report a typo as a bug (kafkaops.cli.common says how).
        from kafkaops.cli.common import CLICK_EXCEPTION

        if isinstance(exc, CLICK_EXCEPTION):
            shown = cast(Any, exc)
            shown.show()
            sys.exit(shown.exit_code)
        if _verbose or os.environ.get("KAFKAOPS_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {exc!r} (re-run with -v for the traceback)\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
