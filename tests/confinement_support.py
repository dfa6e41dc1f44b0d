"""Running the real sandbox as root and as an unprivileged user, for the confinement tests.

``run_shell(user, ws, command, **settings)`` runs one ``shell`` tool call through a
``SandboxSession`` in a fresh Python process: this interpreter for ``"self"``, the
system Python under ``setpriv --reuid=65534`` for ``"nobody"`` (only when the tests run
as root and that Python can import codemode). Workspaces for these tests live in a
world-readable folder (``shared_dir``) so that nobody can reach them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox.confinement.confine import probe

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

DRIVER = """
import asyncio, json, sys
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
from codemode.tool_terms.errors import ToolError
ws, command, settings = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
async def main():
    s = SandboxSession(ws, SandboxSettings(**settings))
    try:
        r = await builtin_registry().invoke(
            "shell", {"command": command, "timeout_ms": 20000},
            ToolContext(workspace=ws, sandbox=s))
    except ToolError as exc:  # a refusal: its message is the output
        r = {"exit_code": None, "output": f"refused: {exc}"}
    finally:
        s.close()
    print(json.dumps({"exit_code": r["exit_code"], "output": r["output"]}))
asyncio.run(main())
"""


def _site_packages() -> str:
    import pydantic

    return str(Path(pydantic.__file__).resolve().parents[1])


@cache
def nobody_unavailable() -> str | None:
    """None when tests can run as nobody here, else why not. (Asked once a process: the
    probe starts a Python as nobody, ~0.3 CPU-s, and some 110 tests ask.)"""
    if os.geteuid() != 0:
        return "the tests do not run as root, so they cannot drop to another user"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} is missing"
    env = {"PYTHONPATH": f"{REPO}:{_site_packages()}", "PATH": os.environ.get("PATH", "")}
    probe_cmd = [*_as_nobody(), SYSTEM_PYTHON, "-c", "import codemode.sandbox.session, pydantic"]
    p = subprocess.run(probe_cmd, env=env, capture_output=True, text=True, cwd="/")
    if p.returncode != 0:
        return f"{SYSTEM_PYTHON} as nobody cannot import codemode: {p.stderr.strip()[-200:]}"
    return None


def _as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def skip_unless(user: str, backend: str | None = None) -> None:
    if user == "nobody" and (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    if backend is not None and (why := getattr(probe(), backend)) is not None:
        pytest.skip(f"{backend} cannot run on this machine: {why}")


def run_shell(
    user: str, ws: Path, command: str, extra_env: dict[str, str] | None = None, **settings: Any
) -> dict[str, Any]:
    settings.setdefault("approval_policy", "never")
    settings = json.loads(json.dumps(settings, default=str))
    env = {**os.environ, "CODEMODE_HOME": str(ws.parent / "codemode-home"), **(extra_env or {})}
    if user == "nobody":
        env["PYTHONPATH"] = f"{REPO}:{_site_packages()}"
        if "HOME" not in (extra_env or {}):
            env["HOME"] = str(ws.parent)
        argv = [*_as_nobody(), SYSTEM_PYTHON]
    else:
        argv = [sys.executable]
    argv += ["-c", DRIVER, str(ws), command, json.dumps(settings)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=ws)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder everybody can enter; its contents are made nobody's by ``give``."""
    d = Path(tempfile.mkdtemp(prefix="codemode-confine-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def give(path: Path, user: str) -> None:
    """Make ``path`` (recursively) writable by ``user``."""
    if user != "nobody":
        return
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, NOBODY, NOBODY)
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), NOBODY, NOBODY)
