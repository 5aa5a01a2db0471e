"""The step kinds runbooks are made of. Importing this package registers all of them.

Each module holds the steps of one system (conftool, traffic, kafka, host, health) and talks to it only
through the run's :class:`~kafkaops.environment.Environment`; client libraries are imported lazily by
the adapters.
"""

from kafkaops.steps import (
    canary,
    conftool,
    deploy,
    discovery,
    env,
    failed_events,
    health,
    host,
    kafka,
    kraft,
    logs,
    mirror,
    offsets,
    operator,
    placement,
    service,
    sites,
    traffic,
)

__all__ = ["canary", "conftool", "deploy", "discovery", "env", "failed_events", "health", "host", "kafka", "kraft",
           "logs", "mirror", "offsets", "operator", "placement", "service", "sites", "traffic"]


def register_all() -> None:
    """Idempotent: the imports above already registered every kind (called by the CLI wiring)."""
