"""The lab's monitoring is real and wired (issue 31, the lab half): Prometheus scrapes every broker's JMX
exporter and every eventbus, its alert rules fire into Alertmanager with the host in their labels, the
receiver records who would have been paged, and an Alertmanager silence on a host keeps its alerts from
paging. These are the pieces the product's ``alerts.silence``/``alerts.gate``/``metrics.gate`` talk to.

Witnesses are the programs themselves: Prometheus' query API, Alertmanager's ``/api/v2`` and the
receiver's file — never what kafkaops says. Waits are bounded (a noisy machine), never timed assertions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from harness import wait_for

from kafkaops.model import Cluster
from kafkaops_lab import dirs, monitoring
from kafkaops_lab.host import LabHost
from kafkaops_lab.spec import LabSpec

pytestmark = pytest.mark.lab

@pytest.fixture(scope="module")
def spec(lab_cluster: Cluster) -> LabSpec:
    return LabSpec.load(dirs.lab_dir(lab_cluster.name))


def _alerts(spec: LabSpec, alertname: str, instance: str, *, silenced: bool = False) -> list[dict[str, Any]]:
    return [a for a in monitoring.alerts(spec, silenced=silenced)
            if a["labels"].get("alertname") == alertname and a["labels"].get("instance") == instance]


def _in_sync(spec: LabSpec) -> bool:
    """Every broker answers its scrape and reports no under-replicated partition."""
    urp = monitoring.query(spec, "kafka_server_replicamanager_underreplicatedpartitions")
    up = monitoring.query(spec, 'up{job="kafka"}')
    return (len(urp) == len(spec.brokers) and all(r["value"][1] == "0" for r in urp)
            and all(r["value"][1] == "1" for r in up))


@pytest.fixture
def restored(spec: LabSpec, lab_cluster: Cluster) -> Iterator[None]:
    """After the test: every broker running, in sync, leading its preferred partitions; no knob left set."""
    yield
    from kafkaops.systems.kafka import KafkaAdmin

    for h in spec.hosts:
        host = LabHost(spec, h)
        host.set_knob("eventbus_produce_fails", None)
        if not host.is_up():
            host.power_on()
        host.start("kafka")
    wait_for("every broker back in sync (Prometheus' view)", lambda: _in_sync(spec), 180)
    KafkaAdmin(lab_cluster.kafka).elect_preferred_leaders()


def test_prometheus_scrapes_every_broker_and_eventbus(spec: LabSpec) -> None:
    want = {(f"{h.fqdn}:{monitoring.JMX_PORT}", "kafka") for h in spec.hosts}
    want |= {(f"{h.fqdn}:{monitoring.EVENTBUS_METRICS_PORT}", "eventbus") for h in spec.hosts if h.eventbus}

    def all_up() -> set[tuple[str, str]] | None:
        up = {(r["metric"]["instance"], r["metric"]["job"]) for r in monitoring.query(spec, "up == 1")}
        return up if up >= want else None

    assert wait_for("every target up", all_up, 60) == want  # nothing else is scraped either
    # The instance label names the host as an inventory does: a host's matcher selects its targets only.
    h = spec.brokers[0]
    mine = monitoring.query(spec, f"up{{{monitoring.host_matcher(h.fqdn)}}}")
    assert {r["metric"]["host"] for r in mine} == {h.name} and len(mine) == (2 if h.eventbus else 1)


def test_kafka_and_eventbus_metrics_have_a_value_per_host(spec: LabSpec) -> None:
    partitions = wait_for("PartitionCount of every broker", lambda: {
        r["metric"]["host"]: float(r["value"][1])
        for r in monitoring.query(spec, "kafka_server_replicamanager_partitioncount")} or None, 60)
    assert set(partitions) == {h.name for h in spec.brokers}
    assert all(n > 0 for n in partitions.values()), partitions
    p99 = monitoring.query(spec, 'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}')
    assert {r["metric"]["host"] for r in p99} == {h.name for h in spec.brokers}

    served = [h for h in spec.hosts if h.eventbus]
    for h in served:  # one accepted event each, straight to the host's service port
        r = requests.post(f"http://{h.address}:{h.http_port}/v1/events", json={"meta": {"stream": "test.event"}},
                          timeout=30)
        assert r.status_code == 201, r.text
    query = 'sum by (host) (eventbus_http_requests_total{path="/v1/events",code="201"})'
    counted = wait_for("each eventbus's 201 counted", lambda: {
        r["metric"]["host"] for r in monitoring.query(spec, query) if float(r["value"][1]) >= 1}
        >= {h.name for h in served} or None, 60)
    assert counted


def test_broker_down_pages_and_a_silence_of_its_host_does_not(spec: LabSpec, restored: None) -> None:
    base = Path(spec.lab_dir)
    target = spec.brokers[-1]
    others = [h for h in spec.brokers if h is not target]
    host = LabHost(spec, target)
    instance = f"{target.fqdn}:{monitoring.JMX_PORT}"
    wait_for("the cluster in sync before the test", lambda: _in_sync(spec), 120)

    # 1. Unsilenced: stopping the broker fires KafkaBrokerDown with its host's labels, and it pages.
    since = time.time()
    assert host.stop("kafka")
    firing = wait_for(f"KafkaBrokerDown for {instance} in Alertmanager",
                      lambda: _alerts(spec, "KafkaBrokerDown", instance))
    assert firing[0]["labels"]["host"] == target.name and firing[0]["labels"]["cluster"] == spec.cluster
    assert firing[0]["status"]["state"] == "active"
    wait_for(f"the receiver paged for KafkaBrokerDown on {target.name}", lambda: monitoring.paged(
        base, instance_prefix=f"{target.fqdn}:", alertname="KafkaBrokerDown", since=since))
    host.start("kafka")
    wait_for("the broker back in sync", lambda: _in_sync(spec), 180)
    wait_for(f"KafkaBrokerDown for {instance} resolved",
             lambda: not _alerts(spec, "KafkaBrokerDown", instance) or None, 60)

    # 2. Silenced through Alertmanager's API, on the host's matcher (what the product's silence will be).
    now = time.time()
    silence = {
        "matchers": [{"name": "instance", "value": monitoring.host_regex(target.fqdn), "isRegex": True,
                      "isEqual": True}],
        "startsAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 5)),
        "endsAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 600)),
        "createdBy": "test_monitoring_lab", "comment": f"maintenance of {target.name} (lab test)",
    }
    url = monitoring.alertmanager_url(spec)
    created = requests.post(f"{url}/api/v2/silences", json=silence, timeout=10, auth=monitoring.auth(spec))
    assert created.status_code == 200, created.text
    silence_id = created.json()["silenceID"]
    try:
        listed = requests.get(f"{url}/api/v2/silences", timeout=10, auth=monitoring.auth(spec)).json()
        assert [s["status"]["state"] for s in listed if s["id"] == silence_id] == ["active"]

        since = time.time()
        assert host.stop("kafka")
        suppressed = wait_for(f"KafkaBrokerDown for {instance} firing but silenced", lambda: [
            a for a in _alerts(spec, "KafkaBrokerDown", instance, silenced=True)
            if a["status"]["state"] == "suppressed"])
        assert suppressed[0]["status"]["silencedBy"] == [silence_id]
        # The witness that the pager still works: an alert induced only now, on another host (its eventbus
        # answering 5xx), pages. Alertmanager had the silenced alert first, so by the time the later one
        # paged it had its chance to page for the silenced one too; it did not.
        witness = next(h for h in others if h.eventbus)
        LabHost(spec, witness).set_knob("eventbus_produce_fails", 1)
        witness_instance = f"{witness.fqdn}:{monitoring.EVENTBUS_METRICS_PORT}"

        def witness_paged() -> list[dict[str, Any]]:
            r = requests.post(f"http://{witness.address}:{witness.http_port}/v1/events",
                              json={"meta": {"stream": "test.event"}}, timeout=30)
            assert r.status_code == 500, r.text  # Kafka "fails" it: the service's own 5xx
            return monitoring.paged(base, instance_prefix=f"{witness.fqdn}:", alertname="EventbusErrorRatio",
                                    since=since)

        paged = wait_for(f"EventbusErrorRatio on {witness.name} paged", witness_paged)
        assert paged[0]["labels"]["instance"] == witness_instance and paged[0]["labels"]["host"] == witness.name
        assert monitoring.paged(base, instance_prefix=f"{target.fqdn}:", since=since) == []
        LabHost(spec, witness).set_knob("eventbus_produce_fails", None)
    finally:
        try:  # the silence ends after the host is back (ending it first pages for the broker still down)
            host.start("kafka")
            wait_for(f"KafkaBrokerDown for {instance} gone", lambda: not [
                a for a in _alerts(spec, "KafkaBrokerDown", instance, silenced=True)] or None, 60)
        finally:
            requests.delete(f"{url}/api/v2/silence/{silence_id}", timeout=10, auth=monitoring.auth(spec))
    assert monitoring.paged(base, instance_prefix=f"{target.fqdn}:", since=since) == []
