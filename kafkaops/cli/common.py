"""Helpers every command shares: output format, the console, the inventory option."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Any

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


class Output(StrEnum):
    """How a command renders its result. ``json`` is stable and meant for tools."""

    table = "table"
    json = "json"
    markdown = "markdown"


def print_json(data: Any) -> None:
    """Write ``data`` as JSON on stdout (no rich markup, so pipes get clean JSON)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
