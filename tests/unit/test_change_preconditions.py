"""The last-moment safety precondition of the disruptive kinds that rewrite or take out what others serve:
``offsets.translate``, ``placement.reassign``, ``discovery.depool``, ``deploy.deploy`` and ``deploy.rollback``.

Each one is asked of small in-memory fakes of the adapters it reads (a subclass of
:class:`~kafkaops.environment.Environment` with its adapters set, as ``test_leader_spread`` and
``test_reboot_step`` do): one world in which the fact holds (a line comes back for the journal) and one in
which it does not (:class:`~kafkaops.errors.SafetyRefusal`, naming what is wrong). The runner calls the
precondition right before every apply and in a dry-run (``tests/unit/engine/test_preconditions.py``); a
dry-run's earlier steps reach it through ``ctx.projected`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.engine.binding import BoundStep
from kafkaops.engine.context import Projection, RunContext
from kafkaops.engine.run_facts import in_memory
from kafkaops.engine.step import Action, get_step_kind
from kafkaops.environment import Environment
from kafkaops.errors import SafetyRefusal
from kafkaops.facts.reassign import Reassigning
from kafkaops.model import Host, PoolState, Service, SshEndpoint, SwitchedService
from kafkaops.stepkit.projection import STOPPED, broker_key, pool_key
from kafkaops.steps import deploy as deploy_steps
from kafkaops.steps import discovery as discovery_steps
from kafkaops.steps.placement import ORIGINALS
from kafkaops.systems.groups import GroupState
from kafkaops.systems.http import HttpCheck

EVENTBUS = Service("eventbus", 8085, health_path="/_info", vip="127.0.10.100")


def _host(n: int) -> Host:
    return Host(f"kafka100{n}", f"kafka100{n}.lab.local", f"127.0.10.{n}", 1000 + n, "eqiad", "A",
                SshEndpoint(f"127.0.10.{n}"), services=(EVENTBUS,),
                conftool_tags={"dc": "eqiad", "cluster": "kafka_main", "service": "eventbus"})


HOSTS = [_host(1), _host(2), _host(3)]


class FakeConftool:
    """conftool's pools: fqdn -> pooled ("yes" / "no")."""

    def __init__(self, pooled: Mapping[str, str]) -> None:
        self.pooled = dict(pooled)

    def get(self, fqdn: str, tags: Mapping[str, str]) -> PoolState:
        return PoolState(fqdn, tags["service"], self.pooled[fqdn], 10)

    def list(self, tags: Mapping[str, str]) -> list[PoolState]:
        return [self.get(fqdn, tags) for fqdn in sorted(self.pooled)]


class FakeGroups:
    def __init__(self, states: Mapping[str, GroupState]) -> None:
        self.states = states

    def state(self, group: str) -> GroupState:
        return self.states[group]


class FakeReassigner:
    def __init__(self, moving: Sequence[tuple[str, int]]) -> None:
        self.moving = list(moving)

    def list(self) -> dict[tuple[str, int], Reassigning]:
        return {(t, p): Reassigning(t, p, (1001, 1002), (1002,), ()) for t, p in self.moving}


class FakeDiscovery:
    def __init__(self, states: Mapping[str, bool]) -> None:
        self._states = dict(states)

    def states(self, record: str) -> dict[str, bool]:
        return dict(self._states)


class World(Environment):
    """The adapters these preconditions read, in memory (no super().__init__: no inventory, no clients)."""

    def __init__(self, *, pooled: Mapping[str, str] | None = None, groups: Mapping[str, GroupState] | None = None,
                 moving: Sequence[tuple[str, int]] = (), registered: Sequence[int] = (),
                 records: Mapping[str, bool] | None = None) -> None:
        self.cluster: Any = SimpleNamespace(name="lab", hosts=HOSTS, source="lab.yaml",
                                            switched={"eventbus": SwitchedService("eventbus", "eventbus", ("g1",))})
        self.hosts = {h.name: h for h in HOSTS}
        self._conftool: Any = FakeConftool(pooled or {})
        self._reassigner: Any = FakeReassigner(moving)
        self._discovery: Any = FakeDiscovery(records or {})
        self._groups = FakeGroups(groups or {})
        self._registered = list(registered)
        self.asked_groups: list[str] = []

    def groups(self, dc: str) -> Any:
        self.asked_groups.append(dc)
        return self._groups

    def registered_brokers(self) -> list[int]:
        return list(self._registered)


def _ctx(env: World, target: str = "kafka1001", *, projected: Projection | None = None,
         steps: tuple[BoundStep, ...] = (), index: int = 0, facts: Any = None) -> RunContext:
    return RunContext(run_id="r1", operator="o", reason="r", task=None, target=target, params={}, env=env,
                      projected=projected or Projection(), steps=steps, step_index=index,
                      facts=facts if facts is not None else in_memory())


def _step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None and entry.disruptive, f"{kind} must be registered disruptive"
    return entry.create({**{p.name: p.default for p in entry.params}, **params})


# --- offsets.translate -----------------------------------------------------------------------------------

TRANSLATE = Action("translate g1, g2 from eqiad to codfw", data={"groups": [
    {"group": "g1", "to": "codfw", "offsets": [["t", 0, 5]]},
    {"group": "g2", "to": "codfw", "offsets": [["t", 0, 9]]}]})


def test_offsets_translate_holds_when_no_group_it_writes_has_a_member_on_the_target() -> None:
    env = World(groups={"g1": GroupState("g1", "EMPTY", ()), "g2": GroupState("g2", "DEAD", ())})
    step = _step("offsets.translate", from_site="eqiad", to_site="codfw", group="g1")
    found = step.precondition(_ctx(env), TRANSLATE)
    assert "g1" in found and "g2" in found and "codfw" in found
    assert env.asked_groups == ["codfw"]  # asked of the target cluster, once


def test_offsets_translate_refuses_naming_the_group_a_consumer_joined_on_the_target() -> None:
    env = World(groups={"g1": GroupState("g1", "EMPTY", ()),
                        "g2": GroupState("g2", "STABLE", ("consumer-1@/10.0.0.7",))})
    step = _step("offsets.translate", from_site="eqiad", to_site="codfw", group="g1")
    with pytest.raises(SafetyRefusal, match=r"g2.*active on codfw.*consumer-1@/10\.0\.0\.7") as refused:
        step.precondition(_ctx(env), TRANSLATE)
    assert "stop its consumers on codfw" in (refused.value.hint or "")


# --- placement.reassign -----------------------------------------------------------------------------------

ASSIGNMENT = [["t", 0, [1001, 1002]], ["t", 1, [1002, 1003]]]
REASSIGN = Action("reassign 2 partition(s)", data={"batches": [[["t", 0], ["t", 1]]]})


def _reassign() -> Any:
    return _step("placement.reassign", assignment=ASSIGNMENT)


def test_placement_reassign_holds_with_no_other_reassignment_and_every_target_broker_registered() -> None:
    found = _reassign().precondition(_ctx(World(registered=[1001, 1002, 1003])), REASSIGN)
    assert "1001, 1002, 1003" in found


def test_placement_reassign_refuses_a_reassignment_this_run_did_not_start() -> None:
    env = World(moving=[("other", 3)], registered=[1001, 1002, 1003])
    with pytest.raises(SafetyRefusal, match="other-3"):
        _reassign().precondition(_ctx(env), REASSIGN)


def test_placement_reassign_awaits_its_own_batch_in_flight_without_refusing() -> None:
    """A resumed run finds the batch it submitted still moving: that one is its own (the run's facts)."""
    facts = in_memory()
    facts.set(ORIGINALS, [["t", 0, [1001, 1003]]])
    env = World(moving=[("t", 0)], registered=[1001, 1002, 1003])
    assert _reassign().precondition(_ctx(env, facts=facts), REASSIGN)
    with pytest.raises(SafetyRefusal, match="t-0"):  # another run's facts: not this run's batch
        _reassign().precondition(_ctx(env), REASSIGN)


def test_placement_reassign_refuses_a_target_broker_that_is_not_registered_now_or_once_stopped_by_the_plan() -> None:
    with pytest.raises(SafetyRefusal, match="1003"):
        _reassign().precondition(_ctx(World(registered=[1001, 1002])), REASSIGN)
    projected = Projection()
    projected.set(broker_key(1002), STOPPED, "kafka1002 step 4 (kafka.stop_broker)")
    with pytest.raises(SafetyRefusal, match="1002"):
        _reassign().precondition(_ctx(World(registered=[1001, 1002, 1003]), projected=projected), REASSIGN)


# --- discovery.depool -------------------------------------------------------------------------------------

DEPOOL_EQIAD = Action("depool eventbus in eqiad", data={"record": "eventbus", "site": "eqiad"})


def _depool() -> Any:
    return _step("discovery.depool", service="eventbus", site="eqiad")


def test_discovery_depool_holds_while_the_other_site_stays_pooled() -> None:
    found = _depool().precondition(_ctx(World(records={"eqiad": True, "codfw": True})), DEPOOL_EQIAD)
    assert "codfw" in found


def test_discovery_depool_refuses_to_leave_no_site_serving() -> None:
    with pytest.raises(SafetyRefusal, match="no site"):
        _depool().precondition(_ctx(World(records={"eqiad": True, "codfw": False})), DEPOOL_EQIAD)
    projected = Projection()  # pooled now, but an earlier step of the plan depools it
    projected.set("discovery/eventbus/codfw", False, "lab step 2 (discovery.depool)")
    with pytest.raises(SafetyRefusal, match="no site"):
        _depool().precondition(_ctx(World(records={"eqiad": True, "codfw": True}), projected=projected),
                               DEPOOL_EQIAD)


def test_a_switchover_depools_first_only_when_its_own_later_pool_goes_to_a_healthy_site(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The switchover's deliberate gap (depool the source, wait, pool the target): allowed when a later step of
    this run pools the other site and that site, asked now, can take every client."""
    steps = (BoundStep(1, "sites.preflight", {}), BoundStep(2, "discovery.depool", {"service": "eventbus",
                                                                                       "site": "eqiad"}),
             BoundStep(6, "discovery.pool", {"service": "eventbus", "site": "codfw"}))
    problems: dict[str, list[str]] = {"codfw": []}
    monkeypatch.setattr(discovery_steps, "lock_owner", lambda env: "r1")
    monkeypatch.setattr(discovery_steps, "site_health", lambda env, dc, service, owner: {"problems": problems[dc]})
    env = World(records={"eqiad": True, "codfw": False})
    found = _depool().precondition(_ctx(env, steps=steps, index=2), DEPOOL_EQIAD)
    assert "codfw" in found and "step 6" in found
    problems["codfw"] = ["1 offline partition(s)"]
    with pytest.raises(SafetyRefusal, match="1 offline partition"):
        _depool().precondition(_ctx(env, steps=steps, index=2), DEPOOL_EQIAD)


# --- deploy.deploy, deploy.rollback -------------------------------------------------------------------------

#: What each kind's plan hands its apply (and precondition).
DEPLOY = {"deploy.deploy": Action("deploy r2 to kafka1001", data={"served": "r1"}),
          "deploy.rollback": Action("roll kafka1001 back to r1", data={"previous": "r1"})}


@pytest.fixture
def health(monkeypatch: pytest.MonkeyPatch) -> dict[str, int | None]:
    """Each host's health answer (HTTP status; None: no answer), as the deploy steps' check_health sees it."""
    status: dict[str, int | None] = {h.name: 200 for h in HOSTS}

    def check(host: Host, service: Service) -> HttpCheck:
        code = status[host.name]
        return HttpCheck(url=f"http://{host.address}:8085/_info", status=code, body={"revision": "r1"},
                         error="" if code else "connection refused")

    monkeypatch.setattr(deploy_steps, "check_health", check)
    return status


def _pools(**pooled: str) -> dict[str, str]:
    return {h.fqdn: pooled.get(h.name, "yes") for h in HOSTS}


@pytest.mark.parametrize("kind", ["deploy.deploy", "deploy.rollback"])
def test_deploy_holds_on_a_depooled_target_or_with_another_pooled_host_answering(
        kind: str, health: dict[str, int | None]) -> None:
    step = _step(kind, service="eventbus", rev="r2", message="m")
    found = step.precondition(_ctx(World(pooled=_pools(kafka1001="no"))), DEPLOY[kind])
    assert "kafka1001 is out of the eventbus pool" in found
    health.update(kafka1002=503)
    found = step.precondition(_ctx(World(pooled=_pools())), DEPLOY[kind])
    assert "kafka1003" in found  # pooled and answering HTTP 200
    projected = Projection()  # the runbook's conftool.depool, planned before the deploy
    projected.set(pool_key("kafka1001.lab.local", "eventbus"), "no", "kafka1001 step 5 (conftool.depool)")
    health.update(kafka1003=None)
    assert "out of" in step.precondition(_ctx(World(pooled=_pools()), projected=projected), DEPLOY[kind])


@pytest.mark.parametrize("kind", ["deploy.deploy", "deploy.rollback"])
def test_deploy_refuses_to_restart_the_last_serving_host(kind: str, health: dict[str, int | None]) -> None:
    step = _step(kind, service="eventbus", rev="r2", message="m")
    health.update(kafka1002=503)  # pooled but failing its health check
    with pytest.raises(SafetyRefusal, match=r"kafka1001.*kafka1002: HTTP 503"):
        step.precondition(_ctx(World(pooled=_pools(kafka1003="no"))), DEPLOY[kind])
    health.update(kafka1002=200)  # answering, but an earlier planned step depools it
    projected = Projection()
    projected.set(pool_key("kafka1002.lab.local", "eventbus"), "no", "kafka1002 step 5 (conftool.depool)")
    with pytest.raises(SafetyRefusal, match="kafka1001 is pooled and no other pooled host of eventbus"):
        step.precondition(_ctx(World(pooled=_pools(kafka1003="no")), projected=projected), DEPLOY[kind])
