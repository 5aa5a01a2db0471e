"""kafka-reassign-partitions output, recorded from Kafka 3.9.1 on the stretch lab, parsed strictly."""

from __future__ import annotations

import pytest

from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.reassign import (
    Reassigning,
    assignment_json,
    parse_assignment_json,
    parse_execute,
    parse_generate,
    parse_list,
    parse_verify,
)

LOG4J = ("log4j:WARN No appenders could be found for logger (org.apache.kafka.clients.admin.AdminClientConfig).\n"
         "log4j:WARN Please initialize the log4j system properly.\n")

GENERATE = """Current partition replica assignment
{"version":1,"partitions":[{"topic":"lab.load","partition":0,"replicas":[2001,1002,1001],"log_dirs":["any","any","any"]},{"topic":"lab.load","partition":1,"replicas":[1001,2001,2002],"log_dirs":["any","any","any"]}]}

Proposed partition reassignment configuration
{"version":1,"partitions":[{"topic":"lab.load","partition":0,"replicas":[2002,1001,1002],"log_dirs":["any","any","any"]},{"topic":"lab.load","partition":1,"replicas":[1002,2002,2001],"log_dirs":["any","any","any"]}]}
"""

EXECUTE = """Current partition replica assignment

{"version":1,"partitions":[{"topic":"probe.x","partition":1,"replicas":[1001,2001],"log_dirs":["any","any"]}]}

Save this to use as the --reassignment-json-file option during rollback
Successfully started partition reassignment for probe.x-1
"""

LIST_ACTIVE = """Current partition reassignments:
probe.x-1: replicas: 1001,1002,2001,2002. adding: 1002,2002.
lab.load-3: replicas: 1001,2001,2002. adding: 2002. removing: 1002.
"""


def test_generate_gives_current_and_proposed() -> None:
    current, proposed = parse_generate(LOG4J + GENERATE)
    assert current == {("lab.load", 0): (2001, 1002, 1001), ("lab.load", 1): (1001, 2001, 2002)}
    assert proposed[("lab.load", 1)] == (1002, 2002, 2001)


def test_list_in_progress_and_none() -> None:
    active = parse_list(LIST_ACTIVE)
    assert active[("probe.x", 1)] == Reassigning("probe.x", 1, (1001, 1002, 2001, 2002), (1002, 2002), ())
    assert active[("lab.load", 3)].removing == (1002,)
    assert parse_list("No partition reassignments found.\n") == {}


def test_verify_states() -> None:
    out = ("Status of partition reassignment:\nReassignment of partition probe.x-0 is completed.\n"
           "Reassignment of partition probe.x-1 is still in progress.\n"
           "There is no active reassignment of partition probe.x-2, but replica set is 1001,2001 rather than "
           "1001,2001,2002.\n")
    assert parse_verify(out) == {("probe.x", 0): "completed", ("probe.x", 1): "in progress",
                                 ("probe.x", 2): "not active"}


def test_execute_must_say_it_started() -> None:
    parse_execute(EXECUTE)
    with pytest.raises(MalformedAnswer, match="Successfully started"):
        parse_execute("Error reassigning partition(s):\nprobe.x-1: org.apache.kafka...\n")


@pytest.mark.parametrize("output", [
    "", "Current partition reassignments:\nprobe.x-1: replicas: 1;id.\n",
    "Current partition reassignments:\n\x1b[31mprobe.x-1: replicas: 1001.\n", "Something else\n"])
def test_list_refuses_other_shapes(output: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_list(output)


@pytest.mark.parametrize("text", ['{"version":2,"partitions":[]}', "[]", "not json",
                                  '{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
                                  '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[true]}]}'])
def test_assignment_documents_are_checked(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_assignment_json(text)


def test_assignment_json_round_trips_sorted() -> None:
    doc = assignment_json({("b", 1): (2, 1), ("a", 0): (1, 2)})
    assert doc.index('"a"') < doc.index('"b"')
    assert parse_assignment_json(doc) == {("a", 0): (1, 2), ("b", 1): (2, 1)}
