"""Typed facts about a KRaft cluster's feature levels, from Kafka's ``kafka-features describe``.

``metadata.version`` is the one a rolling upgrade bumps last (Kafka's upgrade notes): new software runs
under the old metadata version until every node runs it, and the bump — which older software cannot
read back — is the separate, confirmed end of an upgrade. confluent-kafka has no DescribeFeatures, so
kafkaops runs Kafka's own tool over SSH on a controller node (the inventory's ``kafka_features``
template). What it prints is input from a target host: only the shape Kafka 3.9 and 4.x print is
accepted (recorded in ``tests/unit/test_upgrade.py``), anything else is :class:`MalformedAnswer`.

Shape: one line per feature, ``Key: value`` fields separated by tabs (3.9) or padded with spaces (4.x) —
``Feature: metadata.version  SupportedMinVersion: 3.3-IV3  SupportedMaxVersion: 4.3-IV0
FinalizedVersionLevel: 3.9-IV0  Epoch: 1131``; and ``version-mapping``'s ``metadata.version=30 (4.3)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkaops.facts.errors import MalformedAnswer

# An older tool asking newer nodes prints a level it has no name for as ``UNKNOWN 30`` (3.9's tool, 4.3 nodes).
_LINE = re.compile(r"^Feature:\s+(?P<name>[a-z][a-z0-9._]{0,63})\s+SupportedMinVersion:\s+(?P<min>UNKNOWN \d+|\S+)\s+"
                   r"SupportedMaxVersion:\s+(?P<max>UNKNOWN \d+|\S+)\s+FinalizedVersionLevel:\s+(?P<level>\S+)\s+"
                   r"Epoch:\s+-?\d{1,19}$")
_LEVEL = re.compile(r"^(?:(?:UNKNOWN )?\d{1,5}|\d{1,3}\.\d{1,3}(?:-IV\d{1,3})?|-)$")
_MAPPING = re.compile(r"^metadata\.version=(?P<level>\d{1,5}) \((?P<release>\d{1,3}\.\d{1,3}(?:-IV\d{1,3})?)\)$")
_MAPPING_LINE = re.compile(r"^(?P<name>[a-z][a-z0-9._]{0,63})=(?P<level>\d{1,5})"
                           r"(?: \(\d{1,3}\.\d{1,3}(?:-IV\d{1,3})?\))?$")
_SHAPE = ("'Feature: NAME  SupportedMinVersion: V  SupportedMaxVersion: V  FinalizedVersionLevel: V  Epoch: N' lines "
          "(tabs in 3.9, spaces in 4.x)")


@dataclass(frozen=True)
class Feature:
    """One feature as the cluster finalized it, and the range its nodes support."""

    name: str
    supported_min: str
    supported_max: str
    finalized: str


def parse_features(text: str) -> dict[str, Feature]:
    """``kafka-features describe``'s lines, by feature name."""
    out: dict[str, Feature] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _LINE.match(line.strip())
        if m is None or not all(_LEVEL.match(m[k]) for k in ("min", "max", "level")):
            raise MalformedAnswer(_SHAPE, text, command="kafka-features describe")
        out[m["name"]] = Feature(m["name"], m["min"], m["max"], m["level"])
    if "metadata.version" not in out:
        raise MalformedAnswer("a metadata.version line", text, command="kafka-features describe")
    return out


def parse_mapping_level(text: str) -> int:
    """``kafka-features version-mapping --release-version R``: the numeric ``metadata.version`` level of
    release R (``metadata.version=30 (4.3)``: 30), the one ``upgrade --feature`` takes."""
    for line in text.splitlines():
        m = _MAPPING.match(line.strip())
        if m:
            return int(m["level"])
    raise MalformedAnswer("a 'metadata.version=N (R)' line", text, command="kafka-features version-mapping")


def parse_mapping(text: str) -> dict[str, int]:
    """``kafka-features version-mapping --release-version R``: every feature's level in release R
    (``metadata.version=30 (4.3)``, ``kraft.version=1``, ...) — what ``upgrade --release-version R`` would set.

    Raises:
        MalformedAnswer: A line of another shape, or no ``metadata.version``.
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _MAPPING_LINE.match(line.strip())
        if m is None:
            raise MalformedAnswer("'FEATURE=LEVEL' lines", text, command="kafka-features version-mapping")
        out[m["name"]] = int(m["level"])
    if "metadata.version" not in out:
        raise MalformedAnswer("a 'metadata.version=N (R)' line", text, command="kafka-features version-mapping")
    return out


def release_of(level: str) -> tuple[int, int]:
    """The release a metadata version belongs to: ``3.9-IV0`` -> (3, 9)."""
    m = re.match(r"^(\d+)\.(\d+)", level)
    if m is None:
        raise MalformedAnswer("a metadata version (3.9-IV0)", level)
    return int(m[1]), int(m[2])
