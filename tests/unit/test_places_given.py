"""The root options reach the lookups through :func:`kafkaops.places.use`, never the process environment
(issue 44): a child process, or the next command of the same process, inherits none of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkaops import places
from kafkaops.catalog import runbook_dirs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAFKAOPS_INVENTORY", "KAFKAOPS_RUNBOOKS", "KAFKAOPS_READER_JARS"):
        monkeypatch.delenv(name, raising=False)
    places.use(places.Given())


def _invoke(*args: str) -> object:
    from kafkaops.cli.main import register

    return CliRunner().invoke(register(), list(args))


def test_root_options_are_given_to_the_lookups_and_not_to_the_environment(tmp_path: Path) -> None:
    inventory = REPO / "inventory" / "lab.yaml"
    _invoke("--inventory", str(inventory), "--runbooks", str(REPO / "runbooks"), "check", "nosuchcluster",
            "--jars", str(tmp_path), "--no-scan")
    assert places.given() == places.Given(inventory=inventory.resolve(), runbooks=((REPO / "runbooks").resolve(),),
                                          reader_jars=tmp_path.resolve())
    in_use = places.inventory_places()[1]
    assert in_use is not None and in_use.name == "--inventory" and in_use.files == (inventory.resolve(),)
    assert runbook_dirs() == [(REPO / "runbooks").resolve()]
    assert not {"KAFKAOPS_INVENTORY", "KAFKAOPS_RUNBOOKS", "KAFKAOPS_READER_JARS"} & set(os.environ)


def test_the_next_command_of_the_process_does_not_inherit_them(tmp_path: Path) -> None:
    _invoke("--inventory", str(REPO / "inventory" / "lab.yaml"), "--runbooks", str(REPO / "runbooks"),
            "runbooks", "list")
    assert places.given().inventory is not None and places.given().runbooks
    _invoke("runbooks", "list")
    assert places.given() == places.Given()
