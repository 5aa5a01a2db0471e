"""Procedures are YAML: a new runbook is a command (``kafkaops run NAME``, ``kafkaops NAME``) with no Python.

The first tests do exactly what docs/engine.md "Adding a procedure" walks through: write a runbook using
existing step kinds and hooks into a directory of its own, and find its parameters as options, its alias,
and its plan. The inventory here has no ZooKeeper and no etcd (a file lock in a temp directory) and the
runbook's only step kind (``canary.confirm``) asks no system, so the plan is made without any cluster.
The others check that the seven generated procedure commands still map their flags onto the runbook
parameters and hooks exactly as the hand-written commands did, and that command-line mistakes are usage
errors before any system is asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]

RUNBOOK = """\
name: canary-drill
summary: Rehearse a canary pause on the hosts that run a service, changing nothing
parameters:
  service: {type: str, required: true, flag: [--service, -s], help: "Service name from the inventory."}
  canary_count: {type: int, default: 1, min: 0, flag: --canary, help: "Pause after the first N hosts."}
  canary: {type: list, default: [], flag: false, help: "The canary hosts (resolved from --canary)."}
  port: {type: int, default: 0, flag: false, help: "The service port (resolved from the inventory)."}
  pace: {type: str, default: calm, choices: [calm, brisk], help: "How briskly to rehearse."}
  loud: {type: bool, default: false, help: "Say more."}
command:
  help: Rehearse the canary gate of a rolling procedure on the hosts of CLUSTER that run SERVICE.
  target: cluster
  select: hosts_running_service
  resolve: {port: service_port, canary: first_targets}
targets:
  order: inventory
steps:
  - canary.confirm: {canary: "{params.canary}"}
"""

INVENTORY = """\
cluster: drill
kafka:
  bootstrap_servers: 127.0.0.1:9
commands: {kafka_stop: "true", kafka_start: "true", kafka_status: "true", reboot: "true", boot_id: "true"}
services:
  eventbus: {port: 8085, health_path: /_info}
  other: {port: 9000}
hosts:
  kafka1001: {fqdn: kafka1001.drill.local, address: 127.0.0.1, broker_id: 1001, dc: eqiad, rack: A,
              services: [eventbus]}
  kafka1002: {fqdn: kafka1002.drill.local, address: 127.0.0.1, broker_id: 1002, dc: eqiad, rack: B,
              services: [other, eventbus]}
  kafka1003: {fqdn: kafka1003.drill.local, address: 127.0.0.1, broker_id: 1003, dc: eqiad, rack: C,
              services: [other]}
"""


@pytest.fixture
def drill(tmp_path: Path) -> dict[str, Path]:
    """A runbooks directory holding only the new runbook, an inventory, a home and a lock directory."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "canary-drill.yaml").write_text(RUNBOOK)
    (tmp_path / "drill.yaml").write_text(INVENTORY)
    return {"runbooks": tmp_path / "runbooks", "inventory": tmp_path / "drill.yaml", "home": tmp_path / "home",
            "locks": tmp_path / "locks"}


def kafkaops(drill: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKAOPS_HOME": str(drill["home"]), "KAFKAOPS_LOCK_DIR": str(drill["locks"]),
           "COLUMNS": "200"}
    env.pop("KAFKAOPS_RUNBOOKS", None)
    env.pop("KAFKAOPS_INVENTORY", None)
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "--runbooks", str(drill["runbooks"]),
                           "-i", str(drill["inventory"]), *args], capture_output=True, text=True, timeout=120, env=env)


def test_run_help_lists_the_new_runbooks_declared_parameters(drill: dict[str, Path]) -> None:
    result = kafkaops(drill, "run", "canary-drill", "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "run canary-drill [OPTIONS] CLUSTER" in out
    params = " ".join(out.split("Parameters (--param NAME=VALUE):")[1].split())  # unwrapped
    assert "service Service name from the inventory. [str; required]" in params
    assert "canary_count Pause after the first N hosts. [int ≥ 0; default: 1]" in params
    assert "canary The canary hosts (resolved from --canary). [list; default: resolved by first_targets]" in params
    assert "port The service port (resolved from the inventory). [int; default: resolved by service_port]" in params
    assert "pace How briskly to rehearse. [str; one of calm|brisk; default: calm]" in params
    assert "loud Say more. [bool; default: false]" in params


def test_the_new_runbook_is_a_command_with_its_declared_flags(drill: dict[str, Path]) -> None:
    listing = kafkaops(drill, "--help").stdout
    assert __import__("re").search(r"canary-drill +Rehearse the canary gate", listing)  # column: widest name
    assert "rolling-reboot" not in listing  # --runbooks DIR replaces the packaged runbooks
    result = kafkaops(drill, "canary-drill", "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "canary-drill [OPTIONS] CLUSTER" in out
    assert "-s, --service TEXT" in out and "[required]" in out
    assert "--canary INTEGER" in out and "[default: 1]" in out
    assert "--pace [calm|brisk]" in out and "How briskly to rehearse." in out
    assert "--loud" in out and "Say more." in out
    assert "--canary-count" not in out and "--port" not in out  # flag: false, or renamed
    for common in ("--inventory", "--reason", "--task", "--yes", "--dry-run", "--output", "--save-plan"):
        assert common in out


def _plan(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout))


def test_dry_run_of_the_new_runbook_selects_resolves_and_plans_without_a_cluster(drill: dict[str, Path]) -> None:
    via_alias = _plan(kafkaops(drill, "canary-drill", "drill", "-s", "eventbus", "--pace", "brisk", "--dry-run",
                               "-o", "json"))
    assert via_alias["runbook"] == "canary-drill" and via_alias["cluster"] == "drill"
    assert via_alias["targets"] == ["kafka1001", "kafka1002"]  # hosts_running_service: not kafka1003
    params = via_alias["bound"]["params"]
    assert params == {"service": "eventbus", "canary_count": 1, "canary": ["kafka1001"], "port": 8085,
                      "pace": "brisk", "loud": False}
    steps = [(s["target"], s["kind"], s["action"] is not None) for s in via_alias["steps"]]
    assert steps == [("kafka1001", "canary.confirm", True), ("kafka1002", "canary.confirm", False)]

    via_run = _plan(kafkaops(drill, "run", "canary-drill", "drill", "--param", "service=eventbus", "--param",
                             "pace=brisk", "--dry-run", "-o", "json"))
    assert via_run["bound"] == via_alias["bound"]
    assert [s["action"] for s in via_run["steps"]] == [s["action"] for s in via_alias["steps"]]

    no_canary = _plan(kafkaops(drill, "run", "canary-drill", "drill", "-p", "service=eventbus", "-p",
                               "canary_count=2", "--dry-run", "-o", "json"))
    assert no_canary["bound"]["params"]["canary"] == []  # N covers every target: no canary


@pytest.mark.parametrize(("args", "message"), [
    (["--param", "nope=1"], "--param nope: runbook canary-drill has no parameter 'nope'"),
    (["--param", "pace=slow"], "--param pace=slow: 'slow' is not one of calm, brisk"),
    (["--param", "canary_count=many"], "--param canary_count=many: 'many' is not an integer"),
    (["--param", "canary_count=-1"], "--param canary_count=-1: '-1' is below the minimum 0"),
    (["--param", "pace"], "--param 'pace': expected NAME=VALUE"),
    (["--param", "pace=calm", "--param", "pace=brisk"], "--param pace is given twice"),
    ([], "runbook canary-drill needs --param service=<str>"),
])
def test_a_bad_param_is_a_one_line_usage_error(drill: dict[str, Path], args: list[str], message: str) -> None:
    base = [] if not args or args[1].startswith("service") else ["--param", "service=eventbus"]
    result = kafkaops(drill, "run", "canary-drill", "drill", *base, *args, "--dry-run")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), result.stderr
    assert result.stdout == ""


@pytest.fixture
def no_lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Any inventory lookup (the step before any system is asked) is recorded."""
    import kafkaops.lookup as lookup
    import kafkaops.procedure as procedure  # imported before the patch: it binds the lookups at its top

    seen: list[str] = []
    for module in (lookup, procedure):
        monkeypatch.setattr(module, "find_host", lambda name, inventory=None: seen.append(name))
        monkeypatch.setattr(module, "find_cluster", lambda name, inventory=None: seen.append(name))
    yield seen


def test_command_line_mistakes_are_found_before_the_inventory_is_read(drill: dict[str, Path],
                                                                      no_lookups: list[str]) -> None:
    from kafkaops.cli.main import register

    app = register()
    cli = CliRunner()
    env = {"KAFKAOPS_RUNBOOKS": str(drill["runbooks"])}
    for args in (["run", "canary-drill", "drill", "-p", "service=x", "-p", "pace=slow", "--dry-run"],
                 ["run", "canary-drill", "drill", "--dry-run"],
                 ["canary-drill", "drill", "-s", "x", "--pace", "slow", "--dry-run"],
                 ["canary-drill", "drill", "-s", "x"]):  # no --reason
        result = cli.invoke(app, args, env=env)
        assert result.exit_code == 2, (args, result.output)
    assert no_lookups == []


# --- the seven generated procedure commands ------------------------------------------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Run a procedure command up to planning (recorded, not done); deploy-host and health answers are
    canned, so nothing is asked of the lab."""
    import kafkaops.cli.runbook_commands as procedures
    import kafkaops.procedure as procedure
    seen: dict[str, Any] = {}

    def fake_plan_run(rb: Any, cluster: Any, hosts: list[Any], params: dict[str, Any], **kw: Any) -> Any:
        seen.update(runbook=rb.name, cluster=cluster.name, hosts=[h.name for h in hosts], params=params,
                    reason=kw["reason"])
        kw["env"].close()
        return None

    def fake_show_and_run(planned: Any, **kw: Any) -> None:
        seen.update(yes=kw["yes"])

    class Healthy:
        healthy, revision = True, "r1"

        def line(self) -> str:
            return "HTTP 200 (revision r1)"

    import dataclasses

    from kafkaops.catalog import load_plugins
    from kafkaops.queries import selectors

    load_plugins()
    seen["checks"] = []
    monkeypatch.setitem(selectors._HOOKS, "kafka_answers", dataclasses.replace(
        selectors._HOOKS["kafka_answers"], func=lambda inv: seen["checks"].append(("kafka_answers", inv.cluster.name))))
    monkeypatch.setattr(procedure, "plan_run", fake_plan_run)
    monkeypatch.setattr(procedures, "_show_and_run", fake_show_and_run)
    # the hooks' own names (kafkaops.queries.selectors imports them at its top)
    monkeypatch.setattr(selectors, "checked_out_revision", lambda env, repo: f"r1-of-{repo}")
    monkeypatch.setattr(selectors, "check_health", lambda host, svc: Healthy() if host.name == "kafka1003" else
                        type("Down", (), {"healthy": False, "revision": None})())
    monkeypatch.setenv("KAFKAOPS_INVENTORY", str(REPO / "inventory" / "lab.yaml"))
    monkeypatch.delenv("KAFKAOPS_RUNBOOKS", raising=False)
    yield seen


def _invoke(*args: str) -> Any:
    from kafkaops.cli.main import register

    result = CliRunner().invoke(register(), list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.mark.parametrize(("args", "hosts", "params"), [
    (["reboot", "kafka1002.lab.local", "--force", "--isr-headroom", "1", "--no-scan"], ["kafka1002"],
     {"allow_urp": True, "isr_headroom": 1, "scan": False}),
    (["restart", "kafka1001", "--no-election", "--spark-master", "yarn"], ["kafka1001"],
     {"election": False, "spark_master": "yarn"}),
    (["rolling-reboot", "lab", "--syn-window", "3s", "--stable-for", "3s", "--grace", "1m", "--election-at-end"],
     ["kafka1001", "kafka1002", "kafka1003"],
     {"syn_window": 3.0, "stable_for": 3.0, "grace": 60.0, "election_at_end": True}),
    (["rolling-restart", "lab"], ["kafka1001", "kafka1002", "kafka1003"], {}),
    (["restart-service", "eventbus", "kafka1003", "--log-window", "1s"], ["kafka1003"],
     {"service": "eventbus", "port": 8085, "log_window": 1.0}),
    (["rolling-restart-service", "eventbus", "lab", "--canary", "1", "--health-timeout", "8s"],
     ["kafka1001", "kafka1002", "kafka1003"],
     {"service": "eventbus", "port": 8085, "canary_count": 1, "canary": ["kafka1001"], "health_timeout": 8.0}),
    (["rolling-deploy", "lab", "-s", "eventbus", "-m", "deploy r2", "--rev", "r2", "--canary", "0"],
     ["kafka1001", "kafka1002", "kafka1003"],
     {"service": "eventbus", "message": "deploy r2", "rev": "r2", "canary_count": 0, "canary": [], "port": 8085}),
    (["rolling-deploy", "lab", "--service", "eventbus", "--message", "m", "--repo", "x/y"],  # rev from the deploy
     ["kafka1001", "kafka1002", "kafka1003"],                                               # host; canary 1
     {"service": "eventbus", "message": "m", "repo": "x/y", "rev": "r1-of-x/y", "port": 8085, "canary": ["kafka1001"]}),
])
def test_procedure_commands_map_flags_and_hooks_onto_runbook_parameters(
        captured: dict[str, Any], args: list[str], hosts: list[str], params: dict[str, Any]) -> None:
    _invoke(*args, "--reason", "test", "--yes")
    assert captured["runbook"] == args[0] and captured["cluster"] == "lab"
    assert captured["hosts"] == hosts
    assert captured["params"] == params  # given on the command line, or resolved by a hook
    assert captured["reason"] == "test" and captured["yes"] is True
    assert captured["checks"] == ([("kafka_answers", "lab")] if args[0] in ("reboot", "restart") else [])


def test_rolling_deploy_skips_hosts_already_serving_the_revision(captured: dict[str, Any]) -> None:
    result = _invoke("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--dry-run")
    assert captured["hosts"] == ["kafka1001", "kafka1002"]
    assert captured["params"]["canary"] == ["kafka1001"]
    assert "kafka1003: already serves r1 (HTTP 200 (revision r1)): skipped" in result.output


def test_rolling_deploy_with_nothing_to_deploy_says_so_and_plans_nothing(
        captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkaops.queries.selectors as selectors

    monkeypatch.setattr(selectors, "check_health", lambda host, svc: type(
        "Up", (), {"healthy": True, "revision": "r1", "line": lambda self: "HTTP 200"})())
    result = _invoke("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--dry-run")
    assert "nothing to deploy: every host of lab running eventbus serves r1" in result.output
    assert "runbook" not in captured and captured["checks"] == []


# The coordinator removes this marker with the call to kafkaops.cli.render.nothing_to_do in cli/runbook_commands.py
# (owned by another helper during issue 30); strict, so the suite fails if one lands without the other.
def test_nothing_to_deploy_is_json_with_output_json(captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """With -o json every outcome is JSON on stdout, "nothing to do" too (it was a line of prose on stderr)."""
    import kafkaops.queries.selectors as selectors

    monkeypatch.setattr(selectors, "check_health", lambda host, svc: type(
        "Up", (), {"healthy": True, "revision": "r1", "line": lambda self: "HTTP 200"})())
    result = _invoke("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--dry-run", "-o", "json")
    assert json.loads(result.stdout) == {
        "nothing_to_do": True, "reason": "nothing to deploy: every host of lab running eventbus serves r1"}
    assert "runbook" not in captured


def test_contradicting_flags_are_refused_as_before(captured: dict[str, Any]) -> None:
    from kafkaops.cli.main import register

    result = CliRunner().invoke(register(), ["rolling-reboot", "lab", "--no-election", "--election-at-end",
                                             "--dry-run"])
    assert result.exit_code == 2
    assert "--no-election and --election-at-end contradict each other" in result.output
    assert "runbook" not in captured and captured["checks"] == []


def test_runbooks_are_not_read_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ./runbooks copy (say, without the pre-flight) never shadows the packaged runbook."""
    from kafkaops.catalog import find_runbook, runbook_dirs

    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "reboot.yaml").write_text("name: reboot\nsummary: no pre-flight\n"
                                                       "steps:\n  - host.reboot: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KAFKAOPS_RUNBOOKS", raising=False)
    assert runbook_dirs() == [REPO / "runbooks"]
    assert find_runbook("reboot", check_kinds=False).summary == "Reboot one Kafka broker host safely"
    monkeypatch.setenv("KAFKAOPS_RUNBOOKS", str(tmp_path / "runbooks"))
    assert find_runbook("reboot", check_kinds=False).summary == "no pre-flight"  # only when asked for


def test_a_runbook_naming_an_unknown_hook_is_refused_with_its_line(tmp_path: Path) -> None:
    from kafkaops.catalog import load_plugins
    from kafkaops.cli.runbooks import check_command
    from kafkaops.engine.runbook import load_runbook
    from kafkaops.errors import ConfigError

    load_plugins()
    path = tmp_path / "typo.yaml"
    path.write_text(RUNBOOK.replace("name: canary-drill", "name: typo").replace("select: hosts_running_service",
                                                                              "select: hosts_runing_service"))
    with pytest.raises(ConfigError) as info:
        check_command(load_runbook(path))
    assert f"{path}:13: command: 'hosts_runing_service' is not a hook, not a select hook" in str(info.value)
    assert "did you mean 'hosts_running_service'?" in str(info.value)
    path.write_text(RUNBOOK.replace("name: canary-drill", "name: typo").replace("flag: --canary", "flag: --reason"))
    with pytest.raises(ConfigError, match=r"typo.yaml:5: parameters.canary_count: --reason is an option of every"):
        check_command(load_runbook(path))
