"""Where kafkaops keeps its state on the admin host: journals, audit log, local lock files.

One small module that the journal, the audit log and the lock all import, so that none of them has to
import another just to learn where ``$KAFKAOPS_HOME`` is (that is how ``audit`` and ``journal`` once
imported each other). It imports nothing of kafkaops but :mod:`kafkaops.places`, which decides every
place of the admin host.
"""

from __future__ import annotations

from pathlib import Path

from kafkaops.places import state_dir


def kafkaops_home() -> Path:
    """``$KAFKAOPS_HOME`` or ``$XDG_STATE_HOME/kafkaops`` (``~/.local/state/kafkaops``)."""
    return state_dir()


def runs_dir(home: Path | None = None) -> Path:
    """Directory holding one sub-directory per run."""
    return (home or kafkaops_home()) / "runs"
