"""The closing post-check of every maintenance runbook: is the cluster healthy again?

Metadata first (offline, URP, under-min-ISR, preferred leaders) because it is instant; the Spark scan of
the data itself (``kafkaops check``) runs when the post-check module is installed and ``scan`` is on.
A failed post-check fails the run: maintenance is not done while the cluster is worse than before.
"""

from __future__ import annotations

from kafkaops.engine.context import RunContext
from kafkaops.engine.step import Action, Observation, Param, StepBase, register_step
from kafkaops.errors import CheckFailed
from kafkaops.safety import cluster_health
from kafkaops.steps.common import names, services, wait


class PostCheck(StepBase):
    """Post-check: no offline, URP or under-min-ISR partition; preferred leaders restored."""

    def observe(self, ctx: RunContext) -> Observation:
        summary = cluster_health(services(ctx).kafka.snapshot())
        return Observation({"healthy": summary.healthy, "urp": len(summary.under_replicated),
                            "offline": len(summary.offline), "under_min_isr": len(summary.under_min_isr),
                            "preferred_ratio": round(summary.preferred_leader_ratio, 4), "dry_run": ctx.dry_run},
                           summary=f"{len(summary.under_replicated)} URP, {len(summary.offline)} offline, "
                                   f"preferred leaders {summary.preferred_leader_ratio:.0%}")

    def plan(self, obs: Observation) -> Action:
        return Action(description="post-check: wait until no partition is offline, under-replicated or under "
                                  f"min ISR (timeout {self.params['timeout']:.0f}s), then report leader balance",
                      commands=("AdminClient metadata + topic configs",), impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        svc = services(ctx)

        def healthy() -> tuple[bool, str]:
            s = cluster_health(svc.kafka.snapshot())
            return s.healthy, (f"{len(s.offline)} offline, {len(s.under_replicated)} URP, "
                               f"{len(s.under_min_isr)} under min ISR")

        wait(ctx, healthy, what="cluster healthy", timeout=float(self.params["timeout"]), interval=0.5)

    def verify(self, ctx: RunContext) -> None:
        s = cluster_health(services(ctx).kafka.snapshot())
        problems = [f"{len(s.offline)} offline" if s.offline else "",
                    f"{len(s.under_replicated)} under-replicated" if s.under_replicated else "",
                    f"{len(s.under_min_isr)} under min ISR" if s.under_min_isr else ""]
        if any(problems):
            raise CheckFailed("post-check failed: " + ", ".join(p for p in problems if p) + " ("
                              + names([f"{p.topic}-{p.partition}" for p in (*s.offline, *s.under_replicated)])
                              + ")")
        ctx.progress(f"  post-check: healthy; preferred leaders {s.preferred_leader_ratio:.0%}, "
                     f"leaders per broker {dict(sorted(s.leaders_by_broker.items()))}")


register_step("health.post_check", PostCheck, [Param("timeout", "duration", default=300.0)])
