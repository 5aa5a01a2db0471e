"""Programs on this admin host that kafkaops runs locally (the post-check's JVM): found, and which version.

``kafkaops doctor`` asks; the CLI never starts a process itself.
"""

from __future__ import annotations

import shutil
import subprocess


def version_line(program: str, flag: str = "-version", timeout: float = 20.0) -> tuple[str | None, bool, str]:
    """``(path, answered, "PATH: first line of its version output")``; ``(None, False, why)`` when it is
    not on PATH; ``answered`` is false when it could not be run or did not finish. ``java -version``
    prints to stderr; either stream is read."""
    found = shutil.which(program)
    if not found:
        return None, False, f"no {program} on PATH"
    try:
        out = subprocess.run([found, flag], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return found, False, f"{found}: {exc}"
    said = out.stderr or out.stdout
    return found, True, f"{found}: {said.splitlines()[0] if said else '?'}"
