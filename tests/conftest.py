"""Fixtures shared by the tests: a private CODEMODE_HOME for every test (autouse), an
empty one to hand a subprocess, and a workspace."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _pytest.pathlib
import pytest
import warm_suite
from cpu_burners import Burners

from codemode.hostfs.removal import remove_tree
from codemode.sandbox.confinement.grpc_fork import quiet_grpc_fork

# Tests load gRPC in this process (the code-mode host's client, Ray) and also start
# commands confined with Landlock from it, as codemode's own processes never do with
# gRPC's fork handlers on (codemode.sandbox.confinement.grpc_fork).
quiet_grpc_fork()
# pytest-xdist's workers (scripts/test.sh) are started with COLUMNS=80 and LINES=24: the
# programs the terminal tests start must size themselves from their own terminal.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
# A test run started in the background of a script inherits SIGINT ignored, and so would
# every process it starts: a Ctrl-C test's SIGINT would then do nothing. Python's own
# handler here means the processes it starts begin with the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The run's warm servers: in a folder of the run's own, stopped when it ends.
warm_suite.begin()
# pytest removes the temporary folders of older runs with Python 3.11's rmtree, which
# recurses once per level: the trees some tests build on purpose (1500 folders deep)
# would end a later run in RecursionError. The project's own removal has no such limit.
_pytest_rm_rf = _pytest.pathlib.rm_rf


def _rm_rf_any_depth(path: Path) -> None:
    try:
        _pytest_rm_rf(path)
    except RecursionError:
        remove_tree(path)


_pytest.pathlib.rm_rf = _rm_rf_any_depth


@pytest.fixture(autouse=True)
def own_codemode_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets a CODEMODE_HOME of its own, not yet created (as a new user's): a
    session built in this process, or a program started with this environment, would
    otherwise write sessions, journals and ``writable-roots`` into the real
    ``~/.codemode``, and read what other runs left there. A test that wants another home
    sets it itself (``monkeypatch.setenv``, or its subprocess's environment)."""
    h = tmp_path_factory.mktemp("codemode-home") / "home"
    monkeypatch.setenv("CODEMODE_HOME", str(h))
    return h


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
    load = Burners()
    load.start()
    try:
        yield
    finally:
        load.stop()


@pytest.fixture
def burners_later() -> Iterator[Burners]:
    """Burners the test starts itself (``.start()``) just before what it bounds, and
    that run to its end: its set-up (a process starting, an engine booting) then runs
    beside no burner, so it is quicker, and the burners' CPU, which a loaded machine
    pays, covers what is measured and little else."""
    load = Burners()
    try:
        yield load
    finally:
        load.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that start a real local model server run last: scripts/test.sh builds the
    server in the background while everything else runs (codemode_testkit/local_model.py
    waits for that build), so a cold test run pays for the build and the suite at once,
    not one after the other. A module that imports ``find_local_model`` is such a test.
    (This orders one process's run; across xdist's workers the scheduler below does.)"""
    def uses_local_model(item: pytest.Item) -> bool:
        module = getattr(item, "module", None)
        return module is not None and hasattr(module, "find_local_model")

    items.sort(key=uses_local_model)  # stable: the order within each group is kept


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile`` (scripts/test.sh) the local-model files go to a worker
    once their server's build has ended, not when xdist's own order reaches them
    (tests/xdist_order.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist_order import LocalModelWhenBuilt

    return LocalModelWhenBuilt(config, log)


def asserts_a_time_bound(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "burners" in names or "burners_later" in names or bool(item.get_closest_marker("timing"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """scripts/test.sh runs the suite on several workers (pytest-xdist, one test file
    each at a time); the tests that assert a time bound (marked ``timing``, or using
    ``burners``) take turns across them, so one test's CPU burners never run beside
    another's bound. (Beside them the other workers' tests run, as other work does on
    a loaded machine.)"""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or not asserts_a_time_bound(item):
        yield
        return
    with timing_lock(run).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def timing_lock(run: str) -> Path:
    return Path(tempfile.gettempdir()) / f"codemode-tests-{run}.timing.lock"


def pytest_configure(config: pytest.Config) -> None:
    """The xdist controller picks the run's id itself (xdist's ``--testrunuid``, which
    its workers get as PYTEST_XDIST_TESTRUNUID), so that it knows which lock to remove."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and hasattr(config.option, "testrunuid"):
        config.option.testrunuid = config.option.testrunuid or uuid.uuid4().hex


def pytest_terminal_summary(terminalreporter: Any) -> None:
    line = warm_suite.summary()
    if line:
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the run's timing lock once every worker is down (xdist's
    loop ends only then): none can hold it, or open it again and lock another file."""
    run = getattr(config.option, "testrunuid", None)
    if run and not os.environ.get("PYTEST_XDIST_WORKER"):
        timing_lock(run).unlink(missing_ok=True)
    warm_suite.end()
