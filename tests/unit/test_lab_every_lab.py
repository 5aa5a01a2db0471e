"""``lab down`` stops every lab that is up, ``lab status`` lists each (issue 28, item 11).

After ``lab up --mode kraft`` (or ``--sites ...``, ``--brokers 4 ...``), a plain ``kafkaops lab down``
used to stop only the default lab and leave the other one's JVMs running. Here each lab is a real lab
directory (the layout ``lab up`` saves, under a temporary HOME) whose "processes" are real ``sleep``
processes started the way the lab starts its own: a pidfile with their start time and the lab's
environment marker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaops.errors import LabError
from kafkaops.inventory import load_inventory
from kafkaops_lab import dirs, lab, procs
from kafkaops_lab.spec import from_inventory

REPO = Path(__file__).resolve().parents[2]
#: Each lab's inventory, moved to addresses no real lab uses (nothing listens there).
MOVED = {"lab": ("lab.yaml", "127.0.10.", "127.0.30."), "lab-kraft": ("lab-kraft.yaml", "127.0.50.", "127.0.31."),
         "lab-eqiad": ("lab-eqiad.yaml", "127.0.60.", "127.0.32.")}


class Machine:
    """A temporary HOME holding lab directories, and the processes started for them."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.pids: dict[str, list[int]] = {}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_LAB_DIR")}
        return {**env, "HOME": str(self.home)}

    def lab(self, name: str) -> Path:
        """A lab as ``lab up`` leaves it: its lab.json, a process by pidfile and one of its hosts' processes
        known only by the lab's marker (a service started over SSH)."""
        source, old, new = MOVED[name]
        inventory = self.home / source
        inventory.write_text((REPO / "inventory" / source).read_text().replace(old, new))
        spec = from_inventory(load_inventory(inventory))
        spec.save()
        base = Path(spec.lab_dir)
        host = spec.hosts[0].name
        self.pids[name] = [
            self._sleep(base, base / "run" / "etcd.pid"),
            self._sleep(base, base / "hosts" / host / "run" / "kafka.pid"),
            self._sleep(base, base / "hosts" / host / "run" / "over-ssh.pid", host=host, keep_pidfile=False),
        ]
        return base

    def sites(self) -> Path:
        """The two-site lab: its directory (sites.json, MirrorMaker's pidfile) and its site eqiad's lab."""
        base = dirs.lab_dir("lab-sites")
        base.mkdir(parents=True)
        (base / "sites.json").write_text(json.dumps({
            "name": "lab-sites", "inventory": str(REPO / "inventory" / "lab-sites.yaml"),
            "sites": {"eqiad": "lab-eqiad", "codfw": "lab-codfw"}}))
        self.lab("lab-eqiad")
        self.pids["lab-sites"] = [self._sleep(base, base / "run" / "mirrormaker.pid")]
        return base

    def _sleep(self, base: Path, pidfile: Path, host: str | None = None, keep_pidfile: bool = True) -> int:
        env = {procs.LAB_MEMBER_ENV: str(base), **({procs.LAB_HOST_ENV: host} if host else {})}
        pid = procs.spawn(["sleep", "300"], log=base / "log" / "sleep.log", pidfile=pidfile, env=env)
        if not keep_pidfile:
            pidfile.unlink()
        return pid

    def alive(self, name: str) -> list[int]:
        return [p for p in self.pids[name] if procs.is_alive(p)]

    def kafkaops(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "lab", *args], capture_output=True,
                              text=True, timeout=120, env=self.env())


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    m = Machine(tmp_path / "home")
    m.home.mkdir()
    for key in [k for k in os.environ if k.startswith("KAFKAOPS_LAB_DIR")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(m.home))
    try:
        yield m
    finally:
        for pid in (p for pids in m.pids.values() for p in pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # already reaped (subprocess reaps the lab's detached children it forgot)


def test_plain_lab_down_stops_every_lab_that_is_up(machine: Machine) -> None:
    machine.lab("lab")
    machine.lab("lab-kraft")
    machine.sites()
    assert all(machine.alive(name) == pids for name, pids in machine.pids.items())

    result = machine.kafkaops("down")
    assert result.returncode == 0, result.stderr
    assert {name: machine.alive(name) for name in machine.pids} == {name: [] for name in machine.pids}
    said = [line.split(" (")[0] for line in result.stdout.splitlines() if " down (" in line]
    # the two-site lab first (MirrorMaker before the clusters it reads), its site's lab with it
    assert said == ["lab lab-sites down", "lab lab down", "lab lab-kraft down"]

    again = machine.kafkaops("down")
    assert (again.returncode, again.stdout.strip()) == (0, "no lab is up")


def test_lab_down_with_nothing_up_is_a_clean_no_op(machine: Machine) -> None:
    result = machine.kafkaops("down")
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, "no lab is up", "")


def test_lab_down_with_lab_stops_only_that_lab(machine: Machine) -> None:
    machine.lab("lab")
    machine.lab("lab-kraft")
    result = machine.kafkaops("--lab", "lab-kraft", "down")
    assert result.returncode == 0, result.stderr
    assert machine.alive("lab-kraft") == []
    assert machine.alive("lab") == machine.pids["lab"]


def test_lab_status_lists_every_lab_that_is_up(machine: Machine) -> None:
    machine.lab("lab")
    eqiad = machine.lab("lab-eqiad")  # ZooKeeper labs: asking a KRaft lab that is not there takes 10 s
    result = machine.kafkaops("status", "-o", "json")
    assert result.returncode == LabError.exit_code, result.stderr  # these labs' components do not answer
    data = json.loads(result.stdout)
    assert [(d["lab"], d["dir"], d["healthy"]) for d in data["labs"]] == [
        ("lab", str(dirs.lab_dir("lab")), False), ("lab-eqiad", str(eqiad), False)]
    by_lab = {(c["lab"], c["name"]): c for c in data["components"]}
    assert by_lab[("lab", "zookeeper")]["address"] == "127.0.30.10:2181"
    assert by_lab[("lab-eqiad", "zookeeper")]["address"] == "127.0.32.10:2181"
    assert by_lab[("lab-eqiad", "kafka-main1001/kafka")]["kind"] == "kafka"
    assert not data["healthy"]

    table = machine.kafkaops("status")
    titles = [line.strip() for line in table.stdout.splitlines() if line.strip().startswith("kafkaops lab")]
    assert titles == ["kafkaops lab lab", "kafkaops lab lab-eqiad"]

    machine.kafkaops("down")
    only = machine.kafkaops("--lab", "lab-eqiad", "status", "-o", "json")
    assert [d["lab"] for d in json.loads(only.stdout)["labs"]] == ["lab-eqiad"]


def test_running_lists_a_multi_site_lab_once_and_first(machine: Machine) -> None:
    plain = machine.lab("lab")
    sites = machine.sites()
    assert lab.running() == [sites, plain]
    procs.terminate(machine.pids["lab-sites"], timeout=5)  # MirrorMaker gone: its site still makes it up
    assert lab.running() == [sites, plain]
    assert lab.site_dirs(sites) == [dirs.lab_dir("lab-eqiad"), dirs.lab_dir("lab-codfw")]
    assert lab.name(sites) == "lab-sites" and lab.name(plain) == "lab"


def test_a_lab_named_by_its_variable_is_found_outside_the_default_place(machine: Machine, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKAOPS_LAB_DIR_LAB_KRAFT", str(tmp_path / "elsewhere"))
    kraft = machine.lab("lab-kraft")
    assert kraft == tmp_path / "elsewhere"
    assert lab.running() == [kraft]
