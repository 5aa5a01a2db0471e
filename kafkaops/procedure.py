"""A procedure, from the operator's request to its plan, and the start of its run: the product's one entry.

Every procedure command (``kafkaops reboot HOST``, ``kafkaops run RUNBOOK TARGET``, the other generated
aliases) asks the same of the product, whatever its command line looked like: :func:`plan` takes a
:class:`Request` (the runbook, the TARGET name, the typed parameters, the inventory, the reason) and

1. loads the step kinds (once per process) and checks the already-parsed runbook against them and
   against the command hooks (its steps, and that every hook it names exists) — the runbook is never
   parsed again (:mod:`kafkaops.catalog`);
2. resolves TARGET in the inventory: a host (never a KRaft controller node: its procedure is the
   rolling restart with a quorum gate) or a cluster;
3. runs the runbook's hooks (:func:`kafkaops.queries.selectors.prepare`: checks, target selection,
   parameters resolved from the systems) in a dry-run environment;
4. checks the batch spec, orders the hosts (controller last) and cuts the batches, binds the runbook and
   plans it in the same dry-run environment (:func:`plan_run`, also used by the commands that build their
   targets themselves: switchover, failed-events replay, placement).

:func:`start` then runs the reviewed plan in a live environment. The CLI only parses, asks and renders:
it owns the flag spelling of every usage error, the prompts and the output format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkaops.catalog import load_plugins
from kafkaops.engine import Runner, Target, bind_runbook
from kafkaops.engine.audit import current_operator
from kafkaops.engine.runbook import check_step_kinds
from kafkaops.environment import Environment
from kafkaops.errors import ConfigError
from kafkaops.lookup import find_cluster, find_host
from kafkaops.policy.batches import needs_snapshot, parse_batch
from kafkaops.policy.batches import roll_batches as cut
from kafkaops.policy.quorum import judge
from kafkaops.policy.roll_order import controller_last, has_controller_nodes, kraft_order
from kafkaops.queries.checkpoints import pending_checkpoints
from kafkaops.queries.migration import quorum_leader
from kafkaops.queries.selectors import Invocation, check_refs, prepare

if TYPE_CHECKING:
    from kafkaops.engine.binding import BoundRunbook
    from kafkaops.engine.plan import Plan
    from kafkaops.engine.runbook import Runbook
    from kafkaops.engine.runner import Runner, RunResult
    from kafkaops.model import Cluster, Host


class BadBatch(ValueError):
    """The ``batch`` parameter is not a batch spec (``1``, ``2``, ``25%``): a usage error."""


@dataclass(frozen=True)
class Request:
    """What the operator asked for.

    Attributes:
        runbook: The runbook, as parsed (its step kinds are checked here, not parsed again).
        target: TARGET as written: a host (short name or FQDN) or a cluster, as the runbook's command says.
        params: The parameters given on the command line, typed.
        inventory: ``-i FILE``: only this inventory is searched.
        reason: Why (goes to the audit log; the CLI refused a missing one already).
        task: The task or ticket id.
        confirm: How a step asks the operator a question during the run (None: nobody to ask).
        say: Prints one progress line for the operator.
        status: The run's live wait status (None: plain lines only).
    """

    runbook: Runbook
    target: str
    params: Mapping[str, Any]
    inventory: Path | None = None
    reason: str = ""
    task: str | None = None
    confirm: Callable[[str], bool] | None = None
    say: Callable[[str], None] = print
    status: Callable[[str | None], None] | None = None


@dataclass(frozen=True)
class Planned:
    """A planned run: what :func:`start` runs after the operator reviewed :attr:`plan`.

    ``hosts`` are the targets in the order they run; ``env`` the dry-run environment the plan was made in,
    still open: its :meth:`~kafkaops.environment.Environment.live` twin runs the plan on the connections it
    opened. :meth:`close` it when the plan is not run (:func:`start` closes it).
    """

    runbook: Runbook
    bound: BoundRunbook
    plan: Plan
    hosts: Sequence[Host]
    env: Environment
    runner: Runner
    operator: str
    reason: str
    task: str | None

    def close(self) -> None:
        """Close the plan's environment and the connections it still holds (idempotent)."""
        self.env.close()

    def checkpoints(self) -> list[tuple[str, str]]:
        """The manual checkpoints the plan asks for, (name, text): each must be confirmed before the start."""

        return pending_checkpoints(self.plan.steps)


def check(runbook: Runbook) -> None:
    """Check a parsed runbook against the step kinds and the command hooks (load them first).

    Raises:
        ConfigError: Naming the file, line and the fix.
    """

    check_step_kinds(runbook)
    check_refs(runbook)


def resolve(runbook: Runbook, target: str, inventory: Path | None) -> tuple[Cluster, list[Host]]:
    """TARGET's cluster and the hosts before selection: the named host, every host of the cluster (a
    rolling runbook), or none (a cluster-wide runbook run once).

    Raises:
        ConfigError: Unknown host or cluster; a KRaft controller node given to a broker procedure.
    """

    if runbook.command.target == "host":
        cluster, host = find_host(target, inventory)
        if host.role == "controller":  # its procedure has a quorum gate the host runbooks do not
            raise ConfigError(f"{host.name} is a KRaft controller node: {runbook.name} is a broker procedure",
                              hint=f"restart controllers with `kafkaops rolling-restart {cluster.name} --role "
                                   "controllers`: a quorum gate before each, the active controller last")
        return cluster, [host]
    cluster = find_cluster(target, inventory)
    return cluster, list(cluster.hosts) if runbook.rolling else []


def plan(request: Request) -> Planned:
    """The plan of a procedure command (see the module doc), made in a dry-run environment.

    Raises:
        NothingToDo: A selection left nothing to do (say so; exit 0).
        InvalidParameter: A value makes no sense here (a usage error of that parameter).
        BadBatch: The batch spec does not parse (a usage error).
        ConfigError: The runbook, the inventory or a hook refuses.
    """
    from functools import partial


    rb = request.runbook
    load_plugins()  # the step kinds, and the hooks beside them
    check(rb)
    cluster, hosts = resolve(rb, request.target, request.inventory)
    # The dry-run environment is built when a hook first needs a system, and the plan is made in it.
    inv = Invocation(rb, cluster, hosts, request.params, say=request.say,
                     environment=partial(Environment.of, cluster, dry_run=True, confirm=request.confirm))
    try:
        targets, params = prepare(inv)
    except BaseException:
        inv.close()
        raise
    return plan_run(rb, cluster, targets, params, env=inv.env, reason=request.reason, task=request.task,
                    say=request.say, status=request.status)


def check_batch(params: Mapping[str, Any]) -> None:
    """Refuse a ``batch`` parameter that is no batch spec, before any host is ordered.

    Raises:
        BadBatch: Saying what a batch spec is.
    """
    if "batch" in params:

        try:
            parse_batch(str(params["batch"]))
        except ValueError as exc:
            raise BadBatch(str(exc)) from None


def roll_order(env: Environment, hosts: list[Host], order: str) -> tuple[list[Host], list[str]]:
    """``hosts`` in the order a runbook's ``targets.order`` asks for, and a note for the plan
    (:mod:`kafkaops.policy.roll_order`, from the controller Kafka names or the KRaft quorum's leader; a
    migration's controllers by the quorum's leader too).

    Kafka is asked once, with one try: an unreachable cluster is reported within one request timeout; a
    broker-only KRaft roll asks no quorum.
    """

    if order != "controller_last":
        return list(hosts), []
    if not env.cluster.kraft and not (env.cluster.migrating and has_controller_nodes(hosts)):
        return controller_last(hosts, env.kafka.controller(attempts=1))
    if env.cluster.migrating:
        # A migration's controllers may not form a quorum yet: the run's own gate says so, with the phase
        # (this order only decides which one goes last).

        return kraft_order(hosts, quorum_leader(env))
    leader = judge(env.quorum().replication()).leader_id if has_controller_nodes(hosts) else None
    return kraft_order(hosts, leader)


def roll_batches(env: Environment, hosts: list[Host], spec: str, *,
                 headroom: int = 0) -> tuple[list[list[Host]], list[str]]:
    """``hosts`` (in roll order) cut into the batches ``--batch`` asks for, and notes for the plan
    (:func:`kafkaops.policy.batches.roll_batches`, from a snapshot taken only when it matters)."""

    snap = env.kafka.snapshot(with_configs=True) if needs_snapshot(hosts, spec) else None
    return cut(hosts, spec, snap, headroom=headroom)


def plan_run(runbook: Runbook, cluster: Cluster, hosts: Sequence[Host], params: dict[str, Any], *, reason: str,
             task: str | None, say: Callable[[str], None], status: Callable[[str | None], None] | None = None,
             confirm: Callable[[str], bool] | None = None, env: Environment | None = None) -> Planned:
    """Order and batch ``hosts``, bind ``runbook`` and plan it in a dry-run environment (``env``, or a new one
    of ``cluster``'s inventory), left open in the :class:`Planned` (closed here only on an error). The step
    kinds must be loaded.

    Raises:
        BadBatch: The batch spec does not parse.
        ConfigError: The runbook does not bind (an unknown or missing parameter, a bad value).
    """

    plan_env = env if env is not None else Environment.of(cluster, dry_run=True, confirm=confirm)
    try:
        check_batch(params)
        order = runbook.targets.order if runbook.targets else "inventory"
        ordered, notes = roll_order(plan_env, list(hosts), order)
        batches: list[list[Host]] = []
        if runbook.rolling and str(params.get("batch", "1")) != "1":
            batches, more = roll_batches(plan_env, ordered, str(params["batch"]),
                                         headroom=int(params.get("isr_headroom") or 0))
            ordered, notes = [h for b in batches for h in b], [*notes, *more]
        bound = bind_runbook(runbook, cluster=cluster, targets=[Target(h.name, host=h) for h in ordered],
                             params=params, batches=[[h.name for h in b] for b in batches])
        runner = Runner(echo=say, status=status)
        operator = current_operator()
        with plan_env.one_instant():  # the plan is made of one instant of the cluster
            made = runner.dry_run(bound, env=plan_env, operator=operator, reason=reason, task=task,
                                  notes=tuple(notes))
    except BaseException:
        plan_env.close()
        raise
    return Planned(runbook=runbook, bound=bound, plan=made, hosts=ordered, env=plan_env, runner=runner,
                   operator=operator, reason=reason, task=task)


def start(planned: Planned, *, confirmed: dict[str, str], ask: Callable[[str], bool] | None) -> RunResult:
    """Run the reviewed plan in a live environment.

    Args:
        confirmed: The plan's manual checkpoints, confirmed (name -> how), every one of them.
        ask: How a step asks a manual checkpoint's question during the run (None: nobody to ask).
    """
    live = planned.env.live()
    planned.close()  # what the run was not handed (the dry-run adapters)
    try:
        return planned.runner.start(planned.bound, env=live, operator=planned.operator, reason=planned.reason,
                                    task=planned.task, confirmed=confirmed, ask=ask)
    finally:
        live.close()
