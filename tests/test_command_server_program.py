"""The command server's program as the host passes it into the sandbox
(``codemode.sandbox.server.server_program``): every module it needs travels with it, it
loads nothing else of codemode's, and a checkout of codemode that a command rewrites
cannot change what a later server runs."""

from __future__ import annotations

import ast
import asyncio
import json
import marshal
import os
import shutil
import signal
import sys
import types
from pathlib import Path

import pytest

from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.server import server_program
from tests.test_command_server import Shell

SERVER = Path(server_program.__file__).parent


def _imports(name: str) -> set[str]:
    """The modules ``name`` (one of the program's) imports, by their full names."""
    tree = ast.parse((SERVER / f"{name}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{name}.py: a relative import finds no package there"
            assert node.module is not None
            found.add(node.module)
    return found


def test_each_module_imports_the_standard_library_and_modules_sent_before_it() -> None:
    sent: set[str] = set()
    for name in server_program.MODULES:
        for module in _imports(name):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            # Anything else of codemode's is not there: only what was sent before it.
            assert module in sent, f"{name}.py imports {module}, which the program lacks"
        sent.add(f"{server_program.PACKAGE}.{name}")
    assert server_program.MODULES[-1] == "command_server"


def test_the_program_is_every_module_whole_and_fits_its_pipe() -> None:
    codes = marshal.loads(server_program.program())
    assert [name for name, _ in codes] == [
        f"{server_program.PACKAGE}.{m}" for m in server_program.MODULES
    ]
    for (_, code), module in zip(codes, server_program.MODULES, strict=True):
        text = (SERVER / f"{module}.py").read_text(encoding="utf-8")
        assert code == compile(text, f"{module}.py", "exec")
    # The host writes it into a pipe before anything reads it: past 64 KiB it would block.
    assert len(server_program.program()) < 60 << 10


pytestmark_bwrap = pytest.mark.skipif(
    probe().bubblewrap is not None, reason=f"bubblewrap: {probe().bubblewrap}"
)


@pytestmark_bwrap
async def test_a_piece_rewritten_by_a_command_does_not_run_in_a_later_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace is a checkout of codemode that codemode itself runs from (an
    # editable install): the server's modules are files a command can write.
    checkout = tmp_path / "codemode" / "sandbox" / "server"
    shutil.copytree(SERVER, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(
        server_program, "resources", types.SimpleNamespace(files=lambda _package: checkout)
    )
    server_program.program.cache_clear()
    server_program.texts.cache_clear()
    marker = tmp_path / "planted-ran"
    shell = Shell(tmp_path)
    try:
        first = await shell("echo first")
        assert first["output"].strip() == "first", first
        old = shell.server
        assert old is not None
        # The command plants code in a piece every later server would import...
        planted = await shell(
            f"printf '\\nopen(%s, \"w\").write(\"ran\")\\n' \"'{marker}'\" "
            f">> {checkout}/baseline.py && tail -n 1 {checkout}/baseline.py"
        )
        assert str(marker) in planted["output"], planted
        # ...and its server ends: the next command starts a new one.
        os.kill(old.pid, signal.SIGKILL)
        for _ in range(200):  # (until the host has seen its end)
            if not old.alive:
                break
            await asyncio.sleep(0.01)
        assert not old.alive
        again = await shell("echo again")
        assert again["output"].strip() == "again", again
        assert shell.server is not None and shell.server is not old
        assert not marker.exists(), "a later server ran the text a command planted"
    finally:
        shell.close()
        monkeypatch.undo()
        server_program.program.cache_clear()
        server_program.texts.cache_clear()


def test_the_servers_json_reads_back_as_it_was_sent() -> None:
    from codemode.sandbox.server.command_server import to_json

    odd = ["", "plain", 'a "quote" and a \\', "\x00\x1f\x7f", "é", "😀", "\udc80", "\u2028"]
    message = {"id": 7, "exit": -9, "stuck": False, "unstarted": True, "dirty": odd}
    out = to_json(message)
    assert out.isascii()
    assert json.loads(out) == message
    with pytest.raises(TypeError):
        to_json({"id": 1.5})


# Modules whose import builds classes and enums (or pulls in ``re``): each cost the
# server's start, which is on the way to a session's first command.
_HEAVY = {"json", "socket", "selectors", "signal", "subprocess", "contextlib", "enum", "re"}


def test_the_program_imports_nothing_heavy_at_its_start() -> None:
    for name in server_program.MODULES:
        tree = ast.parse((SERVER / f"{name}.py").read_text(encoding="utf-8"))
        top = {
            alias.name.split(".")[0]
            for node in tree.body
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {node.module.split(".")[0] for node in tree.body
             if isinstance(node, ast.ImportFrom) and node.module}  # fmt: skip
        assert not top & _HEAVY, f"{name}.py imports {top & _HEAVY} at its start"
    assert "json" not in server_program.BOOT and "types" not in server_program.BOOT
