"""The step kinds runbooks are made of. Importing this package registers all of them.

Each module holds the kinds of one prefix and is named after it — ``kafka.stop_broker`` is in
``kafka.py``, ``env.reachable`` in ``env.py``, ``operator.confirm`` in ``operator.py`` — so a kind named
in a runbook, a plan or a journal leads straight to its code (tests/unit/test_step_modules.py holds
every registered kind to it). This package holds step kinds only, and only the catalog imports them:
what kinds share is in :mod:`kafkaops.queries` (questions asked of the cluster) and :mod:`kafkaops.stepkit`
(what a kind is written with). Steps talk to systems only through the run's
:class:`~kafkaops.environment.Environment`; client libraries are imported lazily by the adapters.
"""

from kafkaops.steps import (
    alerts,
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
    metrics,
    migration,
    mirror,
    offsets,
    operator,
    placement,
    quorum,
    replace,
    roll_alerts,
    service,
    sites,
    traffic,
    upgrade,
)

__all__ = ["alerts", "canary", "conftool", "deploy", "discovery", "env", "failed_events", "health", "host", "kafka",
           "kraft", "logs", "metrics", "migration", "mirror", "offsets", "operator", "placement", "quorum",
           "replace", "roll_alerts", "service", "sites", "traffic", "upgrade"]


def register_all() -> None:
    """Idempotent: the imports above already registered every kind (called by the CLI wiring)."""
