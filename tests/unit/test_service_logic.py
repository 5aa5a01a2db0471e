"""Pure logic of the service procedures: log scanning, revision comparison, plans, lab releases."""

from __future__ import annotations

from pathlib import Path

import pytest

import kafkaops.steps  # noqa: F401 - registers the step kinds
from kafkaops.catalog import find_runbook
from kafkaops.engine import Target, bind_runbook
from kafkaops.engine.step import Action, Noop, Observation
from kafkaops.errors import ConfigError, SafetyRefusal
from kafkaops.facts.log_lines import describe_matches, find_error_lines
from kafkaops.inventory import load_inventory
from kafkaops.queries.deploy_host import check_message, revision_matches
from kafkaops.steps.canary import ConfirmCanary
from kafkaops.steps.deploy import Deploy, Rollback, VerifyRevision
from kafkaops.steps.service import Restart
from kafkaops.systems.http import HttpCheck, served_revision
from kafkaops_lab import deploy as labdeploy

REPO = Path(__file__).resolve().parents[2]
PATTERNS = ("Failed processing event", r"0 out of \d+ events were accepted")
# Recorded from the lab eventbus after a bad event (and as the runbook quotes production).
LOG = """\
2026-11-22T18:13:27.016 (MainThread) eventbus stopped
2026-11-22T18:13:27.323 (MainThread) eventbus r2 listening on 127.0.40.3:8085
2026-11-22T18:13:27.442 (Thread-3 (process_request_thread)) 200 GET /_info (127.0.0.1) 0.31ms
2026-11-22T18:13:29.101 (Thread-4 (process_request_thread)) Failed processing event: invalid JSON: Expecting value
2026-11-22T18:13:29.102 (Thread-4 (process_request_thread)) 0 out of 1 events were accepted.
2026-11-22T18:13:29.102 (Thread-4 (process_request_thread)) 400 POST /v1/events (127.0.0.1) 1.20ms
(MainThread) 400 POST /v1/events (10.64.0.71) 1.87ms (MainThread) Failed processing event: Failed validating
2026-11-22T18:13:30.000 (MainThread) 12 out of 12 events were accepted.
"""


def test_scan_finds_each_matching_line_once_with_its_number_and_pattern() -> None:
    matches = find_error_lines(LOG.splitlines(), PATTERNS)
    assert [(m.number, m.pattern) for m in matches] == [
        (4, "Failed processing event"), (5, r"0 out of \d+ events were accepted"), (7, "Failed processing event"),
    ]
    assert matches[1].line.endswith("0 out of 1 events were accepted.")


def test_scan_of_a_clean_log_or_without_patterns_finds_nothing() -> None:
    clean = [line for line in LOG.splitlines() if "Failed" not in line and "0 out of" not in line]
    assert find_error_lines(clean, PATTERNS) == []
    assert find_error_lines(LOG.splitlines(), ()) == []


def test_scan_refuses_a_bad_pattern() -> None:
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        find_error_lines(["x"], ["(unclosed"])


def test_described_matches_are_capped() -> None:
    matches = find_error_lines(["Failed processing event"] * 15, PATTERNS)
    text = describe_matches(matches, limit=10)
    assert text.count("[Failed processing event]") == 10 and "and 5 more" in text


@pytest.mark.parametrize(("served", "wanted", "ok"), [
    ("r2", "r2", True), (" R2\n", "r2", True), ("r1", "r10", False), ("r10", "r1", False), (None, "r1", False),
    ("", "r1", False), ("1a2b3c4d5e6f", "1a2b3c4", True), ("1a2b3c4", "1a2b3c4d5e6f", True),
    ("1a2b3c5", "1a2b3c4d5e6f", False), ("abc", "abcdef", False),
])
def test_revision_matches(served: str | None, wanted: str, ok: bool) -> None:
    assert revision_matches(served, wanted) is ok


def test_served_revision_reads_the_usual_keys() -> None:
    assert served_revision({"revision": "r3"}) == "r3"
    assert served_revision({"git_sha": "1a2b3c4"}) == "1a2b3c4"
    assert served_revision({"status": "ok"}) is None and served_revision(["r1"]) is None
    assert HttpCheck("u", 503, {"revision": "r9", "error": "bad"}).line() == "HTTP 503 (revision r9): bad"
    assert HttpCheck("u", None, error="ConnectionError").line() == "no answer (ConnectionError)"


@pytest.mark.parametrize("message", ["two\nlines", "bell\a", "esc\x1b[31m", "  ", ""])
def test_deploy_messages_must_be_one_line_of_text(message: str) -> None:
    with pytest.raises(ConfigError):
        check_message(message)


@pytest.mark.parametrize("message", ['say "hi"', "cost $5", "a `cmd`", "back\\slash", "x; id #", "fix token refresh"])
def test_any_one_line_deploy_message_is_fine_it_is_shell_quoted(message: str) -> None:
    assert check_message(message) == message


def _deploy_obs(**over: object) -> Observation:
    data = {"host": "kafka1001", "service": "eventbus", "rev": "r2", "served": "r1", "healthy": True,
            "line": "HTTP 200 (revision r1)", "url": "http://h/_info", "deploy_host": "deploy1001",
            "command": 'labdeploy -l kafka1001 --rev r2 "m"', "checked_out": None, "before": None,
            "previous": "r1"}
    data.update(over)
    return Observation(data)


def test_deploy_is_a_noop_when_the_target_already_serves_the_revision() -> None:
    step = Deploy({"service": "eventbus", "rev": "r2", "message": "m", "repo": "", "timeout": 60.0})
    assert isinstance(step.plan(_deploy_obs(served="r2")), Noop)
    action = step.plan(_deploy_obs())
    assert isinstance(action, Action) and action.commands == ('on deploy1001: labdeploy -l kafka1001 --rev r2 "m"',)
    assert action.data == {"served": "r1"} and not action.idempotent


def test_deploy_refuses_when_scap_would_ship_another_checkout() -> None:
    step = Deploy({"service": "eventbus", "rev": "r2", "message": "m", "repo": "", "timeout": 60.0})
    with pytest.raises(SafetyRefusal, match="check out r2 on deploy1001"):
        step.plan(_deploy_obs(checked_out="r1"))
    assert isinstance(step.plan(_deploy_obs(checked_out="r2")), Action)


def test_rollback_plans_only_what_this_run_changed() -> None:
    step = Rollback({"service": "eventbus", "rev": "r2", "message": "m", "repo": "", "timeout": 60.0})
    assert "nothing to roll back" in step.plan(_deploy_obs(previous="")).reason  # type: ignore[union-attr]
    assert isinstance(step.plan(_deploy_obs(served="r1", previous="r1")), Noop)
    assert isinstance(step.plan(_deploy_obs(served="r2", healthy=False, previous="r1")), Action)


def test_verify_revision_waits_unless_healthy_on_the_revision() -> None:
    step = VerifyRevision({"service": "eventbus", "rev": "r2", "timeout": 60.0})
    base = {"host": "kafka1001", "service": "eventbus", "rev": "r2", "url": "u", "line": "", "timeout": 60.0}
    assert isinstance(step.plan(Observation({**base, "served": "r2", "healthy": True})), Noop)
    assert isinstance(step.plan(Observation({**base, "served": "r2", "healthy": False})), Action)
    assert isinstance(step.plan(Observation({**base, "served": "r1", "healthy": True})), Action)
    # Planned right after the deploy step (projected: served r2, health still to be seen): it waits.
    assert isinstance(step.plan(Observation({**base, "served": "r2", "healthy": None})), Action)


def test_restart_is_a_noop_once_a_new_process_runs() -> None:
    step = Restart({"service": "eventbus", "timeout": 60.0})
    base = {"host": "kafka1001", "service": "eventbus", "command": "hostctl restart eventbus", "timeout": 60.0}
    assert isinstance(step.plan(Observation({**base, "pid": 10, "active": True, "pid_before": None})), Action)
    assert isinstance(step.plan(Observation({**base, "pid": 10, "active": True, "pid_before": 10})), Action)
    assert isinstance(step.plan(Observation({**base, "pid": 11, "active": True, "pid_before": 10})), Noop)
    assert isinstance(step.plan(Observation({**base, "pid": 11, "active": True, "pid_before": 0})), Noop)
    assert isinstance(step.plan(Observation({**base, "pid": 0, "active": False, "pid_before": 10})), Action)


def test_canary_gate_acts_only_after_the_last_canary_target() -> None:
    step = ConfirmCanary({"canary": ["kafka1001", "kafka1002"]})

    def obs(target: str, confirmed: str | None = None) -> Observation:
        return Observation({"target": target, "canary": ["kafka1001", "kafka1002"],
                            "is_end": target == "kafka1002", "confirmed": confirmed, "paused": False})

    assert isinstance(step.plan(obs("kafka1001")), Noop)
    assert isinstance(step.plan(obs("kafka1002")), Action)
    assert isinstance(step.plan(obs("kafka1002", confirmed="op at 12:00")), Noop)
    assert isinstance(ConfirmCanary({"canary": []}).plan(Observation({"canary": [], "target": "x"})), Noop)


def test_service_runbooks_bind_against_the_lab_and_production_inventories() -> None:
    for inventory, service in (("lab.yaml", "eventbus"), ("eqiad-main.example.yaml", "eventlogging-service-eventbus")):
        cluster = load_inventory(REPO / "inventory" / inventory)
        targets = [Target(h.name, host=h) for h in cluster.hosts]
        common = {"service": service, "port": 8085, "canary": [targets[0].name]}
        bound = bind_runbook(find_runbook("rolling-deploy"), cluster=cluster, targets=targets,
                             params={**common, "rev": "r2", "message": "deploy r2"})
        kinds = [s.kind for s in bound.targets[0].steps]
        assert kinds == ["env.reachable", "metrics.baseline", "alerts.gate", "alerts.silence", "conftool.depool",
                         "traffic.wait_zero_syns", "metrics.gate", "deploy.deploy", "deploy.verify_revision",
                         "service.scan_log", "conftool.repool", "alerts.unsilence", "alerts.gate", "canary.confirm"]
        # no canary gate after the last; its alerts.gate (at_end) is a step of its own
        assert [s.kind for s in bound.targets[-1].steps][-3:] == ["conftool.repool", "alerts.unsilence", "alerts.gate"]
        bound = bind_runbook(find_runbook("rolling-restart-service"), cluster=cluster, targets=targets, params=common)
        assert bound.target_names == [h.name for h in cluster.hosts]  # inventory order
        bind_runbook(find_runbook("restart-service"), cluster=cluster, targets=targets[:1],
                     params={"service": service})


def test_lab_releases_checkout_and_deploy_log(tmp_path: Path) -> None:
    labdeploy.seed_releases(tmp_path)
    assert labdeploy.known_releases(tmp_path) == ["r1", "r2", "r3"] and labdeploy.current(tmp_path) == "r1"
    bad = labdeploy.add_release("r4", broken="fails on purpose", base=tmp_path)
    assert (bad / "REVISION").read_text() == "r4\n" and (bad / "BROKEN").exists()
    labdeploy.add_release("r4", base=tmp_path)  # re-adding without --broken repairs it
    assert not (bad / "BROKEN").exists()
    labdeploy.checkout("r4", tmp_path)
    assert labdeploy.current(tmp_path) == "r4"
    with pytest.raises(Exception, match="unknown revision"):
        labdeploy.checkout("nope", tmp_path)
    with pytest.raises(ValueError):
        labdeploy.add_release("../escape", base=tmp_path)
    assert labdeploy.deploy_log(tmp_path) == []


def test_a_resumed_deploy_waits_for_the_interrupted_attempt_only_within_its_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Killing kafkaops does not stop the deploy tool on the deploy host: a resume within the earlier
    attempt's timeout waits for the target to serve the revision instead of deploying it a second time."""
    import time

    from kafkaops.engine.context import RunContext
    from kafkaops.steps import deploy as deploy_steps

    host = load_inventory(REPO / "inventory" / "lab.yaml").host("kafka1001")
    assert host is not None
    served = iter(["r1", "r1", "r2"])
    asked: list[str] = []

    def health(h: object, s: object) -> HttpCheck:
        asked.append("GET")
        return HttpCheck(url="u", status=200, body={"revision": next(served)})

    monkeypatch.setattr(deploy_steps, "check_health", health)
    monkeypatch.setattr(deploy_steps, "service_of", lambda h, s: s)
    ctx = RunContext(run_id="r", operator="o", reason="x", task=None, target=host.name, params={}, env=None)
    running = {"rev": "r1", "to": "r2", "started": time.time() - 5}
    assert deploy_steps._earlier_attempt_finished(ctx, host, "eventbus", "r2", running, timeout=60)
    assert len(asked) == 3  # it waited until the target served r2
    asked.clear()
    past = {**running, "started": time.time() - 61}
    assert not deploy_steps._earlier_attempt_finished(ctx, host, "eventbus", "r2", past, timeout=60)
    other = {**running, "to": "r3"}
    assert not deploy_steps._earlier_attempt_finished(ctx, host, "eventbus", "r2", other, timeout=60)
    assert asked == []  # neither case asks the target: the earlier attempt is over or was another revision
