"""The parts that make a confined call cheaper keep their promises.

- ``dropcaps`` (root's replacement for setpriv): empties every capability set, refuses
  to run anything when it cannot, and is not used when someone else could have
  swapped it;
- ``pidfd_process``: exit codes and signals come back as asyncio's would, to any
  number of waiters;
- the codemode home, where the helper lives, is read-only to confined commands.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from codemode.sandbox.confinement import bwrap
from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.helpers import compiled, dropcaps
from codemode.sandbox.server import pidfd_process
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, builtin_registry


def _helper_or_skip() -> str:
    if os.geteuid() != 0:
        pytest.skip("the dropcaps helper is used only when codemode runs as root")
    exe = dropcaps.path()
    if exe is None:
        pytest.skip("no C compiler here to build the dropcaps helper (setpriv is used)")
    return exe


def test_helper_empties_every_set_and_runs_the_command() -> None:
    exe = _helper_or_skip()
    out = subprocess.run(
        [exe, "grep", "-E", "^Cap(Inh|Prm|Eff|Bnd|Amb):", "/proc/self/status"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == [
        "CapInh:", "0" * 16, "CapPrm:", "0" * 16, "CapEff:", "0" * 16,
        "CapBnd:", "0" * 16, "CapAmb:", "0" * 16,
    ]  # fmt: skip


def test_helper_runs_nothing_when_it_cannot_drop(request: pytest.FixtureRequest) -> None:
    exe = _helper_or_skip()
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    shared = Path(tempfile.mkdtemp(prefix="codemode-dropcaps-"))  # /tmp: others reach it
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o777)  # nobody may create the marker here
    exe = str(shutil.copy(exe, shared / "dropcaps"))
    marker = shared / "ran"
    # as a user holding no capability (so no CAP_SETPCAP) the bounding set cannot be
    # emptied: the command must not run
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe,
         "touch", str(marker)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert "PR_CAPBSET_DROP" in p.stderr
    assert not marker.exists()


def test_a_helper_others_could_write_is_not_used(tmp_path: Path, monkeypatch) -> None:
    _helper_or_skip()
    monkeypatch.setenv("CODEMODE_CACHE", str(tmp_path / "cache"))
    exe = dropcaps.path()
    assert exe is not None and exe.startswith(str(tmp_path))
    os.chmod(exe, 0o777)
    assert dropcaps.path() is None
    os.chmod(exe, 0o755)
    os.chmod(Path(exe).parent, 0o777)  # a folder others may write: they could swap it
    assert dropcaps.path() is None
    os.chmod(Path(exe).parent, 0o700)
    os.unlink(exe)
    os.symlink("/bin/true", exe)  # never through a link
    assert dropcaps.path() is None
    # with no usable helper, bubblewrap falls back to setpriv
    if shutil.which("setpriv") is not None:
        assert bwrap.isolation()[1][0] == shutil.which("setpriv")


# (Landlock refuses such a workspace: test_confinement_own)
@pytest.mark.parametrize("backend", ["bubblewrap"])
@pytest.mark.parametrize("which", ["codemode home", "helpers cache"])
async def test_codemode_home_and_helpers_are_read_only_to_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str, backend: str
) -> None:
    """A workspace that holds the codemode home or the compiled-helpers cache (the home
    folder): no command can replace the helper root's commands start through (bound
    read-only under bubblewrap)."""
    why_not = getattr(probe(), backend)
    if why_not is not None:
        pytest.skip(f"{backend}: {why_not}")
    if which == "codemode home":
        top = tmp_path / ".codemode"
        monkeypatch.setenv("CODEMODE_HOME", str(top))
        folder = top / "helpers"
    else:
        top = tmp_path / ".cache" / "codemode"
        monkeypatch.setenv("CODEMODE_CACHE", str(top))
        folder = compiled.helpers_dir()
        assert folder == top / "helpers"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "dropcaps-x"
    target.write_text("original\n")
    s = SandboxSession(tmp_path, SandboxSettings(approval_policy="never", backend=backend))
    planted = folder / compiled.name("dropcaps.c")
    try:
        r = await builtin_registry().invoke(
            "shell",
            {"command": f"echo evil > {target}; rm -f {target}; echo evil > {planted}; "
                        f"mv {folder} {tmp_path}/x; echo end"},
            ToolContext(workspace=tmp_path, sandbox=s),
        )
    finally:
        s.close()
    assert "end" in r["output"].splitlines(), r["output"]
    assert target.read_text() == "original\n", r["output"]
    assert folder.is_dir()
    assert not planted.exists() or planted.read_bytes() != b"evil\n", r["output"]


def test_the_helpers_folder_exists_before_any_command_even_without_a_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where nothing can be compiled the folder is still made (and so bound read-only),
    or a command could plant a "helper" there for a later run with a compiler."""
    monkeypatch.setenv("CODEMODE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no cc, no gcc
    assert dropcaps.path() is None
    assert compiled.helpers_dir().is_dir()
    assert oct(compiled.helpers_dir().stat().st_mode & 0o777) == "0o700"


async def test_pidfd_process_reports_exit_codes_and_signals(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        procs = [
            await pidfd_process.start(argv, cwd=tmp_path, env=os.environ, output_fd=w)
            for argv in (["sh", "-c", "exit 3"], ["sh", "-c", "kill -TERM $$"], ["true"])
        ]
    finally:
        os.close(w)
        os.close(r)
    assert all(isinstance(p, pidfd_process.PidfdProcess) for p in procs)
    codes = await asyncio.gather(*(p.wait() for p in procs))
    assert codes == [3, -signal.SIGTERM, 0]
    assert [p.returncode for p in procs] == codes


async def test_pidfd_process_many_waiters_and_a_kill(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        p = await pidfd_process.start(["sleep", "30"], cwd=tmp_path, env=os.environ, output_fd=w)
    finally:
        os.close(w)
        os.close(r)
    waiters = [asyncio.ensure_future(p.wait()) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert p.returncode is None and not any(t.done() for t in waiters)
    waiters[0].cancel()  # one waiter giving up does not cancel the others
    os.killpg(p.pid, signal.SIGKILL)
    async with asyncio.timeout(10):
        assert await asyncio.gather(*waiters[1:]) == [-signal.SIGKILL] * 2
    assert await p.wait() == -signal.SIGKILL
    p.kill()  # reaped: nothing to signal, and no error


async def test_pidfd_process_terminate(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        p = await pidfd_process.start(["sleep", "30"], cwd=tmp_path, env=os.environ, output_fd=w)
    finally:
        os.close(w)
        os.close(r)
    p.terminate()
    async with asyncio.timeout(10):
        assert await p.wait() == -signal.SIGTERM
