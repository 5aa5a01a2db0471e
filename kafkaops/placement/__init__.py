"""Replica placement for clusters stretched over data centres (seed 004, the stretch-cluster evaluation).

A Kafka cluster stretched over two DCs survives the loss of a broker, or of a whole DC, only if its
replicas are laid out for it, and Kafka's own rack-aware assignment (KIP-36) does not lay them out so:
it alternates racks (``[A1, B1, A2, B2]``), which puts a partition's first two candidate leaders in
different DCs. The layout the seed asks for, per partition:

* at least two replicas in every DC, so consumers survive one broker failure without reading across DCs
  (follower fetching serves them from a replica in their own DC);
* the first two replicas in the same DC, so producers survive one failure without switching DC;
* each DC's replicas grouped (``[A1, A2, B1, B2]``), so after a whole-DC loss the next leader is known;
* preferred leaders spread evenly over brokers *and* DCs.

Pure logic only (no client library): :mod:`~kafkaops.placement.layout` checks an assignment against
those rules and analyses the loss of a DC, :mod:`~kafkaops.placement.planner` computes the target
assignment with the fewest replica moves, :mod:`~kafkaops.placement.estimate` the data to move, its time
at a throttle and the cross-DC traffic of a layout, :mod:`~kafkaops.placement.lifecycle` the demotion,
decommission and addition of one broker (issue 46). The procedure that applies a plan is the runbook
``placement-apply`` (:mod:`kafkaops.steps.placement`), which drives Kafka's own
``kafka-reassign-partitions`` (:mod:`kafkaops.systems.reassign`).
"""
