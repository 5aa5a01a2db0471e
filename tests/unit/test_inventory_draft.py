"""``kafkaops inventory init``'s draft (issue 45): what the cluster said filled in, what it cannot know left as
TODO comments that ``inventory check`` names one by one — never a placeholder that could reach a shell."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from kafkaops.inventory import REQUIRED_COMMANDS, check_inventory, load_inventory
from kafkaops.inventory_draft import SeenBroker, SeenCluster, draft, seen_from

SEEN = SeenCluster((SeenBroker(1002, "kafka1002.eqiad.wmnet", 9092, "b"),
                    SeenBroker(1001, "kafka1001.eqiad.wmnet", 9092, None)),
                   controller=1002, zookeeper="conf1001.eqiad.wmnet:2181/kafka/main-eqiad")


def test_the_draft_holds_what_kafka_said_and_check_names_every_todo(tmp_path: Path) -> None:
    text = draft("main-eqiad", SEEN, asked="kafka1001.eqiad.wmnet:9092", when="on 2026-11-28")
    data = yaml.safe_load(text)
    assert data["kafka"] == {"bootstrap_servers": "kafka1001.eqiad.wmnet:9092,kafka1002.eqiad.wmnet:9092",
                             "zookeeper": "conf1001.eqiad.wmnet:2181/kafka/main-eqiad"}
    assert data["hosts"]["kafka1002"] == {"fqdn": "kafka1002.eqiad.wmnet", "address": "kafka1002.eqiad.wmnet",
                                          "broker_id": 1002, "rack": "b"}
    assert "# broker 1002, the controller when asked" in text and "TODO" in text
    assert "commands" not in data  # a placeholder command could reach a shell: left out, named by check
    path = tmp_path / "main-eqiad.yaml"
    path.write_text(text)
    errors = sorted(str(e).split(": ", 1)[1] for e in check_inventory(path))
    assert errors == sorted([f"commands: missing command template(s): {', '.join(REQUIRED_COMMANDS)}",
                             "hosts.kafka1001.dc: missing required key", "hosts.kafka1001.rack: missing required key",
                             "hosts.kafka1002.dc: missing required key"]), errors


def test_filled_in_it_loads(tmp_path: Path) -> None:
    data = yaml.safe_load(draft("main-eqiad", SEEN, asked="x"))
    data["commands"] = {c: "true" for c in REQUIRED_COMMANDS}
    for host in data["hosts"].values():
        host.update(dc="eqiad", rack=host.get("rack", "a"))
    path = tmp_path / "main-eqiad.yaml"
    path.write_text(yaml.safe_dump(data))
    cluster = load_inventory(path)
    assert [h.broker_id for h in cluster.hosts] == [1001, 1002] and cluster.zookeeper == SEEN.zookeeper


def test_a_kraft_cluster_says_where_its_quorum_is_and_security_is_copied_as_written() -> None:
    seen = SeenCluster(SEEN.brokers, controller=None, quorum="3001@ctrl3001:9093")
    security = {"protocol": "SASL_SSL", "ca_file": "/etc/ssl/ca.pem",
                "sasl": {"mechanism": "SCRAM-SHA-512", "username": "kafkaops", "password_file": "/etc/k/pw"}}
    data = yaml.safe_load(draft("main-eqiad", seen, security=security, asked="x"))
    assert "zookeeper" not in data["kafka"] and data["kafka"]["security"] == security
    assert "3001@ctrl3001:9093" in draft("main-eqiad", seen, asked="x")


def test_seen_from_an_admin_clients_answers() -> None:
    metadata = SimpleNamespace(controller_id=1001, brokers={
        1001: SimpleNamespace(id=1001, host="127.0.10.1", port=9092),
        1002: SimpleNamespace(id=1002, host="127.0.10.2", port=9092)})
    settings = {1001: {"broker.rack": "a", "zookeeper.connect": "127.0.10.10:2181"}, 1002: {"broker.rack": "b"}}
    seen = seen_from(metadata, settings)
    assert seen.controller == 1001 and seen.zookeeper == "127.0.10.10:2181" and seen.quorum is None
    assert {(b.broker_id, b.rack) for b in seen.brokers} == {(1001, "a"), (1002, "b")}
