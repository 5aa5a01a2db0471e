"""Metric gates (issue 31): the judgement (pure), the Prometheus adapter against a real Prometheus, and the
``metrics.baseline`` / ``metrics.gate`` steps on it.

The adapter and the steps talk to Debian's ``prometheus`` itself, started here on 127.0.0.1 and a free
port with no scrape target: PromQL constants (``vector(5)``, ``1.5``) are values this test chooses, and
Prometheus' own parser and evaluator answer them — a syntax error, a range vector, NaN, an empty result
are its answers, not ours.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkaops.errors import ConfigError, UnreachableError
from kafkaops.policy.metric_gates import judge, summary, worst
from kafkaops.systems.prometheus import Prometheus

# --- the judgement --------------------------------------------------------------------------------------


def test_max_is_an_absolute_ceiling() -> None:
    assert judge("isr", 0.0, None, high=0, ratio=None).ok
    r = judge("isr", 2.0, None, high=0, ratio=None)
    assert not r.ok and r.limit == 0 and r.line() == "isr 2 > 0 (max 0)"


def test_max_ratio_is_a_ceiling_relative_to_the_baseline() -> None:
    assert judge("p99", 15.0, 10.0, high=None, ratio=1.5).ok
    r = judge("p99", 16.0, 10.0, high=None, ratio=1.5)
    assert not r.ok and r.limit == 15.0
    assert r.line() == "p99 16 > 15 (1.5 x baseline 10)"


def test_the_lower_of_both_ceilings_applies() -> None:
    assert judge("p99", 40.0, 100.0, high=50, ratio=1.5).limit == 50
    assert judge("p99", 40.0, 10.0, high=50, ratio=1.5).limit == 15.0


@pytest.mark.parametrize("baseline", [0.0, -1.0, None, math.nan])
def test_a_zero_or_absent_baseline_drops_the_ratio_never_divides(baseline: float | None) -> None:
    """1.5 x 0 would stop a roll on any rise from an idle cluster; the ratio is not applied, and says so."""
    r = judge("p99", 1000.0, baseline, high=None, ratio=1.5)
    assert r.ok and r.limit is None
    assert "max_ratio 1.5 not applied" in r.detail
    with_max = judge("p99", 1000.0, baseline, high=500, ratio=1.5)
    assert not with_max.ok and with_max.limit == 500  # max alone decides


@pytest.mark.parametrize("value", [None, math.nan])
def test_no_data_does_not_hold(value: float | None) -> None:
    """Monitoring that cannot see the figure must not let a host be taken down blind."""
    r = judge("isr", value, None, high=0, ratio=None)
    assert not r.ok and r.value is None
    assert "no data" in r.line()


@pytest.mark.parametrize("value", [None, math.nan])
def test_no_data_names_the_gate_and_its_query(value: float | None) -> None:
    """An empty answer is blind, whatever the ceiling: the line says which query saw nothing, and what to
    look at first (the exporter), so the operator does not have to find the gate in the inventory."""
    query = 'sum(rate(eventbus_http_request_duration_seconds_count{cluster="lab"}[30s]))'
    r = judge("produce_p99_ms", value, 10.0, high=1000, ratio=1.5, query=query)
    assert not r.ok and r.value is None
    assert r.line().startswith(f"produce_p99_ms no data: query {query} returned no series")
    assert "is the exporter up?" in r.line()


def test_the_worst_series_is_judged_and_named() -> None:
    value, where = worst([({"instance": "kafka1001:7800"}, 3.0), ({"instance": "kafka1002:7800"}, 9.0),
                          ({"instance": "kafka1003:7800"}, math.nan)])
    assert (value, where) == (9.0, "instance=kafka1002:7800")
    assert worst([({}, math.nan)]) == (None, "")
    r = judge("p99", value, 2.0, high=None, ratio=2, series=where)
    assert summary([r]) == "p99 9 > 4 at instance=kafka1002:7800 (2 x baseline 2)"


# --- a real Prometheus ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's Prometheus on 127.0.0.1:<free port>, scraping nothing; its base URL."""
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.path.exists(binary):
        pytest.fail("prometheus not found: run scripts/install.sh (Debian's prometheus)", pytrace=False)
    d = tmp_path_factory.mktemp("prometheus")
    (d / "prometheus.yml").write_text("global: {scrape_interval: 1h}\nscrape_configs: []\n")
    port = _free_port()
    log = (d / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    import requests

    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"prometheus did not start: {(d / 'prometheus.log').read_text()[-2000:]}", pytrace=False)
        time.sleep(0.1)
    try:
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()


def test_an_instant_query_returns_typed_samples(prometheus: str) -> None:
    p = Prometheus(prometheus, timeout=5)
    got = p.query('label_replace(vector(2.5), "instance", "kafka1001:7800", "", "")')
    assert len(got) == 1 and got[0].value == 2.5 and got[0].labels == {"instance": "kafka1001:7800"}
    assert [s.value for s in p.query("1.5")] == [1.5]  # a scalar
    assert p.query("absent_metric_name_xyz") == []
    assert math.isnan(p.query("vector(0/0)")[0].value)


def test_a_refused_query_is_a_config_error_naming_the_gate(prometheus: str) -> None:
    with pytest.raises(ConfigError, match="refused gate p99") as exc:
        Prometheus(prometheus).query("max(", what="gate p99")
    assert exc.value.exit_code == 3 and "monitoring.gates" in (exc.value.hint or "")
    with pytest.raises(ConfigError, match="returns a matrix"):
        Prometheus(prometheus).query("up[5m]", what="gate up")


def test_an_unreachable_prometheus_is_one_line_naming_the_url() -> None:
    port = _free_port()  # bound and released: refused
    with pytest.raises(UnreachableError) as exc:
        Prometheus(f"http://127.0.0.1:{port}", timeout=2).query("1", what="gate x")
    assert exc.value.exit_code == 4
    assert exc.value.message == f"Prometheus http://127.0.0.1:{port} did not answer gate x: ConnectionError"


def test_a_silent_prometheus_times_out(tmp_path: Path) -> None:
    """A server that accepts and never answers: the call ends at its timeout, it does not hang the run."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(UnreachableError, match="did not answer gate x: ReadTimeout"):
            Prometheus(url, timeout=0.5).query("1", what="gate x")


# --- the steps, on that Prometheus -----------------------------------------------------------------------


def _env(url: str | None, *gates: tuple[str, str, float | None, float | None]) -> Any:
    from kafkaops.environment import Environment
    from kafkaops.model import Cluster, Host, MetricGate, Monitoring, SshEndpoint

    host = Host(name="kafka9001", fqdn="kafka9001.example", address="127.0.0.1", broker_id=9001, dc="x", rack="a",
                ssh=SshEndpoint(address="127.0.0.1", port=9))
    monitoring = Monitoring(prometheus=url, gates=tuple(MetricGate(n, q, high, ratio) for n, q, high, ratio in gates))
    cluster = Cluster(name="c1", bootstrap_servers="127.0.0.1:9", hosts=(host,), monitoring=monitoring)
    return Environment(cluster, dry_run=True)


def _ctx(env: Any, kind: str, facts: Any = None, **params: Any) -> Any:
    from kafkaops.engine.context import RunContext
    from kafkaops.engine.run_facts import in_memory

    records: list[tuple[str, dict[str, Any]]] = []
    ctx = RunContext(run_id="r1", operator="o", reason="x", task=None, target="kafka9001", params=params, env=env,
                     kind=kind, facts=facts or in_memory(),
                     record=lambda event, **fields: records.append((event, fields)))
    return ctx, records


def _step(kind: str, **params: Any) -> Any:
    import kafkaops.steps  # noqa: F401  (registers the kinds)
    from kafkaops.engine.step import require_kind

    entry = require_kind(kind, kind)
    bound = {p.name: p.default for p in entry.params} | params
    return entry.create(bound)


def test_without_gates_both_steps_are_noops_that_say_why() -> None:
    from kafkaops.engine.step import Noop

    for env, why in ((_env(None, ("x", "1", 1, None)), "no monitoring.prometheus URL"), (_env("http://127.0.0.1:9"),
                                                                                          "no monitoring.gates")):
        for kind in ("metrics.baseline", "metrics.gate"):
            step = _step(kind)
            ctx, _ = _ctx(env, kind)
            decision = step.plan(step.observe(ctx))
            assert isinstance(decision, Noop) and why in decision.reason, (kind, decision)


def test_the_baseline_is_kept_with_the_run_and_the_gate_compares_against_it(prometheus: str, tmp_path: Path) -> None:
    """The gate's query answers 12 now; the baseline stored by the run says 10: 12 > 1.1 x 10 holds the roll.
    A resume (a new process, the same facts file) compares against the stored 10, not against a new one."""
    from kafkaops.engine.run_facts import RunFacts
    from kafkaops.engine.step import Action, Noop
    from kafkaops.steps.metrics import BASELINE_FACT

    facts = RunFacts(tmp_path / "facts.json")
    env = _env(prometheus, ("p99", "vector(10)", None, 1.1))
    baseline = _step("metrics.baseline")
    ctx, records = _ctx(env, "metrics.baseline", facts)
    action = baseline.plan(baseline.observe(ctx))
    assert isinstance(action, Action) and action.impact == "read-only"
    assert action.commands == (f"Prometheus {prometheus}: p99 = vector(10)",)
    baseline.apply(ctx, action)
    assert facts.get(BASELINE_FACT)["values"] == {"p99": 10.0}
    assert records == [("metric_baseline", {"values": {"p99": 10.0}})]
    again = baseline.plan(baseline.observe(ctx))
    assert isinstance(again, Noop) and "already taken" in again.reason and "p99 10" in again.reason

    later = _env(prometheus, ("p99", "vector(12)", None, 1.1))  # the same gate, the figure has grown
    gate = _step("metrics.gate", timeout=1.0, interval=0.5)
    ctx, records = _ctx(later, "metrics.gate", RunFacts(tmp_path / "facts.json"))
    obs = gate.observe(ctx)
    assert isinstance(gate.plan(obs), Action)
    assert obs.summary == "metric gates exceeded: p99 12 > 11 (1.1 x baseline 10)"  # shown in the plan
    assert records[0][0] == "metric_gate" and records[0][1]["held"] is False
    assert records[0][1]["readings"][0] == {"name": "p99", "value": 12.0, "baseline": 10.0, "limit": 11.0,
                                                 "ok": False, "detail": "1.1 x baseline 10", "series": "",
                                                 "query": "vector(12)"}


def test_an_exceeded_gate_waits_then_stops_naming_value_baseline_and_limit(prometheus: str) -> None:
    from kafkaops.engine.step import Action
    from kafkaops.errors import WaitTimeout

    env = _env(prometheus, ("isr", "vector(2)", 0, None), ("p99", "vector(1)", 5, None))
    gate = _step("metrics.gate", timeout=1.0, interval=0.5)
    ctx, records = _ctx(env, "metrics.gate")
    decision = gate.plan(gate.observe(ctx))
    assert isinstance(decision, Action)
    with pytest.raises(WaitTimeout) as exc:
        gate.apply(ctx, decision)
    assert "isr 2 > 0 (max 0)" in exc.value.message and "p99" not in exc.value.message  # only what holds it
    assert "nothing of this host was stopped" in (exc.value.hint or "")
    assert records[-1][0] == "metric_gate" and records[-1][1]["held"] is False


@pytest.mark.parametrize("query", ['eventbus_absent_metric_xyz{cluster="{cluster.name}"}', "vector(0/0)"])
def test_a_gate_with_no_data_holds_the_roll_naming_its_query(prometheus: str, query: str) -> None:
    """No series (the exporter is down, the query matches nothing) or NaN: the gate is blind and must hold,
    never pass — however generous its ceiling — and the stop names the gate and the query that saw nothing."""
    from kafkaops.engine.step import Action
    from kafkaops.errors import WaitTimeout

    env = _env(prometheus, ("produce_p99_ms", query, 1e9, None))
    gate = _step("metrics.gate", timeout=1.0, interval=0.5)
    ctx, records = _ctx(env, "metrics.gate")
    obs = gate.observe(ctx)
    rendered = query.replace("{cluster.name}", "c1")
    assert obs.summary.startswith(f"metric gates exceeded: produce_p99_ms no data: query {rendered} returned no "
                                  "series")
    decision = gate.plan(obs)
    assert isinstance(decision, Action)
    with pytest.raises(WaitTimeout) as exc:
        gate.apply(ctx, decision)
    assert f"produce_p99_ms no data: query {rendered} returned no series" in exc.value.message
    assert "is the exporter up?" in exc.value.message
    assert records[-1][0] == "metric_gate" and records[-1][1]["held"] is False
    assert records[-1][1]["readings"][0]["value"] is None and records[-1][1]["readings"][0]["query"] == rendered


def test_gates_within_their_ceilings_let_the_roll_go_on(prometheus: str) -> None:
    env = _env(prometheus, ("isr", "vector(0)", 0, None), ("p99", "vector(9)", None, 1.5))
    gate = _step("metrics.gate", timeout=1.0)
    ctx, records = _ctx(env, "metrics.gate")
    ctx.projected.set("metrics/baseline", {"p99": 8.0, "isr": 0.0}, "metrics.baseline")  # a dry-run's projection
    obs = gate.observe(ctx)
    assert obs.summary == "metric gates hold: isr 0 ≤ 0 (max 0); p99 9 ≤ 12 (1.5 x baseline 8)"
    gate.apply(ctx, gate.plan(obs))  # holds now: no error
    assert records[-1][0] == "metric_gate" and records[-1][1]["held"] is True


def test_a_dry_run_takes_the_baseline_once_for_the_whole_roll(prometheus: str) -> None:
    """In a plan, the first target's step takes the run's baseline; the later targets' take none."""
    from kafkaops.engine.step import Action, Noop

    env = _env(prometheus, ("p99", "vector(10)", None, 1.5))
    baseline = _step("metrics.baseline")
    ctx, _ = _ctx(env, "metrics.baseline")
    obs = baseline.observe(ctx)
    action = baseline.plan(obs)
    assert isinstance(action, Action)
    for key, value in baseline.effects(obs, action).items():
        ctx.projected.set(key, value, "kafka9001 step 4 (metrics.baseline)")
    later = baseline.plan(baseline.observe(ctx))
    assert isinstance(later, Noop) and "already taken" in later.reason and "p99 10" in later.reason


def test_a_refused_gate_query_names_the_gate(prometheus: str) -> None:
    env = _env(prometheus, ("broken_gate", "sum(", 1, None))
    gate = _step("metrics.gate")
    ctx, _ = _ctx(env, "metrics.gate")
    with pytest.raises(ConfigError, match="refused gate broken_gate"):
        gate.observe(ctx)


# --- where the values are shown -----------------------------------------------------------------------------

_HELD = {"event": "metric_gate", "target": "kafka1002", "held": False, "t": 1.0,
         "readings": [{"name": "p99", "value": 45.0, "baseline": 10.0, "limit": 15.0, "ok": False,
                       "detail": "1.5 x baseline 10", "series": ""}]}


def test_runs_show_names_each_hosts_last_gate_verdict_with_its_values() -> None:
    from kafkaops.cli.runs import _gate_lines

    passed = {**_HELD, "target": "kafka1001", "held": True,
              "readings": [{**_HELD["readings"][0], "value": 9.0, "ok": True}]}
    lines = _gate_lines({"events": [passed, {"event": "reboot_sent", "target": "kafka1001"}, _HELD]})
    assert lines == ["metric gates before kafka1001: held: p99 9 ≤ 15 (1.5 x baseline 10)",
                     "metric gates before kafka1002: held the roll: p99 45 > 15 (1.5 x baseline 10)"]


def test_the_chart_annotates_a_gate_with_value_and_limit() -> None:
    from kafkaops.health.timeline_chart import gate_label

    assert gate_label(_HELD) == "p99 45>15"
    assert gate_label({"readings": [{"name": "isr", "value": None, "limit": 0, "ok": False}]}) == "isr no data"


# --- the lab's gate queries: empty exactly when the exporter is gone -------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _inventories() -> list[Path]:
    return sorted([*(REPO / "inventory").glob("*.yaml"), *(REPO / "bench").glob("*.yaml")])


def test_no_inventory_gate_manufactures_data() -> None:
    """``... or vector(0)`` answers 0 when the exporter is dead: a blind gate that passes. No inventory the
    project ships (the labs', the bench's, the examples) may write one; the gate must see nothing then."""
    import yaml

    from kafkaops.inventory import load_inventory

    checked = []
    for path in _inventories():
        if not (yaml.safe_load(path.read_text()) or {}).get("monitoring"):
            continue
        monitoring = load_inventory(path).monitoring
        for gate in monitoring.gates if monitoring else ():
            checked.append(f"{path.name}: {gate.name}")
            assert "vector(" not in gate.query.replace(" ", ""), (
                f"{path.name}: gate {gate.name} makes up a value when its series are missing: {gate.query}")
    assert len(checked) >= 8, checked  # every lab inventory has gates: the loop did look at them


class _Exporter:
    """The lab eventbus's ``/metrics`` (its own :class:`~kafkaops_lab.eventbus.Metrics`) on 127.0.0.1."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from kafkaops_lab.eventbus import Metrics

        self.metrics = Metrics()
        metrics = self.metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = metrics.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def scraping(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, _Exporter]]:
    """Debian's Prometheus scraping an idle lab eventbus exporter every second, as the lab's Prometheus does
    (its targets labelled ``cluster: lab``); its URL and the exporter."""
    import requests

    exporter = _Exporter()
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.path.exists(binary):
        pytest.fail("prometheus not found: run scripts/install.sh (Debian's prometheus)", pytrace=False)
    d = tmp_path_factory.mktemp("prometheus-scraping")
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: eventbus, static_configs: [{{targets: ['127.0.0.1:{exporter.port}'], "
        "labels: {cluster: lab}}]}\n")
    port = _free_port()
    log = (d / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # ready, and two scrapes in: rate() over them answers
            try:
                if Prometheus(url, timeout=1).query(
                        "count_over_time(eventbus_http_request_duration_seconds_count[30s]) >= 2"):
                    break
            except (UnreachableError, requests.RequestException):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not scrape: {(d / 'prometheus.log').read_text()[-2000:]}",
                            pytrace=False)
            time.sleep(0.2)
        yield url, exporter
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()
        exporter.server.shutdown()
        exporter.server.server_close()


def _lab_gate(name: str) -> Any:
    from kafkaops.inventory import load_inventory

    monitoring = load_inventory(REPO / "inventory" / "lab.yaml").monitoring
    assert monitoring is not None
    return next(g for g in monitoring.gates if g.name == name)


def test_the_labs_p99_gate_answers_0_when_idle_and_nothing_when_the_exporter_is_gone(
        scraping: tuple[str, _Exporter]) -> None:
    """An idle eventbus still exports its histogram (every count 0): histogram_quantile is NaN then, and the
    query answers 0 from the request count's rate — a real series, so the gate can pass. A cluster whose
    exporter Prometheus does not have (dead, never scraped) gets no series at all: the gate holds."""
    url, _ = scraping
    gate = _lab_gate("produce_p99_ms")
    p = Prometheus(url, timeout=5)
    idle = p.query(gate.promql("lab"))
    assert [s.value for s in idle] == [0.0]
    value, _ = worst([(s.labels, s.value) for s in idle])
    assert judge(gate.name, value, None, high=gate.max, ratio=None).ok

    gone = p.query(gate.promql("lab-without-exporter"))
    assert gone == []  # an old `... or vector(0)` answered [0.0] here: a dead exporter read as an idle one
    value, _ = worst([(s.labels, s.value) for s in gone])
    blind = judge(gate.name, value, None, high=gate.max, ratio=None, query=gate.promql("lab-without-exporter"))
    assert not blind.ok and blind.value is None


def test_the_labs_p99_gate_measures_the_traffic(scraping: tuple[str, _Exporter]) -> None:
    """With requests, the same query is the p99 in ms (each request here takes 0.2 s: the 0.25 s bucket)."""
    url, exporter = scraping
    gate = _lab_gate("produce_p99_ms")
    p = Prometheus(url, timeout=5)
    for _ in range(200):
        exporter.metrics.observe("POST", "/v1/events", 201, 0.2, accepted=1)
    deadline = time.monotonic() + 20
    values: list[float] = []
    while time.monotonic() < deadline:
        values = [s.value for s in p.query(gate.promql("lab"))]
        if values and values[0] > 0:
            break
        time.sleep(0.3)
    assert len(values) == 1 and 100 < values[0] <= 250, values


def test_a_plan_asks_prometheus_once_and_a_run_every_time(prometheus: str) -> None:
    """A plan is made of one instant (Environment.one_instant): the gates of every host and the baseline
    are judged on one answer of Prometheus; a run's gate asks afresh at every poll."""
    from kafkaops.steps.metrics import evaluate

    env = _env(prometheus, ("isr", "vector(0)", 0, None), ("p99", "vector(9)", None, 1.5))
    asked: list[str] = []
    real = env.prometheus.query
    env.prometheus.query = lambda promql, **kw: (asked.append(promql), real(promql, **kw))[1]
    with env.one_instant():
        first, again = evaluate(env), evaluate(env)
    assert first == again and first["p99"][0] == 9.0 and len(asked) == 2
    evaluate(env)
    evaluate(env)
    assert len(asked) == 6
