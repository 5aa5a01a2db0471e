"""`-i FILE` restricts every lookup to that file; a name two inventories define is an error naming both."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import ConfigError, UnknownHostError
from kafkaops.lookup import find_cluster, find_host

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    lab = (REPO / "inventory" / "lab.yaml").read_text()
    found = tmp_path / "kafkaops" / "inventory"  # the operator's own place: $XDG_CONFIG_HOME/kafkaops/inventory
    found.mkdir(parents=True)
    a, b = found / "a.yaml", found / "b.yaml"
    a.write_text(lab)
    b.write_text(lab.replace("cluster: lab", "cluster: other").replace("kafka1003", "kafka2003"))
    monkeypatch.delenv("KAFKAOPS_INVENTORY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return a, b


def test_a_name_defined_twice_is_an_error_naming_both_files(two: tuple[Path, Path]) -> None:
    a, b = two
    with pytest.raises(ConfigError, match=rf"host 'kafka1001' is defined by {a} and {b}.*--inventory"):
        find_host("kafka1001")
    assert find_host("kafka2003")[0].name == "other"  # unique names still resolve


def test_inventory_restricts_every_lookup_to_that_file(two: tuple[Path, Path]) -> None:
    a, b = two
    cluster, _host = find_host("kafka1001", b)
    assert (cluster.name, cluster.source) == ("other", str(b))
    with pytest.raises(UnknownHostError, match=f"unknown host 'kafka2003' in {a}"):
        find_host("kafka2003", a)  # defined in b only: not found through -i a
    with pytest.raises(ConfigError, match=f"unknown cluster 'other' in {a}"):
        find_cluster("other", a)


def test_the_root_option_restricts_lookups_too(two: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    a, _b = two
    monkeypatch.setenv("KAFKAOPS_INVENTORY", str(a))  # what `kafkaops -i a.yaml ...` sets
    assert find_host("kafka1001")[0].source == str(a)
    with pytest.raises(UnknownHostError):
        find_host("kafka2003")
