"""Issue 29's acceptance, as an operator installs kafkaops: the wheel (built from the sdist) installed —
not editable — into a fresh virtualenv outside the checkout, run from a temporary directory with its
inventory in a temporary ``$XDG_CONFIG_HOME``, without ``PYTHONPATH``: it lists every runbook, plans a
reboot, registers the lab's commands through the entry point of the lab's own wheel (kafkaops-lab), and
restarts a broker of the lab for real with the Spark post-check on.

The venv sees the machine's site-packages (``--system-site-packages``: pyspark and the client libraries
come from there, as on an admin host whose packages configuration management installs); the wheel is
installed with ``--no-deps --no-index``, and the test proves the venv's own copy is what runs — not the
machine's editable install of a checkout, whose finder sits on the same path.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kafkaops.model import Cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
FAST = ["--syn-window", "2s"]


@pytest.fixture(scope="module")
def venv(built_dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run(["python3", "-m", "venv", "--system-site-packages", str(root)], check=True, timeout=300)
    subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(built_dist["wheel"]), str(built_dist["lab_wheel"])],
                   check=True, timeout=300)
    return root


def _operator_env(tmp_path: Path, home: Path, cluster: Cluster) -> dict[str, str]:
    """What an operator's shell has: no PYTHONPATH, no KAFKAOPS_INVENTORY; the inventory in
    ``$XDG_CONFIG_HOME/kafkaops/inventory/``; the lab's directory as the session's lab uses it."""
    config = tmp_path / "config" / "kafkaops" / "inventory"
    config.mkdir(parents=True)
    (config / "lab.yaml").write_text(Path(cluster.source).read_text())
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and (not k.startswith("KAFKAOPS_") or k.startswith("KAFKAOPS_LAB_DIR")
                                     or k == "KAFKAOPS_CACHE")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), KAFKAOPS_SYSCONFDIR=str(tmp_path / "no-etc"),
               KAFKAOPS_HOME=str(home), COLUMNS="200")
    return env


def test_the_installed_package_runs_without_the_checkout(venv: Path, pooled_lab: Cluster, home: Path,
                                                         tmp_path: Path) -> None:
    env = _operator_env(tmp_path, home, pooled_lab)
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=work,
                              stdin=subprocess.DEVNULL)

    for package in ("kafkaops", "kafkaops_lab"):  # the product's wheel and the lab's (issue 45)
        where = run(str(venv / "bin" / "python"), "-c", f"import {package}; print({package}.__file__)").stdout.strip()
        assert not Path(where).resolve().is_relative_to(REPO), where
        assert not Path(where).resolve().is_relative_to(Path("/work/main")), where  # the machine's editable install
        assert Path(where).resolve().is_relative_to(venv.resolve()), where

    kafkaops = str(venv / "bin" / "kafkaops")
    listed = run(kafkaops, "runbooks", "list")
    assert listed.returncode == 0, listed.stderr
    for runbook in (REPO / "runbooks").glob("*.yaml"):
        assert runbook.stem in listed.stdout, (runbook.stem, listed.stdout)

    plan = run(kafkaops, "reboot", "kafka1001", "--dry-run")
    assert plan.returncode == 0, plan.stderr + plan.stdout
    assert "kafka1001" in plan.stdout and "reboot" in plan.stdout.lower()

    status = run(kafkaops, "lab", "--lab", "lab", "status", "-o", "json")  # the lab registered by its entry point
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["healthy"] is True

    restart = run(kafkaops, "restart", "kafka1002", "--yes", "--reason", "installed package", *FAST)
    assert restart.returncode == 0, restart.stderr[-3000:] + restart.stdout[-3000:]
    shown = restart.stdout + restart.stderr
    assert "post-check: Spark scan of the data written since the baseline" in shown, shown[-3000:]
    assert "notice: the fast scan reader is not built" not in shown  # the installed reader, not the fallback
    runs = sorted((home / "runs").iterdir())
    assert len(runs) == 1
    assert (runs[0] / "post-check.md").is_file()  # written by the scan, after it read the data
