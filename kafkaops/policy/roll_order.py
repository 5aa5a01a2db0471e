"""The order of a roll: who goes last, so that the roll costs one election, not one per host.

Pure: the caller observes the cluster (the controller's broker id, the KRaft quorum's leader) and
passes what it found; nothing here asks a system. The one controller-last implementation of kafkaops.

* **ZooKeeper mode** (:func:`controller_last`): the active controller goes last. Every bounce of the
  controller forces a controller election, and during a roll each broker's restart then also makes the
  new controller re-send metadata and move leaders while it is still catching up: a roll that bounced
  the controller early caused an election per broker bounce and an outage (WMF T399005; Yelp
  kafka-utils #150 saw the same). Last means exactly one election, when every other broker is healthy.
* **KRaft** (:func:`kraft_order`): the controller nodes first, the quorum's leader last among them (one
  leader election for the whole roll), then the brokers in inventory order (on KRaft no broker is the
  controller).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkaops.model import Host


def controller_last(hosts: Sequence[Host], controller: int | None) -> tuple[list[Host], list[str]]:
    """``hosts`` in inventory order with the one whose broker id is ``controller`` moved last, and the
    plan's note (none when the controller is unknown or not among ``hosts``)."""
    last = [h for h in hosts if h.broker_id == controller]
    if not last:
        return list(hosts), []
    return [h for h in hosts if h.broker_id != controller] + last, [
        f"controller {last[0].name} goes last (one controller election for the whole roll)"]


def has_controller_nodes(hosts: Sequence[Host]) -> bool:
    """Whether a KRaft roll over ``hosts`` restarts controller nodes (only then is the quorum asked)."""
    return any(h.role == "controller" for h in hosts)


def kraft_order(hosts: Sequence[Host], leader: int | None) -> tuple[list[Host], list[str]]:
    """A KRaft roll over ``hosts``: controller nodes first, the quorum's ``leader`` (its node id, None:
    the quorum has no leader) last among them; then the brokers in inventory order. And the plan's notes."""
    controllers = [h for h in hosts if h.role == "controller"]
    brokers = [h for h in hosts if h.role != "controller"]
    if not controllers:
        return brokers, []
    last = [h for h in controllers if h.broker_id == leader]
    ordered = [h for h in controllers if h.broker_id != leader] + last
    notes = [f"controller nodes first, the active controller {last[0].name} last (one quorum leader election "
             "for the whole roll)" if last else "the quorum has no leader now: the quorum gate will refuse"]
    if brokers:
        notes.append("then the brokers, in inventory order, once the quorum is whole")
    return ordered + brokers, notes
