"""Where an installed kafkaops finds its inventories and keeps its state (issue 29): the operator's places,
never the package's directory or a checkout's ``inventory/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkaops import places
from kafkaops.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
LAB = (REPO / "inventory" / "lab.yaml").read_text()


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No inventory anywhere: an empty XDG_CONFIG_HOME, no $KAFKAOPS_INVENTORY, an absent /etc/kafkaops."""
    for var in ("KAFKAOPS_INVENTORY", "KAFKAOPS_HOME", "KAFKAOPS_CACHE", "KAFKAOPS_LOCK_DIR",
                "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KAFKAOPS_SYSCONFDIR", str(tmp_path / "etc"))
    return tmp_path


def _inventory(directory: Path, name: str = "main.yaml", cluster: str = "lab") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    f = directory / name
    f.write_text(LAB.replace("cluster: lab", f"cluster: {cluster}"))
    return f


def test_nothing_found_is_one_line_naming_every_place_in_order(nowhere: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        places.inventory_files()
    line = str(caught.value)
    assert "\n" not in line
    order = ["--inventory (not set)", "$KAFKAOPS_INVENTORY (not set)",
             f"{nowhere / 'config' / 'kafkaops' / 'inventory'} (absent)", f"{nowhere / 'etc' / 'inventory'} (absent)"]
    positions = [line.index(p) for p in order]
    assert positions == sorted(positions), line
    assert caught.value.exit_code == 3


def test_the_operators_own_directory_wins_whole_over_the_sites(nowhere: Path) -> None:
    mine = _inventory(nowhere / "config" / "kafkaops" / "inventory", cluster="mine")
    _inventory(nowhere / "etc" / "inventory", cluster="site")
    assert places.inventory_files() == [mine]  # the first place holding any; never merged with /etc's


def test_etc_is_used_when_the_operator_has_none(nowhere: Path) -> None:
    (nowhere / "config" / "kafkaops" / "inventory").mkdir(parents=True)  # present but empty: skipped
    site = _inventory(nowhere / "etc" / "inventory")
    _inventory(nowhere / "etc" / "inventory", "x.example.yaml")  # examples are never inventories
    assert places.inventory_files() == [site]


def test_the_variable_and_the_option_restrict_to_exactly_what_they_name(nowhere: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _inventory(nowhere / "config" / "kafkaops" / "inventory")
    one = _inventory(nowhere / "elsewhere", "one.yaml")
    two = _inventory(nowhere / "dir", "two.yaml")
    monkeypatch.setenv("KAFKAOPS_INVENTORY", str(one))
    assert places.inventory_files() == [one]
    assert places.inventory_files(two.parent) == [two]  # --inventory DIR: that directory's inventories
    monkeypatch.setenv("KAFKAOPS_INVENTORY", str(nowhere / "empty-dir"))
    (nowhere / "empty-dir").mkdir()
    with pytest.raises(ConfigError, match=r"no inventory found in \$KAFKAOPS_INVENTORY"):
        places.inventory_files()


def test_state_lock_and_cache_follow_the_operators_variables(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path("~").expanduser()
    assert places.state_dir() == home / ".local" / "state" / "kafkaops"
    assert places.cache_dir() == home / ".cache" / "kafkaops"
    assert places.lock_dir() == Path("/var/lib/kafkaops/locks")
    monkeypatch.setenv("XDG_STATE_HOME", str(nowhere / "s"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(nowhere / "c"))
    assert (places.state_dir(), places.cache_dir()) == (nowhere / "s" / "kafkaops", nowhere / "c" / "kafkaops")
    monkeypatch.setenv("KAFKAOPS_HOME", str(nowhere / "h"))
    monkeypatch.setenv("KAFKAOPS_CACHE", str(nowhere / "k"))
    monkeypatch.setenv("KAFKAOPS_LOCK_DIR", str(nowhere / "l"))
    assert (places.state_dir(), places.cache_dir(), places.lock_dir()) == (nowhere / "h", nowhere / "k", nowhere / "l")


def test_a_production_command_never_falls_back_to_the_labs_inventory(nowhere: Path) -> None:
    """The issue's acceptance: with no inventory anywhere, ``kafkaops reboot kafka1001`` (a host of the lab's
    inventory, which sits in this checkout) exits 3 with one line listing the places searched."""
    result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "reboot", "kafka1001", "--dry-run"],
                            capture_output=True, text=True, timeout=60, cwd=nowhere, stdin=subprocess.DEVNULL)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 3, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: no inventory found anywhere: searched --inventory"), lines
    assert str(nowhere / "etc" / "inventory") in lines[0]
