"""The wheel and the sdist carry everything an admin host needs without the checkout (issue 29): every
runbook, the runbook docs, the operator's docs, the example inventories, the Java reader's source, py.typed,
the inventory's JSON Schema (``kafkaops inventory schema`` prints it) — and nothing of the lab (issue 45):
the lab is its own wheel, kafkaops-lab, carrying its package, its inventories and the entry point through
which it registers ``kafkaops lab``."""

from __future__ import annotations

import re
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
    expected |= {f"kafkaops/docs/{p.name}" for p in (REPO / "docs").glob("*.md")}  # `kafkaops docs TOPIC`
    expected |= {f"kafkaops/examples/inventory/{p.name}" for p in (REPO / "inventory").glob("*.example.yaml")}
    expected |= {"kafkaops/py.typed", "kafkaops/health/jvm/KafkaRangeSource.java", "kafkaops/runbooks/README.md",
                 "kafkaops/schemas/inventory.schema.json"}
    assert len(expected) > 25
    assert expected <= names, sorted(expected - names)
    # Nothing of the lab: no package, no inventory of its, no entry point (an admin host never sees `lab`).
    assert not [n for n in names if "kafkaops_lab" in n or re.fullmatch(r"lab.*\.yaml", n.rsplit("/", 1)[-1])]
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = contents[info].decode()
    assert "kafkaops.commands" not in entry_points and "lab" not in entry_points
    assert "kafkaops = kafkaops.cli.main:main" in entry_points
    # The license: an SPDX expression in the metadata (PEP 639), and its text in the wheel (issue 45)
    metadata = contents[next(n for n in names if n.endswith(".dist-info/METADATA"))].decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines(), metadata[:600]
    assert "License-File: LICENSE" in metadata.splitlines()
    license_text = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert contents[license_text] == (REPO / "LICENSE").read_bytes()
    for name in expected:  # byte for byte what the repo holds
        source = {"kafkaops/runbooks/": REPO / "runbooks", "kafkaops/docs/runbooks/": REPO / "docs" / "runbooks",
                  "kafkaops/docs/": REPO / "docs", "kafkaops/examples/inventory/": REPO / "inventory",
                  "kafkaops/schemas/": REPO / "kafkaops" / "schemas"}
        for prefix, directory in source.items():
            if name.startswith(prefix) and "/" not in name[len(prefix):]:
                assert contents[name] == (directory / name[len(prefix):]).read_bytes(), name

    with tarfile.open(built_dist["sdist"]) as tar:
        sdist = {Path(*Path(m).parts[1:]).as_posix() for m in tar.getnames()}
    assert {"LICENSE", "setup.py", "MANIFEST.in", "runbooks/reboot.yaml", "docs/runbooks/reboot.md",
            "inventory/lab.yaml", "docs/install.md", "kafkaops/health/jvm/KafkaRangeSource.java",
            "kafkaops/schemas/inventory.schema.json"} <= sdist


@pytest.mark.slow
def test_kafkaops_docs_reads_the_wheels_copy(built_dist: dict[str, Path], tmp_path: Path) -> None:
    """The wheel's code, unpacked outside the checkout, finds its own docs: ``kafkaops docs install`` prints
    the shipped copy, and the list has every topic."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    with zipfile.ZipFile(built_dist["wheel"]) as archive:
        archive.extractall(site)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}, "PYTHONPATH": str(site)}

    def docs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "import kafkaops, sys; assert kafkaops.__file__.startswith("
                               f"{str(site)!r}), kafkaops.__file__; from kafkaops.cli.main import main; "
                               "sys.argv = ['kafkaops', 'docs', *sys.argv[1:]]; main()", *args],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL)

    install = docs("install")
    assert install.returncode == 0, install.stderr
    assert install.stdout == (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    listed = docs()
    assert listed.returncode == 0, listed.stderr
    assert {line.split()[0] for line in listed.stdout.splitlines()} == {p.stem for p in (REPO / "docs").glob("*.md")}


@pytest.mark.slow
def test_the_lab_is_a_wheel_of_its_own(built_dist: dict[str, Path]) -> None:
    """kafkaops-lab: its package, every lab inventory byte for byte, the entry point that adds ``kafkaops lab``,
    and a dependency on the same kafkaops release (the lab drives the product's adapters)."""
    with zipfile.ZipFile(built_dist["lab_wheel"]) as archive:
        names = set(archive.namelist())
        read = archive.read
        inventories = {p.name for p in (REPO / "inventory").glob("lab*.yaml")}
        assert len(inventories) >= 5
        for name in inventories:
            assert read(f"kafkaops_lab/inventory/{name}") == (REPO / "inventory" / name).read_bytes(), name
        assert not [n for n in names if n.startswith("kafkaops_lab/inventory/") and n.rsplit("/", 1)[-1]
                    not in inventories], "only the lab's inventories"
        assert {"kafkaops_lab/cli.py", "kafkaops_lab/lab.py", "kafkaops_lab/net.py"} <= names
        assert not [n for n in names if n.startswith("kafkaops/")], "the product is kafkaops' wheel's alone"
        info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "[kafkaops.commands]\nlab = kafkaops_lab.cli:app" in read(info).decode()
        metadata = read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode().splitlines()
    assert "Requires-Dist: kafkaops==0.1.0" in metadata
    assert "License-Expression: Apache-2.0" in metadata
