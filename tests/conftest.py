"""Fixtures shared by the agent-level tests: a private CODEMODE_HOME and a workspace."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.sandbox.confinement.grpc_fork import quiet_grpc_fork

# Tests load gRPC in this process (the code-mode host's client, Ray) and also start
# commands confined with Landlock from it, as codemode's own processes never do with
# gRPC's fork handlers on (codemode.sandbox.confinement.grpc_fork).
quiet_grpc_fork()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty CODEMODE_HOME (config, sessions, rules) for one test."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A small workspace with one file (tests that need more define their own)."""
    w = tmp_path / "work"
    w.mkdir()
    (w / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return w


# The confinement tests run each case as this user ("self": whoever runs the tests;
# "nobody": uid 65534, where the machine allows it) and under each backend.
@pytest.fixture(params=["self", "nobody"])
def user(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["bubblewrap", "landlock"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def burners() -> Iterator[None]:
    """Keep every core busy for the test's duration (limits and cancellation must hold
    on a loaded machine)."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    time.sleep(0.1)
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that start a real local model server run last: scripts/test.sh builds the
    server in the background while everything else runs (codemode/testing/local_model.py
    waits for that build), so a cold test run pays for the build and the suite at once,
    not one after the other. A module that imports ``find_local_model`` is such a test."""
    def uses_local_model(item: pytest.Item) -> bool:
        module = getattr(item, "module", None)
        return module is not None and hasattr(module, "find_local_model")

    items.sort(key=uses_local_model)  # stable: the order within each group is kept
