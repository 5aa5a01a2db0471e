"""New TCP SYNs seen by ``tcpdump -n -l``: the evidence that a depooled host gets no new connections.

The SYN gate touches the service only after a whole window counts zero, so the count decides whether
requests are dropped. Each packet line is therefore parsed, not just counted: a line that is neither a
SYN packet nor one of tcpdump's own status lines (a wrong capture filter printing other packets, ``-v``
output, an error message on stdout) stops the step instead of being counted as a connection or
silently ignored. Source addresses are shown to the operator ("3 new SYNs from 10.64.0.12, ..."), so
each must be an IP address.

Recorded shapes (tcpdump 4.99, ``-n -l``)::

    18:03:18.774268 IP 127.0.0.1.45708 > 127.0.0.1.45931: Flags [S], seq 4184137718, win 65495, ..., length 0
    18:03:18.774268 lo    In  IP 127.0.0.1.45708 > 127.0.0.1.45931: Flags [S], seq ...   (-i any)
    18:03:26.709675 IP6 ::1.59830 > ::1.45931: Flags [S], seq 3649419560, win 65476, ..., length 0

tcpdump's status lines (``listening on ...``, ``N packets captured``, ...) go to stderr, which is not
parsed; when a template sends them to stdout (``2>&1``) they are recognised and skipped, never counted.
So are blank lines (tcpdump prints one when ``timeout`` ends it).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

_PACKET = re.compile(
    r"(?:(?:[0-9]{4}-[0-9]{2}-[0-9]{2} )?[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6,9} )?"  # time (-tttt, --nano)
    r"(?:\S+ +(?:In|Out|B|M|P) +)?"  # -i any: interface and direction
    r"(?P<proto>IP6?) (?P<src>[0-9A-Fa-f.:]+)\.(?P<sport>[0-9]{1,5}) > (?P<dst>[0-9A-Fa-f.:]+)\.(?P<dport>[0-9]{1,5}): "
    r"Flags \[(?P<flags>[SFRPUEW.]+)\](?:, .*)?",
    re.ASCII,
)
_STATUS = re.compile(
    r"tcpdump: (?:verbose output suppressed, use -v(?:\[v\])?\.\.\. for full protocol decode"
    r"|data link type \S+|WARNING: .*)"
    r"|listening on \S+, link-type .*"
    r"|[0-9]+ packets? (?:captured|received by filter|dropped by (?:kernel|interface))",
    re.ASCII,
)

EXPECTED = "tcpdump -n -l lines of TCP SYN packets (TIME [IFACE In] IP SRC.PORT > DST.PORT: Flags [S], ...)"


@dataclass(frozen=True)
class SynCount:
    """The new connections one capture saw.

    Attributes:
        syns: How many SYN packets (one per packet line).
        sources: The distinct source addresses, sorted (as text).
    """

    syns: int
    sources: tuple[str, ...]

    @property
    def quiet(self) -> bool:
        return self.syns == 0


def _address(text: str, proto: str) -> str | None:
    """``text`` as a normalised address of the family ``proto`` says, or None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return str(address) if address.version == (6 if proto == "IP6" else 4) else None


def _syn_source(line: str) -> str | None:
    """The source address of a SYN packet line, or None when ``line`` is not one."""
    m = _PACKET.fullmatch(line)
    if m is None or "S" not in m["flags"] or "." in m["flags"]:
        return None
    if int(m["sport"]) > 65535 or int(m["dport"]) > 65535 or _address(m["dst"], m["proto"]) is None:
        return None
    return _address(m["src"], m["proto"])


def parse_syn_count(output: str, *, host: str | None = None, command: str | None = None) -> SynCount:
    """Parse the stdout of a ``tcpdump -n -l`` SYN capture (the inventory's ``syn_capture``).

    Accepts, line by line: TCP packet lines whose flags hold SYN and not ACK, with valid IPv4 (``IP``)
    or IPv6 (``IP6``) addresses and ports, with or without the ``-i any`` interface/direction columns;
    tcpdump's status lines and blank lines (skipped). Empty output is zero SYNs. Rejects any other line:
    non-SYN packets (a capture filter that lets them through), SYN-ACKs, non-TCP or ``-v`` lines,
    addresses that are not IP addresses (or of the wrong family), ports above 65535, text.

    Raises:
        MalformedAnswer: A line is neither a SYN packet nor a tcpdump status line; the error quotes that
            line (``.output``) and gives its number.
    """
    syns = 0
    sources: set[str] = set()
    for number, raw in enumerate(output.split("\n"), start=1):
        src = syn_line(raw, number=number, host=host, command=command)
        if src is not None:
            syns += 1
            sources.add(src)
    return SynCount(syns, tuple(sorted(sources)))


def listening(raw: str) -> bool:
    """Whether ``raw`` is tcpdump's ``listening on IFACE, link-type ...`` line: from then on it captures.

    A streamed capture (:func:`kafkaops.systems.traffic.watch_syns`) starts its quiet window at this
    line, not when the command was sent: SYNs before tcpdump opened its socket would go unseen.
    """
    return raw.strip().startswith("listening on ") and _STATUS.fullmatch(raw.strip()) is not None


def syn_line(raw: str, *, number: int = 1, host: str | None = None, command: str | None = None) -> str | None:
    """The source address of one line of a SYN capture when it is a SYN packet; ``None`` for a blank or a
    tcpdump status line.

    Raises:
        MalformedAnswer: The line is neither (see :func:`parse_syn_count`).
    """
    line = raw.strip()
    if not line or _STATUS.fullmatch(line):
        return None
    src = _syn_source(line)
    if src is None:
        raise MalformedAnswer(f"{EXPECTED}; line {number} is not one", raw, host=host, command=command,
                              hint="check commands.syn_capture: tcpdump -n -l with a filter for SYNs only")
    return src
