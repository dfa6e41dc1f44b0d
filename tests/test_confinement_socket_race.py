"""A socket that goes away while a sandbox starts fails no command.

With ``allow_unix_sockets`` set, every other socket file is covered by a bind over it;
bubblewrap must create the file to bind over when it is gone, in a tree already
read-only, and dies ("Can't create file at ..."). Programs remove their sockets at any
time (CI saw Ray's ``raylet`` go between the list and the start), so the command failed
for no fault of its own, and the session gave up its command servers for good. These
run real commands in real bubblewrap with a real socket removed at the worst moment.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox.confinement import confine, unix_sockets
from codemode.sandbox.server import server_launch
from codemode.sandbox.server.command_servers import CommandServers
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
from tests.confinement_support import skip_unless


@pytest.fixture
def fleeting(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A folder with ``allowed.sock`` and ``fleeting.sock`` listening, and a function that
    closes and removes the second."""
    folder = tmp_path / "sockets"
    folder.mkdir()
    held: list[socket.socket] = []
    for name in ("allowed.sock", "fleeting.sock"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(folder / name))
        s.listen(1)
        held.append(s)

    def remove() -> None:
        held[1].close()
        (folder / "fleeting.sock").unlink(missing_ok=True)

    try:
        yield folder, remove
    finally:
        for s in held:
            s.close()


async def _run(ws: Path, folder: Path, commands: list[str], server: bool) -> list[Any]:
    settings = SandboxSettings(
        approval_policy="never", backend="bubblewrap", command_server=server,
        allow_unix_sockets=[folder / "allowed.sock"],
    )  # fmt: skip
    session = SandboxSession(ws, settings)
    ctx, reg = ToolContext(workspace=ws, sandbox=session), builtin_registry()
    try:
        out = [await reg.invoke("shell", {"command": c}, ctx) for c in commands]
        return out
    finally:
        session.close()


async def test_a_socket_removed_while_the_command_server_starts_is_retried(
    tmp_path: Path, fleeting: tuple[Path, Callable[[], None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_unless("self", "bubblewrap")
    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    folder, remove = fleeting
    ws = tmp_path / "ws"
    ws.mkdir()
    starts: list[tuple[str, ...]] = []
    real_start = server_launch.start

    async def start_after_removing(key: Any, *a: Any) -> Any:
        starts.append(key.options)
        remove()  # after the key was made, before bubblewrap binds over the socket
        return await real_start(key, *a)

    monkeypatch.setattr(server_launch, "start", start_after_removing)
    broken: list[str | None] = []
    real_close = CommandServers.close

    def close_noting(self: CommandServers) -> None:
        broken.append(self.broken)
        real_close(self)

    monkeypatch.setattr(CommandServers, "close", close_noting)
    [first, second] = await _run(ws, folder, ["echo first", "echo second"], server=True)
    assert first["exit_code"] == 0 and first["output"].strip() == "first", first
    assert second["exit_code"] == 0 and second["output"].strip() == "second", second
    cover = str(folder / "fleeting.sock")
    assert cover in starts[0] and all(cover not in s for s in starts[1:]), starts
    # the servers were not given up for the session: the retry started one that served
    assert broken == [None], broken


async def test_a_socket_removed_after_the_cover_list_is_made_is_not_bound_over(
    tmp_path: Path, fleeting: tuple[Path, Callable[[], None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a command server: the list is checked again just before bubblewrap
    starts, so a socket gone meanwhile is not in it."""
    skip_unless("self", "bubblewrap")
    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    folder, remove = fleeting
    ws = tmp_path / "ws"
    ws.mkdir()
    lists: list[list[Path]] = []
    real_to_hide = unix_sockets.to_hide

    def to_hide_then_remove(allowed: Any) -> list[Path]:
        out = real_to_hide(allowed)
        lists.append(out)
        remove()
        return out

    monkeypatch.setattr(confine.unix_sockets, "to_hide", to_hide_then_remove)
    [r] = await _run(ws, folder, ["echo ran"], server=False)
    assert r["exit_code"] == 0 and r["output"].strip() == "ran", r
    assert folder / "fleeting.sock" in lists[0] and folder / "fleeting.sock" not in lists[-1]
