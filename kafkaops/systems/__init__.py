"""Adapters, one per external system; the only place a client library is imported (lazily).

Each adapter turns library objects into :mod:`kafkaops.model` values and library exceptions into
:mod:`kafkaops.errors` (one-line, actionable), so nothing above this layer knows which client is used.
"""
