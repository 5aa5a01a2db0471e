"""The lab's network faults (kafkaops/lab/net.py): the iptables rules a partition makes, checked without
running iptables. What must hold for every rule, whatever the sides: it sits in the lab's own chain, names
a source and a destination that are both loopback lab addresses, and never matches the admin's address
as a lab side; both directions are cut; a partition without the admin is refused (the lab's processes
all connect from 127.0.0.1, so it could not be told apart)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from kafkaops.errors import LabError
from kafkaops.inventory import load_inventory
from kafkaops.lab import net
from kafkaops.lab.spec import LabSpec, from_inventory

INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "lab.yaml"


@pytest.fixture(scope="module")
def spec() -> LabSpec:
    return from_inventory(load_inventory(INVENTORY))


def _value(rule: list[str], flag: str) -> str:
    return rule[rule.index(flag) + 1]


@pytest.mark.parametrize("other", ["zookeeper", "etcd", "brokers", "kafka1002", "kafka1001.lab.local"])
def test_every_rule_is_between_lab_loopback_addresses_and_cuts_both_ways(spec: LabSpec, other: str) -> None:
    side = net.resolve(spec, other)
    rules = net.rules("lab", net.resolve(spec, "admin"), side)
    assert len(rules) == 3 * len(side.addresses)
    for rule in rules:
        for flag in ("-s", "-d"):
            ip = ipaddress.ip_network(_value(rule, flag))
            assert ip.prefixlen == 32 and ip.subnet_of(ipaddress.ip_network("127.0.0.0/8")), rule
        assert _value(rule, "--comment") == f"kafkaops-lab:admin~{side.name}"
    pairs = {(_value(r, "-s"), _value(r, "-d")) for r in rules if _value(r, "-j") == "DROP"}
    for address in side.addresses:
        assert {("127.0.0.1/32", f"{address}/32"), (f"{address}/32", "127.0.0.1/32")} <= pairs
    # Only the admin's own packets start a mark; a drop matches only a marked (admin's) connection.
    for rule in rules:
        if _value(rule, "-j") == "CONNMARK":
            assert _value(rule, "--gid-owner") == str(net.ADMIN_GID) and _value(rule, "-s") == "127.0.0.1/32"
        else:
            assert _value(rule, "--mark") == net.MARK


def test_the_sides_resolve_to_the_labs_own_addresses(spec: LabSpec) -> None:
    assert net.resolve(spec, "zookeeper").addresses == ("127.0.10.10",)
    assert net.resolve(spec, "etcd").addresses == ("127.0.10.11",)
    assert net.resolve(spec, "brokers").addresses == ("127.0.10.1", "127.0.10.2", "127.0.10.3")
    assert net.resolve(spec, "kafka1003.lab.local").name == "kafka1003"


@pytest.mark.parametrize("a,b", [("zookeeper", "kafka1001"), ("admin", "admin"), ("brokers", "etcd")])
def test_a_partition_without_exactly_one_admin_side_is_refused(spec: LabSpec, a: str, b: str) -> None:
    with pytest.raises(LabError, match=r"127\.0\.0\.1"):
        net.rules("lab", net.resolve(spec, a), net.resolve(spec, b))


def test_an_unknown_side_is_refused_naming_the_sides(spec: LabSpec) -> None:
    with pytest.raises(LabError) as err:
        net.resolve(spec, "kafka9999")
    assert "zookeeper" in (err.value.hint or "") and "kafka1001" in (err.value.hint or "")


@pytest.mark.parametrize("address", ["10.0.0.1", "192.0.2.2", "127.0.0.1", "::1"])
def test_a_side_outside_the_lab_loopback_is_refused(address: str) -> None:
    with pytest.raises(LabError, match="not a lab loopback address"):
        net.rules("lab", net.Side("admin", ("127.0.0.1",), admin=True), net.Side("x", (address,)))


def test_the_jump_is_loopback_only_and_the_chain_is_the_labs_own() -> None:
    assert net.jump("lab-stretch") == ["OUTPUT", "-o", "lo", "-j", "KAFKAOPS-LAB-lab-stretch"]
    with pytest.raises(LabError):
        net.chain("a-lab-name-far-too-long-for-iptables")
