"""Where kafkaops finds its configuration and keeps its state on an admin host: one module, one answer.

An operator installs kafkaops as a package on a cluster-management host (``pipx install``, a venv, a
Debian package) and configuration management writes its inventories into ``/etc`` — nothing is read
from the package's own directory or a checkout. The places, each overridable by one variable:

* inventories: ``--inventory FILE|DIR``, else ``$KAFKAOPS_INVENTORY`` (each restricts every lookup to
  exactly that file, or that directory's ``*.yaml``), else the **first** of
  ``$XDG_CONFIG_HOME/kafkaops/inventory/`` (``~/.config/...``: an operator's own) and
  ``$KAFKAOPS_SYSCONFDIR/inventory/`` (default ``/etc/kafkaops/inventory/``: Puppet's) that holds a
  ``*.yaml``. The first wins whole: a personal directory is never merged with the site's, so a name
  never resolves to a file the operator did not mean. Nothing found is a one-line configuration error
  listing every place searched (:func:`inventory_files`), never a silent fallback to the lab's inventory.
* state (journals, audit log, facts): ``$KAFKAOPS_HOME``, else ``$XDG_STATE_HOME/kafkaops``
  (``~/.local/state/kafkaops``).
* file locks of clusters without ZooKeeper and etcd: ``$KAFKAOPS_LOCK_DIR``, else
  ``/var/lib/kafkaops/locks`` — a directory the admin host's operators share, not a home directory, or
  two operators would not exclude each other.
* downloads and builds (the post-check reader's jars): ``$KAFKAOPS_CACHE``, else
  ``$XDG_CACHE_HOME/kafkaops`` (``~/.cache/kafkaops``).

``kafkaops doctor`` prints all of them and which inventory directory is in use. This module imports
nothing of kafkaops but the error tree: everything else (the engine, the lab, the CLI) may import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kafkaops.errors import ConfigError

#: Names the root of the system-wide configuration (``/etc/kafkaops``); set only to test or to relocate it.
SYSCONFDIR_ENV = "KAFKAOPS_SYSCONFDIR"
SYSCONFDIR = "/etc/kafkaops"
INVENTORY_ENV = "KAFKAOPS_INVENTORY"
DEFAULT_LOCK_DIR = "/var/lib/kafkaops/locks"


@dataclass(frozen=True)
class Given:
    """What the command line's root options named for this process (``--inventory``, ``--runbooks``,
    ``check --jars``): the CLI hands them over with :func:`use` before a command runs, and the lookups
    below read them before the environment. Never written into ``os.environ``: a child process, a test,
    or the next command of a long-lived process must not inherit one command's options.

    Attributes:
        inventory: ``--inventory FILE|DIR``, resolved.
        runbooks: ``--runbooks DIR`` (repeatable: the first wins), resolved.
        reader_jars: ``check --jars DIR``: where the post-check reader's ``kafka-clients`` jar is.
    """

    inventory: Path | None = None
    runbooks: tuple[Path, ...] = ()
    reader_jars: Path | None = None


_given = Given()


def use(given: Given) -> None:
    """The command line's places for this process, replacing the previous command's (the CLI calls it
    once per invocation, before the command runs)."""
    global _given
    _given = given


def given() -> Given:
    """What the command line named (all unset outside the CLI)."""
    return _given


def _xdg(variable: str, default: str) -> Path:
    value = os.environ.get(variable)
    return Path(value).expanduser() if value else Path(default).expanduser()


def config_dir() -> Path:
    """The operator's own configuration: ``$XDG_CONFIG_HOME/kafkaops`` (``~/.config/kafkaops``)."""
    return _xdg("XDG_CONFIG_HOME", "~/.config") / "kafkaops"


def sysconf_dir() -> Path:
    """The site's configuration, written by configuration management: ``/etc/kafkaops``."""
    return Path(os.environ.get(SYSCONFDIR_ENV) or SYSCONFDIR)


def state_dir() -> Path:
    """``$KAFKAOPS_HOME``, else ``$XDG_STATE_HOME/kafkaops`` (``~/.local/state/kafkaops``)."""
    env = os.environ.get("KAFKAOPS_HOME")
    return Path(env).expanduser() if env else _xdg("XDG_STATE_HOME", "~/.local/state") / "kafkaops"


def lock_dir() -> Path:
    """``$KAFKAOPS_LOCK_DIR``, else ``/var/lib/kafkaops/locks`` (shared by the admin host's operators)."""
    return Path(os.environ.get("KAFKAOPS_LOCK_DIR") or DEFAULT_LOCK_DIR).expanduser()


def cache_dir() -> Path:
    """``$KAFKAOPS_CACHE``, else ``$XDG_CACHE_HOME/kafkaops`` (``~/.cache/kafkaops``)."""
    env = os.environ.get("KAFKAOPS_CACHE")
    return Path(env).expanduser() if env else _xdg("XDG_CACHE_HOME", "~/.cache") / "kafkaops"


def inventory_dirs() -> list[Path]:
    """The directories searched when neither ``--inventory`` nor ``$KAFKAOPS_INVENTORY`` says: in order."""
    return [config_dir() / "inventory", sysconf_dir() / "inventory"]


def example_inventories() -> list[Path]:
    """The ``*.example.yaml`` files of the inventory directories: never read as inventories (an example's
    made-up hosts must not be found by name), but ``kafkaops doctor`` names them so a copied example left
    with its suffix is not a mystery."""
    out: list[Path] = []
    for d in inventory_dirs():
        try:
            out += sorted(p for p in d.glob("*.yaml") if ".example." in p.name and p.is_file())
        except OSError:
            continue
    return out


def _yaml_in(directory: Path) -> list[Path]:
    """The inventories of a directory: its ``*.yaml``, examples (``*.example.yaml``) left out."""
    try:
        return sorted(p for p in directory.glob("*.yaml") if ".example." not in p.name and p.is_file())
    except OSError:
        return []


@dataclass(frozen=True)
class Place:
    """One place inventories are looked for, and what it holds here.

    Attributes:
        name: How the operator names it (``--inventory``, ``$KAFKAOPS_INVENTORY``, a directory).
        path: The file or directory, or ``None`` (option not given, variable not set).
        files: The inventories it holds.
    """

    name: str
    path: Path | None
    files: tuple[Path, ...]

    def describe(self) -> str:
        if self.path is None:
            return f"{self.name} (not set)"
        if self.path.is_file():
            return f"{self.path}"
        if not self.path.exists():
            return f"{self.path} (absent)"
        return f"{self.path} ({len(self.files)} inventor{'y' if len(self.files) == 1 else 'ies'})"


def _explicit(name: str, value: Path) -> Place:
    return Place(name, value, (value,) if not value.is_dir() else tuple(_yaml_in(value)))


def inventory_places(inventory: Path | None = None) -> tuple[list[Place], Place | None]:
    """Every place in search order, and the one in use (``None``: no inventory anywhere). ``inventory``
    is a command's own option; else the root ``--inventory`` (:func:`given`)."""
    inventory = inventory if inventory is not None else _given.inventory
    env = os.environ.get(INVENTORY_ENV)
    places = [Place("--inventory", inventory, ()) if inventory is None else _explicit("--inventory", inventory),
              Place(f"${INVENTORY_ENV}", None, ()) if not env else _explicit(f"${INVENTORY_ENV}", Path(env))]
    places += [Place(str(d), d, tuple(_yaml_in(d))) for d in inventory_dirs()]
    if inventory is not None:
        return places, places[0]
    if env:
        return places, places[1]
    return places, next((p for p in places[2:] if p.files), None)


def searched(inventory: Path | None = None) -> str:
    """The places searched, in order, for one line: ``--inventory (not set), ... , /etc/... (absent)``."""
    places, _ = inventory_places(inventory)
    return ", ".join(p.describe() for p in places)


def inventory_files(inventory: Path | None = None) -> list[Path]:
    """The inventories a host or cluster name is looked up in (see the module docstring).

    Raises:
        ConfigError: No inventory anywhere: one line naming every place searched, in order.
    """
    places, used = inventory_places(inventory)
    if used is None or not used.files:
        where = used.name if used is not None else "anywhere"
        raise ConfigError(f"no inventory found {'in ' + where if used is not None else where}: searched "
                          + ", ".join(p.describe() for p in places),
                          hint=f"put the cluster's inventory in {inventory_dirs()[0]}/ or "
                               f"{inventory_dirs()[1]}/, or pass --inventory FILE (`kafkaops docs install`)")
    return list(used.files)


def shipped(package_dir: str, source_dir: str, pattern: str) -> Path:
    """A directory the build copies into the package (setup.py's ``SHIPPED``): the package's own copy when it
    holds a ``pattern`` file (an installed kafkaops needs no checkout), else — in a checkout, or an editable
    install of one, where nothing is copied — the repo's ``source_dir``, its source."""
    from importlib.resources import files

    copy = Path(str(files("kafkaops"))) / package_dir
    if copy.is_dir() and any(copy.glob(pattern)):
        return copy
    return Path(__file__).resolve().parents[1] / source_dir


def shipped_docs() -> Path:
    """The operator's documentation (``docs/*.md``, shipped as ``kafkaops/docs/``): what ``kafkaops docs``
    prints, and what every hint naming ``kafkaops docs TOPIC`` points to."""
    return shipped("docs", "docs", "*.md")
