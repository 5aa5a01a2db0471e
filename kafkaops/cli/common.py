"""Helpers every command shares: output format, the console, the inventory option."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import typer

if TYPE_CHECKING:
    from rich.console import Console


class _LazyConsole:
    """A rich ``Console`` built on first use.

    Importing rich costs ~30 ms, a tenth of ``kafkaops status -o json``, which never prints through
    it; commands that do print pay for it when they first do.
    """

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def is_terminal(self) -> bool:
        """rich's answer, without importing rich when the stream is no terminal and no variable of rich's
        (``TTY_COMPATIBLE``, ``FORCE_COLOR``) says to treat it as one: the usual case of ``-o json`` read by
        a tool, which :func:`waiting` asks before every network wait."""
        if self._console is None and not {"TTY_COMPATIBLE", "FORCE_COLOR"} & os.environ.keys():
            stream = sys.stderr if self._stderr else sys.stdout
            try:
                if not stream.isatty():
                    return False
            except (AttributeError, ValueError):  # no stream, or a closed one: rich says False too
                return False
        return bool(self.__getattr__("is_terminal"))

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            class _Console(Console):
                def on_broken_pipe(self) -> None:
                    stdout_closed()

            self._console = _Console(stderr=self._stderr)
        return getattr(self._console, name)


console = cast("Console", _LazyConsole(stderr=False))
err_console = cast("Console", _LazyConsole(stderr=True))


class Output(StrEnum):
    """How a command renders its result. ``json`` is stable and meant for tools; ``markdown`` is for a
    task or a change review."""

    table = "table"
    json = "json"
    markdown = "markdown"


class PlanOutput(StrEnum):
    """How a procedure renders its plan: ``auto`` (the default) is the wide table on a terminal of at
    least 120 columns and ``plain`` otherwise (a narrow terminal, a log, a pipe); ``table`` and
    ``plain`` force one; ``markdown`` for the change review; ``json`` for tools."""

    auto = "auto"
    table = "table"
    plain = "plain"
    markdown = "markdown"
    json = "json"


# The options of a command that plans, then runs, a procedure it builds itself (switchover, offsets translate,
# migrate-to-kraft): spelled and explained once.
ReasonOpt = typer.Option(None, "--reason", "-r", help="Why (required unless --dry-run; goes to the audit log).")
TaskOpt = typer.Option(None, "--task", help="Task or ticket id, e.g. T123456.")
YesOpt = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation after showing the plan.")
DryRunOpt = typer.Option(False, "--dry-run", help="Observe and plan for real, show the plan, change nothing.")
OutputOpt = typer.Option(PlanOutput.auto, "--output", "-o",
                         help="Plan format: auto, table, plain (logs, narrow terminals), markdown (review), json.")
SavePlanOpt = typer.Option(None, "--save-plan", metavar="PATH", help="Write the plan for `kafkaops apply`.")


class TableOrJson(StrEnum):
    """For commands with nothing to paste into a review: ``--help`` lists, and click checks, only these."""

    table = "table"
    json = "json"


def _click_class(name: str) -> type[Exception]:
    """click's exception class ``name``, as typer's commands raise it.

    typer (0.26 on) runs on a copy of click it keeps private (``typer._click``) and exports one of its
    exceptions, ``BadParameter``; a ``click`` of another package would never match what typer raises. So
    the classes kafkaops catches are reached through that public class's bases, never the private module:
    a typer that moves its copy, or depends on click again, changes nothing here."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


#: Every command-line mistake click reports (an unknown command, a missing argument; exit 2).
USAGE_ERROR = _click_class("UsageError")
#: Every error click shows and exits with (a usage error, a declined prompt, ...): ``.show()``, ``.exit_code``.
CLICK_EXCEPTION = _click_class("ClickException")


class CommandLineError(typer.BadParameter):
    """A command-line mistake the option's type cannot see (``--param``, a regex, exclusive options):
    one line on stderr, like every kafkaops error, and the usage exit code (2)."""

    def format_message(self) -> str:
        return self.message

    def show(self, file: Any = None) -> None:
        sys.stderr.write(f"error: {self.format_message()}\n")


def stdout_closed() -> NoReturn:
    """The reader of our stdout is gone (``kafkaops status | head``): it has what it wanted, so exit as
    a process killed by SIGPIPE would, not with 1, which says "bug". Later writes go to /dev/null."""
    from kafkaops.errors import STDOUT_CLOSED

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(STDOUT_CLOSED)


def check_writable(path: Path, what: str, option: str, *, parents: bool = False) -> None:
    """Refuse an output file that could not be written before any work is done — not after a dry-run
    against the cluster or a scan whose result would be lost: a ConfigError (exit 3) naming the path.

    ``parents``: the writer creates missing directories (else the file's directory must exist). The
    probe is an anonymous temporary file: nothing is left behind.
    """
    import errno
    import tempfile

    from kafkaops.errors import ConfigError

    where = path.parent
    while parents and not where.exists() and where != where.parent:
        where = where.parent
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write {what}: {exc.strerror or exc}",
                          hint=f"pass another {option}") from None


def print_text(text: str) -> None:
    """Write ``text`` on stdout as is (JSON, Markdown: no rich markup or wrapping)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout (no rich markup, so pipes get clean JSON)."""
    print_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def checkpoint_prompt() -> Any:
    """How a step asks a manual checkpoint's question: a yes/no prompt on a terminal, else None
    (nobody to ask: only ``--confirmed NAME`` passes it). Never answered by ``--yes``."""
    if not sys.stdin.isatty():
        return None

    def ask(question: str) -> bool:
        import typer

        return bool(typer.confirm(question, default=False))

    return ask


def confirm_checkpoints(needed: list[tuple[str, str]], given: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Every manual checkpoint a plan asks for, confirmed before the run starts, and how each was.

    ``needed``: (name, text) pairs (:func:`kafkaops.steps.operator.pending_checkpoints`); ``given``: the
    ``--confirmed NAME`` values. A checkpoint not given is asked on a terminal (showing its text); with no
    terminal, or answered no, the run does not start: :class:`~kafkaops.errors.NotConfirmed` (exit 13),
    one line naming the checkpoint and the flag. ``--yes`` plays no part: it does not confirm one.
    """
    from kafkaops.errors import NotConfirmed

    out = dict.fromkeys(given, "--confirmed")
    ask = checkpoint_prompt()
    for name, text in needed:
        if name in out:
            continue
        if ask is None:
            raise NotConfirmed(f"checkpoint {name!r} is not confirmed: {text}",
                               hint=f"once it holds, pass --confirmed {name} (--yes does not confirm a checkpoint)")
        if not ask(f"Checkpoint {name}: {text}. Confirmed?"):
            raise NotConfirmed(f"checkpoint {name!r} was not confirmed at the prompt: {text}",
                               hint=f"once it holds, answer yes or pass --confirmed {name}")
        out[name] = "prompt"
    return out


class LiveStatus:
    """A run's live wait status on a terminal: rich's status line on stderr, redrawn in place (what the
    wait waits for, the value, elapsed/timeout) while the run's plain lines scroll above it; cleared when
    the wait ends. Only ever built for a terminal (:func:`live_status`): a log never gets a carriage return."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self._status: Any = None

    def __call__(self, text: str | None) -> None:
        from rich.text import Text

        if text is None:
            if self._status is not None:
                self._status.stop()
                self._status = None
            return
        if self._status is None:
            status = self.console.status(Text(text), spinner="dots")
            try:
                status.start()
            except Exception:  # another live display holds the terminal (rich allows one): a plain line
                self.console.print(Text(text), highlight=False)
                return
            self._status = status
        else:
            self._status.update(Text(text))


#: Seconds a wait lasts before :func:`waiting` shows its spinner: a quicker answer shows nothing (no flicker).
SPINNER_AFTER = 1.0


@contextmanager
def waiting(text: str, *, after: float | None = None) -> Iterator[None]:
    """A spinner on stderr saying what the command waits for (``asking kafka at HOST:PORT``), once the
    wait has lasted a second, while the body asks the network. On a terminal only: a log or a pipe gets
    nothing, and stdout (a table, JSON) is never touched. Without it a first connect to a slow or
    unreachable cluster was seconds of silence that looked like a hang."""
    if not err_console.is_terminal:
        yield
        return
    import threading

    from rich.text import Text

    shown: list[Any] = []
    lock = threading.Lock()

    def show() -> None:
        with lock:
            if not shown:
                status = err_console.status(Text(text), spinner="dots")
                try:
                    status.start()
                except Exception:  # a run's own live status holds the terminal (rich allows one): it says more
                    return
                shown.append(status)

    timer = threading.Timer(SPINNER_AFTER if after is None else after, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            for status in shown:
                status.stop()
            shown.clear()
            shown.append(None)  # a timer already past its cancel point shows nothing now


def live_status() -> LiveStatus | None:
    """The live status for a run on a terminal (stderr is one), else None: plain lines only."""
    return LiveStatus(err_console) if err_console.is_terminal else None


def bar(value: float, scale: float, width: int = 40) -> str:
    """A text bar of ``value`` on a ``scale`` as wide as ``width`` (the chart's unit; at least one block
    for any positive value, so a tiny figure still shows): ``service bench``'s rate and latency charts."""
    if scale <= 0 or value <= 0:
        return ""
    cells = value / scale * width
    full = int(cells)
    return "█" * full + ("▌" if cells - full >= 0.5 else "") or "▏"
