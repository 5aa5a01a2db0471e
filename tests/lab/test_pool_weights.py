"""The runbook's pool check on the lab's real conftool: "you should see every host weight: 10, enabled"
before taking one out (issue 13, point 3). A pool member at weight 0 takes no traffic, so depooling another
host would leave the service with less than it is sized for: the run refuses before changing anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import kafkaops

from kafkaops.errors import SafetyRefusal
from kafkaops.model import Cluster
from kafkaops_lab.pools import LabConftool as Conftool

pytestmark = [pytest.mark.lab]


def test_a_member_at_weight_0_stops_the_reboot_naming_it_and_status_shows_it(pooled_lab: Cluster,
                                                                              home: Path) -> None:
    cluster = pooled_lab
    assert cluster.conftool_config
    conftool = Conftool(cluster.conftool_config)
    victim, other = cluster.hosts[0], cluster.hosts[1]
    conftool.ensure(other.fqdn, other.conftool_tags, pooled="yes", weight=0)
    try:
        status = kafkaops(home, cluster, "status", "lab", "-o", "json")
        weights = {b["host"]: b["weight"] for b in json.loads(status.stdout)["brokers"]}
        assert weights == {victim.name: 10, other.name: 0, cluster.hosts[2].name: 10}
        table = kafkaops(home, cluster, "status", "lab")
        assert f"pool weight: {other.name} at 0 (expected 10" in " ".join(table.stdout.split()), table.stdout

        result = kafkaops(home, cluster, "reboot", victim.name, "--yes", "--reason", "weight test",
                          "--no-scan", "--syn-window", "2s")
        assert result.returncode == SafetyRefusal.exit_code, result.stdout + result.stderr
        assert f"{other.fqdn} has weight 0 (every host is expected at weight 10)" in result.stderr
        assert conftool.get(victim.fqdn, victim.conftool_tags).pooled == "yes"  # nothing changed
    finally:
        conftool.ensure(other.fqdn, other.conftool_tags, pooled="yes", weight=10)
