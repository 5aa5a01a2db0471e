"""Build hook: the wheel carries what an operator's admin host needs besides the code.

Everything else is in ``pyproject.toml``. The runbooks, their generated docs and the example inventories
keep their sources at the top of the repo (``runbooks/``, ``docs/runbooks/``, ``inventory/``), where
operators review them; a build copies them into the package, where an installed kafkaops finds them with
``importlib.resources``:

* ``runbooks/*.yaml`` (and its README) -> ``kafkaops/runbooks/``
* ``docs/runbooks/*.md`` -> ``kafkaops/docs/runbooks/``
* ``docs/*.md`` -> ``kafkaops/docs/`` (the operator's documentation: ``kafkaops docs TOPIC`` prints it, and the
  hints name it so)
* ``inventory/*.example.yaml`` -> ``kafkaops/examples/inventory/`` (what an operator starts an inventory from)

An editable install copies nothing: the package then reads the checkout's sources directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

#: (source directory, glob, destination inside the package)
SHIPPED = (
    ("runbooks", "*.yaml", "kafkaops/runbooks"),
    ("runbooks", "README.md", "kafkaops/runbooks"),
    ("docs/runbooks", "*.md", "kafkaops/docs/runbooks"),
    ("docs", "*.md", "kafkaops/docs"),
    ("inventory", "*.example.yaml", "kafkaops/examples/inventory"),
)


class BuildPyWithData(build_py):
    """``build_py`` that also copies :data:`SHIPPED` into the build tree (not for an editable install)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for source, pattern, dest in SHIPPED:
            files = sorted((ROOT / source).glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: nothing matches {source}/{pattern}: the package would ship without it")
            target = Path(self.build_lib) / dest
            target.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, target / f.name)


setup(cmdclass={"build_py": BuildPyWithData})
