"""Facts parse recorded host output: every fixture under tests/fixtures/facts/<fact>/<case>.json.

A fixture is ``{"output": "...", "expected": {...} | null}`` (the parsed fact as a dict, null for "no
value") or ``{"output": "...", "error": "substring of the one-line message"}``; optional ``host`` and
``command`` are passed to the parser, ``note`` says where the output comes from. pyinfra's
``tests/facts/<Fact>/*.json`` are the model. Adding a case is adding a file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkaops.errors import CheckFailed
from kafkaops.facts import (
    MalformedAnswer,
    parse_boot_id,
    parse_checked_out_revision,
    parse_epoch_seconds,
    parse_main_pid,
    parse_served_revision,
    parse_syn_count,
    parse_system_state,
    parse_systemd_show,
    parse_unit_activity,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "facts"


def _served(output: str, *, host: str | None = None, command: str | None = None) -> Any:
    """The served revision is read from the decoded ``/_info`` body; the fixture holds the body's text."""
    return parse_served_revision(json.loads(output), host=host, source=command)


#: fixture directory -> parser(output, *, host, command)
PARSERS: dict[str, Callable[..., Any]] = {
    "boot_id": parse_boot_id,
    "epoch_seconds": parse_epoch_seconds,
    "systemd_show": parse_systemd_show,
    "main_pid": parse_main_pid,
    "unit_activity": parse_unit_activity,
    "system_state": parse_system_state,
    "syn_count": parse_syn_count,
    "checked_out_revision": parse_checked_out_revision,
    "served_revision": _served,
}

CASES = sorted(FIXTURES.glob("*/*.json"))


def _load(path: Path) -> dict[str, Any]:
    case = json.loads(path.read_text())
    assert isinstance(case.get("output"), str), f"{path}: 'output' must be a string"
    assert ("expected" in case) != ("error" in case), f"{path}: exactly one of 'expected' and 'error'"
    return dict(case)


def _as_json(value: Any) -> Any:
    """A fact as the fixtures write it: a dataclass as a dict, tuples as lists."""
    if value is None:
        return None
    return json.loads(json.dumps(dataclasses.asdict(value)))


def _parse(path: Path, case: dict[str, Any]) -> Any:
    parser = PARSERS[path.parent.name]
    return parser(case["output"], host=case.get("host"), command=case.get("command"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fact_fixture(path: Path) -> None:
    case = _load(path)
    if "expected" in case:
        assert _as_json(_parse(path, case)) == case["expected"]
        return
    with pytest.raises(MalformedAnswer) as info:
        _parse(path, case)
    message = str(info.value)
    assert case["error"] in message
    assert "\n" not in message and "\r" not in message and "\x1b" not in message, "one line, control chars escaped"
    assert message.startswith("malformed answer")
    assert len(message) < 600


def test_every_fixture_directory_has_a_parser_and_enough_cases() -> None:
    dirs = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    assert dirs == sorted(PARSERS)
    for name in dirs:
        cases = [_load(p) for p in (FIXTURES / name).glob("*.json")]
        valid = sum("expected" in c for c in cases)
        malformed = sum("error" in c for c in cases)
        assert valid >= 4 and malformed >= 4, f"{name}: {valid} valid and {malformed} malformed cases"


def test_a_malformed_answer_is_a_retryable_failed_check_exit_9() -> None:
    with pytest.raises(CheckFailed) as info:
        parse_boot_id("garbage", host="kafka1001", command="hostctl boot-id")
    err = info.value
    assert isinstance(err, MalformedAnswer)
    assert err.exit_code == 9 and err.retryable
    assert (err.host, err.command, err.output) == ("kafka1001", "hostctl boot-id", "garbage")
    assert str(err) == ("malformed answer from kafka1001 (`hostctl boot-id`): expected a boot id (one UUID such as "
                        "3f1c2e4a-8b9d-4c7e-a1f2-0e9d8c7b6a54), got 'garbage'")


def test_the_message_quotes_80_characters_at_most() -> None:
    with pytest.raises(MalformedAnswer) as info:
        parse_main_pid("9" * 79 + "\u202e" + "X" * 500)
    message = str(info.value)
    assert "X" * 20 not in message and "\\u202e" in message and message.endswith("…")


def test_the_inventory_commands_are_named_in_a_malformed_answer() -> None:
    with pytest.raises(MalformedAnswer, match=r"^malformed answer from `date \+%s`: "):
        parse_epoch_seconds("", command="date +%s")
    with pytest.raises(MalformedAnswer, match=r"^malformed answer from kafka1001: .* got nothing$"):
        parse_unit_activity("", host="kafka1001")
