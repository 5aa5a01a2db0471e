"""Named hooks that turn a command line into a run's targets and parameters (a runbook's ``command:``).

A procedure's command line is declared in its YAML (see ``runbooks/README.md``); what the command
does *before* planning is declared too, by naming hooks defined here:

* ``checks`` run first (``kafka_answers``: one quick metadata request, so a dead cluster is said in
  seconds, not after a run's patient retries; ``deploy_message_is_safe``);
* ``select`` narrows the targets, in order (``hosts_running_service``; ``hosts_not_serving_revision``,
  so a repeated deploy is a no-op for the hosts it already reached);
* ``resolve`` fills a parameter the operator did not give (``service_port``, ``first_targets`` for the
  canary, ``deploy_host_checkout`` for the revision to deploy).

Hooks live here, in the step layer, because they know what the step kinds know (services, the deploy
host, Kafka); the engine only validates that a runbook names them and the parameters they read, and
the product (:mod:`kafkaops.procedure`) only calls :func:`prepare`. A new procedure that uses existing
hooks and step kinds is one YAML file and no Python; a new hook is one decorated function below.

Every hook reads parameters through :meth:`Invocation.param`, which resolves a parameter on demand:
``hosts_not_serving_revision`` asks for ``rev``, and ``deploy_host_checkout`` runs then, before the
selection needs it. Each *role* of a hook (``service`` of ``hosts_running_service``) is played by the
parameter of the same name unless the runbook maps it to another (``{hosts_running_service: {service:
svc}}``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kafkaops.engine.step import coerce_param
from kafkaops.errors import ConfigError
from kafkaops.queries.deploy_host import check_message, checked_out_revision, deploy_host, revision_matches
from kafkaops.queries.service import check_health, service_of

if TYPE_CHECKING:
    from kafkaops.engine.runbook import HookRef, Runbook
    from kafkaops.environment import Environment
    from kafkaops.model import Cluster, Host

HookKind = Literal["check", "select", "resolve"]


class NothingToDo(Exception):
    """A selection left no target (every host already serves the revision): say why, change nothing."""


class InvalidParameter(Exception):
    """A parameter's value makes no sense for this invocation (``--canary -1``): a usage error (exit 2)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclass(frozen=True)
class Hook:
    """A registered hook: its kind, function, the roles it reads (role -> default parameter) and summary."""

    name: str
    kind: HookKind
    func: Callable[..., Any]
    roles: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""


_HOOKS: dict[str, Hook] = {}


def hook(kind: HookKind, name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a hook. Its keyword-only arguments are its roles; their defaults name the parameter
    that plays each role unless a runbook maps it to another."""

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        hook_name = name or func.__name__
        roles = {p.name: str(p.default) for p in inspect.signature(func).parameters.values()
                 if p.kind is inspect.Parameter.KEYWORD_ONLY}
        doc = (func.__doc__ or "").strip()
        _HOOKS[hook_name] = Hook(hook_name, kind, func, roles, doc.splitlines()[0] if doc else "")
        return func

    return deco


def hooks() -> dict[str, Hook]:
    """Every registered hook, by name."""
    return dict(_HOOKS)


def check_refs(runbook: Runbook) -> None:
    """Refuse a runbook naming a hook that does not exist, of the wrong kind, or with an unknown role.

    Raises:
        ConfigError: Naming the file, the line and the hooks that would fit.
    """
    spec = runbook.command
    refs: list[tuple[HookKind, HookRef]] = [("check", r) for r in spec.checks]
    refs += [("select", r) for r in spec.select]
    refs += [("resolve", r) for _, r in spec.resolve]
    for kind, ref in refs:
        where = f"{runbook.source}:{ref.line}" if ref.line else runbook.source
        found = _HOOKS.get(ref.name)
        if found is None or found.kind != kind:
            import difflib

            fits = sorted(n for n, h in _HOOKS.items() if h.kind == kind)
            close = difflib.get_close_matches(ref.name, fits, n=1)
            what = f"is a {found.kind} hook" if found else "is not a hook"
            raise ConfigError(f"{where}: command: {ref.name!r} {what}, not a {kind} hook",
                              hint=(f"did you mean {close[0]!r}? " if close else "")
                              + f"{kind} hooks: {', '.join(fits) or 'none'}")
        bad = sorted(set(ref.args) - set(found.roles))
        if bad:
            raise ConfigError(f"{where}: command: hook {ref.name} has no role {', '.join(map(repr, bad))}",
                              hint=f"its roles: {', '.join(found.roles) or 'none'}")


class Invocation:
    """One command line being turned into a run: the cluster, the targets so far, the parameters.

    Args:
        runbook: The runbook invoked.
        cluster: The cluster TARGET belongs to (or is).
        hosts: The targets before selection: the named host, or every host of the cluster (a rolling
            runbook), or none (a cluster-wide runbook run once).
        given: Parameters given on the command line, already typed.
        environment: Builds the run's dry-run :class:`~kafkaops.environment.Environment` on first use
            (a hook that never needs a system costs no connection); the plan is made in the same one.
        say: Prints one progress line for the operator.
    """

    def __init__(self, runbook: Runbook, cluster: Cluster, hosts: Sequence[Host], given: Mapping[str, Any], *,
                 environment: Callable[[], Environment], say: Callable[[str], None]) -> None:
        self.runbook = runbook
        self.cluster = cluster
        self.hosts: list[Host] = list(hosts)
        self.target_kind = runbook.command.target
        self.say = say
        self._environment = environment
        self._env: Environment | None = None
        self._values: dict[str, Any] = dict(given)
        self._resolvers = dict(runbook.command.resolve)
        self._resolving: set[str] = set()

    @property
    def env(self) -> Environment:
        if self._env is None:
            self._env = self._environment()
        return self._env

    def close(self) -> None:
        """Close the environment if a hook built one (a failed selection leaves no connection open)."""
        if self._env is not None:
            self._env.close()
            self._env = None

    def param(self, name: str) -> Any:
        """The parameter's value: as given, else resolved by its hook (now, once), else its default."""
        if name in self._values:
            return self._values[name]
        ref = self._resolvers.get(name)
        if ref is not None and name not in self._resolving:
            self._resolving.add(name)
            self._values[name] = _call(ref, self)
            return self._values[name]
        spec = self.runbook.param(name)
        if spec is None:  # pragma: no cover - load-time validation names only declared parameters
            raise ConfigError(f"runbook {self.runbook.name}: no parameter {name!r}")
        if spec.default is None:
            return None

        return coerce_param(spec, spec.default)

    def values(self) -> dict[str, Any]:
        """Given and resolved parameters (defaults are the runbook's business when it is bound)."""
        return dict(self._values)


def _call(ref: HookRef, inv: Invocation, *extra: Any) -> Any:
    found = _HOOKS[ref.name]
    return found.func(inv, *extra, **{role: ref.args.get(role, param) for role, param in found.roles.items()})


def prepare(inv: Invocation) -> tuple[list[Host], dict[str, Any]]:
    """Run the runbook's hooks: checks, then selections in order, then the resolutions not yet done.

    The runbook's hook references must have been checked (:func:`check_refs`, which
    :func:`kafkaops.procedure.check` does once, before the inventory is read).

    Returns:
        The targets and the parameters (given and resolved) to bind the runbook with.

    Raises:
        NothingToDo: A selection left nothing to do (the caller says so and exits 0).
        InvalidParameter: A value makes no sense here (a usage error).
        ConfigError: A hook refuses (no host runs the service...).
    """
    spec = inv.runbook.command
    for ref in spec.checks:
        _call(ref, inv)
    for ref in spec.select:
        inv.hosts = list(_call(ref, inv, list(inv.hosts)))
    if inv.runbook.rolling and not inv.hosts:
        raise NothingToDo(f"no host of {inv.cluster.name} to run {inv.runbook.name} on")
    for name in dict(spec.resolve):
        inv.param(name)
    return inv.hosts, inv.values()


# --- checks ------------------------------------------------------------------------------------------


@hook("check")
def kafka_answers(inv: Invocation) -> None:
    """Ask Kafka for its controller once (one try): a dead cluster is said in one request timeout."""
    inv.env.kafka.controller(attempts=1)


@hook("check")
def deploy_message_is_safe(inv: Invocation, *, message: str = "message") -> None:
    """The deploy message is one line of text, not empty (it goes to the deploy log and SAL)."""

    check_message(str(inv.param(message) or ""))


# --- selections ------------------------------------------------------------------------------------------


#: ``--role`` of a roll: which nodes of the cluster it restarts.
ROLES = ("brokers", "controllers", "all")


@hook("select")
def hosts_of_role(inv: Invocation, hosts: list[Host], *, role: str = "role") -> list[Host]:
    """The nodes ``--role`` names: brokers (the default), the KRaft controller nodes, or all (controllers
    first: the quorum the brokers depend on is whole before any broker stops)."""
    wanted = str(inv.param(role) or "brokers")
    if wanted not in ROLES:
        raise InvalidParameter(role, f"unknown role {wanted!r} (roles: {', '.join(ROLES)})")
    if wanted == "brokers":
        return hosts
    if not inv.cluster.controllers and not inv.cluster.kraft:
        raise ConfigError(f"{inv.cluster.name} runs in ZooKeeper mode: it has no KRaft controller nodes",
                          hint="its controller is one of its brokers: --role brokers (the default) restarts them, "
                               "the controller last")
    if not inv.cluster.controllers:
        raise ConfigError(f"the inventory lists no controller nodes for {inv.cluster.name}",
                          hint=f"list them under controllers: in {inv.cluster.source} (name, address, node_id)")
    return list(inv.cluster.controllers) + (hosts if wanted == "all" else [])


@hook("select")
def migration_controllers(inv: Invocation, hosts: list[Host]) -> list[Host]:
    """The KRaft controllers a cluster migrates to (``kafka.migration: to-kraft``, ``controllers:``), in
    inventory order: the nodes the migration's controller stages provision and finalize."""
    if not inv.cluster.migrating or not inv.cluster.controllers:
        raise ConfigError(f"{inv.cluster.name} is not being migrated to KRaft",
                          hint=f"in {inv.cluster.source}: kafka.migration: to-kraft and the quorum under controllers: "
                               "(`kafkaops docs migration`)")
    return list(inv.cluster.controllers)


@hook("select")
def every_node(inv: Invocation, hosts: list[Host]) -> list[Host]:
    """Every node of a KRaft cluster (or one migrated to KRaft): its controllers, then its brokers — what a
    rolling upgrade installs the new release on (the roll's order is ``targets.order``'s)."""
    if not inv.cluster.controllers:
        raise ConfigError(f"the inventory lists no KRaft controller nodes for {inv.cluster.name}",
                          hint="Kafka 4 runs in KRaft mode: list the quorum under controllers: "
                               f"in {inv.cluster.source} (`kafkaops docs migration`)")
    return list(inv.cluster.controllers) + hosts


@hook("select")
def controller_nodes(inv: Invocation, hosts: list[Host]) -> list[Host]:
    """The KRaft controllers, in inventory order: where a cluster-wide feature change is asked."""
    return every_node(inv, hosts)[:len(inv.cluster.controllers)]


@hook("check")
def being_migrated(inv: Invocation) -> None:
    """The cluster is one the inventory says is migrating to KRaft (a broker stage on any other is refused)."""
    migration_controllers(inv, [])


@hook("select")
def hosts_running_service(inv: Invocation, hosts: list[Host], *, service: str = "service") -> list[Host]:
    """The hosts that run the service (a named host that does not is refused)."""

    name = str(inv.param(service))
    if inv.target_kind == "host":
        for h in hosts:
            service_of(h, name)  # "kafka1001 has no service 'x' (its services: ...)"
        return hosts
    keep = [h for h in hosts if h.service(name) is not None]
    if not keep:
        known = sorted({s.name for h in inv.cluster.hosts for s in h.services})
        raise ConfigError(f"no host of cluster {inv.cluster.name} runs {name!r}",
                          hint=f"services in {inv.cluster.source}: {', '.join(known) or 'none'}")
    return keep


@hook("select")
def hosts_not_serving_revision(inv: Invocation, hosts: list[Host], *, service: str = "service",
                               rev: str = "rev") -> list[Host]:
    """Leave out the hosts that already serve the revision, healthy (a repeated deploy deploys nothing)."""

    name, wanted = str(inv.param(service)), str(inv.param(rev))
    todo = []
    for h in hosts:
        check = check_health(h, service_of(h, name))
        if check.healthy and revision_matches(check.revision, wanted):
            inv.say(f"{h.name}: already serves {wanted} ({check.line()}): skipped")
        else:
            todo.append(h)
    if not todo:
        raise NothingToDo(f"nothing to deploy: every host of {inv.cluster.name} running {name} serves {wanted}")
    return todo


# --- resolutions ------------------------------------------------------------------------------------------


@hook("resolve")
def service_port(inv: Invocation, *, service: str = "service") -> int:
    """The service's port from the inventory (of the first target), for the SYN gate."""

    if not inv.hosts:
        raise ConfigError(f"runbook {inv.runbook.name}: service_port needs a host target")
    return int(service_of(inv.hosts[0], str(inv.param(service))).port)


@hook("resolve")
def first_targets(inv: Invocation, *, count: str = "canary_count") -> list[str]:
    """The first N targets (the canary), N from the count parameter; none when N covers every target."""
    n = inv.param(count)
    if not isinstance(n, int) or n < 0:
        raise InvalidParameter(count, "must be 0 or more")
    return [h.name for h in inv.hosts[:n]] if n < len(inv.hosts) else []


@hook("resolve")
def deploy_host_checkout(inv: Invocation, *, repo: str = "repo") -> str:
    """What the deploy host has checked out (the inventory's deploy_revision command)."""

    rev = checked_out_revision(inv.env, str(inv.param(repo)))
    inv.say(f"revision {rev}: what {deploy_host(inv.env).name} has checked out")
    return rev
