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
