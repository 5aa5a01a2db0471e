"""The path of one ``kafkaops reboot kafka1001 --dry-run`` through the house, measured (issue 44).

Runs the command in this process against the lab with a profiler on, and counts, over kafkaops' own
functions (module bodies left out): the modules it calls into, the distinct caller -> callee module
pairs, and the *climbs back up* — a call from a module into one of a higher layer
(``tests/unit/test_layers.py``), split into the engine's dispatch (the runner calling a step kind through
its registry, or the environment through its ``RunEnvironment`` protocol: by design) and the rest (a lower
floor calling into a higher one through a callback: what the layers are meant to prevent). Also counts
the function-local imports of kafkaops' modules, by AST.

    python3 bench/house_path.py [--root CHECKOUT] [--out FILE]

``--root`` measures another checkout (a ``git worktree`` of an older commit) with its own layer table.
The lab must be up (the dry-run reads it; nothing is changed).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import raw_result  # bench/ is not a package

ENGINE = 3


def local_imports(root: Path) -> dict[str, int]:
    """Function-local imports of kafkaops' own modules, by top-level package (or root module)."""
    where: set[tuple[str, int]] = set()
    for path in (root / "kafkaops").rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom):
                        own = node.level > 0 or (node.module or "").startswith("kafkaops")
                    elif isinstance(node, ast.Import):
                        own = any(a.name.startswith("kafkaops") for a in node.names)
                    else:
                        continue
                    if own:
                        where.add((str(path.relative_to(root / "kafkaops")), node.lineno))
    out: dict[str, int] = {}
    for file, _ in where:
        key = file.split("/")[0].removesuffix(".py")
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1])) | {"total": len(where)}


def trace(root: Path) -> dict[str, Any]:
    sys.path[:0] = [str(root), str(root / "tests" / "unit"), str(root / "tests")]
    import test_layers  # the checkout's own layer table

    calls: dict[tuple[str, str], int] = {}

    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("kafkaops"):
            return
        back = frame.f_back
        while back is not None and not back.f_globals.get("__name__", "").startswith("kafkaops"):
            back = back.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else "<entry>"
        if caller != callee:
            calls[(caller, callee)] = calls.get((caller, callee), 0) + 1

    os.environ["KAFKAOPS_INVENTORY"] = str(root / "inventory" / "lab.yaml")
    argv, sys.argv = sys.argv, ["kafkaops", "reboot", "kafka1001", "--dry-run", "--reason", "house path", "--no-scan"]
    from kafkaops.cli import main

    assert Path(main.__file__).resolve().is_relative_to(root.resolve()), main.__file__
    threading.setprofile(prof)
    sys.setprofile(prof)
    try:
        main.main()
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        sys.argv = argv
    layer = test_layers.layer_of
    modules = {m for pair in calls for m in pair if m.startswith("kafkaops")}
    climbs = sorted(f"{a} ({layer(a)}) -> {b} ({layer(b)})" for a, b in calls
                    if a.startswith("kafkaops") and layer(a) and layer(b) and layer(b) > layer(a))
    dispatch = [c for c in climbs if f"({ENGINE}) ->" in c]
    return {"modules_crossed": len(modules), "module_pairs": len(calls), "climbs_back_up": len(climbs),
            "engine_dispatch": len(dispatch), "other_climbs": [c for c in climbs if c not in dispatch],
            "climbs": climbs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=raw_result.REPO)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or raw_result.default_path("house-path")
    measured = subprocess.run(["git", "-C", str(args.root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    result = {**raw_result.header("house_path", {"root": str(args.root)}, args.root / "inventory" / "lab.yaml"),
              "measured_commit": measured, "local_imports": local_imports(args.root), **trace(args.root),
              "complete": True}
    raw_result.write(out, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("climbs", "machine")}, indent=1))


if __name__ == "__main__":
    main()
