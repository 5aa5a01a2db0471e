"""Replication throttles: the configs that slow a copy between brokers, set, awaited and always cleared.

Shared by the step kinds that copy replicas — ``placement.reassign`` (a reassignment's batches) and
``replace.throttle`` / ``replace.catch_up`` (a replaced broker catching up on an empty disk). Kafka throttles
with four dynamic configs: a rate per broker (``leader/follower.replication.throttled.rate``) and, per topic,
which replicas the rate applies to (``leader/follower.replication.throttled.replicas``: ``partition:broker``
pairs). Kafka applies them only to replicas **out of the ISR**, so a throttle set on a partition whose
replicas are in sync costs nothing until one of them falls behind. Set through the AdminClient, where each
broker's answer shows what it applies; deleted at the end of every copy, because a throttle left behind
slows the next recovery of the cluster for ever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkaops.engine.context import RunContext
from kafkaops.placement.layout import TopicPartition
from kafkaops.stepkit.common import environment, names, wait

#: The dynamic configs a throttle consists of: set before a batch, deleted at the end.
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

def throttle_configs(current: Mapping[TopicPartition, Sequence[int]],
                     target: Mapping[TopicPartition, Sequence[int]], rate: float
                     ) -> tuple[dict[int, dict[str, str | None]], dict[str, dict[str, str | None]]]:
    """The broker and topic configs that throttle moving ``current`` to ``target`` (what Kafka's own tool
    sets with ``--throttle``): the rate on every broker involved, the current replicas throttled as
    leaders (they send), the added ones as followers (they receive)."""
    brokers: set[int] = set()
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for (topic, p), replicas in sorted(target.items()):
        now = list(current.get((topic, p), ()))
        new = [b for b in replicas if b not in now]
        if not new:
            continue
        brokers.update(now)
        brokers.update(new)
        leaders.setdefault(topic, []).extend(f"{p}:{b}" for b in now)
        followers.setdefault(topic, []).extend(f"{p}:{b}" for b in new)
    value = str(int(rate))
    broker_cfg: dict[int, dict[str, str | None]] = {b: dict.fromkeys(RATE_CONFIGS, value) for b in sorted(brokers)}
    topic_cfg: dict[str, dict[str, str | None]] = {
        t: {REPLICA_CONFIGS[0]: ",".join(leaders[t]), REPLICA_CONFIGS[1]: ",".join(followers[t])} for t in leaders}
    return broker_cfg, topic_cfg


def throttles_left(ctx: RunContext, topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """Every throttle config set on the cluster's brokers and on ``topics`` (non-empty entries only)."""
    env = environment(ctx)
    found = env.kafka.dynamic_configs(brokers=[h.broker_id for h in env.cluster.hosts], topics=topics,
                                      names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
    return {k: v for k, v in found.items() if v}


def clear_throttles(ctx: RunContext, topics: Sequence[str]) -> list[str]:
    """Delete every throttle config from the brokers and ``topics``; returns what was cleared."""
    env = environment(ctx)
    left = throttles_left(ctx, topics)
    if not left:
        return []
    env.kafka.alter_configs(
        brokers={int(k.split(":", 1)[1]): dict.fromkeys(v, None) for k, v in left.items() if k.startswith("broker:")},
        topics={k: dict.fromkeys(v, None) for k, v in left.items() if not k.startswith("broker:")})

    def gone() -> tuple[bool, str]:  # each broker applies the deletion in its own time, as it did the setting
        still = throttles_left(ctx, topics)
        return not still, f"still set on {names(sorted(still))}" if still else "cleared"

    wait(ctx, gone, what="the throttles cleared on every broker", timeout=30, interval=0.5, fast=0.1)
    return sorted(left)


def wait_throttled(ctx: RunContext, brokers: Mapping[int, Mapping[str, str | None]],
                    topics: Mapping[str, Mapping[str, str | None]]) -> None:
    """Submit a batch only once every broker applies its throttle: a dynamic config reaches the brokers
    asynchronously, and a fetch that starts first copies unthrottled (measured on the lab: a first batch
    of 500 KB done in a second at a 10 KB/s throttle). A broker answers DescribeConfigs for itself, so its
    answer is what it applies."""
    env = environment(ctx)

    def applied() -> tuple[bool, str]:
        found = env.kafka.dynamic_configs(brokers=list(brokers), topics=list(topics),
                                          names=(*RATE_CONFIGS, *REPLICA_CONFIGS))
        missing = [f"broker {b}" for b, cfg in brokers.items() if any(found.get(f"broker:{b}", {}).get(n) != v
                                                                       for n, v in cfg.items())]
        missing += [t for t, cfg in topics.items() if any(found.get(t, {}).get(n) != v for n, v in cfg.items())]
        return not missing, f"throttle not yet applied on {names(missing)}" if missing else "applied"

    wait(ctx, applied, what="the throttle applied by every broker", timeout=30, interval=0.5, fast=0.1)
