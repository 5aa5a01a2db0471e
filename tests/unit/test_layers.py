"""The lab is a user of the product, on its top floor (issue 29): nothing outside ``kafkaops/lab/`` imports
``kafkaops.lab`` — not the CLI, not the post-check, not an adapter.

Read from the source (AST), so every kind of import counts: at module level, inside a function (a lazy
import is still a dependency, it only fails later, on an admin host without the lab), and under
``if TYPE_CHECKING:`` (it names a type the product should not need). ``importlib.import_module("kafkaops.lab
...")`` with a literal counts too. The lab's own commands reach the CLI through the entry point
``kafkaops.commands`` (pyproject.toml), never by the CLI naming them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kafkaops"
LAB = PACKAGE / "lab"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lab_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: what`` for each import of ``kafkaops.lab`` in ``path`` (or ``source``, read as if it were
    ``path``'s): absolute, relative or through importlib."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    package = _module(path).split(".") if path.name == "__init__.py" else _module(path).split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[:len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None)
                   in ("import_module", "__import__"))):
            names = [node.args[0].value]
        hits = [n for n in names if n == "kafkaops.lab" or n.startswith("kafkaops.lab.")]
        if hits:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {hits[0]}")
    return found


def test_nothing_outside_the_lab_imports_the_lab() -> None:
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py")) if LAB not in path.parents
                 for hit in lab_imports(path)]
    assert offenders == [], "the product imports the lab:\n" + "\n".join(offenders)


def test_the_walk_sees_every_kind_of_import() -> None:
    """The detector itself: module level, lazy, TYPE_CHECKING, relative and importlib imports are found."""
    probe = ROOT / "kafkaops" / "cli" / "probe.py"  # never written: its source is given
    source = (
        "from typing import TYPE_CHECKING\n"
        "import kafkaops.lab.paths\n"
        "if TYPE_CHECKING:\n    from kafkaops.lab.spec import LabSpec\n"
        "def f():\n    from kafkaops.lab import lab\n    from ..lab import host\n"
        "    import importlib\n    importlib.import_module('kafkaops.lab.cli')\n"
        "from kafkaops import lab as l2\n"
        "from kafkaops.places import cache_dir\n"
    )
    hits = lab_imports(probe, source)  # relative imports resolve against kafkaops.cli
    lines = sorted(int(h.split(":")[1]) for h in hits)
    assert lines == [2, 4, 6, 7, 9, 10], hits
