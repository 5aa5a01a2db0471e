"""The EventBus runbook's own wording, checked against what kafkaops does with it (issue 13, points 2, 3, 9):
the SYN filter on the service address, a gate skipped (and said so) on a host with no service port, every
pool member at the expected weight before a depool, and the example inventories covering the seed's hosts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import kafkaops.steps  # noqa: F401  - registers the kinds
from kafkaops.engine.step import Action, Noop, Observation, get_step_kind
from kafkaops.errors import ConfigError, SafetyRefusal
from kafkaops.inventory import load_inventory
from kafkaops.model import Host, Service, SshEndpoint
from kafkaops.steps.traffic import _service
from kafkaops.systems.traffic import capture_command

REPO = Path(__file__).resolve().parents[2]
EQIAD = REPO / "inventory" / "eqiad-main.example.yaml"
CODFW = REPO / "inventory" / "codfw-main.example.yaml"


def step(kind: str, **params: Any) -> Any:
    entry = get_step_kind(kind)
    assert entry is not None
    return entry.create({**{p.name: p.default for p in entry.params}, **params})


def test_the_production_syn_filter_is_the_seeds_on_the_service_address() -> None:
    cluster = load_inventory(EQIAD)
    host = cluster.hosts[0]
    port, vip = _service(step("traffic.wait_zero_syns"), host)
    command = capture_command(host, host.commands["syn_capture"], port, 10, vip=vip)
    assert (port, vip) == (8085, "eventbus.svc.eqiad.wmnet")
    # the seed: tcpdump dst eventbus.svc.eqiad.wmnet and port 8085 and "tcp[tcpflags] & tcp-syn != 0"
    assert "tcpdump -n -l -i any dst eventbus.svc.eqiad.wmnet and port 8085 and 'tcp[tcpflags] & tcp-syn != 0'" \
        in command


def test_a_vip_from_the_inventory_is_quoted_like_any_other_value() -> None:
    host = load_inventory(EQIAD).hosts[0]
    command = capture_command(host, host.commands["syn_capture"], 8085, 10, vip="10.2.2.1; reboot")
    assert "dst '10.2.2.1; reboot' and port" in command


def test_a_template_naming_the_vip_needs_one() -> None:
    host = load_inventory(EQIAD).hosts[0]
    with pytest.raises(ConfigError, match=r"uses \{vip\} but the service on kafka1001:8085 has no vip"):
        capture_command(host, host.commands["syn_capture"], 8085, 10, vip=None)


def _bare(services: tuple[Service, ...] = ()) -> Host:
    return Host(name="kafka9", fqdn="kafka9.lab", address="127.0.0.9", broker_id=9, dc="eqiad", rack="A",
                ssh=SshEndpoint(address="127.0.0.9"), services=services,
                commands={"syn_capture": "timeout {window} tcpdump dst port {port}"})


def test_a_host_without_a_service_port_skips_the_gate_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.steps.traffic as traffic

    gate, ctx = step("traffic.wait_zero_syns"), SimpleNamespace(target="kafka9", projected={})
    monkeypatch.setattr(traffic, "target_host", lambda ctx: _bare())
    decision = gate.plan(gate.observe(ctx))
    gate.verify(ctx)  # nothing gated, nothing to prove: no fact is asked for
    assert isinstance(decision, Noop)
    assert "runs no load-balanced service" in decision.reason and "no SYN gate" in decision.reason


def test_the_gate_names_the_port_and_service_address_it_uses() -> None:
    svc = Service(name="eventbus", port=8085, vip="127.0.10.100")
    assert _service(step("traffic.wait_zero_syns"), _bare((svc,))) == (8085, "127.0.10.100")
    assert _service(step("traffic.wait_zero_syns", port=8085), _bare((svc,))) == (8085, "127.0.10.100")
    assert _service(step("traffic.wait_zero_syns", port=9000), _bare((svc,))) == (9000, None)
    decision = step("traffic.wait_zero_syns").plan(Observation(
        {"host": "kafka9", "port": 8085, "window": 10.0, "timeout": 300.0, "command": "tcpdump ..."}))
    assert isinstance(decision, Action) and "kafka9:8085" in decision.description


def pool(*, weight: int = 10, off_weight: dict[str, int] | None = None) -> dict[str, Any]:
    return {"pooled": "yes", "weight": weight, "expected_weight": 10, "off_weight": off_weight or {},
            "before_run": None, "peers_pooled": ["b.lab", "c.lab"], "peers_depooled": []}


def test_depool_refuses_when_a_pool_member_is_at_weight_0_naming_it() -> None:
    obs = Observation({"host": "a.lab", "services": {"eventbus": pool(off_weight={"b.lab": 0})}})
    with pytest.raises(SafetyRefusal, match=r"b\.lab has weight 0 \(every host is expected at weight 10\)"):
        step("conftool.depool").plan(obs)


def test_depool_refuses_when_this_host_is_off_weight_too() -> None:
    obs = Observation({"host": "a.lab", "services": {"eventbus": pool(weight=5, off_weight={"a.lab": 5})}})
    with pytest.raises(SafetyRefusal, match=r"a\.lab has weight 5"):
        step("conftool.depool").plan(obs)


def test_depool_goes_ahead_when_every_member_has_the_expected_weight() -> None:
    obs = Observation({"host": "a.lab", "services": {"eventbus": pool()}})
    assert isinstance(step("conftool.depool").plan(obs), Action)


def test_the_expected_weight_comes_from_the_inventory(tmp_path: Path) -> None:
    assert load_inventory(EQIAD).pool_weight == 10
    heavier = tmp_path / "inv.yaml"
    heavier.write_text(EQIAD.read_text().replace("  weight: 10", "  weight: 20"))
    assert load_inventory(heavier).pool_weight == 20
    heavier.write_text(EQIAD.read_text().replace("  weight: 10", "  weight: 0"))
    with pytest.raises(ConfigError, match=r"conftool\.weight: expected a positive weight"):
        load_inventory(heavier)


def test_the_examples_cover_the_seeds_four_hosts_and_the_active_site() -> None:
    eqiad, codfw = load_inventory(EQIAD), load_inventory(CODFW)
    assert [h.fqdn for h in eqiad.hosts] == ["kafka1001.eqiad.wmnet", "kafka1002.eqiad.wmnet"]
    assert [h.fqdn for h in codfw.hosts] == ["kafka2001.codfw.wmnet", "kafka2002.codfw.wmnet"]
    assert {h.dc for h in eqiad.hosts} == {"eqiad"} and {h.dc for h in codfw.hosts} == {"codfw"}
    active = {c.name: c.hosts[0].services[0].active for c in (eqiad, codfw)}
    assert active == {"main-eqiad": True, "main-codfw": False}  # "the only active one is eventbus.svc.eqiad"
    assert codfw.hosts[0].services[0].baseline_rps == pytest.approx(4425.03)  # the seed's main-codfw figure
    service = eqiad.hosts[0].services[0]
    assert service.failed_events_log_on("kafka1001") == \
        "/srv/log/eventlogging/eventlogging-service-eventbus.failed_events.log"
    assert "changeprop" in eqiad.checkpoints


@pytest.mark.parametrize(("old", "new", "error"), [
    ("environment: production", "environment: staging", r"environment: expected one of production, lab"),
    ("  changeprop: >-", "  Change Prop: >-", r"checkpoints\.Change Prop: a checkpoint name is lower-case"),
    ("    active: true ", "    active: maybe ", r"active: expected true or false"),
    ("    events_path: /v1/events", "    events_path: v1/events", r"events_path: expected a path starting"),
])
def test_bad_new_inventory_keys_name_the_line(tmp_path: Path, old: str, new: str, error: str) -> None:
    text = EQIAD.read_text()
    assert old in text
    broken = tmp_path / "inv.yaml"
    broken.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError, match=error):
        load_inventory(broken)


def test_a_baseline_must_be_a_positive_rate(tmp_path: Path) -> None:
    broken = tmp_path / "inv.yaml"
    broken.write_text(CODFW.read_text().replace("requests_per_second: 4425.03", "requests_per_second: -1"))
    with pytest.raises(ConfigError, match=r"requests_per_second: expected a positive number"):
        load_inventory(broken)
