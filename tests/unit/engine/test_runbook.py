"""Runbook loading, validation errors, binding and generated docs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkaops.catalog import runbook_files
from kafkaops.cli.runbook_text import render_markdown
from kafkaops.engine.binding import Target, bind_runbook
from kafkaops.engine.runbook import load_runbook
from kafkaops.engine.step import format_duration, parse_duration
from kafkaops.errors import ConfigError

from engine_fakes import FIXTURES  # isort: skip

REPO = Path(__file__).resolve().parents[3]

BAD = FIXTURES / "bad"
GOOD = FIXTURES / "good"


@dataclass(frozen=True)
class FakeService:
    name: str
    port: int


@dataclass(frozen=True)
class FakeHost:
    name: str
    fqdn: str
    services: tuple[FakeService, ...]


@dataclass(frozen=True)
class FakeCluster:
    name: str


def _error(name: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_runbook(BAD / f"{name}.yaml")
    assert info.value.exit_code == 3
    return str(info.value)


def test_unknown_kind_names_file_line_step_and_suggests_fix() -> None:
    msg = _error("unknown_kind")
    assert "unknown_kind.yaml:5" in msg
    assert "step 2" in msg
    assert "unknown step kind 'test.depol'" in msg
    assert "did you mean 'test.depool'" in msg


def test_missing_param() -> None:
    msg = _error("missing_param")
    assert "missing_param.yaml:4: step 1 (test.set): missing required parameter 'key'" in msg
    assert "add `key: <str>`" in msg


def test_unknown_param_suggests_closest() -> None:
    msg = _error("unknown_param")
    assert "step 3 (test.depool): unknown parameter 'windows'" in msg
    assert "did you mean 'window'" in msg
    assert "unknown_param.yaml:6" in msg


def test_bad_duration() -> None:
    msg = _error("bad_duration")
    assert "step 1 (test.depool): parameter 'window'" in msg
    assert "'5x' is not a duration" in msg
    assert "30s, 5m" in msg  # the fix: the accepted forms


def test_bad_template_root() -> None:
    msg = _error("bad_template")
    assert "unknown template {hots.fqdn}" in msg
    assert "{host.…}" in msg


def test_name_must_match_file(tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "other.yaml"
    p.write_text("name: wrong\nsummary: s\nsteps:\n  - test.fail: {}\n")
    with pytest.raises(ConfigError, match="does not match the file name"):
        load_runbook(p)


def test_unknown_top_level_key(tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "x.yaml"
    p.write_text("name: x\nsummary: s\nstep:\n  - test.fail: {}\n")
    with pytest.raises(ConfigError, match="unknown top-level key"):
        load_runbook(p)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("2d", 172800.0),
        (42, 42.0),
        ("7", 7.0),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5x", "", "-3s", "m5", True, "1h 30"])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration_roundtrip() -> None:
    assert format_duration(5400) == "1h30m"
    assert format_duration(10) == "10s"
    assert parse_duration(format_duration(3725)) == 3725


def _hosts() -> list[Target]:
    svc = (FakeService("eventbus", 8085), FakeService("kafka", 9092))
    return [
        Target("k2", host=FakeHost("k2", "k2.dc.example", svc)),
        Target("k3", host=FakeHost("k3", "k3.dc.example", svc)),
        Target("k1", host=FakeHost("k1", "k1.dc.example", svc)),
    ]


def test_bind_resolves_templates_keeps_the_callers_order_and_inserts_gates() -> None:
    rb = load_runbook(GOOD / "roll.yaml")
    bound = bind_runbook(rb, cluster=FakeCluster("main-eqiad"), targets=_hosts(), params={"flag": "done"})
    assert bound.target_names == ["k2", "k3", "k1"]  # as given: the caller orders (controller last)
    k2 = bound.targets[0]
    assert [s.kind for s in k2.steps] == [
        "test.depool",
        "test.set",
        "test.set",
        "test.repool",
        "test.wait_for",
    ]
    assert k2.steps[0].params == {"services": ["eventbus", "kafka"], "window": 10.0}
    assert k2.steps[1].params == {"key": "k2.state", "value": "done"}
    assert k2.steps[2].params["value"] == "main-eqiad/k2.dc.example"
    assert k2.steps[4].gate and k2.steps[4].params == {"key": "healthy", "timeout": 120.0}
    # no gate after the last target
    assert [s.kind for s in bound.targets[-1].steps][-1] == "test.repool"
    # JSON roundtrip is lossless (this is what the journal and plans carry)
    from kafkaops.engine.binding import BoundRunbook

    assert BoundRunbook.from_dict(bound.to_dict()) == bound


def test_a_batch_runs_in_lockstep_with_the_gate_only_between_batches() -> None:
    """Issue 19: the hosts of a batch are depooled together, ... repooled together; each (host, step)
    keeps its own journal records, and a resume's cursor follows the same order."""
    from kafkaops.engine.binding import BoundRunbook, schedule
    from kafkaops.engine.journal import RunState

    rb = load_runbook(GOOD / "roll.yaml")
    bound = bind_runbook(rb, cluster="c", targets=_hosts(), params={"flag": "done"}, batches=[["k2", "k3"], ["k1"]])
    order = [(t.name, s.kind) for t, s in schedule(bound)]
    assert order == [("k2", "test.depool"), ("k3", "test.depool"), ("k2", "test.set"), ("k3", "test.set"),
                     ("k2", "test.set"), ("k3", "test.set"), ("k2", "test.repool"), ("k3", "test.repool"),
                     ("k3", "test.wait_for"),  # the gate: after the batch, not between its hosts
                     ("k1", "test.depool"), ("k1", "test.set"), ("k1", "test.set"), ("k1", "test.repool")]
    assert BoundRunbook.from_dict(bound.to_dict()) == bound
    state = RunState(run_id="r", started={"runbook": bound.to_dict()})
    assert state.cursor() == ("k2", 1)
    state.steps[("k2", 1)] = state.step("k2", 1)
    state.steps[("k2", 1)].status = "verified"
    assert state.cursor() == ("k3", 1)  # lockstep: the batch's next host, not k2's next step
    with pytest.raises(ConfigError, match="do not cover the targets"):
        bind_runbook(rb, cluster="c", targets=_hosts(), params={"flag": "done"}, batches=[["k3", "k2"], ["k1"]])
    single = bind_runbook(rb, cluster="c", targets=_hosts(), params={"flag": "done"})
    assert [t.name for t, _ in schedule(single)][:6] == ["k2"] * 5 + ["k3"]


def test_bind_rejects_unknown_runbook_param_and_missing_attribute() -> None:
    rb = load_runbook(GOOD / "roll.yaml")
    with pytest.raises(ConfigError, match="unknown parameter 'flags'"):
        bind_runbook(rb, cluster="c", targets=_hosts(), params={"flags": "x"})
    with pytest.raises(ConfigError, match="this run has no 'host'"):
        bind_runbook(rb, cluster="c", targets=[Target("k9")])


def test_non_rolling_runbook_takes_one_target() -> None:
    rb = load_runbook(GOOD / "simple.yaml")
    with pytest.raises(ConfigError, match="not a rolling runbook"):
        bind_runbook(rb, cluster="c", targets=_hosts())
    bound = bind_runbook(rb, cluster="c")
    assert bound.target_names == ["c"]


def test_markdown_docs_come_from_yaml() -> None:
    rb = load_runbook(GOOD / "roll.yaml")
    md = render_markdown(rb)
    assert md.startswith("# Runbook `roll`")
    assert "the current controller last" in md
    assert "1. **`test.depool`** (services=`{host.services}`, window=`10s`) — Depool a host." in md
    assert "rollback: `test.repool`: repool what was depooled" in md
    assert "| `flag` | str | `rolled` | `--param flag=…` | value written for each host |" in md
    assert "`kafkaops run roll CLUSTER [--param NAME=VALUE ...]`" in md


def test_runbook_files_lists_by_name() -> None:
    files = runbook_files([GOOD])
    assert sorted(files) == ["roll", "simple"]


# --- the command-line declarations (parameters' flags and choices, `command:`) -----------------------------

_DECLARED = """\
name: decl
summary: s
parameters:
  mode: {type: str, default: safe, choices: [safe, fast], help: how}
  force: {type: bool, default: false, flag: --force}
  election: {type: bool, default: true}
  service: {type: str, required: true, flag: [--service, -s]}
  svc: {type: str, default: x}
  count: {type: int, default: 1, min: 0}
  hidden: {type: str, default: h, flag: false}
command:
  target: cluster
  arguments: [svc]
  select: [pick_hosts, {pick_more: {service: service}}]
  resolve: {hidden: fill_it}
  conflicts:
    - {force: true, mode: fast}
steps:
  - test.set: {key: k, value: "{params.mode}"}
"""


def _decl_error(tmp_path: object, text: str) -> str:
    from pathlib import Path

    p = Path(str(tmp_path)) / "decl.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_runbook(p)
    assert info.value.exit_code == 3
    return str(info.value)


def test_declarations_are_parsed_and_carried(tmp_path: object) -> None:
    from pathlib import Path

    from kafkaops.cli.runbook_text import spell, usage
    from kafkaops.engine.runbook import HookRef

    p = Path(str(tmp_path)) / "decl.yaml"
    p.write_text(_DECLARED)
    rb = load_runbook(p)
    assert rb.declaration("mode").flags == ("--mode",) and rb.declaration("mode").choices == ("safe", "fast")
    assert rb.declaration("force").flags == ("--force",)
    assert rb.declaration("election").flags == ("--no-election",)  # default true: the switch turns it off
    assert rb.declaration("service").flags == ("--service", "-s")
    assert rb.declaration("svc").flags == ()  # positional
    assert rb.declaration("hidden").flags == ()
    assert rb.param("count") is not None and rb.param("count").min == 0  # type: ignore[union-attr]
    c = rb.command
    assert (c.alias, c.target, c.arguments) == (True, "cluster", ("svc",))
    assert c.select == (HookRef("pick_hosts", {}, 14), HookRef("pick_more", {"service": "service"}, 14))
    assert c.resolve == (("hidden", HookRef("fill_it", {}, 15)),)
    assert c.conflicts == ({"force": True, "mode": "fast"},)
    assert spell(rb, "election", False) == "--no-election" and spell(rb, "mode", "fast") == "--mode fast"
    assert spell(rb, "mode", "fast", alias=False) == "--param mode=fast"
    assert usage(rb) == "kafkaops decl SVC CLUSTER --service SERVICE [OPTIONS]"
    md = render_markdown(rb)
    assert "| `mode` | str (`safe` \\| `fast`) | `safe` | `--mode` | how |" in md
    assert "Refused together: `--force` with `--mode fast`." in md


def test_a_runbook_without_command_has_no_alias_and_default_flags(tmp_path: object) -> None:
    rb = load_runbook(GOOD / "roll.yaml")
    assert rb.command.alias is False and rb.command.target == "cluster"  # rolling: TARGET is a cluster
    assert rb.declaration("flag").flags == ("--flag",)
    assert load_runbook(GOOD / "simple.yaml").command.target == "host"


@pytest.mark.parametrize(("edit", "expected"), [
    (("mode: {type: str, default: safe, choices: [safe, fast], help: how}",
      "mode: {type: str, default: safe, choices: [safe, fast], hlep: how}"),
     "decl.yaml:4: parameters.mode: unknown key(s) ['hlep'] (allowed: type, default"),
    (("choices: [safe, fast]", "choices: [fast, quick]"),
     "decl.yaml:4: parameters.mode: the default 'safe' is not one of the choices"),
    (("count: {type: int, default: 1, min: 0}", "count: {type: int, default: 1, choices: [1, two]}"),
     "decl.yaml:9: parameters.count.choices: 'two' is not an integer"),
    (("force: {type: bool, default: false, flag: --force}", "force: {type: bool, default: false, choices: [true]}"),
     "decl.yaml:5: parameters.force.choices: a bool parameter cannot have choices"),
    (("flag: --force}", "flag: [--force, -s]}"),
     "decl.yaml:7: parameters.service.flag: -s is already the flag of parameter 'force'"),
    (("hidden: {type: str, default: h, flag: false}", "hidden: {type: str, default: h, flag: --mode}"),
     "decl.yaml:10: parameters.hidden.flag: --mode is already the flag of parameter 'mode'"),
    (("flag: --force}", "flag: force}"), "decl.yaml:5: parameters.force.flag: 'force' is not an option name"),
    (("flag: --force}", "flag: -f}"), "decl.yaml:5: parameters.force.flag: needs a long option name besides -f"),
    (("count: {type: int, default: 1, min: 0}", "count: {type: int, default: -1, min: 0}"),
     "decl.yaml:9: parameters.count: bad default: -1 is below the minimum 0"),
    (("  target: cluster", "  target: broker"), "decl.yaml:12: command.target: 'broker' is not a target kind"),
    (("  arguments: [svc]", "  arguments: [svcs]"), "decl.yaml:13: command.arguments.0: 'svcs' names no parameter"),
    (("  arguments: [svc]", "  arguments: [service]"),
     "decl.yaml:7: parameters.service: a positional argument (command.arguments) has no flag"),
    (("{pick_more: {service: service}}", "{pick_more: {service: services}}"),
     "decl.yaml:14: command.select.1: pick_more: service: 'services' names no parameter"),
    (("resolve: {hidden: fill_it}", "resolve: {hiden: fill_it}"),
     "decl.yaml:15: command.resolve.hiden: 'hiden' names no parameter"),
    (("resolve: {hidden: fill_it}", "resolve: {hidden: Fill-It}"),
     "decl.yaml:15: command.resolve.hidden: expected a hook name"),
    (("    - {force: true, mode: fast}", "    - {force: true, mode: slow}"), None),  # values not among choices are
    (("    - {force: true, mode: fast}", "    - {force: true}"),                     # allowed (never refused then)
     "decl.yaml:17: command.conflicts.0: expected two or more {parameter: value}"),
    (("    - {force: true, mode: fast}", "    - {force: maybe, mode: fast}"),
     "decl.yaml:17: command.conflicts.0: force: 'maybe' is not a boolean"),
    (("  target: cluster", "  target: cluster\n  colour: red"), "decl.yaml:11: command: unknown key(s) ['colour']"),
    (("flag: [--service, -s]}", "flag: false}"),
     "decl.yaml:7: parameters.service: required, but the alias cannot set it"),
    (("  mode: {", "  Mode: {"), "decl.yaml:4: parameters.Mode: bad parameter name 'Mode'"),
])
def test_bad_declarations_name_file_line_and_fix(tmp_path: object, edit: tuple[str, str], expected: str | None) -> None:
    old, new = edit
    assert old in _DECLARED
    text = _DECLARED.replace(old, new, 1)
    if expected is None:
        from pathlib import Path

        (Path(str(tmp_path)) / "decl.yaml").write_text(text)
        load_runbook(Path(str(tmp_path)) / "decl.yaml")
        return
    msg = _decl_error(tmp_path, text)
    assert expected in msg, msg


def test_a_target_of_another_role_leaves_the_step_out_and_keeps_the_indexes() -> None:
    """A KRaft controller node runs the kraft.* steps and none of the broker's; a broker the reverse. Each
    kept step has its YAML index, and the gate an index past every step (no collision)."""
    import kafkaops.steps  # noqa: F401 - registers the kinds the shipped runbook names
    from kafkaops.inventory import load_inventory
    from kafkaops.model import Cluster

    cluster: Cluster = load_inventory(REPO / "inventory" / "lab-kraft.yaml")
    rb = load_runbook(REPO / "runbooks" / "rolling-restart.yaml")
    ctrl, broker = cluster.controllers[0], cluster.hosts[0]
    bound = bind_runbook(rb, cluster=cluster, targets=[Target(ctrl.name, host=ctrl), Target(broker.name, host=broker)])
    kinds = {t.name: [s.kind for s in t.steps] for t in bound.targets}
    assert "kraft.stop_controller" in kinds[ctrl.name] and "kafka.stop_broker" not in kinds[ctrl.name]
    assert not any(k.startswith(("conftool.", "traffic.", "service.")) for k in kinds[ctrl.name])
    assert "kafka.stop_broker" in kinds[broker.name] and not any(k.startswith("kraft.") for k in kinds[broker.name])
    by_kind = {s.kind: s.index for s in bound.targets[0].steps}
    assert by_kind["kraft.stop_controller"] == 1 + [s.kind for s in rb.steps].index("kraft.stop_controller")
    gate = bound.targets[0].steps[-1]
    assert gate.gate and gate.index == len(rb.steps) + 1
    assert len({s.index for s in bound.targets[0].steps}) == len(bound.targets[0].steps)
