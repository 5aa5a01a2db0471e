"""Every step kind lives in the steps module named after its prefix (issue 30): ``env.reachable`` in
``kafkaops/steps/env.py``, ``operator.confirm`` in ``kafkaops/steps/operator.py``.

A runbook, a plan or a journal names a kind (``kafka.stop_broker``); a maintainer reading it opens
``kafkaops/steps/kafka.py``, not a module to guess. The kind names are what runbooks and journals hold,
so when the two disagree it is the module that moves, never the kind.
"""

from __future__ import annotations

import kafkaops.steps
from kafkaops.engine.step import step_kinds


def _kinds_by_module() -> dict[str, list[str]]:
    """Each built-in kind's defining module (``kafkaops.steps.kafka``), from the registry after importing
    ``kafkaops.steps`` (which registers them all)."""
    kafkaops.steps.register_all()
    found: dict[str, list[str]] = {}
    for kind, entry in step_kinds().items():
        module = getattr(entry.factory, "__module__", "")
        if module.startswith("kafkaops."):
            found.setdefault(module, []).append(kind)
    return found


def test_every_kind_lives_in_the_module_named_after_its_prefix() -> None:
    found = _kinds_by_module()
    wrong = sorted(f"{kind} is in {module}, expected kafkaops.steps.{kind.split('.', 1)[0]}"
                   for module, kinds in found.items() for kind in kinds
                   if module != f"kafkaops.steps.{kind.split('.', 1)[0]}")
    assert wrong == [], "step kinds in a module not named after their prefix:\n" + "\n".join(wrong)


def test_the_registry_holds_the_built_in_kinds() -> None:
    """The check above is not vacuous: the built-in kinds are found, in more than one module."""
    found = _kinds_by_module()
    assert len(found) > 10
    assert "kafka.stop_broker" in found.get("kafkaops.steps.kafka", [])
