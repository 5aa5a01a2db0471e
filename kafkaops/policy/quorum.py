"""Is the KRaft metadata quorum safe to lose one more voter? Pure judgement over the tool's facts.

A KRaft cluster is only as available as its metadata quorum: with 3 voters, 2 must be caught up for
the quorum to commit anything (a new leader, an ISR change, a broker's registration). A controller
restart takes one voter away for tens of seconds; if another voter is already lagging or down, that
restart leaves the quorum without a majority — no leader, and every broker's metadata frozen. So the
gate before each controller restart (as Strimzi's KafkaRoller checks before rolling a controller)
is: the quorum has a leader, **every other voter is caught up**, and the caught-up voters without this
one are still a majority. The active controller goes last: one leader election per roll, not one per
restarted voter.

"Caught up" is measured on the leader's own clock, never ours: a voter is behind by the leader row's
``LastCaughtUpTimestamp`` minus its own (the leader's row is stamped "now" by the leader), so clock
skew between the admin host and the controllers cannot make a lagging voter look healthy.

The quorum has three modules, one per layer: :mod:`kafkaops.facts.quorum` parses what
``kafka-metadata-quorum`` printed, :mod:`kafkaops.systems.quorum` runs it on a controller, and this one
judges the parsed replicas (no I/O), so a plan and the live gate decide alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkaops.facts.quorum import QuorumReplica

#: How far behind the leader a voter may be and still count as caught up: records, and time since it
#: last was (Kafka's ``controller.quorum.fetch.timeout.ms`` is 2 s; a loaded 2-core lab pauses longer).
DEFAULT_MAX_LAG = 1000
DEFAULT_MAX_BEHIND_MS = 5000


def majority(voters: int) -> int:
    """Voters a quorum of ``voters`` needs to elect a leader and commit: more than half."""
    return voters // 2 + 1


@dataclass(frozen=True)
class VoterState:
    node_id: int
    leader: bool
    lag: int
    behind_ms: int | None  # None: never caught up
    caught_up: bool
    last_caught_up_ms: int = -1  # the leader's clock; -1: never

    def caught_up_since(self, since_ms: int) -> bool:
        """Caught up, and last so after ``since_ms`` (leader's clock): a restarted voter's entry from before
        its stop must not count, and the leader remembers it for seconds."""
        return self.caught_up and (self.leader or self.last_caught_up_ms > since_ms)

    def describe(self) -> str:
        if self.leader:
            return f"voter {self.node_id}: leader"
        behind = "never caught up" if self.behind_ms is None else f"last caught up {self.behind_ms / 1000:.1f}s ago"
        return f"voter {self.node_id}: {self.lag} record(s) behind, {behind}"


@dataclass(frozen=True)
class QuorumView:
    """The quorum as one ``describe --replication`` showed it, judged."""

    leader_id: int | None
    voters: tuple[VoterState, ...]
    observers: tuple[QuorumReplica, ...]

    def voter(self, node_id: int) -> VoterState | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    @property
    def caught_up(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters if v.caught_up)

    @property
    def lagging(self) -> tuple[VoterState, ...]:
        return tuple(v for v in self.voters if not v.caught_up)

    def summary(self) -> str:
        lead = f"leader {self.leader_id}" if self.leader_id is not None else "no leader"
        return (f"{lead}, {len(self.caught_up)}/{len(self.voters)} voters caught up"
                + "".join(f"; {v.describe()}" for v in self.lagging))


def judge(replicas: Sequence[QuorumReplica], *, max_lag: int = DEFAULT_MAX_LAG,
          max_behind_ms: int = DEFAULT_MAX_BEHIND_MS) -> QuorumView:
    """Judge each voter of a ``describe --replication`` answer: caught up, or how far behind."""
    leader = next((r for r in replicas if r.status == "Leader"), None)
    now = leader.last_caught_up_ms if leader is not None else None
    voters = []
    for r in replicas:
        if not r.voter:
            continue
        if r.status == "Leader":
            voters.append(VoterState(r.node_id, True, 0, 0, True, r.last_caught_up_ms))
            continue
        behind = None if r.last_caught_up_ms < 0 or now is None else max(0, now - r.last_caught_up_ms)
        ok = now is not None and behind is not None and r.lag <= max_lag and behind <= max_behind_ms
        voters.append(VoterState(r.node_id, False, r.lag, behind, ok, r.last_caught_up_ms))
    return QuorumView(leader.node_id if leader else None, tuple(voters),
                      tuple(r for r in replicas if not r.voter))


def leader_clock(replicas: Sequence[QuorumReplica]) -> int | None:
    """The leader's "now" in an answer (its own row is stamped when it answered), or None: no leader."""
    return next((r.last_caught_up_ms for r in replicas if r.status == "Leader"), None)


def restart_refusals(view: QuorumView, node_id: int) -> list[str]:
    """Why restarting voter ``node_id`` now could cost the cluster its quorum (empty: it cannot).

    Refused: no leader; ``node_id`` is not a voter (the inventory and the quorum disagree); another voter
    lagging or down (named); the caught-up voters without ``node_id`` not a majority. A lagging
    ``node_id`` itself is no reason: restarting it takes away no caught-up vote.
    """
    problems = []
    if view.leader_id is None:
        problems.append("the metadata quorum has no leader")
    if view.voter(node_id) is None:
        problems.append(f"node {node_id} is not a voter of the quorum (voters: "
                        f"{', '.join(str(v.node_id) for v in view.voters)})")
    others = [v for v in view.lagging if v.node_id != node_id]
    if others:
        problems.append("lagging or down: " + "; ".join(v.describe() for v in others))
    left = [n for n in view.caught_up if n != node_id]
    need = majority(len(view.voters))
    if view.voters and len(left) < need:
        problems.append(f"without {node_id}, {len(left)} of {len(view.voters)} voters are caught up; "
                        f"the quorum needs {need}")
    return problems
