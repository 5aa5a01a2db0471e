"""Build hook: the lab's wheel carries the lab's own inventories (``inventory/lab*.yaml`` at the top of the
repo, where they are reviewed beside the examples) as ``kafkaops_lab/inventory/``.

An editable install copies nothing: :func:`kafkaops_lab.inventories.inventory_dir` then reads the checkout's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent.parent / "inventory"


class BuildPyWithInventories(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        files = sorted(SOURCE.glob("lab*.yaml"))
        if not files:
            raise SystemExit(f"lab/setup.py: no {SOURCE}/lab*.yaml: build the lab's wheel from the repo "
                             "(python -m build --wheel lab)")
        target = Path(self.build_lib) / "kafkaops_lab" / "inventory"
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, target / f.name)


setup(cmdclass={"build_py": BuildPyWithInventories})
