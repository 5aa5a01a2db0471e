"""Issue 42.3: the kill sweep's point 20 stored one value twice, at adjacent offsets, right after a preferred
election moved a partition's leader: librdkafka's idempotent producer with several requests in flight bumps
its epoch on the new leader's OUT_OF_ORDER_SEQUENCE_NUMBER and resends a record the old leader had already
written (librdkafka issue 4953; kafkaops/systems/producing.py has the whole account). Every producer of
kafkaops and of its lab that must write a record once is built from one setting with one request in flight."""

from __future__ import annotations

import re
from pathlib import Path

from kafkaops.model import KafkaEndpoint
from kafkaops.systems.producing import WRITE_ONCE
from kafkaops_lab.load import producer_config

PACKAGE = Path(__file__).resolve().parents[2] / "kafkaops"


def test_the_load_generator_has_one_request_in_flight_idempotent_and_acked_by_the_isr() -> None:
    conf = producer_config(KafkaEndpoint("127.0.10.1:9092"))
    assert conf["max.in.flight.requests.per.connection"] == 1
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"
    assert conf["bootstrap.servers"] == "127.0.10.1:9092"


def test_no_producer_sets_idempotence_on_its_own() -> None:
    """A producer that spells ``enable.idempotence`` itself would get librdkafka's default of five requests in
    flight back: every one takes :data:`WRITE_ONCE` instead."""
    spelled = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if p.name != "producing.py" and re.search(r"""["']enable\.idempotence["']""", p.read_text())]
    assert not spelled, f"producers configured outside kafkaops/systems/producing.py: {spelled}"
    assert WRITE_ONCE == {"acks": "all", "enable.idempotence": True, "max.in.flight.requests.per.connection": 1}
