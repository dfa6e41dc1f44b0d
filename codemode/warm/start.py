"""Starting a warm server (detached, for the next command) and its first moments.

The server is started with none of the caller's descriptors (0-2 are ``/dev/null`` and
its log, every other one closed) and only the environment Python reads at start
(``place``'s start variables): no token or key of the caller's sits in its memory, and
each run gets its caller's environment whole. It takes a lock beside its socket (one
server per socket; ``place.serving`` asks it without connecting), waits for the
command that started it to end (its cold start has the cores to itself), imports
everything, and serves.
"""

from __future__ import annotations

import fcntl
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from codemode.warm import place, spare

# Seconds an idle server waits for a command before it ends (default: 900).
IDLE_ENV = "CODEMODE_WARM_IDLE"


def server_environment(environ: os._Environ[str] | dict[str, str] = os.environ) -> dict[str, str]:
    return {
        k: v
        for k, v in environ.items()
        if k in place.START_VARIABLES or k.startswith(place.START_PREFIXES) or k == IDLE_ENV
    }


def leave_server(path: str, command: str = "") -> None:
    """Start a server on ``path`` unless one holds it already; ``command`` (the name of
    the command that starts it, e.g. ``code-mode-host``) says what its first spare makes
    ready (``spare.py``)."""
    import subprocess

    if not place.private(os.path.dirname(path)) or place.serving(path):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    log = os.open(path + ".log", flags, 0o600)
    try:
        subprocess.Popen(
            [sys.executable, "-m", "codemode.launch", "serve", path, str(os.getpid()),
             *([command] if command else [])],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            close_fds=True, start_new_session=True, cwd="/",
            env=server_environment(),
        )  # fmt: skip
    finally:
        os.close(log)


def serve(path: str, after: int, prepare: Callable[[], None],
          run: Callable[[list[str]], int], idle_s: float,
          folders: list[Path] | None = None, kind: spare.Kind = spare.no_kind,
          prepare_spare: spare.Prepare = spare.prepare_nothing,
          first_kind: bytes = spare.PLAIN) -> int:  # fmt: skip
    """The server's life: ``prepare`` imports what commands use; ``run`` runs one;
    ``folders``: the code to watch (by default codemode's and the installed packages');
    ``kind``, ``prepare_spare`` and ``first_kind`` (the kind of the command that started
    it): what its spares make ready (``spare.py``)."""
    import signal

    # Started by a command that ignores SIGTERM (under `nohup`, or a job control's
    # background), it would ignore `interpreter warm stop` until it serves.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(path + ".lock", flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server has this socket
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()} 0\n".encode())  # who serves it, for `warm stop`
    if after > 0:
        wait_for_end(after)
    # Watched before anything is imported: a change made while it imports makes it stale
    # too; and one that cannot watch (SystemExit: its log says why) ends before it has
    # paid for its imports, as every command that starts it would pay again. Likewise
    # one whose own facts cannot be read (``place.ioprio``): it could serve no caller.
    if place.process_facts("self") is None:
        raise SystemExit("warm: cannot read this process's own facts: it does not serve")
    from codemode.warm.watch import Watch, code_folders

    watch = Watch(folders if folders is not None else code_folders(Path(place.package_folder())))
    prepare()
    gc.collect()
    gc.freeze()  # shared with every run, never copied by a collection
    from codemode.warm.server import IDLE_S, Server

    server = Server(path, run, idle_s if idle_s > 0 else IDLE_S, watch, lock, kind,
                    prepare_spare, first_kind)  # fmt: skip
    return server.serve()


def wait_for_end(pid: int) -> None:
    """Until ``pid`` has ended: the command that started a server may still be running
    on a machine with few cores, and the server's imports would slow it."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or no pidfd: poll
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(0.2)
        return
    try:
        import select

        select.select([fd], [], [])  # a pidfd is readable once its process ended
    finally:
        os.close(fd)


def stop(path: str, wait_s: float = 5.0) -> int:
    """Stop the server on ``path`` (SIGTERM: runs in progress finish); its pid, or 0."""
    import signal

    pid = place.serving(path)
    if pid <= 0:
        return 0
    # The pid is what the lock file says: signalled only if that process holds the lock
    # file open (a server does, for its life), pinned by a pidfd meanwhile. Whoever
    # could write the folder could otherwise name any process.
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return 0
    try:
        if not _holds(pid, path + ".lock"):
            return 0
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
    except OSError:
        return 0
    finally:
        os.close(pidfd)
    deadline = time.monotonic() + wait_s
    while place.serving(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pid


def _holds(pid: int, lock: str) -> bool:
    """Whether process ``pid`` has the file ``lock`` open."""
    try:
        st = os.stat(lock, follow_symlinks=False)
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            there = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def servers(folder: str) -> list[tuple[str, int]]:
    """The sockets in ``folder`` held by a running server, with each one's pid."""
    found = []
    for lock in sorted(Path(folder).glob("warm-*.sock.lock")):
        sock = str(lock)[: -len(".lock")]
        pid = place.serving(sock)
        if pid:
            found.append((sock, pid))
    return found
