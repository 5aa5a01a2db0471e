"""The Kafka ACLs kafkaops' principal needs, per use: least privilege, written down once.

A secured cluster's authorizer lets kafkaops do only what it was granted. What kafkaops must be granted is
therefore part of the product, not tribal knowledge. It is listed here once, and used three ways:
docs/security.md shows it (a test checks the table against this module), the lab grants exactly it to its
``kafkaops`` user (a lab test reads the brokers' ACLs back), and a refusal names the ACL the request
lacked (``kafkaops.systems.kafka_auth``).

Why each one (Kafka's authorization rules, KIP-11 and the protocol's per-API table):

* every command observes: Metadata and ListOffsets need DESCRIBE on the topics; DescribeConfigs needs
  DESCRIBE_CONFIGS on the topics (min.insync.replicas judges a stop's impact) and on the cluster (a
  broker's settings: rack, throttles); DescribeLogDirs and DescribeAcls (the migration's ACL comparison)
  need DESCRIBE on the cluster. A topic that is not
  DESCRIBE-able is *left out* of the metadata without an error, so a gate would judge the cluster without
  it. This is why DESCRIBE is on every topic (``*``), not on a list;
* elections (the pre-flight's restore, ``verify_leaders``): ALTER on the cluster;
* the post-check reads every partition's records: READ on the topics (no group: its readers assign
  partitions and never commit);
* placement (reassignments and their throttles): ALTER and ALTER_CONFIGS on the cluster, ALTER_CONFIGS
  on the topics;
* offsets (translation, switchover): DESCRIBE and READ on the groups, READ on the topics;
* failed-events replay: WRITE on the service's topics (the events name them), READ on them (to find what
  was already written).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Kafka's name of the one CLUSTER resource.
CLUSTER = "kafka-cluster"
#: Every topic, or every group (a LITERAL ``*``).
EVERY = "*"


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW ACL, as ``kafka-acls`` and the Admin API spell it (operation, resource type, name, pattern)."""

    operation: str  # DESCRIBE, READ, WRITE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS
    resource: str  # TOPIC, GROUP, CLUSTER
    name: str
    pattern: str = "LITERAL"  # or PREFIXED

    def __str__(self) -> str:
        kind = {"TOPIC": "Topic", "GROUP": "Group", "CLUSTER": "Cluster"}[self.resource]
        prefixed = " (prefixed)" if self.pattern == "PREFIXED" else ""
        return f"{self.operation} on {kind}:{self.name}{prefixed}"


@dataclass(frozen=True)
class Use:
    """One use of Kafka by kafkaops: the commands that make it, and the ACLs it needs."""

    name: str
    commands: str
    acls: tuple[Acl, ...]


def cluster(operation: str) -> Acl:
    return Acl(operation, "CLUSTER", CLUSTER)


def topic(operation: str, name: str = EVERY, pattern: str = "LITERAL") -> Acl:
    return Acl(operation, "TOPIC", name, pattern)


def group(operation: str, name: str = EVERY) -> Acl:
    return Acl(operation, "GROUP", name)


def uses(service_topic_prefixes: Sequence[str] = ()) -> tuple[Use, ...]:
    """What kafkaops needs, per use. ``service_topic_prefixes``: the prefixes of the topics the services'
    events name (a replay writes there), e.g. ``("eqiad.", "codfw.")``; none: WRITE on every topic."""
    written = (tuple(topic(op, p, "PREFIXED") for p in service_topic_prefixes for op in ("WRITE", "READ"))
               if service_topic_prefixes else (topic("WRITE"), topic("READ")))
    return (
        Use("observe", "every command: status, plans and dry-runs, pre-flights, gates, waits",
            (cluster("DESCRIBE"), cluster("DESCRIBE_CONFIGS"), topic("DESCRIBE"), topic("DESCRIBE_CONFIGS"))),
        Use("elect", "reboot, restart, rolling-reboot, rolling-restart, rolling-upgrade (preferred elections)",
            (cluster("ALTER"),)),
        Use("post-check", "the Spark post-check of every broker roll, health", (topic("READ"),)),
        Use("placement", "placement apply, its cancel and rollback (reassignments, throttles)",
            (cluster("ALTER"), cluster("ALTER_CONFIGS"), topic("ALTER_CONFIGS"))),
        Use("offsets", "offsets translate, switchover", (group("DESCRIBE"), group("READ"), topic("READ"))),
        Use("replay", "failed-events replay", written),
    )


def required(service_topic_prefixes: Sequence[str] = ()) -> list[Acl]:
    """Every ACL of :func:`uses`, once each: what a cluster grants kafkaops' principal for every command."""
    return sorted({acl for use in uses(service_topic_prefixes) for acl in use.acls})


def lacking(error_name: str, needs: Iterable[Acl]) -> Acl | None:
    """Of the ACLs a request needs, the one a librdkafka authorization error (``TOPIC_AUTHORIZATION_FAILED``,
    ``GROUP_…``, ``CLUSTER_…``) says is missing; None when the error names no resource among them."""
    resource = error_name.split("_", 1)[0]
    return next((acl for acl in needs if acl.resource == resource), None)
