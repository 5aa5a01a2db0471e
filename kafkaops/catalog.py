"""Where the runbooks are, each parsed at most once per process, and the step kinds they are checked against.

Runbooks are found by name in the packaged ``kafkaops/runbooks/`` directory (a wheel's copy of the repo's
``runbooks/``), or in the CLI's ``--runbooks DIR``, else ``$KAFKAOPS_RUNBOOKS``; never in the current directory.

One ``kafkaops reboot HOST`` parses ``reboot.yaml`` once: :func:`parsed` keeps each file's parse (or its
error) for the process, so the command line built from it at start-up and the run that checks its steps
after :func:`load_plugins` share one :class:`~kafkaops.engine.runbook.Runbook`. A file edited since (its
size or modification time changed) is parsed again: a long-lived process never runs a stale procedure.

:func:`load_plugins` imports the step kinds (and the command hooks beside them) once per process: a run, a
resume, ``runbooks list --check`` and the procedure commands need them; ``kafkaops --help`` and
``kafkaops status`` never import one.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from kafkaops.engine.runbook import Runbook, check_step_kinds, load_runbook
from kafkaops.errors import ConfigError
from kafkaops.places import given, shipped

_PLUGINS = ("kafkaops.steps",)
_loaded_plugins: set[str] = set()
#: path -> ((mtime_ns, size), the parse or its error)
_parsed: dict[str, tuple[tuple[int, int], Runbook | ConfigError]] = {}


def load_plugins() -> None:
    """Import the modules that register step kinds, each once per process (a second call imports nothing).

    ``kafkaops.steps`` registers the built-in step kinds; ``KAFKAOPS_PLUGINS`` (comma-separated module
    names) adds more.
    """
    extra = [m.strip() for m in os.environ.get("KAFKAOPS_PLUGINS", "").split(",") if m.strip()]
    for name in (*_PLUGINS, *extra):
        if name in _loaded_plugins:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name) and name not in extra:
                continue
            raise
        register_all = getattr(module, "register_all", None)
        if callable(register_all):
            register_all()
        _loaded_plugins.add(name)


def parsed(path: str | Path) -> Runbook | ConfigError:
    """The runbook in ``path`` parsed without its step kinds checked (no step kind need be imported), or
    why it does not parse; each file once per process (again only when it changed)."""
    key = str(path)
    try:
        st = os.stat(key)
    except OSError:
        stamp = None
    else:
        stamp = (st.st_mtime_ns, st.st_size)
    hit = _parsed.get(key)
    if stamp is not None and hit is not None and hit[0] == stamp:
        return hit[1]
    result: Runbook | ConfigError
    try:
        result = load_runbook(key, check_kinds=False)
    except ConfigError as exc:
        result = exc
    if stamp is not None:
        _parsed[key] = (stamp, result)
    return result


def load(path: str | Path, *, check_kinds: bool = True) -> Runbook:
    """The runbook in ``path`` (:func:`parsed`), its steps checked against the registered step kinds
    unless ``check_kinds`` is false.

    Raises:
        ConfigError: Naming the file, line, step index and the fix.
    """
    rb = parsed(path)
    if isinstance(rb, ConfigError):
        if check_kinds:  # the error a checked load reports first (a kind error may come before this one)
            load_runbook(path)
        raise rb
    if check_kinds:
        check_step_kinds(rb)
    return rb


def packaged_runbooks() -> Path:
    """The runbooks shipped with kafkaops: the package's own copy (``kafkaops/runbooks/``, which a build
    copies from the repo's ``runbooks/``: an installed kafkaops needs no checkout), else — in a checkout,
    or an editable install of one — the repo's ``runbooks/``, their source."""
    return shipped("runbooks", "runbooks", "*.yaml")


def runbook_dirs() -> list[Path]:
    """Where runbooks live: the CLI's ``--runbooks DIR`` (:func:`kafkaops.places.given`), else
    ``$KAFKAOPS_RUNBOOKS`` (``os.pathsep``-separated), else the packaged ``runbooks/`` directory.

    Never the current directory: a ``./runbooks`` copy (an old checkout, a colleague's edit without the
    pre-flight) would silently replace the reviewed procedure of the same name.
    """
    if given().runbooks:
        return list(given().runbooks)
    env = os.environ.get("KAFKAOPS_RUNBOOKS")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [packaged_runbooks()]


def runbook_files(dirs: Sequence[Path] | None = None) -> dict[str, Path]:
    """Runbook name -> file; the first directory wins on duplicates."""
    found: dict[str, Path] = {}
    for d in dirs if dirs is not None else runbook_dirs():
        for f in sorted(d.glob("*.y*ml")):
            if f.suffix in (".yaml", ".yml"):
                found.setdefault(f.stem, f)
    return found


_RUNBOOK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def runbook_file(name: str, dirs: Sequence[Path] | None = None) -> Path | None:
    """The file of the runbook called ``name`` (``NAME.yaml`` or ``NAME.yml``; the first directory wins),
    without listing or parsing anything: the CLI asks this for every command word it does not know."""
    if not _RUNBOOK_NAME.match(name) or name.endswith((".yaml", ".yml")):
        return None
    for d in dirs if dirs is not None else runbook_dirs():
        for suffix in (".yaml", ".yml"):
            f = d / f"{name}{suffix}"
            if f.is_file():
                return f
    return None


def find_runbook(name: str, dirs: Sequence[Path] | None = None, *, check_kinds: bool = True) -> Runbook:
    """The runbook called ``name`` (or at path ``name``), parsed once per process (:func:`load`).

    Args:
        check_kinds: Check its steps against the registered step kinds (:func:`load_plugins` first).
    """
    if name.endswith((".yaml", ".yml")) and Path(name).exists():
        return load(name, check_kinds=check_kinds)
    files = runbook_files(dirs)
    if name not in files:
        import difflib

        close = difflib.get_close_matches(name, sorted(files), n=1)
        raise ConfigError(
            f"no runbook named {name!r}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "`kafkaops runbooks list` shows them",
        )
    return load(files[name], check_kinds=check_kinds)
