"""`interpreter run` whose engine worker cannot be started says so: which program and
why, exit status 1, no Python traceback. The case met in practice: uid 65534 running a
virtual environment whose Python lives in root's home (``/root/.pyenv``): the first
exec got in (setpriv drops its capabilities only as it execs), but the worker, started
from ``sys.executable`` by uid 65534 itself, is refused. Made here on any machine: the
Python is reached through a link in a folder only root may enter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confinement_support import REPO, _as_nobody, _site_packages, nobody_unavailable


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder uid 65534 may enter (pytest's own are root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="codemode-unstartable-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_worker_python_the_user_may_not_run_is_a_clear_error(public: Path) -> None:
    if (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    private = public / "private"
    private.mkdir(mode=0o700)  # root's alone: uid 65534 may not look inside
    python = private / "python"
    python.symlink_to(os.path.realpath(sys.executable))
    work = public / "work"
    work.mkdir()
    (work / "hello.js").write_text('console.log("hello")\n')
    os.chown(work, 65534, 65534)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "CODEMODE_HOME": str(work / "home"),
        "CODEMODE_WARM": "0",
        "PYTHONPATH": f"{REPO}:{_site_packages()}",
    }
    done = subprocess.run(
        [*_as_nobody(), str(python), "-m", "codemode.cli", "run", "hello.js"],
        env=env, cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode == 0:
        pytest.skip("uid 65534 could start the worker here: nothing to reproduce "
                    f"({done.stdout.strip()!r})")  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "cannot start the engine worker" in done.stderr, done.stderr
    assert str(python) in done.stderr and "Permission denied" in done.stderr, done.stderr
    assert "uid 65534 may not run it" in done.stderr, done.stderr
