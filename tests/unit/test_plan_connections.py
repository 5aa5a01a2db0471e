"""A run reuses the connections its plan opened (issue 47): `Environment.live()` hands the SSH sessions, the
ZooKeeper session, the lock and the broker probes to the live environment, whose adapters are built anew with
writes allowed; the plan's environment keeps none of them, and a dry-run client still refuses every change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkaops.environment import Environment
from kafkaops.inventory import load_inventory
from kafkaops.systems.guard import DryRunViolation
from kafkaops.systems.ssh import SshPool
from kafkaops.systems.zookeeper import ZooKeeper

REPO = Path(__file__).resolve().parents[2]


class Session:
    """An open connection, as far as the hand-over can tell: it counts its closes."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_run_takes_over_the_plans_connections_and_the_plan_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.systems.zookeeper as zookeeper

    monkeypatch.setattr(zookeeper, "_stop", lambda client: client.close())
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    plan_env = Environment(cluster, dry_run=True)
    ssh, kazoo, lock, probe = Session(), Session(), Session(), Session()
    plan_env._ssh = SshPool(dry_run=True)
    client = plan_env._ssh.get("kafka1001", cluster.hosts[0].ssh)
    client._client = ssh
    plan_env._zk = ZooKeeper.for_cluster(cluster, dry_run=True)
    plan_env._zk._zk = kazoo
    plan_env._lock, plan_env._probe = lock, probe  # type: ignore[assignment]

    live = plan_env.live()
    plan_env.close()
    assert [s.closed for s in (ssh, kazoo, lock, probe)] == [0, 0, 0, 0]   # the plan closed none of them
    assert live._ssh is not None and live._zk is not None
    taken = live._ssh.get("kafka1001", cluster.hosts[0].ssh)
    assert taken._client is ssh and not taken.dry_run and not live._zk.dry_run and live._zk._zk is kazoo
    assert live._lock is lock and live._probe is probe
    with pytest.raises(DryRunViolation):   # the plan's own client: still a dry-run's, and now without a session
        client.change("hostctl stop kafka")
    assert client._client is None
    live.close()
    assert [s.closed for s in (ssh, kazoo, lock, probe)] == [1, 1, 1, 1]


def test_a_plan_without_connections_hands_over_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    live: Any = Environment(cluster, dry_run=True).live()
    assert (live._ssh, live._zk, live._lock, live._probe, live.dry_run) == (None, None, None, None, False)


def test_the_lock_shares_the_environments_zookeeper_session_before_and_after_the_hand_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.systems.zookeeper as zookeeper

    monkeypatch.setattr(zookeeper, "_stop", lambda client: client.close())
    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    plan_env = Environment(cluster, dry_run=True)
    lock: Any = plan_env.lock
    assert lock.zookeeper is plan_env._zookeeper()       # one session for the reads and the lock
    kazoo = Session()
    lock.zookeeper._zk = kazoo
    live: Any = plan_env.live()
    plan_env.close()
    assert live._lock is lock and lock.zookeeper is live._zk and live._zk._zk is kazoo and not live._zk.dry_run
    assert kazoo.closed == 0
    live.close()
    assert kazoo.closed == 1
