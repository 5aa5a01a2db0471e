"""The host's clock (``date +%s``): where a log scan starts.

Log lines are stamped by the host's clock, so the service steps record the host's time just before a
restart or deploy and later scan the log from there. A wrong value silently scans the wrong window —
from 1970 (every old error reported again) or from the future (nothing scanned, errors missed) — so
only a plain count of seconds within sane bounds is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

#: 2000-01-01T00:00:00Z: a host whose clock says earlier has lost it (RTC reset), not a time to trust.
MIN_EPOCH = 946_684_800
#: 2100-01-01T00:00:00Z: later is a clock gone wrong, not a time to trust.
MAX_EPOCH = 4_102_444_800

_DIGITS = re.compile(r"[0-9]{1,12}", re.ASCII)

EXPECTED = "epoch seconds from `date +%s` (digits only, between 2000-01-01 and 2100-01-01)"


@dataclass(frozen=True)
class EpochSeconds:
    """A host's clock reading.

    Attributes:
        seconds: Seconds since 1970-01-01T00:00:00Z, within [MIN_EPOCH, MAX_EPOCH).
    """

    seconds: int


def parse_epoch_seconds(output: str, *, host: str | None = None, command: str | None = None) -> EpochSeconds:
    """Parse the output of ``date +%s``.

    Accepts one line of ASCII digits (blanks around it allowed) between 2000-01-01 and 2100-01-01.
    Rejects empty output, signs, decimals, underscores, non-ASCII digits, other text, several lines.

    Raises:
        MalformedAnswer: The output is not a sane epoch time.
    """
    text = output.strip()
    if not _DIGITS.fullmatch(text) or not MIN_EPOCH <= int(text) < MAX_EPOCH:
        raise MalformedAnswer(EXPECTED, output, host=host, command=command)
    return EpochSeconds(int(text))
