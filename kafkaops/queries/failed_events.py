"""Where a service writes the events it could not deliver, and reading that file from the host (the
replay step and ``kafkaops failed-events`` read the same file the same way)."""

from __future__ import annotations

from kafkaops.environment import Environment
from kafkaops.errors import ConfigError
from kafkaops.model import Host, Service


def failed_log_path(host: Host, service: Service) -> str:
    """The service's failed-events log on ``host`` (inventory ``services.<name>.failed_events_log``)."""
    path = service.failed_events_log_on(host.name)
    if not path:
        raise ConfigError(f"service {service.name} has no failed_events_log in the inventory",
                          hint=f"add services.{service.name}.failed_events_log, e.g. "
                               "/srv/log/eventlogging/eventlogging-service-eventbus.failed_events.log")
    return path


def read_failed_log(env: Environment, host: Host, service: Service) -> tuple[str, str, bool]:
    """Read the failed-events log over SSH with the inventory's ``failed_events_read`` template.

    Returns:
        The path, its text, and whether the file exists (eventbus creates it at its first failure: no
        file is no failure, not an error).

    Raises:
        ConfigError: The file exists but cannot be read (permissions: production needs ``sudo -n cat``).
        UnreachableError: SSH did not answer.
    """
    path = failed_log_path(host, service)
    command = env.command(host, "failed_events_read", path=path)
    result = env.run(host, command, timeout=120, check=False)
    if result.exit_code == 0:
        return path, result.stdout, True
    err = (result.stderr or result.stdout).strip().splitlines()
    first = err[0][:200] if err else f"exit {result.exit_code}"
    if "No such file" in first:
        return path, "", False
    raise ConfigError(f"{host.name}: cannot read {path} ({command}): {first}",
                      hint="the inventory's failed_events_read must read it as this user "
                           "(production: sudo -n cat {path}, with a sudoers rule for it)")
