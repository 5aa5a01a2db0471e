"""The one error of the facts: a target host answered something a parser does not accept.

A malformed answer is a failed check (:class:`~kafkaops.errors.CheckFailed`, exit 9), retryable by the
runner's retry policy: a host half-way through booting, or a command that printed a warning once, may
answer properly on the next try; one that keeps answering garbage stops the run at a safe point with a
message that says what was expected, where it came from, and (escaped, cut short) what came back.
"""

from __future__ import annotations

from kafkaops.errors import CheckFailed

#: How much of a malformed answer an error message quotes.
SHOWN_CHARS = 80


def shown(output: str, limit: int = SHOWN_CHARS) -> str:
    """``output`` for a one-line error message: its first ``limit`` characters, control characters escaped.

    ``repr`` escapes every non-printable character (newlines, ANSI escapes, bidi overrides), so a
    hostile answer can neither break the line nor restyle the operator's terminal.
    """
    if not output:
        return "nothing"
    cut = output[:limit]
    return repr(cut) + ("…" if len(output) > limit else "")


def escaped(text: str) -> str:
    """``text`` with control characters escaped, unquoted: host names, commands, a reply's free text."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class MalformedAnswer(CheckFailed):
    """A command's output (or an HTTP reply) from a target host is not what its fact accepts.

    Attributes:
        expected: What the parser accepts, in words (``a boot id (a UUID)``).
        output: The whole answer, unmodified (the message only shows the start of it, escaped).
        host: The host that answered, when the caller said.
        command: The command (or URL) that produced the answer, when the caller said.
    """

    def __init__(self, expected: str, output: str, *, host: str | None = None, command: str | None = None,
                 hint: str | None = None) -> None:
        where = ""
        if host and command:
            where = f" from {escaped(host)} (`{escaped(command)}`)"
        elif host:
            where = f" from {escaped(host)}"
        elif command:
            where = f" from `{escaped(command)}`"
        super().__init__(f"malformed answer{where}: expected {expected}, got {shown(output)}", hint=hint)
        self.expected = expected
        self.output = output
        self.host = host
        self.command = command
