"""Where a long bench (kill sweep, soak) keeps its raw result, and what a result file says about its run.

docs/reliability.md may state only what a committed file under ``bench/results/`` shows, so each file
carries what is needed to judge it later: the commit the code was at (``-dirty`` when the tree had
changes), the machine (CPUs, load when it started), the exact arguments and inventory, and every
point's or roll's own outcome. The file is rewritten after each point/roll: a run that is stopped or
crashes still leaves what it measured (``"complete": false``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def default_path(bench: str, today: dt.date | None = None) -> Path:
    """``bench/results/<bench>-<date>.json``; a second run the same day gets ``-2``, ``-3``... (never
    overwrites a result someone may already have committed)."""
    stem = f"{bench}-{(today or dt.datetime.now(dt.UTC).date()).isoformat()}"
    path, n = RESULTS / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = RESULTS / f"{stem}-{n}.json"
    return path


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def header(bench: str, args: dict[str, Any], inventory: Path) -> dict[str, Any]:
    """What every result file starts with: which code, which machine, which arguments."""
    commit = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", "kafkaops", "bench"))
    return {
        "bench": bench,
        "started": now(),
        "commit": commit + ("-dirty" if dirty and commit else ""),
        "machine": {"nproc": os.cpu_count(), "loadavg_at_start": list(os.getloadavg()),
                    "python": platform.python_version(), "system": platform.platform()},
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in args.items()},
        "inventory": str(inventory),
        "complete": False,
    }


def write(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` whole (a temporary file renamed over the old one: never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)
