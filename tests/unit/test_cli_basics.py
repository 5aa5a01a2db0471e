"""CLI contract: instant --help (no heavy imports), one-line errors with documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkaops.errors import EXIT_CODES, ConfigError, LabError

HEAVY = ("confluent_kafka", "kazoo", "paramiko", "pyspark", "conftool")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_help_does_not_import_client_libraries() -> None:
    code = (
        "import sys\nfrom kafkaops.cli.main import register\nregister()\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_exit_codes() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "lab" in result.stdout and "Exit codes" in result.stdout


def test_unknown_inventory_is_one_line_error_with_exit_code(tmp_path: Path) -> None:
    result = _run("lab", "up", "--inventory", str(tmp_path / "missing.yaml"))
    assert result.returncode == ConfigError.exit_code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot read inventory" in lines[0]


def test_lab_status_json_without_lab(tmp_path: Path) -> None:
    # HOME too: without --lab, `lab status` lists every lab that is up under ~/.local/state/kafkaops
    result = _run("lab", "status", "-o", "json", env={"KAFKAOPS_LAB_DIR": str(tmp_path), "HOME": str(tmp_path)})
    assert result.returncode == LabError.exit_code
    assert "no lab at" in result.stderr
    assert result.stdout == "" or json.loads(result.stdout)


def test_lab_load_without_lab_is_one_line(tmp_path: Path) -> None:
    result = _run("lab", "load", "-s", "1", env={"KAFKAOPS_LAB_DIR": str(tmp_path)})
    assert result.returncode == LabError.exit_code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "the lab is not up" in lines[0] and "kafkaops lab up" in lines[0]


def test_exit_codes_are_unique_and_documented() -> None:
    assert len(EXIT_CODES) == len(set(EXIT_CODES))
    docs = (Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in docs, f"exit code {code} missing from docs/exit-codes.md"


def test_global_inventory_option_is_checked_first(tmp_path: Path) -> None:
    result = _run("--inventory", str(tmp_path / "nope.yaml"), "status", "lab")
    assert result.returncode == ConfigError.exit_code
    assert "no such inventory file" in result.stderr


def test_status_of_an_unreachable_cluster_is_one_line_and_exit_4(tmp_path: Path, lab_secrets: Path) -> None:
    from kafkaops.errors import UnreachableError

    inventory = (Path(__file__).parents[2] / "inventory" / "lab.yaml").read_text()
    inventory = inventory.replace("127.0.10.1:9092,127.0.10.2:9092,127.0.10.3:9092", "127.0.0.1:9")
    assert "127.0.0.1:9" in inventory
    (tmp_path / "lab.yaml").write_text(inventory)
    result = _run("-i", str(tmp_path / "lab.yaml"), "status", "lab")
    assert result.returncode == UnreachableError.exit_code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no broker of 127.0.0.1:9 answered" in lines[0], result.stderr
    assert "127.0.0.1:9: Connection refused" in lines[0] and "KafkaError" not in lines[0]


@pytest.fixture
def refusing_kafka(monkeypatch: pytest.MonkeyPatch, lab_secrets: Path) -> list[float]:
    """Every AdminClient metadata request fails as against a dead cluster; returns their timeouts."""
    import confluent_kafka.admin

    from kafkaops.systems import kafka

    asked: list[float] = []

    class RefusingAdmin:
        def __init__(self, conf: dict[str, object]) -> None:
            pass

        def list_topics(self, timeout: float) -> None:
            asked.append(timeout)
            raise RuntimeError("Failed to get metadata: Local: Broker transport failure")

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", RefusingAdmin)
    monkeypatch.setattr(kafka.time, "sleep", lambda seconds: None)
    return asked


def _lab_cluster() -> Any:
    from kafkaops.inventory import load_inventory

    return load_inventory(Path(__file__).parents[2] / "inventory" / "lab.yaml")


def test_status_asks_kafka_once_where_a_run_retries(refusing_kafka: list[float]) -> None:
    """A run rides through a broker bounce (three metadata tries); status, an interactive look, says
    "Kafka did not answer" after one."""
    from kafkaops.errors import UnreachableError
    from kafkaops.health.status import collect
    from kafkaops.systems.kafka import KafkaAdmin

    cluster = _lab_cluster()
    with pytest.raises(UnreachableError):
        collect(cluster)
    assert refusing_kafka == [5.0]
    refusing_kafka.clear()
    with pytest.raises(UnreachableError):
        KafkaAdmin(cluster.kafka).snapshot()
    assert refusing_kafka == [10.0, 10.0, 10.0]


def test_a_maintenance_command_asks_kafka_once_before_planning(refusing_kafka: list[float]) -> None:
    """reboot declares the `kafka_answers` check; rolling-reboot asks for the controller to order its
    hosts: either way one metadata try, so a dead cluster is said in one request timeout."""
    from kafkaops.catalog import find_runbook
    from kafkaops.cli.common import Output
    from kafkaops.cli.runbook_commands import run_procedure
    from kafkaops.errors import UnreachableError

    cluster = _lab_cluster()
    for runbook, target in (("reboot", cluster.hosts[0].name), ("rolling-reboot", cluster.name)):
        refusing_kafka.clear()
        with pytest.raises(UnreachableError):
            run_procedure(find_runbook(runbook, check_kinds=False), target, {}, inventory=Path(cluster.source),
                          reason=None, task=None, yes=False, dry_run=True, output=Output.json, save_plan=None)
        assert refusing_kafka == [10.0], runbook


def test_check_and_snapshot_ask_kafka_once(refusing_kafka: list[float]) -> None:
    from kafkaops.errors import UnreachableError
    from kafkaops.health.check import take_snapshot

    with pytest.raises(UnreachableError):
        take_snapshot(_lab_cluster())
    assert refusing_kafka == [15.0]


def test_a_reader_that_goes_away_is_not_a_bug() -> None:
    """`kafkaops ... | head`: exit as a SIGPIPE'd process would (141), quietly, never 1 ("bug")."""
    from kafkaops.errors import STDOUT_CLOSED

    for args in (["runbooks", "list"], ["runbooks", "list", "-o", "json"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first byte
        try:
            result = subprocess.run([sys.executable, "-m", "kafkaops.cli.main", *args], stdout=write_end,
                                    stderr=subprocess.PIPE, text=True, timeout=60)
        finally:
            os.close(write_end)
        assert result.returncode == STDOUT_CLOSED, (args, result.stderr)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_error_text_is_printed_as_text_never_as_markup(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Remote stderr such as ``[/usr/lib/...]`` crashed the error handler (MarkupError); ``[error]`` vanished."""
    from kafkaops.cli import main as cli_main
    from kafkaops.errors import CheckFailed

    def boom(*_: Any, **__: Any) -> None:
        raise CheckFailed("sudo: [/usr/lib/sudo] refused; [error] [bold]not bold[/bold]")

    monkeypatch.setattr(cli_main, "register", lambda **_: None)
    monkeypatch.setattr(cli_main, "app", boom)
    monkeypatch.setattr(sys, "argv", ["kafkaops", "status", "lab"])
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main()
    assert exit_info.value.code == CheckFailed.exit_code
    err = capsys.readouterr().err
    assert "[/usr/lib/sudo] refused; [error] [bold]not bold[/bold]" in err
    assert "internal error" not in err
