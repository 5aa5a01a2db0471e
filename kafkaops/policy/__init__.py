"""Policy: pure decisions over observed state — no I/O, no client library.

A run observes (an adapter in :mod:`kafkaops.systems` reads the cluster, a parser in
:mod:`kafkaops.facts` reads what a host printed) and then decides: may this broker stop, is the KRaft
quorum safe to lose one more voter, which order and batches a roll takes, where a consumer group resumes
on the other site, whether a bench is far below its baseline. Those decisions live here, as functions of
plain data (:mod:`kafkaops.model` snapshots, parsed facts) that never talk to anything: they are tested
from hand-built inputs and behave identically in ``--dry-run`` and for real, so a plan shows exactly the
judgement the live run will make.

A module here imports only the foundation (``errors``, ``model``), :mod:`kafkaops.facts` and other
policy modules. Nothing is re-exported from this package: import the module that holds the decision.
"""
