"""The producer settings every record kafkaops writes (a failed-events replay) and every record its lab
writes (the load generator, the eventbus, test data) are written with: acknowledged by every in-sync
replica, and written once.

``enable.idempotence`` alone does not give "once" with librdkafka during a leader move (issue 42.3, the kill
sweep's point 20: one value stored at two adjacent offsets of ``lab.load-4`` right after a preferred
election, the new leader logging ``OutOfOrderSequenceException ... 1099 (incoming seq. number), 1097
(current end sequence number)``). With several requests in flight per connection, the first failing on the
leader move (not leader, no acknowledgement) makes the next one arrive at the new leader out of sequence;
librdkafka answers ``OUT_OF_ORDER_SEQUENCE_NUMBER`` by bumping the producer epoch and resending every
unacknowledged message from sequence 0, and a message the old leader had written (and replicated) before
the move, whose acknowledgement was lost, is written again under the new epoch: the broker cannot tell it
from a new one. librdkafka issue 4953 ("Sporadic message duplication during leader transition with
idempotent producer"), its fix proposed in librdkafka pull request 4972 and not in the librdkafka 2.16.0
confluent-kafka ships here. The Java client retries without an epoch bump.

One request in flight per connection makes that sequence impossible: no request can arrive at the new
leader ahead of one that failed. It costs throughput per broker connection, which neither a replay nor the
lab's loads (hundreds of records a second) come near.
"""

from __future__ import annotations

#: Settings of a producer whose records must be written exactly once (merged into its own).
WRITE_ONCE: dict[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 1,
}
