"""conftool's library reports an unreachable etcd as an absent object; the adapter must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.errors import UnreachableError
from kafkaops.systems.conftool import Conftool

TAGS = {"dc": "eqiad", "cluster": "kafka_main", "service": "eventbus"}


def test_dead_etcd_is_unreachable_not_a_missing_host(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "conftool.yaml"
    config.write_text("driver: etcd\nhosts: ['http://127.0.0.1:9']\nnamespace: /conftool\napi_version: v1\n"
                      "pools_path: pools\n")  # discard port: nothing listens there
    with pytest.raises(UnreachableError, match=r"etcd did not answer for kafka1001\.example"):
        Conftool(str(config)).get("kafka1001.example", TAGS)
    assert "Backend error" not in capfd.readouterr().err  # the library's own log line stays off the terminal
