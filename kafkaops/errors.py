"""The error tree and the exit codes it maps to: one place, documented in docs/exit-codes.md.

Every failure an operator can act on is a ``KafkaOpsError`` with a one-line message that says what is
wrong and how to fix it. The CLI prints that line and exits with the class's ``exit_code``; anything
else is a bug and exits 1 with a traceback hint. Scripts wrapping kafkaops branch on these codes, so
they never change meaning once released.
"""

from __future__ import annotations


class KafkaOpsError(Exception):
    """Root of every expected failure. ``exit_code`` is stable API."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(KafkaOpsError):
    """Inventory, runbook or plan file is malformed, or a name in it is unknown."""

    exit_code = 3


class UnknownHostError(ConfigError):
    """A HOST argument matches no host of the inventory."""


class UnreachableError(KafkaOpsError):
    """A system (ZooKeeper, etcd/conftool, Kafka, SSH, HTTP) did not answer in time.

    Retryable inside a run: maintenance itself causes short outages (a controller election after a
    broker stop, a host coming back from a reboot), so the runner's backoff rides through them before
    giving up at a safe point.
    """

    exit_code = 4
    #: True when retrying cannot help (no name of the system resolves): the caller stops at once.
    final: bool = False
    retryable = True


class HostKeyError(KafkaOpsError):
    """SSH host key missing from known_hosts or different from it: possible impersonation, never retried."""

    exit_code = 5


class SafetyRefusal(KafkaOpsError):
    """A safety gate refused: the action would risk availability (URP, min ISR, broker down, ...)."""

    exit_code = 6


class LockHeldError(KafkaOpsError):
    """Another run holds the cluster lock."""

    exit_code = 7


class StalePlanError(KafkaOpsError):
    """A saved plan no longer matches what the cluster looks like now."""

    exit_code = 8


class CheckFailed(KafkaOpsError):
    """A post-condition or health check failed. Retryable by the runner's retry policy."""

    exit_code = 9
    retryable = True


class WaitTimeout(KafkaOpsError):
    """A wait (SYNs, ISR, reboot, registration) did not converge before its timeout."""

    exit_code = 10


class RunFailed(KafkaOpsError):
    """A run stopped at a safe point after a step failed; the message says how to resume or roll back."""

    exit_code = 11


class LabError(KafkaOpsError):
    """The local lab cannot start or is in the wrong state (ports taken, Java missing, already up...)."""

    exit_code = 12


class NotConfirmed(KafkaOpsError):
    """A manual checkpoint ("sync with the Services team first") was not confirmed by the operator.

    Its own code, not a usage error: a script that gets it needs a human, not a corrected command line.
    ``--yes`` never confirms a checkpoint: it answers "run the plan", not "I talked to the Services team".
    """

    exit_code = 13


class AuthError(KafkaOpsError):
    """A system refused who kafkaops is: wrong password, a certificate that does not verify (unknown CA,
    expired, another name), or a missing ACL. Never retried: waiting does not fix a credential."""

    exit_code = 14


class Declined(KafkaOpsError):
    """The operator answered "no" to "Run ... ?" (or ended the prompt): nothing was started, no run exists,
    no lock was taken. Not 130: that is a run paused by Ctrl-C, which ``kafkaops resume`` continues."""

    exit_code = 15


class Interrupted(KafkaOpsError):
    """The operator pressed Ctrl-C; the run paused at a safe point and can be resumed."""

    exit_code = 130


#: What a process killed by SIGPIPE reports (128 + 13): stdout was closed early, as by ``| head``.
STDOUT_CLOSED = 141

EXIT_CODES: dict[int, str] = {
    0: "success (for `check`: healthy)",
    1: "internal error (a bug: re-run with -v and report the traceback)",
    2: "command-line usage error",
    ConfigError.exit_code: "inventory, runbook or plan file invalid, or unknown host/cluster",
    UnreachableError.exit_code: "a system did not answer (ZooKeeper, etcd, Kafka, SSH, HTTP)",
    HostKeyError.exit_code: "SSH host key unknown or mismatched",
    SafetyRefusal.exit_code: "a safety gate refused (would risk availability)",
    LockHeldError.exit_code: "the cluster lock is held by another run",
    StalePlanError.exit_code: "the saved plan is stale",
    CheckFailed.exit_code: "a check failed (verify step or health check)",
    WaitTimeout.exit_code: "a wait timed out",
    RunFailed.exit_code: "the run stopped at a safe point after a failure (resumable)",
    LabError.exit_code: "the local lab cannot start or is in the wrong state",
    NotConfirmed.exit_code: "a manual checkpoint was not confirmed (pass --confirmed NAME once it holds)",
    AuthError.exit_code: "a system refused kafkaops' credentials or lacks an ACL (TLS, SASL, authorization)",
    Declined.exit_code: "the operator declined the plan at the prompt; nothing was started",
    Interrupted.exit_code: "interrupted by the operator; the run is paused and resumable",
    STDOUT_CLOSED: "stdout was closed before the output was written (e.g. piped into `head`)",
}
