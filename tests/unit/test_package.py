"""The wheel and the sdist carry everything an admin host needs without the checkout (issue 29): every
runbook, the runbook docs, the lab's inventories (for the lab only), the Java reader's source, py.typed,
the inventory's JSON Schema (``kafkaops inventory schema`` prints it), and the entry point through which
the lab registers ``kafkaops lab``."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_and_the_sdist_carry_everything(built_dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(built_dist["wheel"]) as archive:
        names = set(archive.namelist())
        contents = {n: archive.read(n) for n in names if not n.endswith(".py")}
    expected = {f"kafkaops/runbooks/{p.name}" for p in (REPO / "runbooks").glob("*.yaml")}
    expected |= {f"kafkaops/docs/runbooks/{p.name}" for p in (REPO / "docs" / "runbooks").glob("*.md")}
    expected |= {f"kafkaops/lab/inventory/{p.name}" for p in (REPO / "inventory").glob("lab*.yaml")}
    expected |= {"kafkaops/py.typed", "kafkaops/health/jvm/KafkaRangeSource.java", "kafkaops/runbooks/README.md",
                 "kafkaops/schemas/inventory.schema.json"}
    assert len(expected) > 25
    assert expected <= names, sorted(expected - names)
    # Only the lab's inventories are in the lab's directory: a production inventory never ships as one.
    assert not [n for n in names if n.startswith("kafkaops/lab/inventory/") and "/lab" not in n[22:]]
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = contents[info].decode()
    assert "[kafkaops.commands]\nlab = kafkaops.lab.cli:app" in entry_points
    assert "kafkaops = kafkaops.cli.main:main" in entry_points
    # The license: an SPDX expression in the metadata (PEP 639), and its text in the wheel (issue 45)
    metadata = contents[next(n for n in names if n.endswith(".dist-info/METADATA"))].decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines(), metadata[:600]
    assert "License-File: LICENSE" in metadata.splitlines()
    license_text = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert contents[license_text] == (REPO / "LICENSE").read_bytes()
    for name in expected:  # byte for byte what the repo holds
        source = {"kafkaops/runbooks/": REPO / "runbooks", "kafkaops/docs/runbooks/": REPO / "docs" / "runbooks",
                  "kafkaops/lab/inventory/": REPO / "inventory", "kafkaops/schemas/": REPO / "kafkaops" / "schemas"}
        for prefix, directory in source.items():
            if name.startswith(prefix):
                assert contents[name] == (directory / name[len(prefix):]).read_bytes(), name

    with tarfile.open(built_dist["sdist"]) as tar:
        sdist = {Path(*Path(m).parts[1:]).as_posix() for m in tar.getnames()}
    assert {"LICENSE", "setup.py", "MANIFEST.in", "runbooks/reboot.yaml", "docs/runbooks/reboot.md",
            "inventory/lab.yaml", "docs/install.md", "kafkaops/health/jvm/KafkaRangeSource.java",
            "kafkaops/schemas/inventory.schema.json"} <= sdist
