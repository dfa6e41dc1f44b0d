"""A library patches nothing in its host's process: ``import codemode`` (and
``codemode.host``, and running a sandboxed program through ``ToolHost``) leaves the import
machinery, the modules already imported and other libraries' modules as they were. The
start-up work that does touch them is the `interpreter` command's own
(``codemode.process.entry``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_EMBEDDER = r"""
import asyncio, sys, types

meta, hooks = list(sys.meta_path), list(sys.path_hooks)
before = dict(sys.modules)

import codemode, codemode.host
from codemode import ToolHost

async def main():
    host = ToolHost(sys.argv[1])
    try:
        result = await host.execute(
            "const r = await tools.shell({command: 'echo hi'}); return r.output ?? r.stdout ?? r"
        )
    finally:
        close = getattr(host, "aclose", None) or getattr(host, "close", None)
        if close is not None:
            out = close()
            if asyncio.iscoroutine(out):
                await out
    return result

result = asyncio.run(main())
assert result.error is None, result.error
assert "hi" in str(result.value), result.value

import httpx, ctypes.util

problems = []
if [id(f) for f in sys.meta_path] != [id(f) for f in meta]:
    problems.append(f"sys.meta_path changed: {sys.meta_path!r}")
if [id(h) for h in sys.path_hooks] != [id(h) for h in hooks]:
    problems.append("sys.path_hooks changed")
for name, module in before.items():
    if sys.modules.get(name) is not module:
        problems.append(f"sys.modules[{name!r}] replaced")
for name, module in list(sys.modules.items()):
    if name.startswith("codemode"):
        continue
    spec = getattr(module, "__spec__", None)
    loader = type(getattr(spec, "loader", None)).__module__
    if loader.startswith("codemode"):
        problems.append(f"{name} loaded by {loader}")
    if type(module) is not types.ModuleType and type(module).__module__.startswith("codemode"):
        problems.append(f"{name} is a stand-in ({type(module).__qualname__})")
if not getattr(ctypes.util, "__file__", None):
    problems.append("ctypes.util is a stand-in")
if "pyseccomp" not in sys.modules:
    problems.append("pyseccomp never imported: the sandbox's filter was not built here")
print("PROBLEMS", problems)
"""


def test_import_and_a_sandboxed_program_leave_the_import_machinery_alone(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _EMBEDDER, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PROBLEMS []" in proc.stdout, proc.stdout + proc.stderr


_CLI_IMPORTER = r"""
import os, sys

meta, hooks = list(sys.meta_path), list(sys.path_hooks)
import codemode.cli

problems = []
try:
    os.waitpid(-1, os.WNOHANG)
    problems.append("a child process was started")
except ChildProcessError:
    pass
if [id(f) for f in sys.meta_path] != [id(f) for f in meta]:
    problems.append(f"sys.meta_path changed: {sys.meta_path!r}")
if [id(h) for h in sys.path_hooks] != [id(h) for h in hooks]:
    problems.append("sys.path_hooks changed")
print("PROBLEMS", problems)
"""


@pytest.mark.parametrize("argv", [["run", "x.js"], ["exec", "--code-mode", "hi"]])
def test_importing_the_command_line_reads_no_argv_and_patches_nothing(
    argv: list[str], tmp_path: Path
) -> None:
    # A program whose own arguments happen to look like a command imports the CLI
    # (to call ``main`` itself, or for its click group): nothing may start or change
    # until it calls something.
    (tmp_path / "x.js").write_text("1\n")
    proc = subprocess.run(
        [sys.executable, "-c", _CLI_IMPORTER, *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PROBLEMS []" in proc.stdout, proc.stdout + proc.stderr
