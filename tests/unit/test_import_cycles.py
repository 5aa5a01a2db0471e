"""No import cycles inside kafkaops, type-only imports included: every module can be understood (and changed)
from the bottom up.

The graph is built from the source (AST, :mod:`import_walk`): every import of a ``kafkaops`` module, at module
level, inside a function (a lazy import is still a dependency, it only fails later and more rarely) and under
``if TYPE_CHECKING:``. A type-only import never executes, but two modules naming each other's types are one
module in two files: neither can be read, tested or moved without the other (issue 30: ``MetadataQuorum``
took the whole Environment, which held it). ``from kafkaops.engine import Runner`` goes through the package's
lazy export table (``_EXPORTS``) to the module that defines ``Runner``.

A cycle is reported as the chain of modules, each link with the line that makes it and whether it is
type-only (``kafkaops.environment -> kafkaops.systems.quorum [kafkaops/environment.py:44 type-only] -> ...``),
so whoever broke it sees which import to change.
"""

from __future__ import annotations

from import_walk import ROOT, all_edges, cycles, describe, edges, graph, modules

#: Known cycles being fixed elsewhere, each with why it is tolerated for now. Keep this empty.
KNOWN_CYCLES: set[frozenset[str]] = set()


def import_graph() -> dict[str, set[str]]:
    """``{module: the kafkaops modules it imports}``, every kind of import included."""
    return {name: set(targets) for name, targets in graph(all_edges()).items()}


def test_the_graph_sees_lazy_relative_and_type_only_imports() -> None:
    found = graph(all_edges())
    assert "kafkaops.engine.state_files" in found["kafkaops.engine.journal"]
    assert "kafkaops.engine.step" in found["kafkaops.health.check"]
    # a function-level import counts
    assert "kafkaops.systems.kafka" in found["kafkaops.health.check"]
    # `from kafkaops.engine import Runner`: through the lazy export table, to the module defining it
    assert any("kafkaops.engine.runner" in targets for targets in found.values())


def test_type_only_imports_are_edges_and_say_so() -> None:
    known = {**modules(), "kafkaops.a": ROOT / "kafkaops" / "a.py", "kafkaops.b": ROOT / "kafkaops" / "b.py"}
    a = edges(known["kafkaops.a"], known, "from typing import TYPE_CHECKING\n"
                                          "if TYPE_CHECKING:\n    from kafkaops.b import B\n")
    b = edges(known["kafkaops.b"], known, "def f():\n    from kafkaops import a\n")
    found = graph([*a, *b])
    assert [(e.target, e.line, e.type_only) for e in a] == [("kafkaops.b", 3, True)]
    assert [(e.target, e.line, e.type_only) for e in b] == [("kafkaops.a", 2, False)]
    (cycle,) = cycles(found)
    assert describe(cycle, found) == ("kafkaops.a -> kafkaops.b [type-only: kafkaops/a.py:3] "
                                      "-> kafkaops.a [kafkaops/b.py:2]")
    assert describe(cycle, found, type_only=False) == "kafkaops.a -> kafkaops.b -> kafkaops.a"


def test_cycle_detection_reports_the_chain() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert list(cycles(g)) == [["a", "b", "c", "a"]]


def test_kafkaops_has_no_import_cycles() -> None:
    found = graph(all_edges())
    loops = [c for c in cycles(found) if frozenset(c) not in KNOWN_CYCLES]
    assert loops == [], "import cycles (type-only imports count):\n" + "\n".join(describe(c, found) for c in loops)
