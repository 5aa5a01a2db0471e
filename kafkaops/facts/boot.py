"""The boot id: the value that decides whether a host has rebooted.

``cat /proc/sys/kernel/random/boot_id`` in production, ``hostctl boot-id`` in the lab: both print one
random UUID in its canonical form (``str(uuid.uuid4())`` in the lab) and a newline; the kernel draws a
new one at every boot. The reboot step compares the id before and after, so an answer that is not a
UUID (an empty line from a lab host that never booted, a shell error, a banner) must stop the step —
two equal garbage strings would read as "not rebooted", two different ones as "rebooted".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII | re.IGNORECASE)
_NIL = "00000000-0000-0000-0000-000000000000"

EXPECTED = "a boot id (one UUID such as 3f1c2e4a-8b9d-4c7e-a1f2-0e9d8c7b6a54)"


@dataclass(frozen=True)
class BootId:
    """A host's boot id.

    Attributes:
        value: The UUID, lower case, canonical form (what is journaled and compared).
    """

    value: str

    def __str__(self) -> str:
        return self.value


def parse_boot_id(output: str, *, host: str | None = None, command: str | None = None) -> BootId:
    """Parse the output of the inventory's ``boot_id`` command.

    Accepts exactly one canonical UUID (8-4-4-4-12 hex digits, any case), surrounded by blanks at most
    (the trailing newline). Rejects empty output, the nil UUID, several lines, anything else.

    Raises:
        MalformedAnswer: The output is not one boot id.
    """
    text = output.strip()
    if not _UUID.fullmatch(text) or text == _NIL:
        raise MalformedAnswer(EXPECTED, output, host=host, command=command)
    return BootId(text.lower())
