"""The migration's ACL comparison (issue 43): ZooKeeper's ACLs, as AclAuthorizer stores them, against the ones
the KRaft brokers serve; the finalize stage refused unless they are the same."""

from __future__ import annotations

import pytest

from kafkaops.engine.step import Noop, Observation
from kafkaops.errors import SafetyRefusal
from kafkaops.policy.acl_migration import AclEntry, compare, from_znode, snake
from kafkaops.steps.migration import AclsMatch

# /kafka-acl/Topic/* and /kafka-acl-extended/prefixed/Topic/eqiad. as Kafka 3.9's AclAuthorizer wrote them on
# the lab (November 2026).
TOPIC_ANY = {"version": 1, "acls": [
    {"principal": "User:kafkaops", "permissionType": "Allow", "operation": "Describe", "host": "*"},
    {"principal": "User:kafkaops", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]}
PREFIXED = {"version": 1, "acls": [
    {"principal": "User:eventbus", "permissionType": "Allow", "operation": "Write", "host": "*"},
    {"principal": "User:load", "permissionType": "Deny", "operation": "Read", "host": "10.0.0.1"}]}


def test_authorizer_names_become_the_admin_apis() -> None:
    assert [snake(n) for n in ("DescribeConfigs", "IdempotentWrite", "TransactionalId", "ClusterAction", "All")] == [
        "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE", "TRANSACTIONAL_ID", "CLUSTER_ACTION", "ALL"]


def test_a_znode_is_read_as_kafka_acls_lists_it() -> None:
    literal = from_znode("Topic", "*", "LITERAL", TOPIC_ANY)
    assert literal == [AclEntry("TOPIC", "*", "LITERAL", "User:kafkaops", "*", "DESCRIBE", "ALLOW"),
                       AclEntry("TOPIC", "*", "LITERAL", "User:kafkaops", "*", "DESCRIBE_CONFIGS", "ALLOW")]
    prefixed = from_znode("Topic", "eqiad.", "PREFIXED", PREFIXED)
    assert str(prefixed[1]) == "DENY User:load READ on TOPIC:eqiad. (prefixed) from 10.0.0.1"


@pytest.mark.parametrize("record", [{"version": 1}, {"acls": [{"principal": "User:x"}]}, {"acls": ["x"]}])
def test_a_znode_not_written_by_aclauthorizer_is_an_error(record: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="Topic:t"):
        from_znode("Topic", "t", "LITERAL", record)


def test_missing_and_extra_entries_are_told_apart() -> None:
    zk = from_znode("Topic", "*", "LITERAL", TOPIC_ANY) + from_znode("Topic", "eqiad.", "PREFIXED", PREFIXED)
    assert compare(zk, list(reversed(zk))).same  # order is the authorizer's, not a difference
    # The copy kept the name but lost the pattern type: a literal topic named "eqiad." matches nothing.
    literal = AclEntry("TOPIC", "eqiad.", "LITERAL", "User:eventbus", "*", "WRITE", "ALLOW")
    kraft = [e for e in zk if e.principal != "User:eventbus"] + [literal]
    diff = compare(zk, kraft)
    assert not diff.same and diff.compared == 5
    assert [str(e) for e in diff.missing] == ["ALLOW User:eventbus WRITE on TOPIC:eqiad. (prefixed)"]
    assert diff.extra == (literal,)
    assert diff.describe() == ("1 in ZooKeeper, not in KRaft: ALLOW User:eventbus WRITE on TOPIC:eqiad. (prefixed) / "
                               "1 in KRaft, not in ZooKeeper: ALLOW User:eventbus WRITE on TOPIC:eqiad.")


def _plan(zookeeper: list[AclEntry], kraft: list[AclEntry] | None) -> Noop:
    diff = compare(zookeeper, kraft or [])
    obs = Observation({"zookeeper": len(zookeeper), "kraft": None if kraft is None else len(kraft),
                       "missing": [str(e) for e in diff.missing], "extra": [str(e) for e in diff.extra],
                       "described": diff.describe()})
    decision = AclsMatch.__new__(AclsMatch).plan(obs)
    assert isinstance(decision, Noop)
    return decision


def test_the_finalize_goes_on_only_when_kraft_serves_zookeepers_acls() -> None:
    zk = from_znode("Topic", "*", "LITERAL", TOPIC_ANY)
    assert _plan(zk, list(zk)).reason == "the ACLs in KRaft are ZooKeeper's: the same 2 ACL(s)"
    assert "no ACL to compare" in _plan([], None).reason
    with pytest.raises(SafetyRefusal, match=r"not ZooKeeper's: 1 in ZooKeeper, not in KRaft: ALLOW User:kafkaops "
                                            r"DESCRIBE_CONFIGS on TOPIC:\*"):
        _plan(zk, zk[:1])
    for none in (None, []):  # SECURITY_DISABLED, or the empty answer of Kafka 4.3 KRaft brokers without one
        with pytest.raises(SafetyRefusal, match=r"ZooKeeper holds 2 ACL\(s\) but the KRaft brokers serve none"):
            _plan(zk, none)
