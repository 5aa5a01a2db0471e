"""The ACLs kafkaops needs (kafkaops/policy/kafka_acls.py), and docs/security.md's table of them, agree.

The lab grants exactly :func:`required` to its kafkaops user; tests/lab/test_secured_lab.py reads the
brokers' ACLs back and runs every suite command under them."""

from __future__ import annotations

import re
from pathlib import Path

from kafkaops.policy import kafka_acls as acls
from kafkaops.policy.kafka_acls import Acl, lacking, required, uses

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_every_acl_is_granted_once_and_writes_go_only_to_the_service_topics() -> None:
    wanted = required(("eqiad.", "codfw."))
    assert len(wanted) == len(set(wanted))
    writes = [a for a in wanted if a.operation == "WRITE"]
    assert writes == [Acl("WRITE", "TOPIC", "codfw.", "PREFIXED"), Acl("WRITE", "TOPIC", "eqiad.", "PREFIXED")]
    assert acls.topic("WRITE") in required()  # no prefixes named: every topic
    # Nothing that deletes, creates or changes ACLs: kafkaops never needs them.
    assert not {a.operation for a in required()} & {"CREATE", "DELETE", "ALTER_ACLS", "ALL"}
    assert acls.cluster("ALTER") in wanted and acls.topic("DESCRIBE") in wanted


def test_the_error_names_the_resource_it_refused() -> None:
    needs = [acls.group("READ", "g"), acls.topic("READ", "t")]
    assert lacking("GROUP_AUTHORIZATION_FAILED", needs) == acls.group("READ", "g")
    assert lacking("TOPIC_AUTHORIZATION_FAILED", needs) == acls.topic("READ", "t")
    assert lacking("CLUSTER_AUTHORIZATION_FAILED", needs) is None
    assert str(acls.topic("WRITE", "eqiad.", "PREFIXED")) == "WRITE on Topic:eqiad. (prefixed)"


def test_the_docs_table_is_the_module() -> None:
    """docs/security.md's least-privilege table, row by row: the use, then its ACLs as `str(Acl)`."""
    text = DOC.read_text()
    section = text[text.index("### Kafka ACLs: least privilege"):]
    rows = re.findall(r"^\| `([a-z-]+)` \| [^|]+ \| (.+) \|$", section, re.M)
    assert rows, "no table under 'Kafka ACLs: least privilege'"
    documented = {name: sorted(a.strip(" `") for a in cell.split("<br>")) for name, cell in rows}
    expected = {u.name: sorted(str(a) for a in u.acls) for u in uses(("<service prefix>",))}
    assert documented == expected


def test_the_two_site_labs_load_may_read_the_switched_group_the_inventory_names() -> None:
    """The switchover's load consumes as ``load`` in the group the sites inventory switches: the lab grants
    that group by name, so the two must agree (a renamed group would leave the load refused)."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.lab import SERVICE_PREFIXES
    from kafkaops_lab.security import SWITCHED_GROUP, grants

    sites = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-sites.yaml")
    assert [g for s in sites.switched.values() for g in s.consumer_groups] == [SWITCHED_GROUP]
    load = grants(SERVICE_PREFIXES)["load"]
    assert {acls.group("READ", SWITCHED_GROUP), acls.group("DESCRIBE", SWITCHED_GROUP)} <= set(load)
    assert {acls.topic("READ", p, "PREFIXED") for p in SERVICE_PREFIXES} <= set(load)
    assert not any(a.operation == "WRITE" and a.name.startswith(SERVICE_PREFIXES) for a in load)
