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
    with pytest.raises(UnreachableError, match=r"etcd http://127\.0\.0\.1:\d+ did not answer for kafka1001\.example"):
        Conftool(str(config)).get("kafka1001.example", TAGS)
    assert "Backend error" not in capfd.readouterr().err  # the library's own log line stays off the terminal


def test_every_etcd_request_is_bounded(tmp_path: Path) -> None:
    """python-etcd waits 60 s per request (and urllib3 retries): an etcd that drops packets held a repool for
    minutes (issue 32). The adapter caps the client's read timeout whenever it uses conftool's backend."""
    from conftool.kvobject import Entity

    from kafkaops.systems.conftool import ETCD_TIMEOUT

    config = tmp_path / "conftool.yaml"
    config.write_text("driver: etcd\nhosts: ['http://127.0.0.1:9']\nnamespace: /conftool\napi_version: v1\n"
                      "pools_path: pools\n")
    with pytest.raises(UnreachableError):
        Conftool(str(config)).get("kafka1001.example", TAGS)
    client = Entity.backend.driver.client
    assert ETCD_TIMEOUT <= 10
    assert client.read_timeout <= ETCD_TIMEOUT, client.read_timeout


def test_library_error_chains_are_summarised_in_one_short_line() -> None:
    from kafkaops.systems.conftool import summarise

    chain = ("HTTPConnectionPool(host='127.0.10.11', port=2999): Max retries exceeded with url: "
             "/v2/keys/conftool/v1/pools/eqiad/kafka_main/eventbus/kafka1001.lab.local?recursive=true "
             "(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3e>: Failed to "
             "establish a new connection: [Errno 111] Connection refused'))")
    line = summarise(chain)
    assert line == "NewConnectionError: Failed to establish a new connection: [Errno 111] Connection refused"
    assert summarise("a\nb  c") == "a b c"
    assert len(summarise("x" * 5000)) == 160


def test_two_configs_in_one_process_each_ask_their_own_etcd(tmp_path: Path) -> None:
    """conftool keeps one backend per process: the adapter points it at the config each call is for (the test
    session's default and KRaft labs, an operator's script over two sites). Both etcds are down here; the
    library's backend is checked after each call."""
    from conftool.kvobject import Entity

    configs = {}
    for name, port in (("a", 9), ("b", 7)):  # discard and echo: nothing listens on either
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(f"driver: etcd\nhosts: ['http://127.0.0.1:{port}']\nnamespace: /conftool\n"
                                 "api_version: v1\npools_path: pools\n")
    a, b = Conftool(str(configs["a"])), Conftool(str(configs["b"]))
    # The same adapters again, and new ones for configs already loaded (the library's client is cached).
    for client, port in ((a, 9), (b, 7), (a, 9), (Conftool(str(configs["b"])), 7), (Conftool(str(configs["a"])), 9)):
        with pytest.raises(UnreachableError):
            client.get("kafka1001.example", TAGS)
        assert Entity.config.hosts == [f"http://127.0.0.1:{port}"]
