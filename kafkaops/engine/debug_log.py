"""The debug log: what kafkaops and its client libraries said, for the post-mortem the journal cannot answer.

The journal records what a run decided and did, step by step; it does not record *how* a system answered
— kazoo's session events, paramiko's key exchange, each HTTP request to etcd or Alertmanager,
librdkafka's errors. When a run stops at a safe point and an operator (or the next shift) asks "why did
ZooKeeper not answer at 03:12?", that is where the answer is. So every run keeps one, ``debug.log`` in its
own directory beside ``journal.jsonl``, appended by every process that drives the run (a resume adds to
it), at DEBUG, from the moment the run starts until this process stops driving it (spicerack keeps one
per cookbook run for the same reason). ``-v/--verbose`` shows the same records on stderr, live.

What reaches a log is input, and input may carry a secret (a URL with a password, a ``password=`` in a
client's config dump, an ``Authorization`` header): every record passes :class:`Redact` first. It is a
second line of defence: no adapter logs a secret on purpose, and kazoo logs its authentication packets
below DEBUG (its BLATHER level, which this log does not take).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: One line per record: when (UTC, ms), which logger, its level, the message.
FORMAT = "%(asctime)s.%(msecs)03dZ %(name)s %(levelname)s %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
#: The file in a run's directory.
FILENAME = "debug.log"
#: Loggers of client libraries that do not propagate to the root logger (kafkaops' ZooKeeper adapter keeps
#: kazoo's lines to itself, to say why a connection failed): a debug log attaches to them directly.
NON_PROPAGATING = ("kazoo",)

_SECRET = re.compile(
    r"(?i)(password|passwd|secret|token|sasl\.password|ssl\.key\.password|authorization)"
    r"(\s*[=:]\s*|\"\s*:\s*\"|'\s*:\s*')"
    r"(?P<value>'[^']*'|\"[^\"]*\"|(?:basic\s+|bearer\s+)?[^\s,;'\"&}]+)")
_SCHEME = re.compile(r"(?i)(basic|bearer)\s+")
_URL_CREDENTIALS = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@")


def _hidden(match: re.Match[str]) -> str:
    value = match.group("value")
    if value[:1] in "'\"" and len(value) > 1:
        shown = f"{value[0]}***{value[0]}"  # a quoted value, spaces and all
    else:
        scheme = _SCHEME.match(value)
        shown = f"{scheme.group(0) if scheme else ''}***"
    return f"{match.group(1)}{match.group(2)}{shown}"


def redact(text: str) -> str:
    """``text`` with every secret-looking value (``password=...``, ``Authorization: Basic ...``, a URL's
    ``user:password@``) replaced by ``***``."""
    return _URL_CREDENTIALS.sub(r"\1:***@", _SECRET.sub(_hidden, text))


class Redact(logging.Filter):
    """Rewrites each record's message (arguments applied) through :func:`redact`, before any handler
    formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a library's malformed log call: keep what it gave, as text
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def _formatter() -> logging.Formatter:
    import time

    formatter = logging.Formatter(FORMAT, DATE_FORMAT)
    formatter.converter = time.gmtime
    return formatter


def attach(handler: logging.Handler) -> Callable[[], None]:
    """Send every record at DEBUG and above, of kafkaops and of the client libraries, to ``handler``
    (redacted); returns what undoes it (the loggers' levels restored)."""
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(_formatter())
    handler.addFilter(Redact())
    root = logging.getLogger()
    targets = [root, *(logging.getLogger(name) for name in NON_PROPAGATING)]
    before = root.level
    root.setLevel(logging.DEBUG)
    for logger in targets:
        logger.addHandler(handler)

    def detach() -> None:
        for logger in targets:
            logger.removeHandler(handler)
        if not any(h for h in root.handlers if h.level <= logging.DEBUG):
            root.setLevel(before)
        handler.close()

    return detach


@contextmanager
def recorded(run_dir: Path) -> Iterator[Path]:
    """While the body runs, every record goes to ``run_dir/debug.log`` too (appended; created 0600, as the
    journal is: it says what the hosts and systems answered). Yields the file's path."""
    import os

    path = run_dir / FILENAME
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    detach = attach(logging.FileHandler(path, encoding="utf-8"))
    try:
        yield path
    finally:
        detach()


def verbose() -> None:
    """``-v/--verbose``: every record on stderr, live, for the rest of the process."""
    attach(logging.StreamHandler(sys.stderr))
