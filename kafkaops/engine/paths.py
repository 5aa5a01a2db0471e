"""Where kafkaops keeps its state on the admin host: journals, audit log, local lock files.

One small module that the journal, the audit log and the lock all import, so that none of them has to
import another just to learn where ``$KAFKAOPS_HOME`` is (that is how ``audit`` and ``journal`` once
imported each other). It imports nothing of kafkaops.
"""

from __future__ import annotations

import os
from pathlib import Path


def kafkaops_home() -> Path:
    """``$KAFKAOPS_HOME`` or ``~/.local/state/kafkaops`` (XDG state dir)."""
    env = os.environ.get("KAFKAOPS_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "kafkaops"


def runs_dir(home: Path | None = None) -> Path:
    """Directory holding one sub-directory per run."""
    return (home or kafkaops_home()) / "runs"
