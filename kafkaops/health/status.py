"""The status of a cluster, as ``kafkaops status`` shows it: "can I touch this cluster right now?".

Gathered from every system at once — Kafka's metadata and topic configs, the pool states in etcd, on
KRaft the metadata quorum over SSH — and judged here: ``healthy`` is the promise that every gate of a
maintenance would pass. The CLI renders it (:mod:`kafkaops.cli.status`); the lab tests and benches read
it to wait for a cluster to settle. Of a multi-site inventory (:func:`collect_sites`): each site's
status, which site each switched service is active in, and MirrorMaker's lag per direction.

It answers with what it has when part of the cluster does not: right after a controller dies, metadata
answers while DescribeConfigs times out; etcd may be down while Kafka is up.

A cluster being migrated to KRaft (``kafka.migration: to-kraft`` beside ``kafka.zookeeper``) is a
ZooKeeper cluster to the inventory until the operator edits it. Once its controllers run without
ZooKeeper (:func:`judge_migration`), the quorum is the cluster's controller: status shows it and judges it
as on any KRaft cluster, and says the inventory still needs its edit — an inventory left naming ZooKeeper
otherwise hid the quorum from status for good.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from kafkaops.errors import KafkaOpsError, UnreachableError
from kafkaops.policy.availability import broker_dc_map, cluster_health
from kafkaops.policy.snapshot_scan import partition_name
from kafkaops.systems.kafka import KafkaAdmin

Data = dict[str, Any]


def status(cluster: Any) -> Data:
    """What ``kafkaops status CLUSTER`` shows: :func:`collect_sites` of a multi-site inventory, else
    :func:`collect`. ``data["healthy"]`` is the verdict (the command exits 9 without it)."""
    return collect_sites(cluster) if cluster.multi_site else collect(cluster)


def _pool_states(cluster: Any) -> tuple[dict[str, Any], str]:
    """{host fqdn: PoolState} from etcd, or ({}, why not): status still answers when etcd does not."""
    from kafkaops.systems.conftool import read_pools  # on the question's thread, overlapping Kafka's wait

    pools: dict[str, Any] = {}
    try:
        for tags in {tuple(sorted(h.conftool_tags.items())) for h in cluster.hosts if h.conftool_tags}:
            for state in read_pools(cluster.conftool_config, dict(tags)):
                pools[state.host] = state
    except KafkaOpsError as exc:
        return {}, str(exc)
    return pools, ""


def _snapshot(admin: Any) -> tuple[Any, str]:
    """The cluster snapshot, and why topic configs are missing from it ("" when they are not).

    Right after a controller dies, DescribeConfigs can time out for the seconds the election takes
    while metadata answers: that is exactly when an operator runs status, so it shows brokers, URP and
    leaders anyway and says min ISR is unknown (counted as 1) instead of failing.
    """

    snap = admin.snapshot(with_configs=False)
    try:
        return admin.with_configs(snap), ""
    except UnreachableError as exc:
        return snap, str(exc)


#: How long ``status`` waits for each question besides Kafka's, counted from the moment it was asked (all
#: are asked at once, before Kafka's metadata). Each is a little above the adapter's own timeouts (etcd 3 s
#: per pool group; Alertmanager 5 s per request; the quorum and the controllers' phases over SSH, a JVM
#: tool each), so the adapter's own words win when it gives up; the bound is for what its timeouts do not
#: cover — a server that accepts and trickles, a hung SSH session. Kafka's two requests are bounded by
#: :meth:`KafkaAdmin.look` (one 5 s try each), on the main thread.
BOUNDS: dict[str, float] = {"pools": 4.0, "alerts": 6.0, "quorum": 15.0, "migration": 20.0}


def ask(name: str, question: Callable[[Any], Any], cluster: Any) -> Future[Any]:
    """``question(cluster)`` on a daemon thread of its own, started now; its answer as a future.

    Not a ``ThreadPoolExecutor``: its workers are joined when the interpreter exits, so a question that
    hangs past its bound would still hold ``kafkaops status`` until it returned. A daemon thread is left
    behind instead: the operator gets the verdict, with that question said to have timed out."""
    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(question(cluster))
        except BaseException as exc:  # handed to the waiter, who re-raises it: a bug stays a bug
            future.set_exception(exc)

    threading.Thread(target=run, name=f"status-{name}", daemon=True).start()
    return future


def answer(future: Future[Any], deadline: float) -> tuple[Any, bool]:
    """(the question's answer, False), or (None, True) when it has not answered by ``deadline``
    (:func:`time.monotonic`); an exception the question raised is raised here."""
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic())), False
    except TimeoutError:
        return None, True


def _timed_out(cluster: Any, name: str, bound: float) -> Any:
    """What a question that did not answer within ``bound`` seconds shows: its usual "unknown" answer,
    with an error saying it was not waited for, so the verdict and every renderer treat it as unread."""
    why = f"did not answer within {bound:g}s (status does not wait longer)"
    if name == "pools":
        return {}, f"etcd (conftool) {why}"
    if name == "alerts":
        return {"alertmanager": cluster.monitoring.alertmanager, "error": f"Alertmanager {why}", "firing": [],
                "silenced": [], "silences": []}
    if name == "quorum":
        return {"error": f"the metadata quorum {why}", "leader": None, "voters": [], "observers": []}
    seen = judge_migration(cluster, {}, {h.name: why for h in cluster.controllers})
    seen["note"] = f"the controllers' phases are unknown: they {why}"
    return seen


def collect(cluster: Any) -> dict[str, Any]:
    """Everything ``status`` shows, as plain data (also the ``--output json`` document).

    Every question is asked at once: etcd's pools, Alertmanager's alerts, the KRaft quorum or the
    migration's controllers, each on a thread of its own, while the main thread asks Kafka (librdkafka
    releases the GIL while it waits). An operator runs this before and after every step, so its latency
    is the slowest question's, not their sum; and each is bounded (:data:`BOUNDS`): one that has not
    answered in time is shown as unknown and named in ``timed_out``, never waited for — a slow
    Alertmanager must not hold "can I touch this cluster?".
    """
    # First Kafka's client, which starts connecting at once (librdkafka's own threads: TLS, SASL), the
    # longest of the questions; the others are asked while it connects. One 5 s try: an operator asking
    # "can I touch this cluster?" wants "Kafka did not answer" in seconds, not after a run's retries.
    admin = KafkaAdmin.look(cluster, timeout=5.0)
    asked_at = time.monotonic()
    questions: dict[str, Callable[[Any], Any]] = {}
    if cluster.conftool_config:
        questions["pools"] = _pool_states
    if cluster.kraft and cluster.controllers:
        questions["quorum"] = quorum_state
    if _migrating(cluster):
        questions["migration"] = migration_state
    if cluster.monitoring and cluster.monitoring.alertmanager:
        questions["alerts"] = alerts_state
    futures = {name: ask(name, question, cluster) for name, question in questions.items()}
    snap, min_isr_error = _snapshot(admin)
    answers: dict[str, Any] = {}
    timed_out: list[str] = []
    for name, future in futures.items():
        answers[name], late = answer(future, asked_at + BOUNDS[name])
        if late:
            timed_out.append(name)
            answers[name] = _timed_out(cluster, name, BOUNDS[name])
    pools, pool_error = answers.get("pools", ({}, ""))
    migration = answers.get("migration")
    quorum = answers["quorum"] if "quorum" in answers else migration.pop("quorum_state", None) if migration else None
    alerts = answers.get("alerts")
    # From the finalizing roll on, the KRaft quorum is the controller, whatever the inventory still says.
    kraft = cluster.kraft or bool(migration and migration["quorum"])


    health = cluster_health(snap, broker_dc_map(cluster))
    brokers = []
    for h in cluster.hosts:
        brokers.append({
            "host": h.name, "broker_id": h.broker_id, "dc": h.dc, "rack": h.rack,
            "registered": h.broker_id in snap.brokers,
            # On KRaft a broker is never the controller (the metadata answer names one at random).
            "controller": snap.controller == h.broker_id and not kraft,
            "leaders": health.leaders_by_broker.get(h.broker_id, 0),
            "preferred_ratio": round(health.preferred_ratio_by_broker.get(h.broker_id, 1.0), 4),
            "pooled": pools[h.fqdn].pooled if h.fqdn in pools else (
                "unknown" if pool_error or not cluster.conftool_config else "absent"),
            "weight": pools[h.fqdn].weight if h.fqdn in pools else None,
        })
    quorum_ok = quorum is None or (not quorum["error"] and quorum["leader"] is not None
                                   and all(v["caught_up"] for v in quorum["voters"]))
    return {
        # "healthy" is a promise that every gate would pass: not without knowing min ISR (nor, on KRaft,
        # without a quorum whose voters are all caught up: the controller gate would refuse).
        "cluster": cluster.name, "healthy": health.healthy and not min_isr_error and quorum_ok,
        "controller": quorum["leader"] if quorum else snap.controller,
        "taken_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap.taken_at)),
        "partitions": health.partition_count,
        "offline": [partition_name(p) for p in health.offline],
        "under_replicated": [partition_name(p) for p in health.under_replicated],
        "under_min_isr": [partition_name(p) for p in health.under_min_isr],
        "at_min_isr": [partition_name(p) for p in health.at_min_isr],
        "preferred_leader_ratio": round(health.preferred_leader_ratio, 4),
        "leaders_by_dc": dict(health.leaders_by_dc), "brokers": brokers, "pool_weight": cluster.pool_weight,
        "unregistered_replica_brokers": list(health.unregistered_replica_brokers),
        "pool_error": pool_error,
        "min_isr_error": min_isr_error,
        **({"quorum": quorum} if quorum is not None else {}),
        **({"migration": migration} if migration is not None else {}),
        **({"alerts": alerts} if alerts is not None else {}),
        **({"timed_out": timed_out} if timed_out else {}),
    }


def _migrating(cluster: Any) -> bool:
    """The inventory says the cluster is being migrated to KRaft, and names the quorum it moves to."""
    return bool(cluster.migrating and cluster.controllers and not cluster.kraft)


def controller_phases(cluster: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Each controller node's configured phase (``kafka_configured``: ``zk``, ``migration``, ``kraft``) over
    SSH, all at once, and ({name: why}) those that did not say: status answers without them.

    Read from the nodes, never from ZooKeeper: once the controllers run without it, the operations guide's
    last step stops ZooKeeper, and its ``/migration`` says nothing of the finalization anyway.
    """
    from concurrent.futures import ThreadPoolExecutor

    from kafkaops.environment import Environment  # SSH and the rest: only a migrating cluster's status needs it
    from kafkaops.health.nodes import configured_phase

    def read(host: Any) -> str:
        env = Environment(cluster, dry_run=True, kafka_timeout=5.0)
        try:
            return configured_phase(env, host)
        finally:
            env.close()

    phases: dict[str, str] = {}
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=len(cluster.controllers)) as pool:
        asked = {h.name: pool.submit(read, h) for h in cluster.controllers}
        for name, future in asked.items():
            try:
                phases[name] = future.result()
            except KafkaOpsError as exc:
                errors[name] = exc.message
    return phases, errors


def judge_migration(cluster: Any, phases: Mapping[str, str], errors: Mapping[str, str]) -> Data:
    """How far a migrating cluster's controllers are, for status (pure: the caller reads ``phases``).

    Judged as :func:`kafkaops.policy.migration.phase` judges ``finalizing``/``finalized``, from the
    controllers alone: ``finalized`` when every controller of the inventory says ``kraft`` (one that did
    not answer may still be in migration mode), ``finalizing`` when some do, else ``None`` (an earlier
    phase: status shows the ZooKeeper cluster it still is; ``kafkaops migrate-to-kraft CLUSTER --dry-run``
    tells the phase). From ``finalizing`` on the quorum is the cluster's controller: ``quorum`` says to show
    and judge it. A finalized cluster whose inventory still names ZooKeeper gets ``inventory_edit``: one line
    naming the file and the keys to remove — until then kafkaops sees a ZooKeeper cluster: its run lock stays
    in ZooKeeper (which the guide's last step stops), and only what reads the migration's phase
    (``migrate-to-kraft``, ``rolling-upgrade``, this status) knows better. The edit moves the lock (to
    conftool's etcd, or a lock file), hence "while no run holds it".

    Args:
        cluster: The inventory's cluster (``kafka.migration: to-kraft``, ``controllers:``).
        phases: {controller name: configured phase} of the controllers that answered.
        errors: {controller name: why it did not answer}.

    Returns:
        ``phase``, ``quorum``, ``controllers`` (the phases), ``errors``, ``inventory_edit`` and ``note``
        (one line each, "" when there is nothing to say).
    """
    names = [h.name for h in cluster.controllers]
    without_zk = [n for n in names if phases.get(n) == "kraft"]
    phase = "finalized" if without_zk and len(without_zk) == len(names) else "finalizing" if without_zk else None
    edit = note = ""
    if phase == "finalized" and cluster.zookeeper:
        edit = (f"the migration to KRaft is finalized (every controller runs without ZooKeeper) but "
                f"{cluster.source or 'the inventory'} still names ZooKeeper (kafka.zookeeper: {cluster.zookeeper}): "
                "remove kafka.zookeeper and kafka.migration from it (keep controllers:) while no run holds the "
                "cluster's lock: until then kafkaops keeps its run lock in ZooKeeper and sees a ZooKeeper cluster")
    elif phase == "finalizing":
        others = [f"{n} ({errors[n]})" if n in errors else f"{n} ({phases.get(n, '?')})"
                  for n in names if n not in without_zk]
        note = (f"finalizing: {', '.join(without_zk)} run(s) without ZooKeeper, not yet: {', '.join(others)}; "
                f"past the point of no return, finish it with `kafkaops migrate-to-kraft {cluster.name}`")
    return {"phase": phase, "quorum": phase is not None, "controllers": dict(phases), "errors": dict(errors),
            "inventory_edit": edit, "note": note}


def migration_state(cluster: Any) -> Data:
    """:func:`judge_migration` of the controllers as they are now, with the quorum's state
    (``quorum_state``, :func:`quorum_state`) when it is the cluster's controller."""
    seen = judge_migration(cluster, *controller_phases(cluster))
    if seen["quorum"]:
        seen["quorum_state"] = quorum_state(cluster)
    return seen


def alerts_state(cluster: Any) -> Data | None:
    """The cluster's alerts and silences in its Alertmanager (inventory ``monitoring:``), or None without one.

    ``firing``: the alerts of the cluster's scope that fire unsilenced — what ``alerts.gate`` would hold a
    run on; ``silenced``: those a silence holds; ``silences``: the live silences of the cluster's hosts (their
    matchers are a host's ``monitoring.host_matchers``) or of its scope labels. Shown, not judged: the
    verdict stays the cluster's own (Kafka's health), an alert elsewhere in the scope does not make
    Kafka unhealthy.
    """

    monitoring = cluster.monitoring
    if monitoring is None or not monitoring.alertmanager:
        return None
    # Imported here, on the question's own thread: the HTTP client (urllib, http.client, ssl) is a fifth of
    # status's start-up, and loading it here overlaps the main thread's wait on Kafka.
    from kafkaops.systems.alertmanager import Alertmanager, Matcher

    # The adapter itself, as Environment.alertmanager builds it (5 s a request, writes refused): the
    # environment module imports every adapter (SSH, ZooKeeper, ...), which status would pay at start-up.
    manager = Alertmanager(monitoring.alertmanager, timeout=5.0, dry_run=True, auth=monitoring.auth)
    scope = monitoring.scope_labels(cluster.name)
    hosts = {frozenset(Matcher(label, value, is_regex=True)
                       for label, value in monitoring.host_regexes(h, cluster.name)): h.name
             for h in (*cluster.hosts, *cluster.controllers)}
    try:
        alerts = manager.alerts(scope)
        silences = [s for s in manager.silences() if s.live]
    except KafkaOpsError as exc:
        return {"alertmanager": monitoring.alertmanager, "error": exc.message, "firing": [], "silenced": [],
                "silences": []}
    finally:
        manager.close()
    scoped = {Matcher(label, value) for label, value in scope}
    ours = []
    for silence in silences:
        host = hosts.get(frozenset(silence.matchers))
        if host is not None or (scoped and scoped <= set(silence.matchers)):
            ours.append({**silence.to_dict(), "host": host})
    return {
        "alertmanager": monitoring.alertmanager, "error": "",
        "firing": [a.to_dict() for a in alerts if a.state == "active"],
        "silenced": [a.to_dict() for a in alerts if a.state != "active"],
        "silences": ours,
    }


def quorum_state(cluster: Any) -> dict[str, Any]:
    """The KRaft metadata quorum as ``kafka-metadata-quorum describe --status`` and ``--replication`` tell
    it (over SSH on a controller node), each voter judged caught up or not as the roll's gate judges it."""
    from kafkaops.environment import Environment  # SSH: only a KRaft cluster's status needs it
    from kafkaops.policy.quorum import judge

    env = Environment(cluster, dry_run=True, kafka_timeout=5.0)
    try:
        quorum = env.quorum()
        status = quorum.status()
        replicas = quorum.replication()
    except KafkaOpsError as exc:
        return {"error": exc.message, "leader": None, "voters": [], "observers": []}
    finally:
        env.close()
    view = judge(replicas)
    names = {h.broker_id: h.name for h in (*cluster.controllers, *cluster.hosts)}
    rows = {r.node_id: r for r in replicas}
    return {
        "error": "", "asked": quorum.asked, "leader": status.leader_id, "epoch": status.leader_epoch,
        "high_watermark": status.high_watermark, "max_follower_lag": status.max_follower_lag,
        "voters": [{"node_id": v.node_id, "host": names.get(v.node_id, "?"), "leader": v.leader, "lag": v.lag,
                    "behind_ms": v.behind_ms, "caught_up": v.caught_up,
                    "log_end_offset": rows[v.node_id].log_end_offset,
                    "last_fetch_ms": rows[v.node_id].last_fetch_ms,
                    "last_caught_up_ms": rows[v.node_id].last_caught_up_ms} for v in view.voters],
        "observers": [{"node_id": o.node_id, "host": names.get(o.node_id, "?"), "lag": o.lag} for o in view.observers],
    }


def collect_sites(sites: Any) -> Data:
    """The status of a multi-site inventory. Healthy means a switchover could start either way: every site
    healthy, every service active in exactly one site, and MirrorMaker's lag readable in every direction."""
    from concurrent.futures import ThreadPoolExecutor

    from kafkaops.systems.mirror import MirrorLag

    def site(dc: str) -> Data:
        try:
            return collect(sites.sites[dc])
        except KafkaOpsError as exc:
            return {"cluster": sites.sites[dc].name, "healthy": False, "error": str(exc)}

    def flow(src: str, dst: str) -> Data:
        try:
            lags = MirrorLag(sites, src, dst, timeout=5.0).partitions()
        except KafkaOpsError as exc:
            return {"lag": None, "partitions": 0, "worst": [], "error": str(exc)}
        behind = sorted((p for p in lags if p.lag), key=lambda p: -p.lag)
        return {"lag": sum(p.lag for p in lags), "partitions": len(lags),
                "worst": [f"{p.topic}-{p.partition} ({p.lag})" for p in behind[:3]], "error": ""}

    from kafkaops.systems.conftool import read_discovery

    flows = [(a, b) for a in sites.sites for b in sites.sites if a != b]
    # Every site and every flow at once: with a site down, each waits out its own 5 s, not the sum of them.
    with ThreadPoolExecutor(max_workers=len(sites.sites) + len(flows)) as pool:
        asked = {dc: pool.submit(site, dc) for dc in sites.sites}
        lagging = {f"{a}->{b}": pool.submit(flow, a, b) for a, b in flows}
        services = {}
        for name, svc in sites.switched.items():
            try:
                records, error = read_discovery(sites.conftool_config, svc.discovery), ""
            except KafkaOpsError as exc:
                records, error = {}, str(exc)
            services[name] = {"record": svc.discovery, "records": records, "error": error,
                              "active": [dc for dc, pooled in records.items() if pooled],
                              "consumer_groups": list(svc.consumer_groups)}
        clusters = {dc: f.result() for dc, f in asked.items()}
        mirror = {name: f.result() for name, f in lagging.items()}
    healthy = (all(c.get("healthy") for c in clusters.values())
               and all(len(s["active"]) == 1 and not s["error"] for s in services.values())
               and all(not m["error"] for m in mirror.values()))
    return {"sites": sites.name, "healthy": healthy, "clusters": clusters, "services": services, "mirror": mirror}
