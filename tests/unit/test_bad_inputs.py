"""Every command, fed the mistakes operators make: the documented exit code, one line, nothing changed.

Each case runs the real CLI in a subprocess (``python -m kafkaops.cli.main ARGS``) with its own
``KAFKAOPS_HOME``, lock directory and working directory under ``tmp_path``, ``KAFKAOPS_LAB_DIR`` at a
directory that does not exist (no lab: ``kafkaops lab ...`` never sees a real one) and
``KAFKAOPS_INVENTORY`` at the inventory the case needs (every other ``KAFKAOPS_*`` variable removed).
The inventories are ``inventory/lab.yaml`` moved to 127.0.47.0/24, where nothing listens: a case never
reaches a live system, and most fail before any connection is attempted.

Each case asserts:

* the exit code documented in docs/exit-codes.md (2 usage, 3 configuration, 4 unreachable, 8 stale,
  12 lab, ...);
* **one line on stderr**: its non-blank lines, once click's usage block is dropped, are exactly one,
  and it contains the case's expected words. The rule: when the exit code is 2 and stderr starts with
  ``Usage:``, the lines up to and including click's ``Try '... --help' for help.`` (the usage line, its
  wrapped continuation and the hint) are that block; nothing else is ever ignored;
* no ``Traceback`` and no ``internal error`` on stderr or stdout;
* nothing changed: the shared files (inventories, plans, snapshots) are byte-for-byte and mtime
  identical, and the case's ``KAFKAOPS_HOME`` and lock directory hold nothing (no run directory, no
  lock file, no audit record).

Two inventories defining the same names (no ``-i``), and no inventory at all, need the default search
pointed at a temporary directory: those cases set ``XDG_CONFIG_HOME`` (``Case.search``: the inventories
are then found in its ``kafkaops/inventory/``) and ``KAFKAOPS_SYSCONFDIR`` (every case: the machine's
``/etc/kafkaops`` is never searched).

Cases marked ``xfail(strict=True)`` are mistakes the product still accepts, whose fix belongs in a
file this test's author could not change (the reason says which); they turn into failures when fixed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The lab's addresses moved here: a loopback /24 where nothing listens (never the lab's 127.0.10.0/24).
CLOSED_NET = "127.0.47."


@dataclass(frozen=True)
class Case:
    """One mistake: ``args`` (``{world}`` is the shared directory of inputs), the exit code, and words
    the one error line must contain. ``inventory``: the file of ``world`` that ``KAFKAOPS_INVENTORY``
    names (None: unset); ``search``: a directory of ``world`` that is ``$XDG_CONFIG_HOME`` (the default
    inventory search reads its ``kafkaops/inventory/``)."""

    id: str
    args: tuple[str, ...]
    exit: int
    says: str = ""
    inventory: str | None = "closed.yaml"
    search: str | None = None


USAGE, CONFIG, UNREACHABLE, STALE, LAB = 2, 3, 4, 8, 12

CASES = [
    # --- unknown host and cluster ---------------------------------------------------------------------
    Case("reboot-unknown-host", ("reboot", "nosuch1001", "--dry-run"), CONFIG, "unknown host 'nosuch1001'"),
    Case("restart-unknown-host", ("restart", "nosuch1001", "--dry-run"), CONFIG, "unknown host 'nosuch1001'"),
    Case("rolling-reboot-unknown-cluster", ("rolling-reboot", "nosuch", "--dry-run"), CONFIG,
         "unknown cluster 'nosuch'"),
    Case("rolling-restart-unknown-cluster", ("rolling-restart", "nosuch", "--dry-run"), CONFIG,
         "unknown cluster 'nosuch'"),
    Case("restart-service-unknown-service", ("restart-service", "nosuchsvc", "kafka1001", "--dry-run"), CONFIG,
         "kafka1001 has no service 'nosuchsvc'"),
    Case("rolling-restart-service-unknown-cluster", ("rolling-restart-service", "eventbus", "nosuch", "--dry-run"),
         CONFIG, "unknown cluster 'nosuch'"),
    Case("rolling-deploy-unknown-cluster",
         ("rolling-deploy", "nosuch", "-s", "eventbus", "-m", "m", "--rev", "r1", "--dry-run"), CONFIG,
         "unknown cluster 'nosuch'"),
    Case("run-unknown-host", ("run", "restart", "nosuch1001", "--dry-run"), CONFIG, "unknown host 'nosuch1001'"),
    Case("run-unknown-runbook", ("run", "nosuch", "lab"), USAGE, "no runbook named 'nosuch'"),
    Case("status-unknown-cluster", ("status", "nosuch"), CONFIG, "unknown cluster 'nosuch'"),
    Case("check-unknown-cluster", ("check", "nosuch", "--no-scan"), CONFIG, "unknown cluster 'nosuch'"),
    Case("snapshot-unknown-cluster", ("snapshot", "nosuch", "--out", "{tmp}/snap.json"), CONFIG,
         "unknown cluster 'nosuch'"),
    # -o is the output format everywhere (issue 45): the snapshot's file is --out, and -o FILE a usage error
    Case("snapshot-o-is-a-format", ("snapshot", "lab", "-o", "{tmp}/snap.json"), USAGE,
         "Invalid value for '--output'"),
    Case("snapshot-without-out", ("snapshot", "lab"), USAGE, "Missing option '--out'"),
    Case("runs-unlock-typo", ("runs", "unlock", "TYPO", "--reason", "r"), CONFIG, "unknown cluster 'TYPO'"),
    Case("runs-unlock-typo-no-reason", ("runs", "unlock", "TYPO"), USAGE, "--reason"),
    Case("lab-host-reboot-unknown-no-lab", ("lab", "host", "reboot", "nosuch1001"), LAB, "no lab at"),
    Case("lab-host-crash-no-lab", ("lab", "host", "crash", "kafka1001"), LAB, "no lab at"),
    # --- malformed inventories ---------------------------------------------------------------------------
    Case("inventory-bad-indentation", ("status", "lab"), CONFIG, "bad-indent.yaml:10: invalid YAML",
         inventory="bad-indent.yaml"),
    Case("inventory-tab-indentation", ("reboot", "kafka1001", "--dry-run"), CONFIG, "invalid YAML",
         inventory="tabs.yaml"),
    Case("inventory-wrong-type", ("reboot", "kafka1001", "--dry-run"), CONFIG,
         "hosts.kafka1002.broker_id: expected an integer, got 'two'", inventory="wrong-type.yaml"),
    Case("inventory-hosts-not-a-mapping", ("rolling-restart", "lab", "--dry-run"), CONFIG,
         "hosts: expected a mapping, got list", inventory="hosts-list.yaml"),
    Case("inventory-unknown-key", ("status", "lab"), CONFIG, "hosts.kafka1001.rak: unknown key",
         inventory="unknown-key.yaml"),
    # secured clusters (issue 43): secrets by file or variable, files only their owner reads
    Case("inventory-inline-kafka-password", ("status", "lab"), CONFIG,
         "kafka.security.sasl.password: a password is never written in an inventory",
         inventory="inline-password.yaml"),
    Case("inventory-world-readable-secret", ("status", "lab"), CONFIG, "may be read by other users (mode 0644)",
         inventory="exposed-secret.yaml"),
    Case("inventory-missing-secret", ("status", "lab"), CONFIG,
         "kafka.security.sasl.password_file", inventory="absent-secret.yaml"),
    Case("inventory-gssapi", ("status", "lab"), CONFIG, "unknown SASL mechanism 'GSSAPI'",
         inventory="gssapi.yaml"),
    Case("inventory-missing-key", ("rolling-reboot", "lab", "--dry-run"), CONFIG,
         "hosts.kafka1002.broker_id: missing required key", inventory="missing-key.yaml"),
    Case("inventory-missing-template", ("restart", "kafka1001", "--dry-run"), CONFIG,
         "missing command template(s): reboot", inventory="missing-template.yaml"),
    Case("inventory-duplicate-host-name", ("reboot", "kafka1001", "--dry-run"), CONFIG,
         "hosts.kafka1001: defined twice", inventory="duplicate-host.yaml"),
    Case("inventory-duplicate-broker-id", ("status", "lab"), CONFIG, "broker id 1001 already used by kafka1001",
         inventory="duplicate-broker-id.yaml"),
    Case("inventory-controllers-beside-zookeeper", ("status", "lab"), CONFIG,
         "controllers: a ZooKeeper-mode cluster has no KRaft controller nodes", inventory="zk-controllers.yaml"),
    Case("inventory-controller-node-id-taken", ("status", "lab"), CONFIG, "node id 1001 already used by kafka1001",
         inventory="kraft-id-taken.yaml"),
    Case("rolling-restart-controllers-of-zookeeper-cluster", ("rolling-restart", "lab", "--role", "controllers",
                                                              "--dry-run"), CONFIG, "runs in ZooKeeper mode"),
    Case("rolling-restart-unknown-role", ("rolling-restart", "lab", "--role", "controller", "--dry-run"), USAGE,
         "controller"),
    Case("reboot-a-kraft-controller-node", ("reboot", "kafka-ctrl3001", "--dry-run"), CONFIG,
         "kafka-ctrl3001 is a KRaft controller node", inventory="kraft.yaml"),
    Case("inventory-quoted-placeholder", ("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--dry-run"),
         CONFIG, "puts {message} inside its own quotes", inventory="quoted-placeholder.yaml"),
    Case("inventory-malformed-template", ("status", "lab"), CONFIG, "command template 'reboot' is malformed",
         inventory="malformed-template.yaml"),
    Case("inventory-bad-regex", ("restart-service", "eventbus", "kafka1001", "--dry-run"), CONFIG,
         "error_patterns[0]: bad regex", inventory="bad-regex.yaml"),
    Case("inventory-hostile-names-listed-literally", ("reboot", "nosuch1001", "--dry-run"), CONFIG,
         "known hosts: kafka1001, kafka[/]1002, kafka1003;id", inventory="hostile-names.yaml"),
    Case("inventory-not-utf8", ("status", "lab"), CONFIG,
         "not-utf8.yaml:2: cannot read inventory: not UTF-8 text (byte 0xe9)", inventory="not-utf8.yaml"),
    # $KAFKAOPS_INVENTORY may name a directory (its *.yaml: docs/install.md); one with none is the same one line.
    Case("inventory-directory-without-any", ("reboot", "kafka1001", "--dry-run"), CONFIG,
         "no inventory found in $KAFKAOPS_INVENTORY", inventory="empty"),
    Case("inventory-option-missing-file", ("-i", "{world}/nope.yaml", "status", "lab"), CONFIG,
         "no such inventory file"),
    Case("inventory-empty", ("runs", "unlock", "lab", "--reason", "r"), CONFIG, "cluster: missing required key",
         inventory="empty.yaml"),
    Case("lab-up-malformed-inventory", ("lab", "up", "-i", "{world}/wrong-type.yaml"), CONFIG,
         "expected an integer", inventory=None),
    # --- two inventories, no -i: a name defined twice is an error naming both ---------------------------
    Case("two-inventories-host", ("reboot", "kafka1001", "--dry-run"), CONFIG,
         "host 'kafka1001' is defined by", inventory=None, search="two"),
    Case("two-inventories-cluster", ("status", "lab"), CONFIG, "cluster 'lab' is defined by", inventory=None,
         search="two"),
    Case("two-inventories-unlock", ("runs", "unlock", "lab", "--reason", "r"), CONFIG,
         "cluster 'lab' is defined by", inventory=None, search="two"),
    # --- no inventory anywhere: never the lab's; one line naming every place searched -----------------------
    Case("no-inventory-anywhere", ("reboot", "kafka1001", "--dry-run"), CONFIG,
         "no inventory found anywhere: searched --inventory (not set), $KAFKAOPS_INVENTORY (not set)",
         inventory=None, search="empty"),
    Case("no-inventory-status", ("status", "lab"), CONFIG, "no inventory found anywhere", inventory=None,
         search="empty"),
    Case("doctor-bad-output", ("doctor", "-o", "yaml"), USAGE, "Invalid value for '--output'"),
    Case("docs-unknown-topic", ("docs", "securty"), USAGE, "no documentation topic 'securty'; topics: "),
    Case("docs-two-topics", ("docs", "security", "install"), USAGE, "Got unexpected extra argument"),
    Case("broker-demote-unknown-host", ("broker", "demote", "kafka9999", "--dry-run"), CONFIG, "kafka9999"),
    Case("broker-decommission-no-reason", ("broker", "decommission", "kafka1001"), USAGE, "--reason is required"),
    Case("broker-add-bad-throttle", ("broker", "add", "kafka1001", "--dry-run", "--throttle", "fast"), USAGE,
         "--throttle"),
    Case("controllers-add-a-broker", ("controllers", "add", "kafka1001", "--dry-run"), CONFIG,
         "kafka1001 is not a KRaft controller node of lab"),
    Case("controllers-remove-no-reason", ("controllers", "remove", "kafka1001"), USAGE, "--reason is required"),
    Case("controllers-add-bad-timeout", ("controllers", "add", "kafka1001", "--dry-run", "--timeout", "soon"), USAGE,
         "--timeout"),
    Case("broker-replace-no-reason", ("broker", "replace", "kafka1002"), USAGE, "--reason is required"),
    Case("broker-replace-start-below-min", ("broker", "replace", "kafka1002", "--dry-run", "--throttle", "1MB/s",
                                            "--min-throttle", "5MB/s"), USAGE, "--throttle"),
    Case("broker-replace-bad-interval", ("broker", "replace", "kafka1002", "--dry-run", "--interval", "soon"), USAGE,
         "--interval"),
    Case("inventory-check-no-such-file", ("inventory", "check", "{tmp}/nosuch.yaml"), CONFIG,
         "1 error(s) in 1 of 1 inventory file(s)"),
    Case("inventory-init-no-bootstrap", ("inventory", "init", "x"), USAGE, "Missing option '--bootstrap'"),
    Case("inventory-schema-extra-argument", ("inventory", "schema", "x.json"), USAGE, "unexpected extra argument"),
    Case("inventory-init-security-file-missing", ("inventory", "init", "x", "--bootstrap", "127.0.0.1:9",
                                                  "--security-from", "{tmp}/nosuch.yaml"), CONFIG,
         "cannot read inventory"),
    # --- --reason: missing and blank are the same mistake --------------------------------------------------
    Case("reboot-missing-reason", ("reboot", "kafka1001"), USAGE, "--reason is required"),
    Case("reboot-empty-reason", ("reboot", "kafka1001", "--reason", ""), USAGE, "--reason is required"),
    Case("reboot-blank-reason", ("reboot", "kafka1001", "--reason", "   "), USAGE, "--reason is required"),
    Case("run-missing-reason", ("run", "rolling-reboot", "lab", "--yes"), USAGE, "--reason is required"),
    Case("run-blank-reason", ("run", "rolling-reboot", "lab", "--yes", "-r", "\t"), USAGE, "--reason is required"),
    Case("rolling-deploy-blank-reason",
         ("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--yes", "--reason", " "), USAGE,
         "--reason is required"),
    Case("runs-abort-missing-reason", ("runs", "abort", "20260101-000000-reboot-abcd"), USAGE, "--reason"),
    Case("runs-abort-blank-reason", ("runs", "abort", "20260101-000000-reboot-abcd", "--reason", " "), USAGE,
         "--reason"),
    Case("runs-unlock-missing-reason", ("runs", "unlock", "lab", "--force"), USAGE, "--reason"),
    Case("runs-unlock-blank-reason", ("runs", "unlock", "lab", "--force", "--reason", " "), USAGE, "--reason"),
    # apply's --reason overrides the plan's: blank is "not given" (the plan's reviewed reason), as missing.
    Case("apply-missing-reason", ("apply", "{world}/plan.json"), UNREACHABLE, "ZooKeeper at 127.0.47.10:2182"),
    Case("apply-blank-reason", ("apply", "{world}/plan.json", "--reason", " "), UNREACHABLE,
         "ZooKeeper at 127.0.47.10:2182"),
    # --- negative and absurd numbers and durations ---------------------------------------------------
    Case("reboot-syn-window-negative", ("reboot", "kafka1001", "--dry-run", "--syn-window", "-1s"), USAGE,
         "'-1s' is not a duration"),
    Case("reboot-syn-window-1000d", ("reboot", "kafka1001", "--dry-run", "--syn-window", "1000d"), USAGE,
         "'1000d' is above the maximum 1h"),
    Case("restart-isr-headroom-negative", ("restart", "kafka1001", "--dry-run", "--isr-headroom", "-1"), USAGE,
         "'-1' is below the minimum 0"),
    Case("run-param-syn-window-1000d", ("run", "reboot", "kafka1001", "--dry-run", "-p", "syn_window=1000d"),
         USAGE, "--param syn_window=1000d: '1000d' is above the maximum 1h"),
    Case("run-param-isr-headroom-negative", ("run", "reboot", "kafka1001", "--dry-run", "-p", "isr_headroom=-1"),
         USAGE, "below the minimum 0"),
    Case("run-param-unknown", ("run", "reboot", "kafka1001", "--dry-run", "-p", "syn_windw=10s"), USAGE,
         "did you mean 'syn_window'?"),
    Case("run-param-not-name-value", ("run", "reboot", "kafka1001", "--dry-run", "-p", "syn_window"), USAGE,
         "expected NAME=VALUE"),
    Case("rolling-restart-service-canary-negative",
         ("rolling-restart-service", "eventbus", "lab", "--dry-run", "--canary", "-1"), USAGE,
         "below the minimum 0"),
    Case("rolling-reboot-contradicting-flags",
         ("rolling-reboot", "lab", "--dry-run", "--no-election", "--election-at-end"), USAGE, "contradict"),
    Case("restart-service-log-window-1000d",
         ("restart-service", "eventbus", "kafka1001", "--dry-run", "--log-window", "1000d"), USAGE, "maximum"),
    Case("check-since-negative", ("check", "lab", "--no-scan", "--since", "-1s"), USAGE, "'-1s' is not a duration"),
    Case("check-since-1000d", ("check", "lab", "--no-scan", "--since", "1000d"), USAGE, "at most 30d"),
    Case("check-since-not-a-duration", ("check", "lab", "--no-scan", "--since", "soon"), USAGE,
         "'soon' is not a duration"),
    Case("runs-list-limit-negative", ("runs", "list", "--limit", "-1"), USAGE, "-1"),
    Case("lab-load-negative-seconds", ("lab", "load", "--seconds", "-1"), USAGE, "--seconds"),
    Case("service-bench-concurrency-above-requests", ("service", "bench", "eventbus", "lab", "-n", "10", "-c", "20"),
         USAGE, "more than the 10 in all"),
    Case("service-bench-unknown-service", ("service", "bench", "nosuch", "lab"), CONFIG, "runs no service 'nosuch'"),
    Case("service-bench-nothing-listens", ("service", "bench", "eventbus", "lab", "-n", "5", "-c", "1"), UNREACHABLE,
         "Connection refused"),
    Case("lab-slow-shutdown-negative", ("lab", "host", "slow-shutdown", "kafka1001", "--", "-5"), USAGE, "-5"),
    # --- bad output formats -----------------------------------------------------------------------
    Case("reboot-output-xml", ("reboot", "kafka1001", "--dry-run", "-o", "xml"), USAGE, "'xml' is not one of"),
    Case("status-output-xml", ("status", "lab", "-o", "xml"), USAGE, "'xml' is not one of"),
    Case("check-output-xml", ("check", "lab", "-o", "xml"), USAGE, "'xml' is not one of"),
    Case("runs-list-output-xml", ("runs", "list", "-o", "xml"), USAGE, "'xml' is not one of"),
    Case("runbooks-show-output-yaml", ("runbooks", "show", "reboot", "-o", "yaml"), USAGE, "'yaml' is not one of"),
    Case("lab-status-output-markdown", ("lab", "status", "-o", "markdown"), USAGE, "'markdown' is not one of"),
    # --- other command-line mistakes of check ----------------------------------------------------------
    Case("check-bad-topics-regex", ("check", "lab", "--no-scan", "--topics", "eqiad.(foo"), USAGE,
         "invalid regex"),
    Case("check-since-and-baseline", ("check", "lab", "--since", "1m", "--baseline", "{world}/plan.json"), USAGE,
         "exclusive"),
    Case("check-spark-conf-not-key-value", ("check", "lab", "--spark-conf", "spark.executor.cores"), USAGE,
         "expected KEY=VALUE"),
    Case("check-baseline-not-a-snapshot", ("check", "lab", "--no-scan", "--baseline", "{world}/plan-foreign.json"),
         CONFIG, "plan-foreign.json"),
    Case("check-baseline-missing", ("check", "lab", "--no-scan", "--baseline", "{world}/nope.json"), CONFIG,
         "cannot read snapshot"),
    # --- hostile values on the command line: refused before any system is asked --------------------------
    Case("rolling-deploy-hostile-rev",
         ("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1;touch /tmp/pwned", "--dry-run"),
         CONFIG, "is not a revision"),
    Case("rolling-deploy-hostile-repo",
         ("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--repo", "../../etc", "--dry-run"),
         CONFIG, "is not a repository path"),
    Case("rolling-deploy-message-newline",
         ("rolling-deploy", "lab", "-s", "eventbus", "-m", "ok\n; reboot", "--rev", "r1", "--dry-run"), CONFIG,
         "control character"),
    Case("rolling-deploy-empty-message", ("rolling-deploy", "lab", "-s", "eventbus", "-m", "", "--dry-run"),
         CONFIG, "needs a message"),
    Case("rolling-restart-service-hostile-service",
         ("rolling-restart-service", "eventbus;id", "lab", "--dry-run"), CONFIG, "runs 'eventbus;id'"),
    # --- run ids are names, never paths ----------------------------------------------------------------
    Case("resume-dotdot", ("resume", "../../etc"), CONFIG, "'../../etc' is not a run id"),
    Case("resume-absolute", ("resume", "/tmp/x"), CONFIG, "'/tmp/x' is not a run id"),
    Case("resume-unknown", ("resume", "20260101-000000-reboot-abcd"), CONFIG, "no run '20260101-000000-reboot-abcd'"),
    Case("runs-show-dotdot", ("runs", "show", "../x"), CONFIG, "'../x' is not a run id"),
    Case("runs-show-empty", ("runs", "show", ""), CONFIG, "'' is not a run id"),
    Case("runs-abort-absolute", ("runs", "abort", "/etc/passwd", "--reason", "r"), CONFIG, "is not a run id"),
    # --- plans: corrupt, edited, foreign, unreadable, stale ------------------------------------------
    Case("apply-edited-plan", ("apply", "{world}/plan-edited.json"), CONFIG,
         "the plan was edited after it was saved: the request"),
    Case("apply-foreign-json", ("apply", "{world}/plan-foreign.json"), CONFIG, "not a kafkaops plan"),
    Case("apply-created-at-soon", ("apply", "{world}/plan-soon.json"), CONFIG, "malformed plan"),
    Case("apply-plan-not-json", ("apply", "{world}/closed.yaml"), CONFIG, "not a plan file (invalid JSON"),
    Case("apply-plan-not-utf8", ("apply", "{world}/plan-not-utf8.json"), CONFIG, "not UTF-8"),
    Case("apply-plan-directory", ("apply", "{world}"), CONFIG, "cannot read plan: Is a directory"),
    Case("apply-plan-missing", ("apply", "{world}/nope.json"), CONFIG, "cannot read plan: No such file"),
    Case("apply-plan-of-changed-inventory", ("apply", "{world}/plan-stale.json"), STALE,
         "changed since the plan was made: bootstrap_servers"),
    # --- unwritable outputs: refused before anything is observed, as a configuration error ------------------
    Case("reboot-save-plan-unwritable", ("reboot", "kafka1001", "--dry-run", "--save-plan", "/proc/x/plan.json"),
         CONFIG, "/proc/x/plan.json: cannot write the plan: No such file or directory"),
    Case("rolling-deploy-save-plan-directory",
         ("rolling-deploy", "lab", "-s", "eventbus", "-m", "m", "--rev", "r1", "--dry-run", "--save-plan", "{world}"),
         CONFIG, "cannot write the plan: Is a directory"),
    Case("snapshot-out-unwritable", ("snapshot", "lab", "--out", "/proc/x/snap.json"), CONFIG,
         "/proc/x/snap.json: cannot write the snapshot: No such file or directory"),
    Case("snapshot-out-directory", ("snapshot", "lab", "--out", "{world}"), CONFIG,
         "cannot write the snapshot: Is a directory"),
    Case("check-chart-unwritable", ("check", "lab", "--no-scan", "--chart", "/proc/x/chart.png"), CONFIG,
         "/proc/x/chart.png: cannot write the chart: No such file or directory"),
    Case("runbooks-docs-out-unwritable", ("runbooks", "docs", "--out", "/proc/x"), CONFIG,
         "/proc/x/broker-add.md: cannot write the runbook page: No such file or directory"),
    # --- failed-events ------------------------------------------------------------------------------
    Case("failed-events-list-unknown-target", ("failed-events", "list", "nosuch"), CONFIG,
         "'nosuch' is neither a cluster nor a host"),
    Case("failed-events-list-since-zero", ("failed-events", "list", "lab", "--since", "0s"), USAGE, "--since '0s'"),
    Case("failed-events-list-bad-topic", ("failed-events", "list", "lab", "--topic", "("), USAGE,
         "not a valid regular expression"),
    Case("failed-events-list-output-markdown", ("failed-events", "list", "lab", "-o", "markdown"), USAGE,
         "'markdown' is not one of"),
    Case("failed-events-replay-no-reason", ("failed-events", "replay", "lab"), USAGE, "--reason is required"),
    Case("failed-events-replay-bad-rate", ("failed-events", "replay", "lab", "--rate", "fast", "--dry-run"), USAGE,
         "--rate 'fast'"),
    Case("failed-events-replay-bad-via", ("failed-events", "replay", "lab", "--via", "smtp", "--dry-run"), USAGE,
         "--via 'smtp'"),
    Case("failed-events-replay-unknown-service", ("failed-events", "replay", "lab", "-s", "nosuch", "--dry-run"),
         CONFIG, "no host of lab runs service 'nosuch'"),
    Case("failed-events-replay-report-unwritable",
         ("failed-events", "replay", "lab", "--output-invalid", "/proc/x/r.jsonl", "--dry-run"), CONFIG,
         "cannot write the report of rejected events"),
    # --- placement ---------------------------------------------------------------------------------
    Case("placement-check-unknown-cluster", ("placement", "check", "nosuch"), CONFIG, "unknown cluster 'nosuch'"),
    Case("placement-check-bad-topics", ("placement", "check", "lab", "--topics", "("), USAGE,
         "not a regular expression"),
    Case("placement-plan-bad-throttle", ("placement", "plan", "lab", "--throttle", "fast"), USAGE,
         "'fast' is not a rate"),
    Case("placement-plan-rf-too-low", ("placement", "plan", "lab", "--rf", "1"), USAGE,
         "replication factor 1 cannot give each of 1 DCs 2 replicas"),
    Case("placement-plan-unwritable", ("placement", "plan", "lab", "--save-plan", "/proc/x/p.json"), CONFIG,
         "cannot write the plan"),
    Case("placement-apply-missing-plan", ("placement", "apply", "{world}/nope.json"), CONFIG, "cannot read plan"),
    # --- the migration to KRaft ------------------------------------------------------------------------------
    Case("migrate-unknown-cluster", ("migrate-to-kraft", "nosuch", "--dry-run"), CONFIG, "unknown cluster 'nosuch'"),
    Case("migrate-not-migrating", ("migrate-to-kraft", "lab", "--dry-run"), CONFIG,
         "lab is not being migrated to KRaft"),
    Case("migrate-no-reason", ("migrate-to-kraft", "lab", "--yes"), USAGE, "--reason is required"),
    Case("upgrade-not-a-version", ("rolling-upgrade", "lab", "--to", "latest", "--dry-run"), USAGE,
         "'latest' is not a Kafka release version"),
    Case("upgrade-zookeeper-mode", ("rolling-upgrade", "lab", "--to", "4.3.1", "--dry-run"), CONFIG,
         "the inventory lists no KRaft controller nodes for lab"),
    # --- multi-site: switchover, offsets translate, the two-site lab ------------------------------------
    Case("switchover-unknown-service", ("switchover", "nosuch", "--from", "eqiad", "--to", "codfw", "--dry-run"),
         CONFIG, "no multi-site inventory switches 'nosuch'"),
    Case("switchover-unknown-site", ("switchover", "eventbus", "--from", "eqiad", "--to", "ulsfo", "--dry-run"),
         USAGE, "'ulsfo' is not a site of closed-sites", inventory="sites.yaml"),
    Case("switchover-to-itself", ("switchover", "eventbus", "--from", "eqiad", "--to", "lab", "--dry-run"),
         USAGE, "the service would stay in eqiad", inventory="sites.yaml"),
    Case("switchover-bad-margin", ("switchover", "eventbus", "--from", "eqiad", "--to", "codfw", "--margin", "soon",
                                   "--dry-run"), USAGE, "soon", inventory="sites.yaml"),
    Case("switchover-no-reason", ("switchover", "eventbus", "--from", "eqiad", "--to", "codfw", "--yes"), USAGE,
         "--reason is required", inventory="sites.yaml"),
    Case("offsets-translate-not-two-sites", ("offsets", "translate", "g1", "--from", "lab", "--to", "nosuch",
                                             "--dry-run"), CONFIG, "no multi-site inventory has both lab and nosuch",
         inventory="sites.yaml"),
    Case("offsets-translate-bad-topics", ("offsets", "translate", "g1", "--from", "lab", "--to", "lab-codfw",
                                          "--topics", "(", "--dry-run"), USAGE, "not a regular expression",
         inventory="sites.yaml"),
    Case("inventory-sites-one-site", ("status", "closed-sites"), CONFIG, "needs two sites or more",
         inventory="sites-one.yaml"),
    Case("inventory-sites-wrong-dc", ("status", "closed-sites"), CONFIG, "has hosts in DC eqiad, not codfw",
         inventory="sites-wrong-dc.yaml"),
    Case("inventory-sites-bad-group", ("status", "closed-sites"), CONFIG, "'bad group' is not a Kafka group id",
         inventory="sites-bad-group.yaml"),
    Case("lab-up-unknown-sites", ("lab", "up", "--sites", "eqiad,ulsfo"), LAB, "no two-site lab of 'eqiad,ulsfo'",
         inventory=None),
    # --- runbooks -----------------------------------------------------------------------------------
    Case("runbooks-show-unknown", ("runbooks", "show", "nosuch"), CONFIG, "no runbook named 'nosuch'"),
    Case("runbooks-show-path", ("runbooks", "show", "../../etc/passwd"), CONFIG, "no runbook named"),
    Case("runbooks-list-missing-dir", ("runbooks", "list", "--dir", "{world}/nope"), CONFIG,
         "no such runbook directory"),
    Case("runbooks-docs-check-missing-dir", ("runbooks", "docs", "--check", "--dir", "{world}/nope"), CONFIG,
         "no such runbook directory"),
    Case("root-runbooks-missing-dir", ("--runbooks", "{world}/nope", "reboot", "kafka1001"), CONFIG,
         "no such runbook directory"),
]


#: Mistakes the product still gets wrong, by case id: strict xfails, so that a fix turns its case into a
#: failure until the case is taken off this list.
NOT_FIXED: dict[str, str] = {}


# --- the shared inputs ---------------------------------------------------------------------------------------


def _variant(base: str, old: str, new: str) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


_CONTROLLERS = """
controllers:
  kafka-ctrl3001:
    address: 127.0.47.31
    node_id: 3001
"""


_SITES = f"""sites: closed-sites
environment: lab
clusters:
  eqiad: closed.yaml
  codfw: site-codfw.yaml
discovery:
  etcd: http://{CLOSED_NET}11:2379
  config: ${{KAFKAOPS_LAB_DIR}}/conftool/config.yaml
switchover:
  eventbus:
    discovery: eventbus
    consumer_groups: [lab-switchover]
"""


def _inventories(world: Path) -> None:
    base = (REPO / "inventory" / "lab.yaml").read_text().replace("127.0.10.", CLOSED_NET)
    assert "127.0.10." not in base
    zk_identity = base[base.index("  zookeeper_security:"):base.index("  # Secured as production")]
    kafka_password = "${KAFKAOPS_LAB_DIR:-~/.local/state/kafkaops/lab}/secrets/kafkaops.password"
    exposed = world / "exposed.password"
    exposed.write_text("pw\n")
    exposed.chmod(0o644)
    kraft = _variant(_variant(base, "  zookeeper: 127.0.47.10:2182\n", ""), zk_identity, "")
    files = {
        "closed.yaml": base,
        "bad-indent.yaml": _variant(base, "  zookeeper: ", "   zookeeper: "),
        "tabs.yaml": _variant(base, "  zookeeper: ", "\tzookeeper: "),
        "wrong-type.yaml": _variant(base, "broker_id: 1002", "broker_id: two"),
        "hosts-list.yaml": base[:base.index("\nhosts:\n")] + "\nhosts:\n  - kafka1001\n  - kafka1002\n",
        "unknown-key.yaml": _variant(base, "    rack: A\n", "    rack: A\n    rak: B\n"),
        "missing-key.yaml": _variant(base, "    broker_id: 1002\n", ""),
        "missing-template.yaml": _variant(base, "  reboot: hostctl reboot\n", ""),
        "duplicate-host.yaml": _variant(base, "  kafka1002:\n", "  kafka1001:\n"),
        "duplicate-broker-id.yaml": _variant(base, "broker_id: 1002", "broker_id: 1001"),
        "quoted-placeholder.yaml": _variant(base, "--rev {rev} -- {message}", "--rev {rev} -- \"{message}\""),
        "malformed-template.yaml": _variant(base, "reboot: hostctl reboot", "reboot: hostctl reboot {"),
        "bad-regex.yaml": _variant(base, '"Failed processing event"', '"Failed (processing event"'),
        "hostile-names.yaml": _variant(_variant(base, "  kafka1002:\n", "  kafka[/]1002:\n"),
                                       "  kafka1003:\n", '  "kafka1003;id":\n'),
        "zk-controllers.yaml": base + _CONTROLLERS,
        "kraft-id-taken.yaml": kraft + _CONTROLLERS.replace("node_id: 3001", "node_id: 1001"),
        "kraft.yaml": kraft + _CONTROLLERS,
        "empty.yaml": "",
        "stale.yaml": base,
        "inline-password.yaml": _variant(base, f"password_file: {kafka_password}", "password: hunter2"),
        "exposed-secret.yaml": _variant(base, f"password_file: {kafka_password}", f"password_file: {exposed}"),
        "absent-secret.yaml": _variant(base, f"password_file: {kafka_password}",
                                       f"password_file: {world / 'absent.password'}"),
        "gssapi.yaml": _variant(base, "mechanism: SCRAM-SHA-512", "mechanism: GSSAPI"),
    }
    codfw = (base.replace(CLOSED_NET, "127.0.48.").replace("dc: eqiad", "dc: codfw")
             .replace("cluster: lab\n", "cluster: lab-codfw\n").replace("kafka100", "kafka200"))
    files["site-codfw.yaml"] = codfw
    files["sites.yaml"] = _SITES
    files["sites-one.yaml"] = _variant(_SITES, "  codfw: site-codfw.yaml\n", "")
    files["sites-wrong-dc.yaml"] = _variant(_SITES, "  codfw: site-codfw.yaml\n", "  codfw: stale.yaml\n")
    files["sites-bad-group.yaml"] = _variant(_SITES, "[lab-switchover]", "[bad group]")
    for name, text in files.items():
        (world / name).write_text(text)
    (world / "not-utf8.yaml").write_bytes(b"cluster: lab\n# caf\xe9 in latin-1\n")
    two = world / "two" / "kafkaops" / "inventory"  # as $XDG_CONFIG_HOME/kafkaops/inventory
    two.mkdir(parents=True)
    (two / "a.yaml").write_text(base)
    (two / "b.yaml").write_text(base.replace(CLOSED_NET, "127.0.48."))
    (world / "empty").mkdir()  # an XDG_CONFIG_HOME without any inventory


def _lab_secrets(lab: Path) -> None:
    """What the secured lab inventory names (a CA, 0600 passwords), so each case meets the error it is about,
    not a missing secret (those have cases of their own: tests/unit/test_kafka_security.py)."""
    (lab / "tls").mkdir(parents=True)
    (lab / "tls" / "ca.pem").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text())
    (lab / "secrets").mkdir(mode=0o700)
    for name in ("kafkaops", "zookeeper", "alertmanager"):
        (lab / "secrets" / f"{name}.password").write_text("pw\n")
        (lab / "secrets" / f"{name}.password").chmod(0o600)


def _plans(world: Path) -> None:
    """A fresh plan of the closed inventory (made in-process as `--save-plan` would, without its steps:
    every case refuses it before they matter), and its corrupt, edited and foreign variants."""
    from kafkaops.catalog import load_plugins
    from kafkaops.engine.binding import Target, bind_runbook
    from kafkaops.engine.plan import Plan, save_plan
    from kafkaops.engine.runbook import load_runbook
    from kafkaops.environment import Environment
    from kafkaops.inventory import load_inventory

    load_plugins()
    rb = load_runbook(REPO / "runbooks" / "reboot.yaml")

    def plan_of(inventory: Path) -> Plan:
        cluster = load_inventory(inventory)
        host = cluster.hosts[0]
        bound = bind_runbook(rb, cluster=cluster, targets=[Target(host.name, host=host)], params={})
        return Plan(runbook=rb.name, summary=rb.summary, cluster=cluster.name, operator="alice@admin",
                    reason="kernel upgrade", task="T1", created_at=time.time(), bound=bound.to_dict(),
                    environment=Environment(cluster, inventory=inventory).identity())

    save_plan(plan_of(world / "closed.yaml"), world / "plan.json")
    save_plan(plan_of(world / "stale.yaml"), world / "plan-stale.json")
    stale = world / "stale.yaml"
    stale.write_text(stale.read_text().replace(f"{CLOSED_NET}3:9092", f"{CLOSED_NET}3:9093"))
    data = json.loads((world / "plan.json").read_text())
    (world / "plan-edited.json").write_text(json.dumps({**data, "reason": "something else"}))
    (world / "plan-soon.json").write_text(json.dumps({**data, "created_at": "soon"}))
    (world / "plan-foreign.json").write_text(json.dumps({"hello": "world", "steps": 3}))
    (world / "plan-not-utf8.json").write_bytes(b'{"reason": "caf\xe9"}')


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    world = tmp_path_factory.mktemp("world")
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("KAFKAOPS_")]:
            mp.delenv(key)
        mp.setenv("KAFKAOPS_LAB_DIR", str(world / "lab"))  # as every case sees it: plans record the expansion
        _lab_secrets(world / "lab")
        _inventories(world)
        _plans(world)
    yield world


# --- running a case -----------------------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and directory under ``root``: its mtime and content."""
    out: dict[str, tuple[int, bytes]] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = (p.stat().st_mtime_ns, b"" if p.is_dir() else p.read_bytes())
    return out


def error_line(stderr: str, code: int) -> list[str]:
    """The non-blank lines of ``stderr`` without click's usage block (see the module docstring)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if code == USAGE and lines and lines[0].startswith("Usage:"):
        hint = next((i for i, line in enumerate(lines) if line.startswith("Try '") and "for help" in line), None)
        if hint is not None:
            lines = lines[hint + 1:]
    return lines


def run_case(case: Case, world: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAOPS_")}
    env.update(KAFKAOPS_HOME=str(tmp / "home"), KAFKAOPS_LOCK_DIR=str(tmp / "locks"),
               KAFKAOPS_LAB_DIR=str(world / "lab"), KAFKAOPS_SYSCONFDIR=str(world / "no-etc"), COLUMNS="100")
    if case.inventory is not None:
        env["KAFKAOPS_INVENTORY"] = str(world / case.inventory)
    args = [a.format(world=world, tmp=tmp) for a in case.args]
    if case.search is not None:
        env["XDG_CONFIG_HOME"] = str(world / case.search)
    argv = [sys.executable, "-m", "kafkaops.cli.main", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=tmp, stdin=subprocess.DEVNULL)


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=NOT_FIXED[case.id])] if case.id in NOT_FIXED else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input(case: Case, world: Path, tmp_path: Path) -> None:
    before = _tree(world)
    result = run_case(case, world, tmp_path)
    shown = f"exit {result.returncode}\nstderr:\n{result.stderr}\nstdout:\n{result.stdout[-2000:]}"
    for text in (result.stderr, result.stdout):
        assert "Traceback" not in text and "internal error" not in text, shown
    assert result.returncode == case.exit, shown
    lines = error_line(result.stderr, result.returncode)
    assert len(lines) == 1, shown
    assert case.says in lines[0], shown
    assert _tree(world) == before, "an input file changed"
    assert _tree(tmp_path) == {}, f"the case left state behind: {sorted(_tree(tmp_path))}"


def test_a_plan_that_cannot_be_written_is_a_configuration_error(world: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI refuses an unwritable --save-plan before the dry-run; should writing fail anyway (the
    disk filled meanwhile), it is still one line and exit 3, and no half-written file is left."""
    from kafkaops.engine.plan import load_plan, save_plan
    from kafkaops.errors import ConfigError

    monkeypatch.delenv("KAFKAOPS_PLAN_KEY", raising=False)
    plan = load_plan(world / "plan.json")
    for bad in (Path("/proc/x/plan.json"), tmp_path):
        with pytest.raises(ConfigError, match="cannot write the plan"):
            save_plan(plan, bad)
    assert list(tmp_path.iterdir()) == []


def test_the_table_covers_every_command() -> None:
    """At least 40 cases, and every command (the generated ones too) appears in one."""
    from kafkaops.cli.builtin import COMMAND_MODULES
    from kafkaops.cli.runbook_commands import alias_names

    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    assert set(NOT_FIXED) <= {c.id for c in CASES}
    used = {next((a for a in c.args if not a.startswith("-") and "{" not in a), "") for c in CASES}
    missing = (set(COMMAND_MODULES) | set(alias_names())) - used
    assert not missing, f"no bad-input case for: {sorted(missing)}"
    words = {" ".join(c.args[:2]) for c in CASES}
    for sub in ("runs list", "runs show", "runs abort", "runs unlock", "runbooks list", "runbooks show",
                "runbooks docs"):
        assert sub in words, f"no bad-input case for `kafkaops {sub}`"


def test_the_one_line_rule_drops_only_clicks_usage_block() -> None:
    usage = ("Usage: kafkaops rolling-restart-service \n           [OPTIONS] SERVICE CLUSTER\n"
             "Try 'kafkaops rolling-restart-service --help' for help.\n\nError: No such option: -s\n")
    assert error_line(usage, USAGE) == ["Error: No such option: -s"]
    assert error_line(usage, CONFIG) == [line for line in usage.splitlines() if line.strip()]
    assert error_line("error: a\nerror: b\n", USAGE) == ["error: a", "error: b"]
    assert re.fullmatch(r"127\.0\.\d+\.", CLOSED_NET) and CLOSED_NET != "127.0.10."
