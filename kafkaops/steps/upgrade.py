"""The rolling upgrade's steps: the Kafka version each node runs, its installation between the node's stop
and its start, and the ``metadata.version`` bump that ends an upgrade (issue 33).

Kafka's upgrade notes give the order: new software on every node first, one node at a time, under the
metadata version the cluster already has — every node can still read everything every other node writes,
and a node can be rolled back to the old release by installing it again. Only once every node runs the new
release is ``metadata.version`` raised: a one-way door (older software cannot read what is written after
it), so it is a separate run behind its own checkpoint, never the tail of the roll.

Installing is the inventory's business (``kafka_install {version}``: in production the package manager,
on the lab ``hostctl kafka-install``); kafkaops says *when* — with the broker or controller stopped, so
no running JVM has its jars replaced under it — and checks what the node then says (``kafka_version``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.environment import Environment
from kafkaops.errors import CheckFailed, SafetyRefusal
from kafkaops.facts.features import parse_features, parse_mapping, release_of
from kafkaops.health.nodes import kafka_running
from kafkaops.model import Host
from kafkaops.policy.quorum_membership import TO_DYNAMIC, upgrade_refusal
from kafkaops.queries.migration import judge_phase, migration_view
from kafkaops.queries.versions import behind, check_version, features, installed_version, versions
from kafkaops.stepkit.common import NodeSettingStep, environment, names, target_host
from kafkaops.stepkit.projection import STOPPED, broker_key, controller_key, provenance


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _not_on_release(left: list[str], want: str, level: str) -> SafetyRefusal:
    """``metadata.version`` stays while a node runs another release than ``want``."""
    return SafetyRefusal(f"{', '.join(left)} do not run Kafka {want}: metadata.version {level} stays until every "
                         "node does", hint="finish the roll first: `kafkaops rolling-upgrade CLUSTER --to VERSION`")


def _kraft_problem(env: Environment) -> str | None:
    """Why the cluster cannot take Kafka 4 (None: it runs in KRaft mode). Kafka 4 has no ZooKeeper mode:
    a cluster still migrating must be finalized first."""
    cluster = env.cluster
    if cluster.kraft:
        return None
    if cluster.migrating:
        current = judge_phase(migration_view(env))
        if current == "finalized":
            return None
        return f"{cluster.name}'s migration to KRaft is in phase {current}, not finalized"
    return f"{cluster.name} runs in ZooKeeper mode"


class UpgradeGate(StepBase):
    """Refuse an upgrade the cluster is not ready for: ZooKeeper mode (Kafka 4 has none), a node already on
    a release newer than the target (a downgrade is not a rolling upgrade)."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        installed = versions(env)
        return Observation({"versions": installed, "want": self.params["version"], "kraft": _kraft_problem(env)},
                           summary="installed: " + ", ".join(f"{n} {v}" for n, v in installed.items()))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        if d["kraft"]:
            raise SafetyRefusal(f"no upgrade to Kafka {d['want']}: {d['kraft']}",
                                hint="Kafka 4 runs without ZooKeeper: finish `kafkaops migrate-to-kraft CLUSTER` first")
        newer = sorted(n for n, v in d["versions"].items() if _key(v) > _key(d["want"]))
        if newer:
            raise SafetyRefusal(f"{', '.join(newer)} already run a release newer than {d['want']}",
                                hint="a rolling upgrade goes forward; pass the release the cluster moves to")
        left = behind(d["versions"], d["want"])
        if not left:
            return Noop(f"upgrade gate passes: every node runs {d['want']}")
        return Noop(f"upgrade gate passes: {len(d['versions']) - len(left)} of {len(d['versions'])} nodes run "
                    f"{d['want']}; the roll installs it on {', '.join(left)}; metadata.version stays as it is "
                    "(raised afterwards, on its own, confirmed)")


def _stop_key(host: Host) -> str:
    """The projection's key a stop of ``host`` sets to ``stopped``: ``kraft.stop_controller``'s for a KRaft
    controller, ``kafka.stop_broker``'s for a broker."""
    return controller_key(host.broker_id) if host.role == "controller" else broker_key(host.broker_id)


class Install(NodeSettingStep):
    """Install the target release on the stopped node (``kafka_install {version}``); its start runs it.

    Disruptive: it replaces the node's software. The runbook stops the node just before; right before the
    install its process is read again (:meth:`precondition`)."""

    param, template, what = "version", "kafka_install", "has Kafka installed:"

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """The node's Kafka stopped, read now (``kafka_status``; in a dry-run, the stop planned before this
        step counts): a node started again since its stop — by hand, by a supervisor, by a resumed run's
        compensation — would have the jars of its running JVM replaced under it."""
        env = environment(ctx)
        host = target_host(ctx)
        key = _stop_key(host)
        if ctx.projected.get(key) == STOPPED:
            return f"{host.name}: Kafka stopped by an earlier step{provenance(ctx, [key])}"
        if kafka_running(env, host):
            raise SafetyRefusal(f"{host.name}: Kafka runs: installing {self.params['version']} now would replace "
                                "the jars of a running JVM",
                                hint="stop it first (the runbook's kafka.stop_broker or kraft.stop_controller), "
                                     "then resume the run")
        return f"{host.name}: Kafka stopped (kafka_status)"

    def read(self, env: Environment, host: Host) -> str:
        return installed_version(env, host)

    def change(self, d: Mapping[str, Any]) -> Action:
        return Action(description=f"install Kafka {d['want']} on {d['host']} (was {d['now']}); its start runs it",
                      commands=(f"on {d['host']}: {d['command']}",),
                      impact="the node's Kafka software; it runs it from its next start (it is stopped now)",
                      rollback=f"install {d['now']} again (kafka_install) and restart the node: the metadata "
                               "version is unchanged until the separate bump",
                      data={"was": d["now"]})


def _upgrade_args(env: Environment, release: str) -> tuple[str, dict[str, str], dict[str, int]]:
    """The ``kafka-features`` arguments that raise ``metadata.version`` to ``release``'s level, with what they
    are judged by: the features' finalized levels now and the release's whole version mapping."""
    mapping = parse_mapping(features(env, f"version-mapping --release-version {shlex.quote(release)}"))
    levels = {name: f.finalized for name, f in parse_features(features(env, "describe")).items()}
    return f"upgrade --feature metadata.version={mapping['metadata.version']}", levels, mapping


class MetadataVersion(StepBase):
    """Raise ``metadata.version`` to the target release's (``kafka-features upgrade --feature
    metadata.version=N``, N from ``version-mapping``), once every node runs that release: the end of an
    upgrade, and a one-way door. Only ``metadata.version``: ``--release-version`` would raise every feature
    of the release (``kraft.version`` 1 — a dynamic quorum —, share groups...), each a change of its own.

    KAFKA-21426: ``upgrade --release-version`` raises ``kraft.version`` too, so a routine bump turns a static
    quorum (``controller.quorum.voters`` on every node) dynamic, irreversibly. Right before the bump the
    arguments about to be sent are judged by what the tool would apply
    (:func:`kafkaops.policy.quorum_membership.upgrade_refusal`): any that would move ``kraft.version`` off 0
    is refused; after it, ``kraft.version`` must be what it was."""

    def observe(self, ctx: RunContext) -> Observation:
        env = environment(ctx)
        want = str(self.params["version"])
        if ctx.projected.get("upgrade/metadata.version"):
            return Observation({"done": True, "want": want}, summary="raised by an earlier step of this run")
        found = parse_features(features(env, "describe"))
        level = found["metadata.version"].finalized
        kraft = found["kraft.version"].finalized if "kraft.version" in found else "0"
        return Observation({"done": False, "want": want, "level": level, "versions": versions(env), "kraft": kraft},
                           summary=f"metadata.version {level}, kraft.version {kraft}")

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        release = ".".join(d["want"].split(".")[:2])
        if d["done"]:
            return Noop(f"metadata.version raised to {release} earlier in this run")
        if release_of(d["level"]) >= _key(release):
            return Noop(f"metadata.version is {d['level']}: {release} or later")
        left = behind(d["versions"], d["want"])
        if left:
            raise _not_on_release(left, d["want"], d["level"])
        static = d.get("kraft", "0") in ("0", "-")
        stays = "; kraft.version stays 0 (the quorum stays static: KAFKA-21426)" if static else ""
        return Action(description=f"raise metadata.version from {d['level']} to release {release}'s{stays}",
                      commands=(f"kafka-features version-mapping --release-version {release} (its metadata.version "
                                "level N)", "kafka-features upgrade --feature metadata.version=N (on a controller; "
                                "metadata.version only: --release-version would also raise kraft.version, "
                                "group.version and the others, each a change of its own)"),
                      impact="every node writes the new metadata format from now on; no node of an older "
                             "release can join or read it back",
                      rollback="none safe: Kafka supports no metadata.version downgrade without losing metadata",
                      data={"level": d["level"]})

    def precondition(self, ctx: RunContext, action: Action) -> str:
        """Every node runs the target release, read now (each one's ``kafka_version``): the plan's nodes may
        have changed since — one installed back to the old release, a node added — and after the bump no node
        of an older release can join or read the metadata."""
        want = str(self.params["version"])
        env = environment(ctx)
        installed = versions(env)
        left = behind(installed, want)
        if left:
            raise _not_on_release(left, want, str(action.data.get("level", "")))
        args, levels, mapping = _upgrade_args(env, ".".join(want.split(".")[:2]))
        refusal = upgrade_refusal(args, levels, mapping)
        if refusal is not None:
            raise SafetyRefusal(f"kafka-features {args}: {refusal}", hint=TO_DYNAMIC)
        return (f"all {len(installed)} nodes run Kafka {want} ({names(sorted(installed))}); kafka-features {args} "
                f"leaves kraft.version at {levels.get('kraft.version', '0')}")

    def effects(self, obs: Observation, action: Action) -> dict[str, Any]:
        return {"upgrade/metadata.version": True}

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)
        release = ".".join(str(self.params["version"]).split(".")[:2])
        args, levels, mapping = _upgrade_args(env, release)
        refusal = upgrade_refusal(args, levels, mapping)  # what is sent is what the precondition judged
        if refusal is not None:
            raise SafetyRefusal(f"kafka-features {args}: {refusal}", hint=TO_DYNAMIC)
        ctx.facts.set(KRAFT_BEFORE, levels.get("kraft.version", "0"))
        features(env, args, change=True)

    def verify(self, ctx: RunContext) -> None:
        release = ".".join(str(self.params["version"]).split(".")[:2])
        found = parse_features(features(environment(ctx), "describe"))
        level = found["metadata.version"].finalized
        if release_of(level) < _key(release):
            raise CheckFailed(f"metadata.version is {level} after raising it to {release}'s")
        before, after = str(ctx.facts.get(KRAFT_BEFORE) or "0"), (
            found["kraft.version"].finalized if "kraft.version" in found else "0")
        if before in ("0", "-") and after not in ("0", "-"):
            raise CheckFailed(f"kraft.version moved from 0 to {after} with metadata.version: the quorum is dynamic now "
                              "while its nodes list controller.quorum.voters (KAFKA-21426)",
                              hint="there is no way back to 0: move every node to controller.quorum.bootstrap.servers "
                                   "(Kafka's docs 'KRaft > Upgrade')")


#: The run's fact holding ``kraft.version`` as the bump found it (checked unchanged after it).
KRAFT_BEFORE = "upgrade/kraft.version.before"


def _check(params: Any) -> str | None:
    return check_version(params.get("version"))


VERSION = Param("version", "str", required=True, help="the Kafka release the cluster moves to (4.3.1)")
register_step("upgrade.gate", UpgradeGate, [VERSION], check=_check, effect="read-only")
register_step("upgrade.install", Install, [VERSION], check=_check, effect="disruptive",
              irreversible="the node keeps the release installed; install the earlier one to go back (the metadata "
                           "version is unchanged until its bump)")
register_step("upgrade.metadata_version", MetadataVersion, [VERSION], check=_check, effect="disruptive",
              irreversible="metadata.version is never lowered: Kafka supports no downgrade of it without loss")
