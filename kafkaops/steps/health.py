"""The baseline taken before a maintenance changes anything, and the post-check that ends it.

``health.baseline`` saves an offsets snapshot (start/end offsets, leaders, ISR, configs per partition)
in the run's directory, once per run. ``health.post_check`` first waits until no partition is offline,
under-replicated or under min ISR, then — on the run's last target — compares against the baseline and
scans the data written during the run with Spark (``kafkaops check``): truncation, offset gaps,
timestamps, invalid events, produce-rate dips, DC parity. A failed post-check fails the run: maintenance
is not done while the cluster is worse than before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkaops.engine.context import RunContext
from kafkaops.engine.journal import Journal, runs_dir
from kafkaops.engine.step import Action, Noop, Observation, Param, StepBase, register_step
from kafkaops.engine.timeline import run_report
from kafkaops.errors import CheckFailed
from kafkaops.health.check import read_urp_samples, run_post_check, take_snapshot
from kafkaops.health.metadata import OffsetsSnapshot
from kafkaops.health.report import render_chart, render_markdown
from kafkaops.health.scan_jar import READERS
from kafkaops.health.spark_job import prestart
from kafkaops.health.timeline_chart import draw
from kafkaops.policy.availability import cluster_health
from kafkaops.stepkit.common import environment, names, wait
from kafkaops.systems.run_samples import read_samples

_BASELINE = "baseline_snapshot"


def _baseline_path(ctx: RunContext) -> Path | None:

    if not ctx.run_id:
        return None
    return runs_dir(environment(ctx).home) / ctx.run_id / "baseline.json"


class Baseline(StepBase):
    """Take the baseline snapshot the post-check compares against (once per run), and start the post-check's
    Spark session in the background: the JVM's 10-20 s start hides behind the maintenance, the scan at the
    end only scans, and a Spark that cannot start is said now, while the operator can still act."""

    def observe(self, ctx: RunContext) -> Observation:
        taken = ctx.facts.get(_BASELINE)
        return Observation({"taken": taken}, summary=f"baseline {'taken: ' + taken if taken else 'not taken yet'}")

    def plan(self, obs: Observation) -> Action | Noop:
        if obs.data["taken"]:
            return Noop(f"baseline already taken for this run ({obs.data['taken']})")
        return Action(description="take a baseline snapshot: start/end offsets, leaders, ISR, configs of every "
                                  "partition", commands=("AdminClient: metadata, list_offsets, describe_configs",),
                      impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:

        env = environment(ctx)
        path = _baseline_path(ctx)
        if self.params["scan"]:

            master = str(self.params["spark_master"])
            prestart(master, on_error=lambda why: ctx.progress(
                f"  post-check: {why} - the maintenance goes on, but its closing scan will fail unless Spark is "
                "fixed by then (Ctrl-C pauses the run at a safe point)"))
        snap = take_snapshot(env.cluster, admin=env.kafka)
        if path is not None:
            snap.write(path)
            ctx.facts.set(_BASELINE, str(path))


class PostCheck(StepBase):
    """Post-check: cluster healthy again; on the last target, compare with the baseline and scan the data."""

    def _scan_now(self, ctx: RunContext) -> bool:
        return bool(self.params["scan"]) and (not ctx.targets or ctx.target == ctx.targets[-1])

    def observe(self, ctx: RunContext) -> Observation:
        summary = cluster_health(environment(ctx).snapshot())
        return Observation({"scan": self._scan_now(ctx), "spark_master": self.params["spark_master"]},
                           summary=f"{len(summary.under_replicated)} URP, {len(summary.offline)} offline, "
                                   f"preferred leaders {summary.preferred_leader_ratio:.0%}")

    def plan(self, obs: Observation) -> Action:
        scan = obs.data["scan"]
        return Action(
            description="post-check: wait until no partition is offline, under-replicated or under min ISR "
                        f"(timeout {self.params['timeout']:.0f}s)"
                        + (f"; then compare with the baseline and scan the data written during the run on Spark "
                           f"({obs.data['spark_master']})" if scan else ""),
            commands=("AdminClient metadata + topic configs",
                      *(("kafkaops check <cluster> --baseline <run>/baseline.json",) if scan else ())),
            impact="read-only")

    def apply(self, ctx: RunContext, action: Action) -> None:
        env = environment(ctx)

        def healthy() -> tuple[bool, str]:
            s = cluster_health(env.snapshot())
            return s.healthy, (f"{len(s.offline)} offline, {len(s.under_replicated)} URP, "
                               f"{len(s.under_min_isr)} under min ISR")

        wait(ctx, healthy, what="cluster healthy", timeout=float(self.params["timeout"]), interval=0.5)

    def verify(self, ctx: RunContext) -> None:
        env = environment(ctx)
        s = cluster_health(env.snapshot())
        problems = [f"{len(s.offline)} offline" if s.offline else "",
                    f"{len(s.under_replicated)} under-replicated" if s.under_replicated else "",
                    f"{len(s.under_min_isr)} under min ISR" if s.under_min_isr else ""]
        if any(problems):
            raise CheckFailed("post-check failed: " + ", ".join(p for p in problems if p) + " ("
                              + names([f"{p.topic}-{p.partition}" for p in (*s.offline, *s.under_replicated)])
                              + ")")
        ctx.progress(f"  post-check: metadata healthy; preferred leaders {s.preferred_leader_ratio:.0%}, "
                     f"leaders per broker {dict(sorted(s.leaders_by_broker.items()))}")
        if self._scan_now(ctx):
            self._scan(ctx)

    def _scan(self, ctx: RunContext) -> None:

        env = environment(ctx)
        taken = ctx.facts.get(_BASELINE)
        baseline = OffsetsSnapshot.read(Path(taken)) if taken else None
        ctx.progress(f"  post-check: Spark scan of the data written since the baseline ({self.params['spark_master']})")
        path = _baseline_path(ctx)
        result = run_post_check(env.cluster, baseline, spark_master=str(self.params["spark_master"]),
                                topics_regex=str(self.params["topics"]) or None,
                                urp_samples=read_urp_samples(path.parent) if path is not None else [],
                                reader=str(self.params["reader"]),
                                notify=lambda line: ctx.progress(f"  post-check: {line}"))
        if path is not None:

            report = render_markdown(result)
            try:
                render_chart(result, path.parent / "post-check.png")
                report += _timeline(path.parent)
            except ImportError:  # matplotlib is optional; the report stands without its charts
                pass
            (path.parent / "post-check.md").write_text(report)
        ctx.progress(f"  post-check: {result.summary()}"
                     + (f" (report: {path.parent / 'post-check.md'}, chart: post-check.png)" if path else ""))
        try:
            result.raise_if_unhealthy()
        except CheckFailed as exc:
            exc.retryable = False  # a scan's findings do not change by retrying
            raise


def _timeline(run_dir: Path) -> str:
    """Draw the run's timeline so far (its journal and samples, in ``run_dir``) beside the post-check
    report, and the Markdown that embeds it: the reviewer sees when each host was down next to the
    findings. Nothing when the run has no journal there (a post-check outside a run)."""

    journal = run_dir / "journal.jsonl"
    if not journal.exists():
        return ""
    records = Journal(journal).records()
    draw(run_report(records, alive=True), read_samples(run_dir), run_dir / "timeline.png")
    return "\n## The run's timeline\n\n![the run's timeline: a lane per host, URP and produce rate](timeline.png)\n"


def _reader_known(params: Mapping[str, Any]) -> str | None:
    """A typo in the reader fails when the runbook is bound, not after the maintenance."""

    reader = str(params.get("reader", "fast"))
    return None if reader in READERS else f"reader {reader!r}: use one of {', '.join(READERS)}"


register_step("health.baseline", Baseline, [
    Param("scan", "bool", default=False, help="start the post-check's Spark session now, in the background"),
    Param("spark_master", "str", default="local[2]", help="local[N], spark://host:7077 or yarn"),
], effect="read-only")
register_step("health.post_check", PostCheck, [
    Param("timeout", "duration", default=300.0, help="how long the cluster may take to become healthy"),
    Param("scan", "bool", default=True, help="compare with the baseline and scan the data on Spark (--no-scan)"),
    Param("spark_master", "str", default="local[2]", help="local[N], spark://host:7077 or yarn"),
    Param("topics", "str", default="", help="only topics matching this regex (default: all)"),
    Param("reader", "str", default="fast",
          help="the scan's Kafka reader: fast (ours) or builtin (Spark's kafka source); same report"),
], check=_reader_known, effect="read-only")
