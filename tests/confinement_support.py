"""Running the real sandbox as root and as an unprivileged user, for the confinement tests.

``run_shell(user, ws, command, **settings)`` runs one ``shell`` tool call through a
``SandboxSession`` in a fresh process forked from a driver that has imported codemode:
this interpreter for ``"self"``, the system Python under ``setpriv --reuid=65534`` for
``"nobody"`` (only when the tests run as root and that Python can import codemode).
Workspaces for these tests live in a world-readable folder (``shared_dir``) so that
nobody can reach them.
"""

from __future__ import annotations

import atexit
import json
import os
import select
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

# One driver process a user, kept for the test process's life, that has imported
# codemode once and forks a child for every command: each child starts from the state a
# fresh interpreter would have after these imports (nothing else runs in the parent),
# takes the test's environment and folder, runs the command through a new
# ``SandboxSession`` and exits. (A fresh interpreter a command cost ~0.3 CPU-s of start-up
# and imports; some 130 confinement tests run one or more.) As nobody, the driver itself
# runs as nobody, so every child does.
DRIVER = """
import asyncio, json, os, sys, traceback
from pathlib import Path
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry
from codemode.tool_terms.errors import ToolError

async def shell(ws, command, settings):
    s = SandboxSession(ws, SandboxSettings(**settings))
    try:
        r = await builtin_registry().invoke(
            "shell", {"command": command, "timeout_ms": 20000},
            ToolContext(workspace=ws, sandbox=s))
    except ToolError as exc:  # a refusal: its message is the output
        r = {"exit_code": None, "output": f"refused: {exc}"}
    finally:
        s.close()
    return {"exit_code": r["exit_code"], "output": r["output"]}

def child(req, answer):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # stdin: not the driver's requests
    os.close(null)
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["ws"])
    try:
        reply = {"result": asyncio.run(shell(Path(req["ws"]), req["command"], req["settings"]))}
    except BaseException:
        reply = {"error": traceback.format_exc()}
    answer.write(json.dumps(reply) + "\\n")
    answer.flush()

answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the code under test prints goes to stderr, not into the answers
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            child(json.loads(line), answer)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        ended = {"error": f"the command's process ended: status {status}"}
        answer.write(json.dumps(ended) + "\\n")
        answer.flush()
"""


class _Driver:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*argv, "-c", DRIVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, cwd="/",
        )

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        if not ready:
            self.proc.kill()
            raise AssertionError("the confined command did not answer within 120 s")
        line = self.proc.stdout.readline()
        assert line, f"the driver ended: {self.proc.wait()}"
        reply: dict[str, Any] = json.loads(line)
        assert "error" not in reply, reply["error"]
        return reply["result"]  # type: ignore[no-any-return]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_drivers: dict[str, _Driver] = {}


def _driver(user: str) -> _Driver:
    d = _drivers.get(user)
    if d is None or d.proc.poll() is not None:
        env = dict(os.environ)
        if user == "nobody":
            env["PYTHONPATH"] = f"{REPO}:{_site_packages()}"
            d = _Driver([*_as_nobody(), SYSTEM_PYTHON], env)
        else:
            d = _Driver([sys.executable], env)
        _drivers[user] = d
    return d


@atexit.register
def close_drivers() -> None:
    while _drivers:
        _drivers.popitem()[1].close()


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
    return _driver(user).run({"ws": str(ws), "command": command, "settings": settings,
                              "env": env})


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
