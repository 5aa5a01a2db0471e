"""``kafkaops service bench`` (issue 13 point 7): the seed's ``ab`` throughput test, from recorded output.

Fixtures under ``tests/fixtures/ab/`` are real ``ab`` 2.3 reports: a clean bench of a lab host, a bench
whose every event was refused (400: no ``meta.stream``), one with non-2xx and varying-length answers, and
``ab`` giving up on a refused connection.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkaops.cli.common import bar
from kafkaops.errors import SafetyRefusal
from kafkaops.facts.ab import ab_command, bench_event, bench_event_body, parse_ab
from kafkaops.facts.errors import MalformedAnswer
from kafkaops.inventory import load_inventory
from kafkaops.policy.throughput import Comparison

REPO = Path(__file__).resolve().parents[2]
AB = REPO / "tests" / "fixtures" / "ab"


def fixture(name: str) -> str:
    return (AB / name).read_text()


def test_a_clean_bench_of_a_lab_host() -> None:
    r = parse_ab(fixture("lab-host-200-c4.txt"))
    assert (r.complete, r.failed, r.non_2xx, r.errors, r.ok_2xx) == (200, 0, 0, 0, 200)
    assert r.requests_per_second == 204.15 and r.concurrency == 4 and r.seconds == 0.980
    assert (r.mean_ms, r.mean_across_ms) == (19.593, 4.898)
    assert r.percentiles_ms == {50: 15, 66: 20, 75: 21, 80: 23, 90: 29, 95: 38, 98: 48, 99: 54, 100: 99}


def test_refused_events_are_non_2xx_not_throughput() -> None:
    r = parse_ab(fixture("lab-host-invalid-event-non2xx.txt"))
    assert (r.complete, r.failed, r.non_2xx, r.ok_2xx) == (20, 0, 20, 0)


def test_length_mismatches_are_shown_apart_from_errors() -> None:
    r = parse_ab(fixture("length-and-non2xx.txt"))
    assert r.failed == 33 and r.failed_by == {"connect": 0, "receive": 0, "length": 33, "exceptions": 0}
    assert (r.errors, r.non_2xx, r.ok_2xx) == (0, 7, 43)
    assert r.to_dict()["percentiles_ms"]["100"] == r.percentiles_ms[100]


def test_ab_giving_up_says_why() -> None:
    refused = r"ab did not report a result: apr_socket_recv: Connection refused \(111\)"
    with pytest.raises(MalformedAnswer, match=refused):
        parse_ab(fixture("connection-refused.txt"))
    with pytest.raises(MalformedAnswer, match="no output"):
        parse_ab("", command="ab http://127.0.10.1:8085/v1/events")


def test_a_closed_port_is_no_throughput() -> None:
    r = parse_ab(fixture("refused-with-r.txt"))  # ab -r: every request "completes" as a failure
    assert r.requests_per_second == 20408.16 and (r.complete, r.errors, r.ok_2xx) == (5, 9, 0)
    assert not r.answered
    assert parse_ab(fixture("lab-host-invalid-event-non2xx.txt")).answered  # refused events: it answered


def test_the_event_is_one_an_eventbus_accepts() -> None:
    event = bench_event(now=0, event_id="e1")
    assert event["meta"] == {"stream": "test.event", "topic": "test.event", "id": "e1", "dt": "1970-01-01T00:00:00Z",
                             "domain": "kafkaops.bench"}
    assert json.loads(bench_event_body(event)) == event


def test_the_command_is_the_seeds() -> None:
    argv = ab_command("http://eventbus.svc.codfw.wmnet:8085/v1/events", "/tmp/e.json", requests=10000, concurrency=16)
    # the seed: ab -n 10000 -c 16 -T 'application/json' -p ./test-event.json http://eventbus.svc...:8085/v1/events
    assert argv == ["ab", "-r", "-n", "10000", "-c", "16", "-s", "30", "-T", "application/json", "-p", "/tmp/e.json",
                    "http://eventbus.svc.codfw.wmnet:8085/v1/events"]


def test_the_comparison_with_the_seeds_baseline() -> None:
    half = Comparison(2212.515, 4425.03, "main-codfw, 2016")
    assert half.ratio == pytest.approx(0.5)
    assert half.verdict() == "50% of the baseline 4425.03 req/s (main-codfw, 2016): below it, find out why"
    assert Comparison(4425.03, 4425.03).verdict() == "100% of the baseline 4425.03 req/s"
    assert Comparison(10.0, None).to_dict()["ratio"] is None


def test_bars_scale_and_never_vanish() -> None:
    assert bar(40, 40, 40) == "█" * 40
    assert bar(10, 40, 40) == "█" * 10
    assert bar(0.01, 40, 40) == "▏"
    assert bar(0, 40) == ""


class _Pool:
    def __init__(self, pooled: str) -> None:
        self.pooled = pooled


class _Env:
    def __init__(self, pooled: str) -> None:
        self.conftool = self
        self._pooled = pooled

    def get(self, fqdn: str, tags: Any) -> _Pool:
        return _Pool(self._pooled)

    def close(self) -> None:
        return None


def test_production_refuses_a_pooled_host_and_the_vip_without_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkaops.cli import service
    from kafkaops.environment import Environment

    cluster = load_inventory(REPO / "inventory" / "eqiad-main.example.yaml")
    assert cluster.environment == "production"
    host = cluster.hosts[0]
    targets = [service.BenchTarget(host.name, "http://x:8085/v1/events", "host", host)]
    monkeypatch.setattr(Environment, "of", classmethod(lambda cls, c, **kw: _Env("yes")))
    with pytest.raises(SafetyRefusal, match=r"kafka1001 of production cluster main-eqiad is in service \(pooled=yes\)"):
        service._refuse_production(cluster, targets, 10000)
    for out_of_pool in ("no", "inactive"):  # depooled: no --yes needed
        monkeypatch.setattr(Environment, "of", classmethod(lambda cls, c, state=out_of_pool, **kw: _Env(state)))
        service._refuse_production(cluster, targets, 10000)
    untagged = dataclasses.replace(host, conftool_tags={})
    with pytest.raises(SafetyRefusal, match=r"in service \(no conftool tags: pool state unknown\)"):
        service._refuse_production(cluster, [service.BenchTarget(host.name, "http://x", "host", untagged)], 10)
    vip = [service.BenchTarget("VIP eventbus.svc.eqiad.wmnet", "http://x/v1/events", "vip")]
    with pytest.raises(SafetyRefusal, match="serves live traffic") as exc:
        service._refuse_production(cluster, vip, 10000)
    assert exc.value.exit_code == 6 and "--yes" in str(exc.value)


def test_the_lab_needs_no_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkaops.cli import service
    from kafkaops.environment import Environment

    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    assert cluster.environment == "lab"

    def never(*a: Any, **kw: Any) -> Any:
        raise AssertionError("the lab's pool state was asked")

    monkeypatch.setattr(Environment, "of", classmethod(never))
    service._refuse_production(cluster, [service.BenchTarget("VIP", "http://x/v1/events", "vip")], 10)


def test_ab_missing_names_the_package(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "KAFKAOPS_INVENTORY": str(REPO / "inventory" / "lab.yaml")}
    r = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", "service", "bench", "eventbus", "lab"],
                       capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: ab (ApacheBench) is not installed on this machine (apt-get install apache2-utils)"]
