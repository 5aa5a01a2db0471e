"""A host's service as the inventory declares it: its health URL and health, the host's clock, and the
run-fact keys the service steps, the log steps, the deploy and the selectors share."""

from __future__ import annotations

from typing import Any

from kafkaops.environment import Environment
from kafkaops.errors import ConfigError
from kafkaops.facts.clock import parse_epoch_seconds
from kafkaops.model import Host, Service
from kafkaops.systems.http import get_json


def service_of(host: Host, name: str) -> Service:
    """The inventory's service ``name`` on ``host``."""
    service = host.service(name)
    if service is None:
        raise ConfigError(f"{host.name} has no service {name!r}",
                          hint=f"its services: {', '.join(s.name for s in host.services) or 'none'}")
    return service


def health_url(host: Host, service: Service) -> str:
    if not service.health_path:
        raise ConfigError(f"service {service.name} has no health_path in the inventory",
                          hint="add services.<name>.health_path, e.g. /_info")
    return f"http://{host.address}:{service.port}{service.health_path}"


def check_health(host: Host, service: Service) -> Any:
    """GET the service's health path on ``host`` itself (see :mod:`kafkaops.systems.http`)."""

    return get_json(health_url(host, service))


def host_time(env: Environment, host: Host) -> int:
    """The host's clock (epoch seconds): log lines are stamped by it, not by ours."""
    out = env.run(host, "date +%s", timeout=20).stdout
    return parse_epoch_seconds(out, host=host.name, command="date +%s").seconds


def since_key(host: Host, service: str) -> str:
    """Fact: the host time just before this run restarted (or deployed) ``service``."""
    return f"service_since/{host.name}/{service}"


def disruption_name(host: str) -> str:
    """Fact name: the host's clock just before this run started disrupting ``host`` (stopping its broker,
    rebooting it). Log checks after the maintenance read from there (see ``logs.mark_start``)."""
    return f"disruption_since/{host}"


def disruption_key(host: Host) -> str:
    return disruption_name(host.name)


def services_to_check(host: Host, name: str) -> list[Service]:
    """The service ``name`` of ``host``, or every service it runs when ``name`` is empty."""
    if name:
        return [service_of(host, name)]
    return list(host.services)


def scan_start(facts: Any, host: Host, service: str) -> int | None:
    """Where a scan of ``service``'s log on ``host`` starts: this run's restart or deploy of the service,
    else the start of this run's disruption of the host (the broker stop or reboot), else None."""
    start = facts.get(since_key(host, service))
    if start is None:
        start = facts.get(disruption_key(host))
    return int(start) if start is not None else None
