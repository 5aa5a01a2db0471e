"""Revisions read from hosts: what a service serves, and what the deploy host has checked out.

Both decide what happens next — deploy or skip, refuse a deploy of the wrong checkout — and both travel
further: the revision a target served before a deploy is written to the run's facts and becomes the
``{rev}`` of the rollback's deploy command, run by a shell on the deploy host. So a revision read from a
host is accepted only if it looks like one (a git sha, a tag such as ``r1`` or ``v1.2.3``): a leading
letter or digit, then letters, digits, ``.``, ``_`` and ``-``, 64 characters at most. Blanks, ``;``,
``$(``, quotes, backslashes, newlines and the empty string are refused, never trimmed or guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkaops.facts.errors import MalformedAnswer

REVISION = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}", re.ASCII)
#: The keys of a service's info/health JSON that name its revision, in the order they are read.
REVISION_KEYS = ("revision", "version", "git_sha")

EXPECTED = "a revision (a git sha or tag such as r1 or v1.2.3: letters, digits, '.', '_', '-'; at most 64)"


@dataclass(frozen=True)
class Revision:
    """A revision that is safe to compare, journal and pass to a deploy command.

    Attributes:
        value: The revision as the host wrote it (case kept; :func:`kafkaops.steps.deploy.revision_matches`
            compares without case).
    """

    value: str

    def __str__(self) -> str:
        return self.value


def is_revision(text: str) -> bool:
    """Does ``text`` match the revision pattern exactly (no surrounding blanks)?"""
    return REVISION.fullmatch(text) is not None


def parse_checked_out_revision(output: str, *, host: str | None = None, command: str | None = None) -> Revision:
    """Parse the output of the inventory's ``deploy_revision`` command on the deploy host.

    ``git rev-parse --short HEAD`` (production) and ``labdeploy --current`` (the lab) print one revision
    and a newline. Accepts exactly one line holding one revision, blanks around it allowed. Rejects empty
    output, several non-blank lines (a warning or banner on stdout: which line is the revision is not
    guessed), and anything the revision pattern refuses.

    Raises:
        MalformedAnswer: The output is not one revision.
    """
    text = output.strip()
    if not is_revision(text):
        raise MalformedAnswer(EXPECTED, output, host=host, command=command)
    return Revision(text)


def parse_served_revision(body: Any, *, host: str | None = None, source: str | None = None) -> Revision | None:
    """The revision a service reports in its info/health JSON (``/_info``), already decoded.

    The first of ``revision``, ``version``, ``git_sha`` present with a non-null value decides. A string
    must match the revision pattern exactly (no trimming); an integer (not a boolean) is read as its
    decimal text. Returns None when ``body`` is not a JSON object or holds none of the keys (a service
    that does not say its revision). Rejects a present value that is empty, malformed, or of another
    type (float, boolean, list, object).

    Args:
        body: The decoded JSON body.
        host: The host that answered, for the error message.
        source: Where the body came from (the URL), for the error message.

    Raises:
        MalformedAnswer: The body names a revision that is not one.
    """
    if not isinstance(body, Mapping):
        return None
    for key in REVISION_KEYS:
        value = body.get(key)
        if value is None:
            continue
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not is_revision(text):
            shown_value = value if isinstance(value, str) else repr(value)
            raise MalformedAnswer(f"{EXPECTED} in the {key!r} field", shown_value, host=host, command=source)
        return Revision(text)
    return None
