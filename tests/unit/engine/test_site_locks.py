"""A multi-site run holds its own lock and every site's (SiteLocks), all or none.

Pure composition over the local lock-file backend (each site its own directory, as each site's
ZooKeeper or etcd would be): no server needed to check what is taken, given back and left alone.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from kafkaops.engine.lock import FileLockBackend, LockInfo, SiteLocks
from kafkaops.errors import LockHeldError

SWITCHOVER = LockInfo("lab-sites", "20261125-010000-switchover-aaaa", "sre@cumin", "dc switchover", time.time())
ROLL = LockInfo("lab-codfw", "20261125-000000-rolling-reboot-beef", "alice@cumin", "kernel upgrade", time.time())


@pytest.fixture
def backends(tmp_path: Path) -> dict[str, FileLockBackend]:
    return {name: FileLockBackend(tmp_path / name) for name in ("lab-sites", "lab-eqiad", "lab-codfw")}


def _locks(backends: dict[str, FileLockBackend]) -> SiteLocks:
    return SiteLocks(backends["lab-sites"], {n: b for n, b in backends.items() if n != "lab-sites"})


def _holders(backends: dict[str, FileLockBackend]) -> dict[str, str | None]:
    return {n: (h.run_id if (h := b.holder(n)) else None) for n, b in backends.items()}


def test_a_switchover_holds_every_site_lock_under_its_run_and_gives_them_all_back(backends) -> None:
    locks = _locks(backends)
    locks.acquire(SWITCHOVER)
    assert _holders(backends) == dict.fromkeys(backends, SWITCHOVER.run_id)
    # A roll of a site is refused, naming the switchover.
    with pytest.raises(LockHeldError, match=f"lab-codfw is locked by run {SWITCHOVER.run_id}"):
        backends["lab-codfw"].acquire(ROLL)
    assert locks.release("lab-sites", SWITCHOVER.run_id)
    assert _holders(backends) == dict.fromkeys(backends)


def test_a_site_held_by_a_roll_refuses_the_switchover_and_leaves_nothing_taken(backends) -> None:
    backends["lab-codfw"].acquire(ROLL)
    with pytest.raises(LockHeldError, match=f"lab-codfw is locked by run {ROLL.run_id}"):
        _locks(backends).acquire(SWITCHOVER)
    assert _holders(backends) == {"lab-sites": None, "lab-eqiad": None, "lab-codfw": ROLL.run_id}


def test_a_refused_resume_keeps_what_its_run_already_held(backends) -> None:
    """A resume re-takes its run's locks; refused at a site (force-unlocked, then taken by a roll), it must
    not give up the run's own lock, which still marks the half-done switchover."""
    locks = _locks(backends)
    locks.acquire(SWITCHOVER)
    backends["lab-codfw"].force_unlock("lab-codfw")
    backends["lab-codfw"].acquire(ROLL)
    with pytest.raises(LockHeldError):
        locks.acquire(SWITCHOVER)
    assert _holders(backends) == {"lab-sites": SWITCHOVER.run_id, "lab-eqiad": SWITCHOVER.run_id,
                                  "lab-codfw": ROLL.run_id}


def test_resume_is_reentrant(backends) -> None:
    locks = _locks(backends)
    locks.acquire(SWITCHOVER)
    locks.acquire(replace(SWITCHOVER, pid=4242))
    assert _holders(backends) == dict.fromkeys(backends, SWITCHOVER.run_id)


def test_force_unlock_removes_the_runs_site_locks_and_no_one_elses(backends) -> None:
    locks = _locks(backends)
    backends["lab-eqiad"].acquire(replace(ROLL, cluster="lab-eqiad"))
    backends["lab-sites"].acquire(SWITCHOVER)
    backends["lab-codfw"].acquire(replace(SWITCHOVER, cluster="lab-codfw"))
    previous = locks.force_unlock("lab-sites")
    assert previous is not None and previous.run_id == SWITCHOVER.run_id
    assert _holders(backends) == {"lab-sites": None, "lab-eqiad": ROLL.run_id, "lab-codfw": None}


def test_close_closes_the_runs_own_lock_client_and_leaves_the_sites_to_their_environments(backends) -> None:
    closed: list[str] = []

    class Closing(FileLockBackend):
        def __init__(self, name: str, directory: Path) -> None:
            super().__init__(directory)
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    own = Closing("own", backends["lab-sites"].directory)
    site = Closing("lab-codfw", backends["lab-codfw"].directory)
    SiteLocks(own, {"lab-codfw": site}).close()
    assert closed == ["own"]
