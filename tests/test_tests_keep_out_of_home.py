"""A test run leaves the real ``~/.codemode`` alone: tests that build a session or a tool
host in-process, without setting CODEMODE_HOME, get one of their own from conftest.py
(``own_codemode_home``). Run here in a child pytest whose HOME is a fresh folder and
whose environment names no CODEMODE_HOME, as a developer's shell would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# In-process, with no CODEMODE_HOME of their own: a tool host (whose sandbox records its
# writable roots in the home) and the batch worker.
IN_PROCESS = [
    "tests/test_assembly.py::test_tool_host_dry_run_is_given_at_construction",
    "tests/test_assembly.py::test_batch_worker_dry_run_builds_its_host_whole",
]


def test_a_test_run_writes_nothing_into_the_real_codemode_home(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "CODEMODE_HOME" and not k.startswith(("PYTEST_", "COV_"))
    }
    env["HOME"] = str(user_home)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         *IN_PROCESS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]
    written = sorted(str(p.relative_to(user_home)) for p in user_home.rglob("*"))
    assert not (user_home / ".codemode").exists(), written
