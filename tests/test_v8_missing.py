"""An install without the `v8` extra (py_mini_racer not there): asking for V8 says
what to install, from the command line and from the Python API, not a bare
"EngineCrashed: ... ImportError"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INTERPRETER = Path(sys.executable).parent / "interpreter"

API = """
import asyncio, json
from codemode import ToolHost

async def main():
    with ToolHost(".", engine="v8", sandbox="read-only") as host:
        result = await host.execute("return 1")
    print(json.dumps(result.error.one_line() if result.error else result.value))

asyncio.run(main())
"""


def _without_v8(tmp_path: Path) -> dict[str, str]:
    """An environment whose first import path shadows the package with a plain module,
    so that it is found as no package at all (the engine then finds no library, as in
    a lean install); the engine worker inherits the import path."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "py_mini_racer.py").write_text("raise ImportError('not installed')\n")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shadow), str(REPO)]),
        "CODEMODE_HOME": str(tmp_path / "home"),
    }


def test_the_cli_says_to_install_the_v8_extra(tmp_path: Path) -> None:
    (tmp_path / "hello.js").write_text("console.log('hello')\n")
    p = subprocess.run(
        [str(INTERPRETER), "run", "--engine", "v8", "hello.js"],
        cwd=tmp_path,
        env=_without_v8(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0
    assert "pip install 'codemode[v8]'" in p.stderr, p.stderr
    assert "ImportError" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "hello" not in p.stdout


def test_the_api_says_to_install_the_v8_extra(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-c", API],
        cwd=tmp_path,
        env=_without_v8(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    said = json.loads(p.stdout.strip().splitlines()[-1])
    assert "pip install 'codemode[v8]'" in said and "ImportError" not in said, said


def test_with_v8_installed_the_same_program_runs(tmp_path: Path) -> None:
    """The shadow is what makes the difference (this test fails if V8 is missing here)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEMODE_HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [sys.executable, "-c", API],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == 1
