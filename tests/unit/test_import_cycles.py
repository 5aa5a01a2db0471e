"""No import cycles inside kafkaops: every module can be understood (and changed) from the bottom up.

The graph is built from the source (AST): every import of a ``kafkaops`` module, at module level or
inside a function — a lazy import is still a dependency, it only fails later and more rarely. Imports
under ``if TYPE_CHECKING:`` are left out: they never execute, and annotations naming each other's types
are not a layering problem. ``from kafkaops.engine import Runner`` goes through the package's lazy export
table (``_EXPORTS``) to the module that defines ``Runner``.

A cycle is reported as the chain of modules (``kafkaops.engine.audit -> kafkaops.engine.journal ->
kafkaops.engine.audit``) so whoever broke it sees where.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kafkaops"

#: Known cycles being fixed elsewhere, each with why it is tolerated for now. Keep this empty.
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules() -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    skipped.update(id(n) for n in ast.walk(stmt))
    return skipped


@functools.cache
def _exports(path: Path) -> dict[str, str]:
    """A package's lazy export table (``_EXPORTS = {"Name": "module"}``), if it has one."""
    for node in ast.parse(path.read_text()).body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "_EXPORTS" and isinstance(value, ast.Dict):
            return {str(k.value): str(v.value) for k, v in zip(value.keys, value.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    return {}


def _nearest(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The kafkaops modules ``module`` imports at run time (module level and inside functions)."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_blocks(tree)
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kafkaops":
                    target = _nearest(alias.name, known)
                    if target:
                        out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            if source.split(".")[0] != "kafkaops":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:  # `from kafkaops.engine import lock`: the submodule
                    out.add(sub)
                    continue
                lazy = _exports(known[source]).get(alias.name) if source in known else None
                target = _nearest(lazy or source, known)
                if target:
                    out.add(target)
    out.discard(module)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Every strongly connected component with more than one module, as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan (the graph is a few hundred edges: recursion is fine)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            connect(v)
    for comp in components:
        yield _cycle_through(sorted(comp), graph)


def _cycle_through(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One concrete cycle inside a strongly connected component, starting at its first module."""
    members = set(comp)
    start = comp[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first: the shortest way back to the start
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return [*comp, start]


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    assert "kafkaops.engine.paths" in graph["kafkaops.engine.journal"]
    assert "kafkaops.engine.step" in graph["kafkaops.health.check"]
    # a function-level import counts
    assert "kafkaops.systems.kafka" in graph["kafkaops.health.check"]


def test_cycle_detection_reports_the_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert list(cycles(graph)) == [["a", "b", "c", "a"]]


def test_kafkaops_has_no_import_cycles() -> None:
    found = [c for c in cycles(import_graph()) if frozenset(c) not in KNOWN_CYCLES]
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)
