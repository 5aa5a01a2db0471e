"""``kafkaops lab host add``'s inventory: the lab's own with the next host, a new machine racked (issue 46)."""

from __future__ import annotations

from pathlib import Path

from kafkaops.inventory import load_inventory
from kafkaops_lab.inventories import lab_inventory, with_next_host


def test_the_next_host_follows_the_last_one(tmp_path: Path) -> None:
    name, out = with_next_host(lab_inventory(), tmp_path / "lab-next.yaml")
    assert name == "kafka1004"
    cluster = load_inventory(out)
    host = cluster.host(name)
    assert (host.fqdn, host.address, host.broker_id, host.dc, host.rack) == (
        "kafka1004.lab.local", "127.0.10.4", 1004, "eqiad", "D")
    before = load_inventory(lab_inventory())
    assert [h.name for h in cluster.hosts] == [*(h.name for h in before.hosts), name]
    assert cluster.bootstrap_servers == before.bootstrap_servers and cluster.name == before.name
