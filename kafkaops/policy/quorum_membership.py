"""May a voter join or leave the KRaft metadata quorum now? Pure judgement over the tool's facts (KIP-853).

Kafka 3.9+ changes a quorum's voters online — ``kafka-metadata-quorum add-controller`` /
``remove-controller`` — but only on a **dynamic** quorum (``kraft.version`` 1 or above: the voters are
records of the metadata log, found through ``controller.quorum.bootstrap.servers``). A static quorum
(``kraft.version`` 0: every node lists ``controller.quorum.voters``) has its voters fixed in every node's
configuration; the tool fails there, and changing ``controller.quorum.voters`` by hand on a live cluster is
how quorums split. Kafka 4.1+ can turn a static quorum dynamic (``kafka-features upgrade --feature
kraft.version=1`` once every node runs 4.1+ and names ``controller.quorum.bootstrap.servers``): a one-way
change of its own, never a side effect (:func:`kraft_version_refusal`, KAFKA-21426).

A membership change moves the majority, so it is gated like a restart, and harder:

* **add**: the new node first replicates as an observer; it becomes a voter only once caught up. Adding a
  lagging voter raises the majority (3 of 4 instead of 2 of 3) with a member that cannot vote yet: one
  more failure and the quorum stalls. So: a leader, every voter caught up, the observer caught up.
* **remove**: never below ``min_voters`` (3 by default: a 2-voter quorum survives no failure at all — its
  majority is both), and the voters left must hold a caught-up majority of the *new*, smaller set. A
  voter removed while another lags could leave exactly that lagging voter needed for every commit.

The caught-up judgement is :func:`kafkaops.policy.quorum.judge`'s (on the leader's clock).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from kafkaops.facts.quorum import QuorumReplica
from kafkaops.policy.quorum import QuorumView, majority

#: Fewest voters a removal may leave: 3 survive one failure; 2 survive none (their majority is both).
DEFAULT_MIN_VOTERS = 3

#: What a voter of a static quorum reports as its directory id: none (Kafka's ``Uuid.ZERO_UUID``).
ZERO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"

#: Kafka's documented way from a static quorum to a dynamic one (Kafka 4.1+, operations docs "KRaft":
#: "Upgrade"); the refusal names it rather than attempting it.
TO_DYNAMIC = ("make the quorum dynamic first (Kafka 4.1+, docs 'KRaft > Upgrade'): every node on 4.1+, "
              "controller.quorum.bootstrap.servers in every node's configuration in place of "
              "controller.quorum.voters (rolled), then `kafka-features --bootstrap-controller HOST:PORT upgrade "
              "--feature kraft.version=1` — a one-way change, reviewed on its own")


def kraft_version(features: Mapping[str, str]) -> int:
    """The finalized ``kraft.version`` from ``kafka-features describe`` (feature name to finalized level);
    0 when absent — Kafka 3.x tools and static quorums print none or ``0``."""
    level = features.get("kraft.version", "0")
    return int(level) if level.isdigit() else 0


def static_quorum_refusal(features: Mapping[str, str]) -> str | None:
    """Why the voters cannot be changed at all (None: the quorum is dynamic)."""
    if kraft_version(features) >= 1:
        return None
    return ("the metadata quorum is static (kraft.version 0: its voters are fixed by every node's "
            "controller.quorum.voters); Kafka adds and removes controllers only on a dynamic quorum")


def _lagging(view: QuorumView, skip: int | None = None) -> list[str]:
    return [v.describe() for v in view.lagging if v.node_id != skip]


def add_refusals(view: QuorumView, node_id: int, observer: QuorumReplica | None, *, max_lag: int) -> list[str]:
    """Why making observer ``node_id`` a voter now could cost the quorum its majority (empty: it cannot).

    Refused: no leader; a voter lagging or down (the majority grows and needs it); the node not replicating
    as an observer, or more than ``max_lag`` records behind the leader's log end. A node that already votes
    is not refused here: the step sees it as done."""
    problems = []
    if view.leader_id is None:
        problems.append("the metadata quorum has no leader")
    lagging = _lagging(view)
    if lagging:
        problems.append("lagging or down: " + "; ".join(lagging))
    if observer is None:
        problems.append(f"node {node_id} is not replicating the metadata log (not an observer of the quorum: "
                        "is it formatted and running?)")
    elif observer.lag > max_lag or observer.last_caught_up_ms < 0:
        problems.append(f"node {node_id} is {observer.lag} record(s) behind the leader as an observer (at most "
                        f"{max_lag}): a voter that cannot vote yet raises the majority")
    after = len(view.voters) + 1
    caught = len(view.caught_up) + (1 if observer is not None and observer.lag <= max_lag else 0)
    if view.voters and caught < majority(after):
        problems.append(f"with {node_id}, {caught} of {after} voters would be caught up; the quorum needs "
                        f"{majority(after)}")
    return problems


def remove_refusals(view: QuorumView, node_id: int, *, min_voters: int = DEFAULT_MIN_VOTERS,
                    directory_id: str = "") -> list[str]:
    """Why removing voter ``node_id`` now could cost the quorum its majority (empty: it cannot).

    Refused: no leader; the voters left fewer than ``min_voters``; a voter other than ``node_id`` lagging or
    down; the caught-up voters left not a majority of the smaller set; its directory id unknown (a static
    quorum's voter, which ``remove-controller`` cannot name). A node that is not a voter is not refused
    here: the step sees it as removed."""
    problems = []
    if view.leader_id is None:
        problems.append("the metadata quorum has no leader")
    left = len(view.voters) - 1
    if left < min_voters:
        problems.append(f"removing {node_id} would leave {left} voter(s); at least {min_voters} stay (a quorum "
                        f"of {left} survives {max(0, (left - 1) // 2)} failure(s))")
    lagging = _lagging(view, node_id)
    if lagging:
        problems.append("lagging or down: " + "; ".join(lagging))
    caught = [n for n in view.caught_up if n != node_id]
    if left > 0 and len(caught) < majority(left):
        problems.append(f"without {node_id}, {len(caught)} of {left} voters are caught up; the smaller quorum "
                        f"needs {majority(left)}")
    if directory_id in ("", ZERO_DIRECTORY_ID):
        problems.append(f"voter {node_id} has no directory id in the quorum's answer (a static quorum's voter): "
                        "remove-controller needs one")
    return problems


def kraft_version_refusal(features: Mapping[str, str], upgrades: Mapping[str, int]) -> str | None:
    """Why a feature upgrade must not be sent (None: it may): it would move ``kraft.version`` off 0 — turn a
    static quorum dynamic — as a side effect. KAFKA-21426: ``kafka-features upgrade --release-version R``
    raises every feature of release R, ``kraft.version`` included, so a routine metadata.version bump makes
    a static quorum dynamic, irreversibly, while every node still names ``controller.quorum.voters``."""
    want = upgrades.get("kraft.version")
    if want is None or kraft_version(features) >= 1 or want < 1:
        return None
    return (f"this upgrade would raise kraft.version from 0 to {want}: the static metadata quorum would become "
            "dynamic, irreversibly, while every node still lists controller.quorum.voters (KAFKA-21426)")


def upgrade_refusal(args: str, features: Mapping[str, str], mapping: Mapping[str, int]) -> str | None:
    """Why ``kafka-features ARGS`` must not be sent (None: it may), judged by what the tool would apply:
    ``upgrade --release-version R`` sets every feature of ``mapping`` (R's ``version-mapping``), ``kraft.version``
    included; ``upgrade --feature NAME=LEVEL ...`` sets those named. Refused when that raises ``kraft.version``
    off 0 (:func:`kraft_version_refusal`)."""
    words = args.split()
    if not words or words[0] != "upgrade":
        return None
    upgrades: dict[str, int] = {}
    for flag, value in itertools.pairwise(words[1:]):
        if flag == "--release-version":
            upgrades.update(mapping)
        elif flag == "--feature" and "=" in value:
            name, _, level = value.partition("=")
            if level.isdigit():
                upgrades[name] = int(level)
    return kraft_version_refusal(features, upgrades)
