"""Wait for MirrorMaker 2 to have mirrored everything the source site received.

Once the source site is quiet (no client connects, nothing new is produced), the only records the
target is still missing are the ones MirrorMaker has yet to copy. Consumers translated before it caught
up would be placed by timestamps the target does not have yet — still no loss (they resume at the log
end and read the rest as it arrives), but the duplicate bound would no longer be the plan's.
"""

from __future__ import annotations

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed
from kafkaops.stepkit.common import StableObservation, environment, names, wait
from kafkaops.systems.mirror import MirrorLag


class WaitCaughtUp(StepBase):
    """Wait until MirrorMaker's lag is zero on every partition mirrored from one site to the other."""

    def _lag(self, ctx: RunContext) -> list[str]:

        env = environment(ctx)
        lags = MirrorLag(env.cluster, str(self.params["from_site"]), str(self.params["to_site"]),
                         timeout=env.kafka_timeout).partitions()
        return [f"{p.topic}-{p.partition} ({p.lag})" for p in lags if p.lag > 0]

    def observe(self, ctx: RunContext) -> Observation:
        src, dst = self.params["from_site"], self.params["to_site"]
        behind = self._lag(ctx)
        return StableObservation({"from": src, "to": dst, "behind": behind}, stable={"from": src, "to": dst},
                           summary=f"{src}->{dst}: "
                           + (f"{len(behind)} partition(s) behind" if behind else "caught up"))

    def plan(self, obs: Observation) -> Action | Noop:
        d = obs.data
        return Action(description=f"wait until MirrorMaker {d['from']}->{d['to']} has mirrored every record "
                                  f"(lag 0 on every {d['from']}.* partition; timeout {self.params['timeout']:.0f}s)",
                      commands=(f"read mm2-offsets.{d['from']}.internal on {d['to']} vs. log end offsets on "
                                f"{d['from']}, until equal",),
                      impact="read-only: the target has every record the source received")

    def apply(self, ctx: RunContext, action: Action) -> None:
        def caught_up() -> tuple[bool, str]:
            behind = self._lag(ctx)
            return not behind, (f"{len(behind)} partition(s) behind: {names(behind, 2)}" if behind else "lag 0")

        wait(ctx, caught_up, what=f"MirrorMaker {self.params['from_site']}->{self.params['to_site']} lag 0",
             timeout=float(self.params["timeout"]), interval=1.0)

    def verify(self, ctx: RunContext) -> None:
        behind = self._lag(ctx)
        if behind:
            raise CheckFailed(f"MirrorMaker is still behind on {names(behind)}")


register_step("mirror.wait_caught_up", WaitCaughtUp, [
    Param("from_site", "str", required=True, help="the site whose topics are mirrored"),
    Param("to_site", "str", required=True, help="the site they are mirrored to"),
    Param("timeout", "duration", default=300.0, min=1, max=86400, help="give up (and stop the run) after this long"),
], effect="read-only")
