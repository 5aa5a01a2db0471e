"""Fixtures for the engine tests: an isolated step registry, a temp KAFKAOPS_HOME, a runner factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_fakes import World, register_test_kinds
from real_servers import make_pki

from kafkaops.engine import step as step_mod
from kafkaops.engine.audit import AuditLog, MemorySink
from kafkaops.engine.lock import FileLockBackend
from kafkaops.engine.runner import RetryPolicy, Runner
from kafkaops.engine.wait import FakeClock


@pytest.fixture(autouse=True)
def kinds() -> Iterator[None]:
    with step_mod.isolated_registry():
        register_test_kinds()
        yield


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("KAFKAOPS_HOME", str(h))
    return h


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def audit_sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def make_runner(home: Path, audit_sink: MemorySink) -> Callable[..., Runner]:
    def make(**kw: Any) -> Runner:
        kw.setdefault("home", home)
        kw.setdefault("lock", FileLockBackend(home / "locks"))
        kw.setdefault("audit", AuditLog([audit_sink]))
        kw.setdefault("retry", RetryPolicy(attempts=3, backoff=1.0))
        kw.setdefault("clock", FakeClock())
        kw.setdefault("handle_sigint", False)
        return Runner(**kw)

    return make


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with a server and a client certificate for 127.0.0.1 (:func:`real_servers.make_pki`), per module."""
    return make_pki(tmp_path_factory.mktemp("pki"))
