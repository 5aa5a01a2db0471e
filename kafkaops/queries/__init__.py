"""Queries: what the step kinds, the procedure and the CLI ask of a cluster, shared.

A step-kind module (``kafkaops/steps/``) is a runbook's vocabulary: only the catalog imports one
(tests/unit/test_layers.py). What two of them — or a step and a command — both need to know ("what phase
is the migration in", "is this service healthy", "which release does each node run") lives here, asked
through the run's :class:`~kafkaops.environment.Environment`. Most are read-only; the selectors pick a
procedure's targets and may ask the deploy host.
"""
