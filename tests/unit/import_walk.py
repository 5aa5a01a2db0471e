"""The import walk shared by test_layers.py and test_import_cycles.py: who imports what, read from the source.

Read from the AST, not from ``sys.modules``, so every kind of import counts whether or not a test happens to
execute it:

* module level, and inside a function (a lazy import is still a dependency: it only fails later, and more
  rarely — on an admin host without the lab, or in the one branch no test took);
* under ``if TYPE_CHECKING:`` (it never executes, but it names a type the importer should not need, and it
  is how a loop hides: issue 30 wants none, type-only included) — each import says whether it is type-only;
* relative imports (resolved against the importing module's package);
* ``importlib.import_module("...")`` / ``__import__("...")`` with a literal name;
* a package's lazy export table (``_EXPORTS = {"Name": "module"}``): its modules are imported on first
  attribute access, and ``from kafkaops.engine import Runner`` is an import of the module defining ``Runner``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kafkaops"
#: The lab: a distribution of its own (``lab/``), walked with the product so its imports obey the layers too.
LAB_PACKAGE = ROOT / "lab" / "kafkaops_lab"


@dataclass(frozen=True)
class Import:
    """One name an import statement (or call, or export table) brings in, as written, made absolute."""

    line: int
    name: str
    type_only: bool


@dataclass(frozen=True)
class Edge:
    """``source`` imports the kafkaops module ``target`` (resolved to a module that exists) at ``path:line``."""

    source: str
    target: str
    path: Path
    line: int
    type_only: bool

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def module_name(path: Path) -> str:
    """``kafkaops/engine/__init__.py`` -> ``kafkaops.engine``; ``kafkaops/cli/main.py`` -> ``kafkaops.cli.main``;
    ``lab/kafkaops_lab/net.py`` -> ``kafkaops_lab.net``."""
    base = LAB_PACKAGE.parent if path.is_relative_to(LAB_PACKAGE) else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the product and of the lab."""
    return {module_name(path): path for pkg in (PACKAGE, LAB_PACKAGE) for path in sorted(pkg.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``), its body only."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    inside.update(id(n) for n in ast.walk(stmt))
    return inside


def _export_table(tree: ast.Module) -> ast.Dict | None:
    for node in tree.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "_EXPORTS" and isinstance(value, ast.Dict):
            return value
    return None


@functools.cache
def exports(path: Path) -> dict[str, str]:
    """A package's lazy export table (``_EXPORTS = {"Name": "module"}``), if it has one."""
    if path.name != "__init__.py" or not path.is_file():
        return {}
    table = _export_table(ast.parse(path.read_text()))
    if table is None:
        return {}
    return {str(k.value): str(v.value) for k, v in zip(table.keys, table.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a (possibly relative) ``from X import`` names, seen from ``package``."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = package
    for _ in range(node.level - 1):
        anchor = anchor.rpartition(".")[0]
    return f"{anchor}.{base}" if base else anchor


def _dynamic_import(node: ast.Call) -> str | None:
    """The module of ``import_module("x")`` / ``__import__("x")`` with a literal name, else None."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def imports(path: Path, source: str | None = None) -> list[Import]:
    """Every name ``path`` (or ``source``, read as if it were ``path``'s) imports, absolute, with its line.

    ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (``c`` may be a module); relative imports resolve
    against the module's package; ``importlib.import_module``/``__import__`` with a literal, and the values
    of an ``_EXPORTS`` table, count as imports.
    """
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only = _type_checking_nodes(tree)
    found: list[Import] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_import(node)):
            names = [dynamic]
        if names:
            assert isinstance(node, (ast.Import, ast.ImportFrom, ast.Call))
            found += [Import(node.lineno, name, id(node) in type_only) for name in names]
    table = _export_table(tree)
    if table is not None:  # imported on first attribute access: lazily, but imported
        found += [Import(v.lineno, v.value, False) for v in table.values
                  if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return found


def _nearest(name: str, known: Mapping[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges(path: Path, known: Mapping[str, Path], source: str | None = None) -> list[Edge]:
    """The kafkaops modules ``path`` imports (each import resolved to the deepest module that exists), one
    edge per import, with its line and whether it is type-only.

    ``from kafkaops.engine import lock`` is an edge to the submodule ``kafkaops.engine.lock``; ``from
    kafkaops.engine import Runner`` one to the module the package's ``_EXPORTS`` names for ``Runner``; the
    packages a dotted import passes through (``kafkaops``, ``kafkaops.engine``) are not edges of their own.
    """
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    type_only = _type_checking_nodes(tree)
    out: list[Edge] = []

    def add(name: str, line: int, typed: bool) -> None:
        if name.split(".")[0] != "kafkaops":
            return
        target = _nearest(name, known)
        if target and target != module:
            out.append(Edge(module, target, path, line, typed))

    for node in ast.walk(tree):
        typed = id(node) in type_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, typed)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    add(sub, node.lineno, typed)
                    continue
                lazy = exports(known[base]).get(alias.name) if base in known else None
                add(lazy or base, node.lineno, typed)
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_import(node)):
            add(dynamic, node.lineno, typed)
    table = _export_table(tree)
    if table is not None:
        for v in table.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                add(v.value, v.lineno, False)
    return out


@functools.cache
def all_edges() -> tuple[Edge, ...]:
    """Every import between modules of the package (read once per test session)."""
    known = modules()
    return tuple(e for path in known.values() for e in edges(path, known))


def graph(found: Iterable[Edge]) -> dict[str, dict[str, list[Edge]]]:
    """``{module: {imported module: the imports that make the edge}}``."""
    out: dict[str, dict[str, list[Edge]]] = {}
    for e in found:
        out.setdefault(e.source, {}).setdefault(e.target, []).append(e)
        out.setdefault(e.target, {})
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> Iterator[list[str]]:
    """Every strongly connected component with more than one module, as one cycle through it."""
    succ = {v: set(ws) for v, ws in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan (the graph is a few hundred edges: recursion is fine)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(succ):
        if v not in index:
            connect(v)
    for comp in components:
        yield _cycle_through(sorted(comp), succ)


def _cycle_through(comp: list[str], succ: Mapping[str, set[str]]) -> list[str]:
    """One concrete cycle inside a strongly connected component, starting at its first module."""
    members = set(comp)
    start = comp[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first: the shortest way back to the start
        v = queue.pop(0)
        for w in sorted(succ.get(v, set()) & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return [*comp, start]


def describe(cycle: list[str], found: Mapping[str, Mapping[str, list[Edge]]], *, type_only: bool = True) -> str:
    """``a -> b -> a`` and, with ``type_only``, where each link is imported and which links are type-only
    (``a -> b [type-only: kafkaops/a.py:12] -> a [kafkaops/b.py:3]``): the line to change to break it."""
    if not type_only:
        return " -> ".join(cycle)
    out = cycle[0]
    for a, b in pairwise(cycle):
        via = found.get(a, {}).get(b, [])
        typed = bool(via) and all(e.type_only for e in via)
        where = ", ".join(e.where for e in via[:2]) + (f" (+{len(via) - 2})" if len(via) > 2 else "")
        out += f" -> {b} [{'type-only: ' if typed else ''}{where}]"
    return out
