"""Helpers every command shares: output format, the console, the inventory option."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

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

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return getattr(self._console, name)


console = cast("Console", _LazyConsole(stderr=False))
err_console = cast("Console", _LazyConsole(stderr=True))


class Output(StrEnum):
    """How a command renders its result. ``json`` is stable and meant for tools."""

    table = "table"
    json = "json"
    markdown = "markdown"


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout (no rich markup, so pipes get clean JSON)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
