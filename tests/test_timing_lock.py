"""The lock that makes the suite's timing tests take turns across pytest-xdist workers
(tests/conftest.py) works across workers and is gone once the run ends: a real nested
pytest run on two workers, whose two timing tests (one per worker) must not overlap,
and which leaves no ``codemode-tests-*.timing.lock`` in its temp folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SUITE_CONFTEST = Path(__file__).with_name("conftest.py")

# The nested run's conftest takes the suite's hooks from tests/conftest.py itself.
CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(SUITE_CONFTEST.parent)!r})  # the suite's conftest imports its neighbours
spec = importlib.util.spec_from_file_location("suite_conftest", {str(SUITE_CONFTEST)!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
globals().update({{k: v for k, v in vars(suite).items() if k.startswith("pytest_")}})
"""

TIMED = """
import glob, os, tempfile, time
import pytest

@pytest.mark.timing
def test_takes_a_turn():
    start = time.monotonic()
    held = glob.glob(os.path.join(tempfile.gettempdir(), "codemode-tests-*.timing.lock"))
    assert len(held) == 1, held  # the lock is in play, one for the run
    time.sleep(0.5)
    with open(os.environ["SPANS"], "a") as out:
        out.write(f"{start} {time.monotonic()}\\n")
"""


def test_timing_tests_take_turns_and_leave_no_lock(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    timing: a time bound\n")
    (suite / "conftest.py").write_text(CONFTEST)
    for name in ("a", "b"):
        (suite / f"test_{name}.py").write_text(TIMED)
    temp = tmp_path / "tmp"
    temp.mkdir()
    spans = tmp_path / "spans"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_XDIST") and k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    }
    env.update(TMPDIR=str(temp), SPANS=str(spans))
    args = ["-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", str(suite)]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    (_, first_end), (second_start, _) = sorted(
        tuple(float(x) for x in line.split()) for line in spans.read_text().splitlines()
    )
    assert first_end <= second_start, "the two timing tests ran at once"
    assert sorted(temp.glob("codemode-tests-*")) == []
