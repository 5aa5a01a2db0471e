"""DESIGN rule: the engine imports no client library and nothing of the layers above it — not even lazily.

Checked on the source (AST), file by file, so a lazy import inside a function that no unit test happens
to call is caught as surely as a top-level one. Every way of importing counts: ``import x``,
``from x import y``, relative imports, imports under ``if TYPE_CHECKING:``, and
``importlib.import_module("x")`` / ``__import__("x")`` with a literal name; the engine's lazy export
table (``_EXPORTS`` in ``engine/__init__.py``) may only name engine modules.

Why it matters: the engine is the part every procedure trusts (journal, resume, lock, plans). If it
imported kazoo or ``kafkaops.systems``, a change in an adapter could break resume, and ``kafkaops
runbooks list`` would pay for client libraries it never uses.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[3] / "kafkaops" / "engine"

#: Client and presentation libraries, and the kafkaops layers built on top of the engine.
FORBIDDEN = (
    "kazoo",
    "confluent_kafka",
    "requests",
    "rich",
    "paramiko",
    "conftool",
    "pyspark",
    "urllib3",
    "typer",
    "kafkaops.systems",
    "kafkaops.steps",
    "kafkaops.cli",
    "kafkaops.health",
    "kafkaops_lab",
    "kafkaops.environment",
)

#: ``yaml`` only where the engine truly parses runbook YAML.
ALLOWED_ONLY_IN = {"yaml": ("runbook.py",)}


def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def imported_names(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """Every module name ``source`` imports, with its line: plain, from-, relative and dynamic imports,
    at any depth (functions, ``TYPE_CHECKING`` blocks, ``try``...)."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module, is_package)
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from kafkaops import systems` imports the module kafkaops.systems
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((node.lineno, arg.value))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets
        ) and isinstance(node.value, ast.Dict):
            # the lazy export table: its values are modules imported on first attribute access
            found += [(v.lineno, v.value) for v in node.value.values
                      if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return found


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(source: str, module: str, filename: str, *, is_package: bool = False) -> list[str]:
    out: list[str] = []
    reported: list[tuple[int, str]] = []
    for line, name in imported_names(source, module, is_package=is_package):
        if any(n == line and _matches(name, r) for n, r in reported):
            continue  # `from kazoo.client import KazooClient`: said once, as kazoo.client
        bad = next((f for f in FORBIDDEN if _matches(name, f)), None)
        if bad is None:
            bad = next((lib for lib, files in ALLOWED_ONLY_IN.items()
                        if _matches(name, lib) and filename not in files), None)
        if bad is not None:
            reported.append((line, name))
            out.append(f"{filename}:{line}: imports {name}")
    return out


def _engine_files() -> list[Path]:
    files = sorted(ENGINE.rglob("*.py"))
    assert len(files) >= 10, f"engine files not found under {ENGINE}"
    return files


def _module(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ENGINE.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def test_engine_imports_no_client_library_and_no_upper_layer() -> None:
    found = []
    for path in _engine_files():
        module, is_package = _module(path)
        found += violations(path.read_text(), module, path.relative_to(ENGINE).as_posix(),
                            is_package=is_package)
    assert found == [], "the engine must not import these (move the code to systems/ or cli/):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import kazoo",
        "import kazoo.client as kc",
        "from kazoo.client import KazooClient",
        "def f():\n    import requests\n",
        "def f():\n    from rich.table import Table\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kafkaops.systems.kafka import KafkaAdmin\n",
        "from kafkaops import systems",
        "from ..systems import zookeeper",
        "from .. import cli",
        "import importlib\nimportlib.import_module('confluent_kafka.admin')",
        "from importlib import import_module\nimport_module('kafkaops.steps')",
        "__import__('paramiko')",
        "import urllib3",
        "import kafkaops.environment",
        "from kafkaops.health.check import parse_since",
        "def f():\n    from kafkaops_lab import lab\n",
        "import typer",
        "import conftool",
        "import pyspark.sql",
        "import yaml",
        "_EXPORTS = {'KafkaAdmin': 'kafkaops.systems.kafka'}",
    ],
)
def test_the_check_catches_every_form_of_import(source: str) -> None:
    assert violations(source, "kafkaops.engine.lock", "lock.py") != []


@pytest.mark.parametrize(
    "source",
    [
        "import json, os",
        "from kafkaops.errors import ConfigError",
        "from kafkaops.engine.state_files import kafkaops_home",
        "from . import step",
        "import richtext",  # a name that merely starts like a forbidden one
        "_EXPORTS = {'Runner': 'kafkaops.engine.runner'}",
    ],
)
def test_the_check_lets_the_engine_import_itself_and_the_stdlib(source: str) -> None:
    assert violations(source, "kafkaops.engine.lock", "lock.py") == []


def test_yaml_only_in_the_runbook_loader() -> None:
    assert violations("import yaml", "kafkaops.engine.runbook", "runbook.py") == []
    assert violations("import yaml", "kafkaops.engine.plan", "plan.py") == ["plan.py:1: imports yaml"]
