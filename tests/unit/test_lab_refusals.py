"""``lab up`` refuses bad situations before starting anything (ports taken, Java or jars missing)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafkaops.errors import LabError
from kafkaops.inventory import load_inventory
from kafkaops_lab import lab, procs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def other_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The lab inventory moved to 127.0.30.0/24 and a temporary lab dir: never touches a real lab."""
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", str(tmp_path / "lab"))
    path = tmp_path / "lab.yaml"
    path.write_text((REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", "127.0.30."))
    return path


def test_port_taken_is_refused_and_nothing_starts(other_lab: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.30.2", 9092))
        sock.listen()
        with pytest.raises(LabError, match=r"port\(s\) already in use: kafka1002 kafka 127\.0\.30\.2:9092"):
            lab.up(load_inventory(other_lab))
    assert not (tmp_path / "lab").exists(), "a refused lab up must not create anything"
    assert procs.marked_pids(tmp_path / "lab") == []


def test_missing_jars_are_refused(other_lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(LabError, match=r"Kafka jars not found .*scripts/install\.sh"):
        lab.up(load_inventory(other_lab))
    assert not (tmp_path / "lab").exists()


def test_missing_java_is_refused(other_lab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LabError, match="java not found"):
        lab.up(load_inventory(other_lab))


def test_non_loopback_lab_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", str(tmp_path / "lab"))
    path = tmp_path / "lab.yaml"
    text = (REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", "127.0.30.")
    path.write_text(text.replace("127.0.30.2", "10.0.0.2"))  # never the real lab's addresses
    with pytest.raises(LabError, match="not loopback"):
        lab.up(load_inventory(path))


def test_status_without_a_lab_says_how_to_start_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR", str(tmp_path / "none"))
    with pytest.raises(LabError, match="kafkaops lab up"):
        lab.status()


def test_down_without_a_lab_is_a_no_op(tmp_path: Path) -> None:
    assert lab.down(tmp_path / "none") == 0


@pytest.mark.parametrize("heap", ["1 g", "-Xmx1g", "0m", "1t", ""])
def test_a_broker_heap_that_is_no_jvm_size_is_refused_and_nothing_starts(other_lab: Path, tmp_path: Path,
                                                                         heap: str) -> None:
    with pytest.raises(LabError, match="not a JVM size"):
        lab.up(load_inventory(other_lab), broker_heap=heap)
    assert not (tmp_path / "lab").exists()


def test_the_broker_heap_reaches_each_brokers_jvm_and_only_theirs(other_lab: Path) -> None:
    """`lab up --broker-heap 1g` (bench/bench_scale.py's 10,000 partitions): the brokers' -Xmx, kept in the
    lab's spec so a broker restarted by hostctl gets it too; the KRaft controllers keep their own."""
    from dataclasses import replace

    from kafkaops_lab.host import LabHost
    from kafkaops_lab.spec import from_inventory

    spec = from_inventory(load_inventory(other_lab))
    assert "-Xmx320m" in LabHost(spec, spec.hosts[0]).argv("kafka")
    big = replace(spec, broker_heap="1g")
    argv = LabHost(big, big.hosts[0]).argv("kafka")
    assert "-Xmx1g" in argv and "-Xmx320m" not in argv
