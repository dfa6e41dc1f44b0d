"""The ``subreaper`` helper the command server starts every command through: built as
it is kept in the helpers cache (on x86-64 without the C library, else with it), it
makes the command a child subreaper, passes on the exit status, and says why a command
could not be run, with the exit codes a shell uses."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.sandbox.helpers import compiled

# A grandchild orphaned by its parent tells whose child it became: the helper's
# command (its first process, a subreaper) or something further up.
ORPHAN = """
import os, time
me = os.getpid()
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        time.sleep(0.3)
        os.write(w, str(os.getppid()).encode())
        os._exit(0)
    os._exit(0)
os.close(w)
os.wait()
print(os.read(r, 100).decode() == str(me))
"""


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("CODEMODE_CACHE", str(cache))
    try:
        exe = compiled.path("subreaper.c")
    finally:
        mp.undo()
    if exe is None:
        pytest.skip("no C compiler here: the server uses a preexec_fn instead")
    return Path(exe)


def test_its_command_is_a_subreaper_and_its_status_is_passed_on(helper: Path) -> None:
    done = subprocess.run([str(helper), sys.executable, "-c", ORPHAN], capture_output=True,
                          text=True, timeout=30)  # fmt: skip
    assert done.stdout.strip() == "True", (done.stdout, done.stderr)
    assert subprocess.run([str(helper), "/bin/sh", "-c", "exit 7"], timeout=30).returncode == 7


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["/nonexistent/program"], 127, "/nonexistent/program: No such file or directory"),
        (["NOT-EXECUTABLE"], 126, "not-executable: Permission denied"),
        ([], 125, "usage: subreaper COMMAND"),
    ],
)
def test_what_cannot_run_is_said_with_a_shells_exit_code(
    helper: Path, tmp_path: Path, argv: list[str], code: int, says: str
) -> None:
    plain = tmp_path / "not-executable"
    plain.write_text("echo never\n")
    plain.chmod(0o644)
    argv = [str(plain) if a == "NOT-EXECUTABLE" else a for a in argv]
    done = subprocess.run([str(helper), *argv], capture_output=True, text=True, timeout=30)
    assert done.returncode == code and says in done.stderr, (done.returncode, done.stderr)


def test_on_x86_64_it_is_built_without_the_c_library(helper: Path) -> None:
    if platform.machine() != "x86_64":
        pytest.skip(f"the no-libc build is for x86-64 (this is {platform.machine()})")
    # A static glibc program is ~750 KB; this one maps a few pages.
    assert helper.stat().st_size < 64 * 1024, helper.stat().st_size
