"""A secret's value, read when a client needs it, with the one-line error an operator can act on.

Every system kafkaops authenticates to (Kafka, ZooKeeper, Prometheus and Alertmanager) names its secret by
file or environment variable (:class:`~kafkaops.model.Secret`); this is the one place that reads it. The
message names where the secret should be and never what it is.
"""

from __future__ import annotations

from kafkaops.errors import ConfigError
from kafkaops.model import Secret


def reveal(secret: Secret, who: str, what: str, fix: str) -> str:
    """``secret``'s value, for ``who`` (``cluster main: Kafka``) and its ``what`` (``password``).

    Raises:
        ConfigError: The variable is not set, or the file cannot be read (exit 3, before any connection).
    """
    try:
        return secret.reveal()
    except KeyError:
        raise ConfigError(f"{who}: the {what} variable ${secret.env} is not set", hint=f"export it ({fix})") from None
    except OSError as exc:
        raise ConfigError(f"{who}: cannot read the {what} {secret.where}: {exc.strerror}", hint=fix) from None
