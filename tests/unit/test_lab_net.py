"""The lab's network faults (lab/kafkaops_lab/net.py): the iptables rules a partition makes, checked without
running iptables. What must hold for every rule, whatever the sides: it names a source and a destination
that are both loopback addresses, one of them a lab address; a packet is dropped only when its sender's
group is one side's and its destination the other side's address, or when it answers a connection so
marked; both directions are cut; sides that overlap are refused."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from kafkaops.errors import LabError
from kafkaops.inventory import load_inventory
from kafkaops_lab import net
from kafkaops_lab.procs import identity_gid
from kafkaops_lab.spec import LabSpec, from_inventory

INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "lab.yaml"


@pytest.fixture(scope="module")
def spec() -> LabSpec:
    return from_inventory(load_inventory(INVENTORY))


def _value(rule: list[str], flag: str) -> str:
    return rule[rule.index(flag) + 1]


@pytest.fixture(autouse=True)
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab gives its components group ids only when run as root (as CI and the lab are)."""
    monkeypatch.setattr("os.geteuid", lambda: 0)


PAIRS = [("admin", "zookeeper"), ("admin", "etcd"), ("admin", "brokers"), ("admin", "kafka1001.lab.local"),
         ("kafka1002", "zookeeper"), ("kafka1001", "brokers-but-1001"), ("kafka1003", "etcd"),
         ("kafka1001", "kafka1002")]


def _sides(spec: LabSpec, a: str, b: str) -> tuple[net.Side, net.Side]:
    if b == "brokers-but-1001":  # a side made by hand: the other brokers
        others = [h for h in spec.brokers if h.name != "kafka1001"]
        return net.resolve(spec, a), net.Side("others", tuple(h.address for h in others),
                                              tuple(identity_gid(h.address) or 0 for h in others))
    return net.resolve(spec, a), net.resolve(spec, b)


@pytest.mark.parametrize("a,b", PAIRS)
def test_every_rule_is_between_loopback_addresses_and_cuts_both_ways(spec: LabSpec, a: str, b: str) -> None:
    sa, sb = _sides(spec, a, b)
    rules = net.rules("lab", sa, sb)
    assert rules
    for rule in rules:
        for flag in ("-s", "-d"):
            ip = ipaddress.ip_network(_value(rule, flag))
            assert ip.prefixlen == 32 and ip.subnet_of(ipaddress.ip_network("127.0.0.0/8")), rule
        assert _value(rule, "--comment") == f"kafkaops-lab:{sa.name}~{sb.name}"
    # Forward: a side's own packets (its group) to the other side's addresses, dropped and marked.
    forward = {(_value(r, "--gid-owner"), _value(r, "-d")) for r in rules if _value(r, "-j") == "DROP"
               and "--gid-owner" in r}
    expected = {(str(g), f"{addr}/32") for x, y in ((sa, sb), (sb, sa)) for g in x.gids for addr in y.addresses}
    assert forward == expected and expected
    # Replies: only of a marked connection, from an address of a side whose peer sends.
    for rule in rules:
        if _value(rule, "-j") == "CONNMARK":
            assert "--gid-owner" in rule and _value(rule, "-s") == "127.0.0.1/32"
        elif "--gid-owner" not in rule:
            assert _value(rule, "--mark") == net.MARK and _value(rule, "-d") == "127.0.0.1/32"
    replies = {_value(r, "-s") for r in rules if "--mark" in r}
    assert replies == {f"{addr}/32" for x, y in ((sa, sb), (sb, sa)) if x.gids for addr in y.addresses}


def test_one_broker_cut_from_zookeeper_leaves_the_others_session_alone(spec: LabSpec) -> None:
    rules = net.rules("lab", net.resolve(spec, "kafka1002"), net.resolve(spec, "zookeeper"))
    gids = {_value(r, "--gid-owner") for r in rules if "--gid-owner" in r}
    assert gids == {str(identity_gid("127.0.10.2")), str(identity_gid("127.0.10.10"))}
    assert str(identity_gid("127.0.10.1")) not in gids


def test_the_sides_resolve_to_the_labs_own_addresses(spec: LabSpec) -> None:
    assert net.resolve(spec, "zookeeper").addresses == ("127.0.10.10",)
    assert net.resolve(spec, "etcd").addresses == ("127.0.10.11",)
    assert net.resolve(spec, "brokers").addresses == ("127.0.10.1", "127.0.10.2", "127.0.10.3")
    assert net.resolve(spec, "kafka1003.lab.local").name == "kafka1003"
    assert net.resolve(spec, "admin").gids == (net.ADMIN_GID,) and net.resolve(spec, "admin").addresses == ()
    assert len({identity_gid(a) for a in ("127.0.10.1", "127.0.10.2", "127.0.20.1")}) == 3


@pytest.mark.parametrize("a,b", [("admin", "admin"), ("brokers", "kafka1001"), ("kafka1002", "kafka1002")])
def test_sides_that_overlap_are_refused(spec: LabSpec, a: str, b: str) -> None:
    with pytest.raises(LabError, match="overlap"):
        net.rules("lab", net.resolve(spec, a), net.resolve(spec, b))


def test_without_group_ids_only_the_admin_can_be_cut(spec: LabSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(LabError, match=r"127\.0\.0\.1"):
        net.rules("lab", net.resolve(spec, "kafka1002"), net.resolve(spec, "zookeeper"))
    assert net.rules("lab", net.resolve(spec, "admin"), net.resolve(spec, "zookeeper"))


def test_an_unknown_side_is_refused_naming_the_sides(spec: LabSpec) -> None:
    with pytest.raises(LabError) as err:
        net.resolve(spec, "kafka9999")
    assert "zookeeper" in (err.value.hint or "") and "kafka1001" in (err.value.hint or "")


@pytest.mark.parametrize("address", ["10.0.0.1", "192.0.2.2", "127.0.0.1", "::1"])
def test_a_side_outside_the_lab_loopback_is_refused(address: str) -> None:
    with pytest.raises(LabError, match="not a lab loopback address"):
        net.rules("lab", net.Side("admin", (), (net.ADMIN_GID,), admin=True), net.Side("x", (address,)))


def test_the_jump_is_loopback_only_and_the_chain_is_the_labs_own() -> None:
    assert net.jump("lab-stretch") == ["OUTPUT", "-o", "lo", "-j", "KAFKAOPS-LAB-lab-stretch"]
    with pytest.raises(LabError):
        net.chain("a-lab-name-far-too-long-for-iptables")
