"""One `kafkaops reboot HOST` parses reboot.yaml once and loads the step kinds once (issue 30).

The command is built from a parse that imports no step kind (start-up stays fast); when the run starts,
that same parsed runbook is checked against the step kinds (kafkaops.engine.runbook.check_step_kinds),
never parsed again, and kafkaops.catalog.load_plugins imports and registers them once per process.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]


class _Planning(Exception):
    """Raised where the dry-run would start asking the systems: the path up to it is what is counted."""


def test_a_reboot_parses_its_runbook_once_and_loads_the_step_kinds_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.catalog as catalog
    import kafkaops.engine.runbook as runbook_module
    import kafkaops.steps as steps
    from kafkaops.cli.main import register
    from kafkaops.engine.runner import Runner
    from kafkaops.queries import selectors

    # The lab inventory moved to unused loopback addresses: nothing here may reach a lab that is up.
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text((REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", "127.0.99."))
    monkeypatch.delenv("KAFKAOPS_RUNBOOKS", raising=False)
    monkeypatch.setattr(catalog, "_parsed", {})  # a fresh process: nothing parsed, no step kind loaded
    monkeypatch.setattr(catalog, "_loaded_plugins", set())

    parsed: list[str] = []
    real_parse = runbook_module.parse_runbook

    def counting_parse(doc: Any, **kw: Any) -> Any:
        parsed.append(Path(str(kw.get("source"))).name)
        return real_parse(doc, **kw)

    registered: list[str] = []
    imported: list[str] = []
    real_import = importlib.import_module

    def counting_import(name: str, package: str | None = None) -> Any:
        if name == "kafkaops.steps":
            imported.append(name)
        return real_import(name, package)

    def stop(self: Runner, bound: Any, **kw: Any) -> Any:
        raise _Planning(bound.name, [t.name for t in bound.targets])

    monkeypatch.setattr(runbook_module, "parse_runbook", counting_parse)
    monkeypatch.setattr(importlib, "import_module", counting_import)
    monkeypatch.setattr(steps, "register_all", lambda: registered.append("kafkaops.steps"), raising=False)
    monkeypatch.setitem(selectors._HOOKS, "kafka_answers",  # its one metadata try would wait on 127.0.99.1
                        dataclasses.replace(selectors._HOOKS["kafka_answers"], func=lambda inv: None))
    monkeypatch.setattr(Runner, "dry_run", stop)

    result = CliRunner().invoke(register(), ["reboot", "kafka1001", "--dry-run", "-i", str(inventory)])

    assert isinstance(result.exception, _Planning), (result.output, result.exception)
    assert result.exception.args == ("reboot", ["kafka1001"])  # bound, ordered: the whole path up to the plan
    assert parsed == ["reboot.yaml"]
    assert imported == ["kafkaops.steps"] and registered == ["kafkaops.steps"]
