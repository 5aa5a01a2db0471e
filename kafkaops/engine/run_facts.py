"""Facts a step must remember across a crash, beside the run's journal (``facts.json``).

The journal records what the runner did; these record what the *world* was before a step changed it:
the boot id before a reboot (so a resumed reboot step can tell it already happened), and the pool state
before a depool (so the run repools only what it depooled — never a host someone else had taken out).

The runner opens the store of the run it drives and hands it to every step as ``ctx.facts``
(:class:`~kafkaops.engine.context.RunContext`); a dry-run's lives in memory for the one plan.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

#: The store's file in the run's directory, beside ``journal.jsonl``.
FACTS_FILE = "facts.json"


class RunFacts:
    """A run's facts (see the module docstring). Written atomically (temp file, fsync, rename, directory
    fsync) *before* the side effect. A dry-run keeps them in memory (``path`` None)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._mem: dict[str, Any] = {}

    def _load(self) -> dict[str, Any]:
        if self.path is None:
            return self._mem
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def set(self, key: str, value: Any) -> None:
        data = self._load()
        data[key] = value
        if self.path is None:
            self._mem = data
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".facts.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself must survive a power loss, or a resume reboots twice
        finally:
            os.close(dfd)


def in_memory() -> RunFacts:
    """A store that never touches the disk: a dry-run's, or a step's outside any run."""
    return RunFacts(None)
