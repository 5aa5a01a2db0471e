"""Is a cluster ready to be stretched over DCs? The seed 004 facts beyond the replica layout, judged.

Pure: the caller reads the brokers' ``broker.rack`` and ``replica.selector.class`` (one DescribeConfigs
per broker, :data:`READINESS_SETTINGS`) and passes them in; nothing here asks a system. The layout
itself (replicas per DC, what a DC loss would do) is :mod:`kafkaops.placement.layout`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkaops.model import Cluster

#: The class a broker needs for consumers to fetch from a replica in their own DC (KIP-392).
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
#: The broker configs :func:`stretch_readiness` judges.
READINESS_SETTINGS = ("broker.rack", "replica.selector.class")


def stretch_readiness(cluster: Cluster, settings: Mapping[int, Mapping[str, str]]) -> list[dict[str, Any]]:
    """The stretch-readiness facts of the seed, each ``{fact, ok, detail}`` (``ok`` None: not visible from
    the cluster).

    Args:
        cluster: The inventory's cluster (its ZooKeeper ensemble, each broker's DC).
        settings: ``{broker id: {config name: value}}`` of :data:`READINESS_SETTINGS`, as the brokers report
            them; a broker or a config missing counts as unset.
    """
    facts: list[dict[str, Any]] = []
    if cluster.zookeeper:
        servers = [s for s in cluster.zookeeper.split("/", 1)[0].split(",") if s]
        facts.append({"fact": "quorum over 3 DCs", "ok": len(servers) >= 3,
                      "detail": f"ZooKeeper ensemble of {len(servers)} server(s) ({', '.join(servers)}): a stretched "
                                "cluster needs its quorum over at least 3 DCs (the seed's tie-breaker in a third DC)"
                                + ("" if len(servers) >= 3 else "; one or two servers cannot span 3 DCs")})
    else:
        facts.append({"fact": "quorum over 3 DCs", "ok": False,
                      "detail": "KRaft controller quorum: not checked here (put one controller in a third DC)"})
    brokers = [h.broker_id for h in cluster.hosts]
    no_selector = [b for b in brokers if settings.get(b, {}).get("replica.selector.class") != RACK_AWARE_SELECTOR]
    facts.append({"fact": "follower fetching", "ok": not no_selector,
                  "detail": "replica.selector.class = RackAwareReplicaSelector on every broker" if not no_selector
                  else f"brokers without RackAwareReplicaSelector: {', '.join(map(str, no_selector))} (their "
                       "consumers read from the leader, across DCs)"})
    wrong_rack = [f"{h.broker_id} ({settings.get(h.broker_id, {}).get('broker.rack', 'unset')} != {h.dc})"
                  for h in cluster.hosts if settings.get(h.broker_id, {}).get("broker.rack") != h.dc]
    facts.append({"fact": "broker.rack = DC", "ok": not wrong_rack,
                  "detail": "every broker's broker.rack is its inventory DC" if not wrong_rack
                  else "broker.rack differs from the inventory's dc: " + ", ".join(wrong_rack)})
    facts.append({"fact": "client.rack", "ok": None,
                  "detail": "consumers must set client.rack=<their DC> to fetch from a local replica (not visible "
                            "from the cluster)"})
    return facts
