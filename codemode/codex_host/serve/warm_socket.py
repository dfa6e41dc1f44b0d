"""Where a warm code-mode host server listens, and leaving one behind.

A warm server (``warm/server.py``) keeps a host process ready, its modules imported and
its engine worker booted, so that Codex's next session starts in a few milliseconds
instead of ~80. The shim ``warm/beside.py`` writes with ``warm=True`` runs the small
``warm_client`` program, which hands its stdio to that server, or, when none answers,
starts the host as usual with ``--warm SOCKET``: that host starts a server on SOCKET for
the next session (``leave_warm_server``), which waits for that host to end before it
loads anything (Codex ends its host by killing it, so this cannot wait for an exit).

The socket lives in a folder only this user may enter (``$XDG_RUNTIME_DIR/codemode``,
else ``/tmp/codemode-UID``), and both ends check the other's user besides
(``SO_PEERCRED``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from codemode.warm.place import private

# A Unix socket's path has room for 107 bytes (sun_path).
_MAX_PATH = 107


def socket_path(command: list[str]) -> str:
    """The socket of the warm server for hosts started as ``command``, in this user's
    private folder for them (``$XDG_RUNTIME_DIR/codemode``, else ``/tmp/codemode-UID``:
    made if need be; one whose path leaves no room for the name is passed over)."""
    name = f"host-{hashlib.sha256(json.dumps(command).encode()).hexdigest()[:16]}.sock"
    tried: list[str] = []
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    candidates = [Path(runtime) / "codemode"] if os.path.isabs(runtime) else []
    candidates.append(Path("/tmp") / f"codemode-{os.geteuid()}")
    for folder in candidates:
        path = str(folder / name)
        if len(os.fsencode(path)) <= _MAX_PATH:
            try:
                folder.mkdir(mode=0o700, exist_ok=True)
            except OSError:
                pass
            if private(folder):
                return path
        tried.append(str(folder))
    raise OSError(f"no private folder for the warm host's socket (tried {', '.join(tried)})")


def serving(path: str) -> bool:
    """Whether a warm server holds ``path`` (its lock is taken): asked without
    connecting, since every connection is handed a host."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock it took
    return False


def leave_warm_server(path: str) -> None:
    """Start a warm server on ``path`` (detached: it outlives this process) unless one
    answers there already; it does its work once this process has ended. Never raises:
    a host that cannot leave one serves anyway."""
    try:
        if not private(os.path.dirname(path)) or serving(path):
            return
        # Its diagnostics, for whoever wonders why starts stay slow.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        log = os.open(path + ".log", flags, 0o600)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            script = sys.argv[0]  # the `interpreter` console script: its fast start
            fast = os.path.basename(script) == "interpreter"
            entry = [script] if fast else ["-m", "codemode.cli"]
            argv = [sys.executable, *entry, "code-mode-host", "--warm-server", path,
                    "--after", str(os.getpid())]  # fmt: skip
            os.posix_spawn(
                sys.executable,
                argv,
                dict(os.environ),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null, 0),
                    (os.POSIX_SPAWN_DUP2, log, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                ],
                setsid=True,  # not in the client's process group
            )
        finally:
            os.close(log)
            os.close(null)
    except Exception:  # a warm start is a bonus
        return
