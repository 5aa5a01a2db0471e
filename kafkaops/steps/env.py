"""Before the first change: every system the run will touch answers, and they agree on the brokers.

A run that depools a host and stops its broker, then finds at step 5 that ZooKeeper's address is wrong,
has made an outage it cannot finish. So each target starts by asking, with a short timeout, every system
its runbook declares — Kafka, ZooKeeper (when the cluster has one), etcd through conftool, SSH to every
target of the run and the deploy host, the Spark master when the post-check scans — and the plan shows
these checks. One that does not answer stops the run before any change (exit 4).

Facts are cross-checked between sources: the brokers registered in ZooKeeper (under the configured
chroot) must be the brokers Kafka's metadata reports, and both must be brokers of the inventory. A wrong
chroot reads an empty ``/brokers/ids`` and would otherwise "confirm" a stop it never saw; a wrong
cluster or a stale inventory shows as brokers nobody expects. Either refuses with both lists (exit 3).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import ConfigError, HostKeyError, KafkaOpsError, UnreachableError
from kafkaops.stepkit.common import environment, target_host
from kafkaops.systems.tcp import refusal

SYSTEMS = ("kafka", "zookeeper", "conftool", "ssh", "deploy_host", "spark")
#: Checked unless a runbook says otherwise: what a broker maintenance touches.
DEFAULT_SYSTEMS = ("kafka", "zookeeper", "conftool", "ssh", "spark")


def _spark(master: str, timeout: float) -> str:
    """A ``spark://host:port`` master must accept a connection; ``local[...]`` runs in this process."""
    if not master.startswith("spark://"):
        return f"{master}: runs here"
    first = master[len("spark://"):].split(",")[0]
    url = urlparse(f"//{first}")
    if not url.hostname or not url.port:
        raise ConfigError(f"spark master {master!r} has no host:port", hint="write spark://HOST:PORT")
    why = refusal(url.hostname, url.port, timeout)
    if why is None:
        return f"{master}: accepts connections"
    raise UnreachableError(f"Spark master {master} does not accept connections: {why}",
                           hint="start it, or pass --spark-master local[2] (or --no-scan)")


class Reachable(StepBase):
    """Check every system the run will touch answers, and that ZooKeeper, Kafka and the inventory agree."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        # A cluster-wide procedure (placement apply) has the cluster as its one target: then every host.
        host = None if ctx.target == getattr(env.cluster, "name", None) else target_host(ctx)
        wanted = [str(s) for s in self.params["systems"]]
        timeout = float(self.params["timeout"])
        asks: list[tuple[str, Callable[[], str]]] = []
        seen: dict[str, list[int]] = {}
        if "kafka" in wanted:
            kafka_admin = env.kafka

            def kafka() -> str:
                seen["kafka"] = sorted(kafka_admin.metadata(attempts=1).brokers)
                return f"brokers {seen['kafka']}"
            asks.append(("kafka", kafka))
        if "zookeeper" in wanted and env.cluster.zookeeper:
            def zookeeper() -> str:
                with env.zookeeper() as zk:
                    assert zk is not None
                    seen["zookeeper"] = zk.registered_brokers()
                return f"/brokers/ids {seen['zookeeper']}"
            asks.append(("zookeeper", zookeeper))
        if "conftool" in wanted and env.cluster.conftool_config and host is not None and host.conftool_tags:
            pooled_host = host

            def conftool() -> str:
                state = env.conftool.get(pooled_host.fqdn, pooled_host.conftool_tags)
                return f"{pooled_host.fqdn} pooled={state.pooled}"
            asks.append(("conftool", conftool))
        if "ssh" in wanted:
            for other in (env.cluster.hosts if host is None else [env.host(n) for n in ctx.targets or (ctx.target,)]):
                asks.append((f"ssh {other.name}", functools.partial(_ssh, env.ssh(other))))
        if "deploy_host" in wanted and env.cluster.deploy_host is not None:
            deployer = env.cluster.deploy_host
            asks.append((f"ssh {deployer.name}", functools.partial(_ssh, env.ssh(deployer))))
        if "spark" in wanted and self.params.get("scan", True):
            master = str(self.params["spark_master"])
            asks.append(("spark", lambda: _spark(master, timeout)))
        checks = _ask_all(asks)

        inventory = sorted(h.broker_id for h in env.cluster.hosts)
        mismatch = ""
        # During a migration to KRaft a broker in KRaft mode is in the metadata only, never in /brokers/ids:
        # then only a ZooKeeper registration the metadata does not know is a mismatch.
        differ = (set(seen.get("zookeeper", [])) - set(seen.get("kafka", [])) if env.cluster.migrating
                  else seen.get("kafka") != seen.get("zookeeper"))
        if "kafka" in seen and "zookeeper" in seen and differ:
            mismatch = (f"ZooKeeper {env.cluster.zookeeper} lists brokers {seen['zookeeper']} under /brokers/ids "
                        f"but Kafka's metadata reports {seen['kafka']}")
        else:
            strangers = sorted((set(seen.get("kafka", [])) | set(seen.get("zookeeper", []))) - set(inventory))
            if strangers:
                mismatch = (f"the cluster has brokers {strangers} that the inventory does not know "
                            f"(inventory brokers: {inventory})")
        summary = "; ".join(f"{c['system']}: {'ok' if c['ok'] else 'FAILED'}" for c in checks)
        return Observation({"checks": checks, "mismatch": mismatch, "inventory": inventory},
                           summary=summary or "nothing to check")

    def plan(self, obs: Observation) -> Action | Noop:
        failed = [c for c in obs.data["checks"] if not c["ok"]]
        if failed:
            first = failed[0]
            listed = "; ".join(f"{c['system']}: {c['detail']}" for c in failed)
            cls: type[KafkaOpsError] = {ConfigError.exit_code: ConfigError,
                                        HostKeyError.exit_code: HostKeyError}.get(first.get("exit_code"),
                                                                                  UnreachableError)
            raise cls(f"before any change: {len(failed)} system(s) this run needs did not answer: {listed}",
                      hint=first.get("hint") or "fix it and run again; nothing was changed")
        if obs.data["mismatch"]:
            raise ConfigError(f"before any change: {obs.data['mismatch']}",
                              hint="check the ZooKeeper address and chroot and the bootstrap servers in the "
                                   "inventory (a wrong chroot reads an empty /brokers/ids)")
        return Noop("every system answers: " + "; ".join(f"{c['system']} ({c['detail']})"
                                                          for c in obs.data["checks"]))


def _ssh(client: Any) -> str:
    """An authenticated SSH session (host key checked); the connection is kept for the run."""
    client.connect()
    return "answers"


def _ask_all(asks: list[tuple[str, Callable[[], str]]]) -> list[dict[str, Any]]:
    """Every question asked at once, the answers in the order asked: ``{system, ok, detail[, hint,
    exit_code]}``.

    Why at once: the questions are independent, and each target of a roll asks them again before its first
    change; asked one after another they cost the sum of five round trips and an SSH handshake per host, at
    once the slowest of them. Each runs in a copy of the caller's context, so the runner's read-only scope
    holds in the worker threads too; the adapters are resolved by the caller first (the environment builds
    them lazily, and two threads must not both build one)."""
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    def answer(name: str, fn: Callable[[], str]) -> dict[str, Any]:
        try:
            return {"system": name, "ok": True, "detail": fn()}
        except KafkaOpsError as exc:
            return {"system": name, "ok": False, "detail": exc.message, "hint": exc.hint or "",
                    "exit_code": exc.exit_code}

    if len(asks) <= 1:
        return [answer(name, fn) for name, fn in asks]
    with ThreadPoolExecutor(max_workers=len(asks), thread_name_prefix="kafkaops-reachable") as pool:
        futures = [pool.submit(copy_context().run, answer, name, fn) for name, fn in asks]
        return [f.result() for f in futures]


register_step("env.reachable", Reachable, [
    Param("systems", "list", default=list(DEFAULT_SYSTEMS), help="systems to check, of: " + ", ".join(SYSTEMS)),
    Param("timeout", "duration", default=10.0, min=1, max=120, help="how long each may take to answer"),
    Param("scan", "bool", default=True, help="the post-check scans on Spark (then its master must answer)"),
    Param("spark_master", "str", default="local[2]", help="the post-check's Spark master"),
], effect="read-only")
