"""The test run's warm servers (docs/warm.md: warm starts are on by default).

The run's `interpreter` commands share servers of the run's own: the controller (the one
process of ``-n 0``, or xdist's controller, whose environment its workers inherit) points
``XDG_RUNTIME_DIR`` at a fresh private folder, so no test reaches the servers of the user
running the suite (nor another run's), and an idle server ends after a minute rather
than fifteen; when the run ends the controller stops every server in that folder and
removes it (and this installation's servers that commands of another user, who cannot
use that folder, started in their own ``/tmp/codemode-UID`` during the run). A server
holds none of its callers' descriptors (tests/test_warm_default.py),
so the pipes a test reads close when its command ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

# Set by the controller for its workers: the run's runtime folder.
RUN_FOLDER = "CODEMODE_TEST_RUNTIME"
IDLE_S = "60"


_STARTED: list[float] = []


def begin() -> None:
    """In the controller (a worker finds the folder set): the run's runtime folder."""
    if os.environ.get(RUN_FOLDER):
        return
    _STARTED.append(time.time())
    folder = tempfile.mkdtemp(prefix="cmt-")  # 0700, short: a socket's path is bounded
    os.environ[RUN_FOLDER] = folder
    os.environ["XDG_RUNTIME_DIR"] = folder
    os.environ.setdefault("CODEMODE_WARM_IDLE", IDLE_S)


def end() -> None:
    """In the controller, once every worker is down: stop the run's servers (SIGTERM:
    each ends once its runs have) and remove the folder."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = os.environ.get(RUN_FOLDER)
    if not folder or not folder.startswith(tempfile.gettempdir()):
        return
    pids = [
        pid for lock in Path(folder).glob("codemode/warm-*.sock.lock") if (pid := _holder(lock))
    ]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:  # (one that would not end: the run's end is its end)
        if _holder_pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def summary() -> str | None:
    """A line for the run's report: how many commands its servers ran warm."""
    folder = os.environ.get(RUN_FOLDER)
    if os.environ.get("PYTEST_XDIST_WORKER") or not folder:
        return None
    from codemode.warm import place

    locks = _locks(folder)
    running = sum(1 for lock in locks if _holder(lock))
    runs = sum(place.served(str(lock)[: -len(".lock")]) for lock in locks)
    return f"warm servers: {running} running, {runs} commands served warm (docs/warm.md)"


def _locks(folder: str) -> list[Path]:
    return sorted(Path(folder).glob("codemode/warm-*.sock.lock"))


def _holder_pid_alive(pid: int) -> bool:
    try:
        return b"codemode.launch\0serve\0" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _ours_since(lock: Path) -> int:
    """The pid of the server holding ``lock`` if it is this installation's (its Python)
    and was started during the run."""
    try:
        if not _STARTED or lock.stat().st_mtime < _STARTED[0]:
            return 0
        pid = int(lock.read_text().split()[0])
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return 0
    ours = argv[:1] == [os.fsencode(sys.executable)] and b"serve" in argv
    return pid if ours and _holder(lock) == pid else 0


def _holder(lock: Path) -> int:
    """The pid of the server holding ``lock``, if it is still that server."""
    from codemode.warm import place

    pid = place.serving(str(lock)[: -len(".lock")])
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes() if pid > 0 else b""
    except OSError:
        return 0
    return pid if b"codemode.launch\0serve\0" in cmdline else 0
