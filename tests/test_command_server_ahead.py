"""The command server a session starts ahead of its first command (``prewarm``).

It is started from the warm-up thread with a *guessed* layout (the roots not walked), so
the question for each test is whether anything a command does could differ from a
session without it: a guess that misses a protected entry below the top must never be
used, the server must outlive the thread that asked for it (bubblewrap's
``--die-with-parent`` follows the *thread* that started it), many calls at once must all
run, and a session closed before its first command leaves nothing running. Real
bubblewrap, real commands, real files.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode import ToolHost
from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.server import server_launch
from tests.test_command_server import Shell

pytestmark = pytest.mark.skipif(
    probe().bubblewrap is not None, reason=f"bubblewrap: {probe().bubblewrap}"
)


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, Any]]]:
    """The (bubblewrap pid, key) of every server started, ahead or on demand."""
    found: list[tuple[int, Any]] = []
    real = server_launch.launch

    def launch(key: Any, *a: Any) -> Any:
        out = real(key, *a)
        found.append((out._spawned[0].pid, key))
        return out

    monkeypatch.setattr(server_launch, "launch", launch)
    yield found


def _gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.02)
    return False


async def _ahead(s: Shell) -> None:
    """prewarm, and wait until the server started ahead is there (the warm-up thread
    has made its key and the loop has started it)."""
    s.session.prewarm()
    assert s.session._prestarting is not None
    await s.session._prestarting


async def test_a_guess_that_misses_a_nested_repository_is_not_used(
    tmp_path: Path, launched: list[tuple[int, Any]]
) -> None:
    """The attack: the guessed layout knows nothing below the top, so its sandbox
    leaves a nested repository's ``.git`` and a ``.codemode/`` below the top writable. A
    first command run there could plant a hook git runs later."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "sub")], check=True)
    (tmp_path / "deep" / ".codemode").mkdir(parents=True)
    s = Shell(tmp_path)
    try:
        s.session.prewarm()
        # Only the guess is there when the first command comes: the walk that would
        # replace it beforehand (``_prestart``) is stopped.
        assert s.session._prestarting is not None
        s.session._prestarting.cancel()
        servers = s.session.runner._command_servers()
        assert servers._launch is not None
        await asyncio.wrap_future(servers._launch)
        r = await s(
            "echo evil > sub/.git/hooks/pre-commit; echo rc1=$?; "
            "echo evil > deep/.codemode/config.toml; echo rc2=$?"
        )
        assert "rc1=0" not in r["output"] and "rc2=0" not in r["output"], r
        assert not (tmp_path / "sub/.git/hooks/pre-commit").exists()
        assert not (tmp_path / "deep/.codemode/config.toml").exists()
        # the guessed server was stopped; the command ran in one built from the walk
        assert len(launched) == 2 and launched[0][1] != launched[1][1], launched
        assert _gone(launched[0][0])
        assert s.server is not None and s.server.pid == launched[1][0]
    finally:
        s.close()


async def test_a_right_guess_serves_commands_after_the_warm_up_thread_has_ended(
    tmp_path: Path, launched: list[tuple[int, Any]]
) -> None:
    """bubblewrap's ``--die-with-parent`` is the death of the *thread* that started it:
    the server is started on the loop's thread, so it lives on after the warm-up
    thread has loaded the rules and ended."""
    s = Shell(tmp_path)
    try:
        await _ahead(s)
        first = await s("echo one")
        deadline = time.monotonic() + 30
        while any(t.name == "codemode-sandbox-warm" for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the warm-up thread never ended"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        second = await s("echo two")
        assert (first["output"], second["output"]) == ("one\n", "two\n")
        assert len(launched) == 1  # the one started ahead, still alive
        assert s.server is not None and s.server.alive and s.server.pid == launched[0][0]
    finally:
        s.close()


async def test_many_calls_at_once_all_run_in_the_server_started_ahead(
    tmp_path: Path, launched: list[tuple[int, Any]]
) -> None:
    """``Promise.all``: the calls arrive in one turn of the loop while the first waits for
    the server; each that comes after it said it is ready takes it at once."""
    host = ToolHost(tmp_path, sandbox={"sandbox_mode": "workspace-write",
                                       "approval_policy": "never"})  # fmt: skip
    async with host:
        host.context.sandbox.prewarm()  # type: ignore[attr-defined]
        result = await host.execute(
            "const rs = await Promise.all(Array.from({length: 40}, (_, i) =>"
            " tools.shell({command: `echo call-${i}`})));"
            "return rs.map((r) => r.output.trim() + ':' + r.exit_code).join(',');"
        )
        assert result.error is None, result.error
        assert result.value == ",".join(f"call-{i}:0" for i in range(40))
        assert len(launched) == 1, launched


def test_a_session_closed_before_its_first_command_leaves_nothing_running(
    tmp_path: Path, launched: list[tuple[int, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    async def session_that_runs_nothing(wait: float) -> Shell:
        s = Shell(tmp_path)
        s.session.prewarm()
        await asyncio.sleep(wait)
        s.close()  # in the loop: the server (started or still being started) is stopped
        await asyncio.sleep(0.3)  # (the thread hands over what it started meanwhile)
        return s

    for wait in (0.0, 0.001, 0.01, 0.5):
        before = len(launched)
        asyncio.run(session_that_runs_nothing(wait))
        time.sleep(0.5)  # (a thread still making its key finds the loop gone)
        for pid, _ in launched[before:]:
            assert _gone(pid), f"bubblewrap {pid} outlived its session"

    async def closed_after_its_loop() -> Shell:
        s = Shell(tmp_path)
        s.session.prewarm()
        await asyncio.sleep(0.5)
        return s

    before = len(launched)
    shell = asyncio.run(closed_after_its_loop())
    shell.close()  # the loop is gone: stopped here, at once
    assert len(launched) > before
    for pid, _ in launched[before:]:
        assert _gone(pid), f"bubblewrap {pid} outlived its session"
    # nothing went wrong on the way (a hand-over to a wait cancelled by the close)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


async def test_a_session_closed_while_its_walk_waits_for_the_guess_stops_it_quietly(
    tmp_path: Path,
    launched: list[tuple[int, Any]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk (``_prestart``) waits for the warm-up thread's server; the session closes
    meanwhile, cancelling that wait. Nothing is left running and nothing fails on the
    way (the hand-over once found its future cancelled with the wait, and raised in the
    event loop)."""
    from codemode.sandbox.git.keeper import Keeper

    real = Keeper.guess_layout

    def slow_guess(self: Keeper, *a: Any) -> Any:
        time.sleep(0.4)  # (the walk gets to its wait first)
        return real(self, *a)

    monkeypatch.setattr(Keeper, "guess_layout", slow_guess)
    s = Shell(tmp_path)
    s.session.prewarm()
    servers = s.session.runner._command_servers()
    await asyncio.sleep(0.2)
    assert servers._launch is not None and not servers._launch.done()
    assert s.session._prestarting is not None and not s.session._prestarting.done()
    s.close()
    await asyncio.sleep(0.8)  # the thread hands over what it made (nothing, once closed)
    assert len(launched) <= 1
    for pid, _ in launched:
        assert _gone(pid), "the server started ahead outlived its session"
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


def test_a_session_closed_while_the_guess_is_being_made_leaves_the_workspace_as_it_was(
    tmp_path: Path, launched: list[tuple[int, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up thread makes the placeholder folders bubblewrap binds over (``.git``,
    ``.codemode`` at the top) while the session closes on the loop's thread, which
    removes them: none may be left behind in the user's workspace, no scratch folder
    made after the close, and the close must not fail (it once iterated the set of
    placeholders while the thread added to it)."""
    import tempfile

    from codemode.hostfs.writer import Writer

    real_mkdir = Writer.mkdir

    def slow_mkdir(self: Writer, *a: Any, **k: Any) -> Any:
        time.sleep(0.05)  # (the close comes while the thread is at it)
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Writer, "mkdir", slow_mkdir)
    temp = tmp_path / "temp"  # (this test's own: other tests make scratch folders too)
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for wait in (0.0, 0.02, 0.06, 0.12):
        ws = tmp_path / f"ws{wait}"
        ws.mkdir()

        asyncio.run(_closed_early(ws, wait))
        deadline = time.monotonic() + 30
        while any(t.name == "codemode-sandbox-warm" for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the warm-up thread never ended"
            time.sleep(0.02)
        assert sorted(p.name for p in ws.iterdir()) == [], f"left in the workspace ({wait})"
    assert list(temp.iterdir()) == []  # every scratch folder made was removed
    for pid, _ in launched:
        assert _gone(pid)
    # Nor anything of bubblewrap's: its first process in the sandbox, killed before it
    # had set itself to die with bubblewrap, once stayed for good (test_command_server_stop).
    deadline = time.monotonic() + 5
    while left := _naming(tmp_path):
        assert time.monotonic() < deadline, f"still running: {left}"
        time.sleep(0.05)


def _naming(folder: Path) -> list[int]:
    """The processes (but zombies) whose command line names ``folder``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and os.fsencode(folder) in cmdline:
            found.append(int(entry))
    return found


async def _closed_early(ws: Path, wait: float) -> None:
    s = Shell(ws)
    s.session.prewarm()
    await asyncio.sleep(wait)
    s.close()
