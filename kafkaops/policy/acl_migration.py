"""The ACLs a cluster enforces, before and after its move to KRaft: the same, or the migration stops.

In ZooKeeper mode the brokers' ``AclAuthorizer`` keeps the ACLs in ZooKeeper (``/kafka-acl/<Type>/<name>``,
prefixed ones under ``/kafka-acl-extended/prefixed``). KRaft's ``StandardAuthorizer`` keeps them in the
metadata log, and the migration copies them there (KIP-866) along with the topics. A copy that missed one
(a pattern type, a resource type the copy did not know) would show only as clients refused once the
brokers read the ACLs from KRaft, and after the finalize stage there is no way back. So before the point of
no return, kafkaops compares what ZooKeeper holds (what the ZooKeeper-mode brokers enforced, kept in step by
the controllers' dual writes) with what the cluster now serves from KRaft (DescribeAcls, answered by the
KRaft brokers): both sides read, never assumed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL, spelled as Kafka's Admin API spells it (upper snake case: ``DESCRIBE_CONFIGS``, ``PREFIXED``)."""

    resource: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
    name: str
    pattern: str  # LITERAL or PREFIXED
    principal: str  # User:kafkaops
    host: str
    operation: str  # READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS, ...
    permission: str  # ALLOW or DENY

    def __str__(self) -> str:
        prefixed = " (prefixed)" if self.pattern == "PREFIXED" else ""
        host = "" if self.host == "*" else f" from {self.host}"
        return f"{self.permission} {self.principal} {self.operation} on {self.resource}:{self.name}{prefixed}{host}"


def snake(camel: str) -> str:
    """``DescribeConfigs`` -> ``DESCRIBE_CONFIGS``: AclAuthorizer's names in ZooKeeper as the Admin API's."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", camel).upper()


def from_znode(resource: str, name: str, pattern: str, record: Mapping[str, Any]) -> list[AclEntry]:
    """The ACLs of one AclAuthorizer znode (``{"version": 1, "acls": [{"principal", "permissionType",
    "operation", "host"}]}``) for ``resource`` (its path's type, ``Topic``) and ``name``.

    Raises:
        ValueError: The record is not what AclAuthorizer writes.
    """
    acls = record.get("acls")
    if not isinstance(acls, list):
        raise ValueError(f"no 'acls' list in the ACLs of {resource}:{name}")
    out = []
    for acl in acls:
        if not isinstance(acl, dict) or not all(isinstance(acl.get(k), str) for k in
                                                ("principal", "permissionType", "operation", "host")):
            raise ValueError(f"an ACL of {resource}:{name} is not principal/permissionType/operation/host: {acl!r:.80}")
        out.append(AclEntry(snake(resource), name, pattern, acl["principal"], acl["host"], snake(acl["operation"]),
                            snake(acl["permissionType"])))
    return out


@dataclass(frozen=True)
class AclDiff:
    """What ZooKeeper holds that KRaft does not (``missing``: clients refused after the move) and what KRaft
    holds that ZooKeeper does not (``extra``: access nobody granted in ZooKeeper mode)."""

    missing: tuple[AclEntry, ...]
    extra: tuple[AclEntry, ...]
    compared: int

    @property
    def same(self) -> bool:
        return not self.missing and not self.extra

    def describe(self, limit: int = 5) -> str:
        parts = []
        for what, entries in (("in ZooKeeper, not in KRaft", self.missing), ("in KRaft, not in ZooKeeper", self.extra)):
            if entries:
                shown = "; ".join(str(e) for e in entries[:limit])
                more = f" and {len(entries) - limit} more" if len(entries) > limit else ""
                parts.append(f"{len(entries)} {what}: {shown}{more}")
        return " / ".join(parts) or f"the same {self.compared} ACL(s)"


def compare(zookeeper: Iterable[AclEntry], kraft: Iterable[AclEntry]) -> AclDiff:
    """The two sets compared entry by entry (duplicates are one ACL, as both authorizers hold them)."""
    zk, kr = set(zookeeper), set(kraft)
    return AclDiff(tuple(sorted(zk - kr)), tuple(sorted(kr - zk)), len(zk | kr))
