"""The layers of docs/architecture.md, enforced: a module imports only from its own layer or the layers below.

Why a rule and not taste: each floor can be installed, read and tested without the floors above it. The
engine plans and tests a runbook with no Kafka and no client library; a fact parser or a policy decision is
a pure function a unit test feeds; an admin host never needs the lab, which is why the lab is on the top
floor, a distribution of its own (``lab/``, issue 45), and nothing of the product imports it (issue 29; the
lab's commands reach the CLI through the entry point ``kafkaops.commands`` in lab/pyproject.toml, never by
the CLI naming them).

Read from the source (AST, :mod:`import_walk`), so every kind of import counts: at module level, inside a
function (a lazy import is still a dependency, it only fails later — on an admin host without the lab, in
the branch no test took), under ``if TYPE_CHECKING:`` (it names a type the importer should not need, and
it is how a loop hides), relative, ``importlib.import_module("...")`` with a literal, and a package's lazy
``_EXPORTS`` table.

Every failure is one line per offending import, ``file:line: A (layer N) imports B (layer M)``: the line
to change.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from import_walk import PACKAGE, ROOT, Edge, all_edges, cycles, describe, edges, graph, imports, module_name, modules

LAYER_NAMES = {1: "foundation", 2: "facts, policy", 3: "engine", 4: "systems", 5: "environment", 6: "health",
               7: "queries, stepkit", 8: "steps", 9: "procedure", 10: "cli", 11: "lab"}

#: Where every module lives. ``pkg.*`` places a package and everything under it (a new module in a package
#: is placed by its package); a bare name is that one module (a new module at the package root must be
#: added here, on purpose: test_every_module_has_a_layer fails until it is).
LAYERS: dict[str, int] = {
    # 1 foundation: data types, errors, where things live on disk, inventory parsing. No client library.
    "kafkaops": 1,  # the package root: __version__, nothing else
    "kafkaops.errors": 1,
    "kafkaops.model": 1,
    "kafkaops.templates": 1,
    "kafkaops.places": 1,
    "kafkaops.inventory": 1,
    "kafkaops.inventory_draft": 1,  # a first inventory rendered from what a cluster said (pure)
    "kafkaops.run_identity": 1,  # what a run depends on in its inventory, hashed: a plan or resume sees a change
    # 2 pure functions over what was observed: parsers of what a target printed, decisions (safety gates,
    #   quorum judgement, roll order, batches, offset translation, throughput), the placement planner.
    "kafkaops.facts.*": 2,
    "kafkaops.policy.*": 2,
    "kafkaops.placement.*": 2,
    # 3 the runbook engine (model, parsing, binding, runner, journal, lock, plan, wait, audit, run facts).
    #   Below the adapters: the lock backends and audit sinks implement the engine's contracts (LockBackend,
    #   AuditSink), so they import the engine, never the other way round.
    "kafkaops.engine.*": 3,
    # 4 adapters to real systems: the only place client libraries are imported.
    "kafkaops.systems.*": 4,
    # 5 the adapter locator: which adapter for this cluster.
    "kafkaops.environment": 5,
    # 6 the Spark post-check (and the status it shares with `kafkaops status`). Below the steps: the
    #   health.* step kinds run it, it never runs a step.
    "kafkaops.health.*": 6,
    # 7 what the step kinds, the procedure and the CLI share: the questions asked of a cluster through its
    #   environment (a service's health, the migration's phase, the quorum's leader, a switched service,
    #   the releases installed, the deploy host; the selectors and hooks that pick targets), and the kit a
    #   step kind is written with (the run's environment, waits, projected facts, the broker unit watch).
    "kafkaops.queries.*": 7,
    "kafkaops.stepkit.*": 7,
    # 8 the step kinds, one module per prefix; only the catalog imports one (test_only_the_catalog_imports_a_step_kind).
    "kafkaops.steps.*": 8,
    # 9 the product's entries: one procedure command, the runbook catalog, the inventory lookup by name.
    "kafkaops.procedure": 9,
    "kafkaops.catalog": 9,
    "kafkaops.lookup": 9,
    # 10 the command line: parse, call one product function, render.
    "kafkaops.cli.*": 10,
    # 11 the lab: a user of the product, on the top floor.
    "kafkaops_lab.*": 11,
}

ENGINE = 3

#: Layers allowed fewer imports than "same or lower". The engine imports the foundation only — not the
#: facts or policy, not the adapters: it is the part every procedure trusts (journal, resume, lock, plans),
#: so it must be testable, and a runbook plannable, with no Kafka, no client library and no Kafka-specific
#: decision; what a step needs from the world reaches it through the run's environment, typed by the
#: engine's own ``RunEnvironment`` protocol.
ONLY: dict[int, set[int]] = {ENGINE: {1, ENGINE}}

#: (importer, imported, why): the imports the layers allow although they point up. Each is the lower
#: module implementing or running a contract of the upper one, with no import back (test_import_cycles.py
#: proves it); each must still be needed (test_every_exception_is_still_used).
EXCEPTIONS: tuple[tuple[str, str, str], ...] = ()

#: Client libraries: talking to a real system is the adapters' job (layer 4).
CLIENT_LIBRARIES = ("confluent_kafka", "kazoo", "paramiko", "requests", "urllib3", "etcd3", "etcd", "conftool",
                    "pyspark")
#: The layers that import no client library, lazily or not: the engine, the foundation, facts and policy
#: (each is tested, and each runs on an admin host, without a cluster or the libraries to reach one).
NO_CLIENT_LIBRARY = {1, 2, ENGINE}


def _placed_by(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        base = pattern[:-2]
        return module == base or module.startswith(base + ".")
    return module == pattern


def layer_of(module: str) -> int | None:
    """The layer of ``module``: its own entry, else its deepest package's ``pkg.*`` entry; None if unplaced."""
    if module in LAYERS:
        return LAYERS[module]
    packages = [p for p in LAYERS if p.endswith(".*") and _placed_by(module, p)]
    return LAYERS[max(packages, key=len)] if packages else None


def _excepted(edge: Edge) -> bool:
    return any(_placed_by(edge.source, a) and _placed_by(edge.target, b) for a, b, _ in EXCEPTIONS)


def violations(found: Iterable[Edge]) -> list[str]:
    """``file:line: A (layer N) imports B (layer M)``, one line per import that breaks the layers."""
    out: list[str] = []
    for e in found:
        low, high = layer_of(e.target), layer_of(e.source)
        if low is None or high is None or _excepted(e):
            continue  # an unplaced module is test_every_module_has_a_layer's to report
        allowed = ONLY.get(high)
        if low > high or (allowed is not None and low not in allowed):
            line = f"{e.where}: {e.source} (layer {high}) imports {e.target} (layer {low})"
            if allowed is not None and low <= high:
                line += f"; layer {high} ({LAYER_NAMES[high]}) imports only layers {sorted(allowed)}"
            if e.type_only:
                line += "; type-only"
            if line not in out:  # `from a import b, c`: one line
                out.append(line)
    return out


def client_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: module imports LIBRARY`` for each client-library import of ``path`` (or ``source``)."""
    module = module_name(path)
    out = []
    for imp in imports(path, source):
        if imp.name.split(".")[0] in CLIENT_LIBRARIES:
            line = f"{path.relative_to(ROOT)}:{imp.line}: {module} imports {imp.name.split('.')[0]}"
            if line not in out:
                out.append(line)
    return out


def lab_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: what`` for each import of ``kafkaops_lab`` in ``path`` (or ``source``, read as if it were
    ``path``'s): absolute, relative, type-only or through importlib."""
    found: list[str] = []
    for imp in imports(path, source):
        line = f"{path.relative_to(ROOT)}:{imp.line}: {imp.name}"
        if (imp.name == "kafkaops_lab" or imp.name.startswith("kafkaops_lab.")) \
                and not any(f.startswith(f"{path.relative_to(ROOT)}:{imp.line}:") for f in found):
            found.append(line)
    return found


# --- the rules, on the package ------------------------------------------------------------------------


def test_nothing_outside_the_lab_imports_the_lab() -> None:
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in lab_imports(path)]
    assert offenders == [], "the product imports the lab:\n" + "\n".join(offenders)


def test_every_module_has_a_layer() -> None:
    """A new module must be placed (here and in docs/architecture.md) before it can import anything."""
    unplaced = [f"{path.relative_to(ROOT)}: {name} has no layer (add it to LAYERS in tests/unit/test_layers.py "
                "and to docs/architecture.md)" for name, path in modules().items() if layer_of(name) is None]
    assert unplaced == [], "modules outside the layers:\n" + "\n".join(unplaced)


def test_the_layer_table_names_only_real_modules() -> None:
    """No entry outlives its module: a stale entry would place nothing and hide a rename."""
    known = modules()
    stale = [f"LAYERS[{name!r}]: no such module or package under kafkaops/" for name in LAYERS
             if not any(_placed_by(m, name) for m in known)]
    assert stale == [], "\n".join(stale)


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = violations(all_edges())
    assert found == [], "imports against the layers (docs/architecture.md):\n" + "\n".join(found)


#: Who may import a step-kind module: the catalog loads them (through the package, which imports each).
STEP_KIND_IMPORTERS = ("kafkaops.catalog", "kafkaops.steps")


def step_kind_imports(found: Iterable[Edge]) -> list[str]:
    """``file:line: A imports step kind B`` for each import of a step-kind module by anyone but the catalog."""
    out: list[str] = []
    for e in found:
        if _placed_by(e.target, "kafkaops.steps.*") and e.target != "kafkaops.steps" \
                and e.source not in STEP_KIND_IMPORTERS:
            line = f"{e.where}: {e.source} imports step kind {e.target}"
            if line not in out:
                out.append(line)
    return out


def test_only_the_catalog_imports_a_step_kind() -> None:
    """A step-kind module is a runbook's vocabulary, not a library: what two of them (or the CLI) share is a
    query (kafkaops/queries/) or the step kit (kafkaops/stepkit/), so a kind can change without its users."""
    found = step_kind_imports(all_edges())
    assert found == [], "step kinds imported outside the catalog:\n" + "\n".join(found)


def test_every_exception_is_still_used() -> None:
    """An exception nobody needs any more is a hole in the rules: delete it."""
    found = all_edges()
    unused = [f"EXCEPTIONS ({a} -> {b}): no import uses it; delete it" for a, b, _ in EXCEPTIONS
              if not any(_placed_by(e.source, a) and _placed_by(e.target, b) for e in found)]
    assert unused == [], "\n".join(unused)


def test_engine_foundation_facts_and_policy_import_no_client_library() -> None:
    found = [hit for name, path in modules().items() if layer_of(name) in NO_CLIENT_LIBRARY
             for hit in client_imports(path)]
    assert found == [], ("client libraries are the adapters' (kafkaops/systems/), never the engine's, the "
                         "foundation's, the facts' or the policy's:\n" + "\n".join(found))


# --- the detector itself, on synthetic source ---------------------------------------------------------


def test_the_walk_sees_every_kind_of_import() -> None:
    """Module level, lazy, TYPE_CHECKING, relative and importlib imports are found."""
    probe = ROOT / "kafkaops" / "cli" / "probe.py"  # never written: its source is given
    source = (
        "from typing import TYPE_CHECKING\n"
        "import kafkaops_lab.dirs\n"
        "if TYPE_CHECKING:\n    from kafkaops_lab.spec import LabSpec\n"
        "def f():\n    from kafkaops_lab import lab\n    from .lab import host\n"
        "    import importlib\n    importlib.import_module('kafkaops_lab.cli')\n"
        "import kafkaops_lab\n"
        "from kafkaops.places import cache_dir\n"
    )
    hits = lab_imports(probe, source)  # relative imports resolve against kafkaops.cli: not the lab
    lines = sorted(int(h.split(":")[1]) for h in hits)
    assert lines == [2, 4, 6, 9, 10], hits


def test_the_rules_catch_an_upward_import_and_a_type_only_cycle() -> None:
    """A step importing the CLI lazily, an engine module importing an adapter under TYPE_CHECKING, and an
    adapter naming a step's type (type-only) while the step imports the adapter: each is one line, and the
    last is a loop."""
    step = ROOT / "kafkaops" / "steps" / "probe.py"  # never written: their sources are given
    adapter = ROOT / "kafkaops" / "systems" / "probe.py"
    engine = ROOT / "kafkaops" / "engine" / "probe.py"
    known = {**modules(), "kafkaops.steps.probe": step, "kafkaops.systems.probe": adapter,
             "kafkaops.engine.probe": engine}
    found = [
        *edges(step, known, "from kafkaops.systems.probe import Probe\n"
                            "def f():\n    from kafkaops.cli.common import console\n"),
        *edges(adapter, known, "from typing import TYPE_CHECKING\nfrom kafkaops.errors import ConfigError\n"
                               "if TYPE_CHECKING:\n    from kafkaops.steps.probe import Step\n"),
        *edges(engine, known, "from typing import TYPE_CHECKING\nfrom kafkaops.engine.step import Param\n"
                              "if TYPE_CHECKING:\n    from kafkaops.policy.quorum import QuorumView\n"),
    ]
    assert violations(found) == [
        "kafkaops/steps/probe.py:3: kafkaops.steps.probe (layer 8) imports kafkaops.cli.common (layer 10)",
        "kafkaops/systems/probe.py:4: kafkaops.systems.probe (layer 4) imports kafkaops.steps.probe (layer 8)"
        "; type-only",
        "kafkaops/engine/probe.py:4: kafkaops.engine.probe (layer 3) imports kafkaops.policy.quorum (layer 2)"
        "; layer 3 (engine) imports only layers [1, 3]; type-only",
    ]
    g = graph(found)
    assert [describe(c, g) for c in cycles(g)] == [
        "kafkaops.steps.probe -> kafkaops.systems.probe [kafkaops/steps/probe.py:1] "
        "-> kafkaops.steps.probe [type-only: kafkaops/systems/probe.py:4]"]
    # the engine's client-library rule sees the same kinds of import
    assert client_imports(engine, "def f():\n    import kazoo.client\n"
                                  "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from confluent_kafka.admin import AdminClient\n") == [
        "kafkaops/engine/probe.py:2: kafkaops.engine.probe imports kazoo",
        "kafkaops/engine/probe.py:5: kafkaops.engine.probe imports confluent_kafka"]


def test_the_step_kind_rule_catches_a_step_kind_imported_as_a_library() -> None:
    """The CLI or another step kind importing a step-kind module is one line each; the catalog and the
    package that registers the kinds are not."""
    cli = ROOT / "kafkaops" / "cli" / "probe.py"  # never written: their sources are given
    step = ROOT / "kafkaops" / "steps" / "probe.py"
    catalog = ROOT / "kafkaops" / "catalog.py"
    known = {**modules(), "kafkaops.cli.probe": cli, "kafkaops.steps.probe": step}
    found = [
        *edges(cli, known, "def f():\n    from kafkaops.steps.migration import PhaseGate\n"),
        *edges(step, known, "from kafkaops.steps.kafka import StopBroker\n"
                            "from kafkaops.queries.service import service_of\n"),
        *edges(catalog, known, "import kafkaops.steps.kafka\n"),
    ]
    assert step_kind_imports(found) == [
        "kafkaops/cli/probe.py:2: kafkaops.cli.probe imports step kind kafkaops.steps.migration",
        "kafkaops/steps/probe.py:1: kafkaops.steps.probe imports step kind kafkaops.steps.kafka",
    ]


# --- the CLI reaches the world only through the product; parameters never travel through os.environ ---

#: What the command line never imports: it parses, calls one product function and renders. A socket or a
#: process started by the CLI is outside ``systems/`` and its ``@write`` guard (a bench's load, a probe).
CLI_NEVER_IMPORTS = ("socket", "subprocess")

#: The writes of ``os.environ`` the product keeps, each with why there is no other way.
ENVIRON_WRITES: tuple[tuple[str, str], ...] = (
    ("kafkaops/health/spark_job.py", "PySpark starts its JVM with this process's environment and no other "
                                     "way to give it SPARK_LOCAL_IP (setdefault: an operator's own wins)"),
)

_ENVIRON_METHODS = ("setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__")


def cli_world_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: module imports socket`` for each import of :data:`CLI_NEVER_IMPORTS`."""
    module = module_name(path)
    return list(dict.fromkeys(f"{path.relative_to(ROOT)}:{imp.line}: {module} imports {imp.name.split('.')[0]}"
                              for imp in imports(path, source) if imp.name.split(".")[0] in CLI_NEVER_IMPORTS))


def environ_writes(path: Path, source: str | None = None) -> list[str]:
    """``file:line: writes os.environ`` for each assignment, deletion or mutating call on ``os.environ``
    (or ``environ`` imported from os), and each ``os.putenv``/``os.unsetenv``."""
    import ast

    tree = ast.parse(source if source is not None else path.read_text())

    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
                and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")

    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        hit = any(isinstance(t, ast.Subscript) and is_environ(t.value) for t in targets)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            hit = hit or (f.attr in _ENVIRON_METHODS and is_environ(f.value)) or (
                f.attr in ("putenv", "unsetenv") and isinstance(f.value, ast.Name) and f.value.id == "os")
        if hit:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: writes os.environ")
    return found


def test_the_cli_opens_no_socket_and_starts_no_process() -> None:
    found = [hit for name, path in modules().items() if layer_of(name) == LAYERS["kafkaops.cli.*"]
             for hit in cli_world_imports(path)]
    assert found == [], ("the CLI reaches the world itself; an adapter in kafkaops/systems/ does it (a write "
                         "guarded by @write):\n" + "\n".join(found))


def test_nothing_in_the_product_writes_os_environ() -> None:
    """Parameters are passed (the root options through :func:`kafkaops.places.use`), never through the
    process environment, which every child and the next command of the process would inherit."""
    allowed = {f for f, _ in ENVIRON_WRITES}
    found = [hit for name, path in modules().items() if layer_of(name) != LAYERS["kafkaops_lab.*"]
             for hit in environ_writes(path) if str(path.relative_to(ROOT)) not in allowed]
    assert found == [], "the product writes os.environ:\n" + "\n".join(found)
    unused = [f for f in allowed if not environ_writes(ROOT / f)]
    assert unused == [], f"ENVIRON_WRITES lists files that no longer write it: {unused}"


def test_the_world_rules_catch_each_kind_of_write_and_import() -> None:
    probe = ROOT / "kafkaops" / "cli" / "probe.py"  # never written: its source is given
    source = ("import os\nfrom os import environ\ndef f():\n    import subprocess\n"
              "    os.environ['A'] = '1'\n    environ['B'] = '2'\n    os.environ.setdefault('C', '3')\n"
              "    del os.environ['A']\n    os.putenv('D', '4')\n    os.environ.get('E')\n"
              "from socket import create_connection\n")
    assert sorted(cli_world_imports(probe, source)) == [
        "kafkaops/cli/probe.py:11: kafkaops.cli.probe imports socket",
        "kafkaops/cli/probe.py:4: kafkaops.cli.probe imports subprocess"]
    assert sorted(int(h.split(":")[1]) for h in environ_writes(probe, source)) == [5, 6, 7, 8, 9]


def private_typer_imports(path: Path, source: str | None = None) -> list[str]:
    """``file:line: name`` for each import of a private part of typer (``typer._click``, ``typer._types``)."""
    found = {imp.line: f"{path.relative_to(ROOT)}:{imp.line}: {imp.name}" for imp in imports(path, source)
             if imp.name.startswith("typer.") and any(part.startswith("_") for part in imp.name.split(".")[1:])}
    return [found[line] for line in sorted(found)]


def test_nothing_imports_a_private_part_of_typer() -> None:
    """typer's private modules (its vendored click above all) change in any release: the CLI reaches click's
    classes through typer's public ones (kafkaops.cli.common), so typer's pin is about start-up time only."""
    found = [hit for path in modules().values() for hit in private_typer_imports(path)]
    assert found == [], "private typer imports:\n" + "\n".join(found)
    probe = ROOT / "kafkaops" / "cli" / "probe.py"  # never written: its source is given
    source = ("import typer\nfrom typer.core import TyperCommand\nfrom typer._click import Context\n"
              "def f():\n    from typer._types import TyperChoice\n")
    assert [h.split(":")[1] for h in private_typer_imports(probe, source)] == ["3", "5"]
