"""Starting an engine worker process (``spawn``), and workers started ahead of the pool.

Every worker is started here, so there is one way a worker comes to be. A process may
start one before its pool exists (``spawn_early``: the Codex host's warm spare boots
its worker while it waits for a client), and the pool in ``worker_process.py`` adopts
it (``adopt``).

The worker gets fd 0 (requests), 1 (replies), 2 (diagnostics) and its control pipe;
it closes anything else it inherited before it imports anything (``worker.py``).
Its environment holds nothing of ours but the import path.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import sys

_BOOT = (
    "import sys, os, json; sys.path[:0] = json.loads(os.environ.pop('CODEMODE_WORKER_PATH')); "
    "from codemode.js_runtime.worker import main; main()"
)


def _search_path() -> str:
    # The parent's own import path (the worker runs with -I -S: no site, no env).
    entries = [e for e in sys.path if e and os.path.exists(e)]
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    return json.dumps([package_root, *entries])


class WorkerStartError(OSError):
    """The engine worker's process could not be started; the message says which program
    and why (as uid 65534, a Python inside a folder only root may enter)."""


def _start_error(exc: OSError) -> WorkerStartError:
    why = exc.strerror or str(exc)
    hint = ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        hint = (
            f": uid {os.getuid()} may not run it (is it, or a folder above it, "
            "private to another user?)"
        )
    error = WorkerStartError(f"cannot start the engine worker {sys.executable} ({why}){hint}")
    error.errno = exc.errno
    return error


class Spawned:
    """A started worker process: its pid and the parent's ends of its pipes."""

    def __init__(self, pid: int, requests: int, replies: int, errors: int, control: int) -> None:
        self.pid = pid
        self.requests = requests  # write end of its fd 0
        self.replies = replies  # read end of its fd 1
        self.errors = errors  # read end of its fd 2
        self.control = control  # write end of its control pipe
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status once it has exited (negative: the signal), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -9
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _above_stdio(fd: int) -> int:
    # A parent started with fd 0, 1 or 2 closed gets pipes there; the child's own 0, 1
    # and 2 are made from our fds by dup2, so none of those may be 0, 1 or 2.
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def spawn(engine: str, memory_bytes: int) -> Spawned:
    """Start a worker for ``engine`` with an isolate cap of ``memory_bytes``."""
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(4):
            for fd in os.pipe():  # both close on exec
                ours.append(fd if fd > 2 else _above_stdio(fd))
        req_r, req_w, rep_r, rep_w, err_r, err_w, ctl_r, ctl_w = ours
        theirs = [req_r, rep_w, err_w, ctl_r]
        os.set_inheritable(ctl_r, True)  # the one fd it keeps beyond 0, 1 and 2
        argv = [sys.executable, "-I", "-S", "-c", _BOOT, engine, str(memory_bytes), str(ctl_r)]
        pid = os.posix_spawn(
            sys.executable,
            argv,
            {"CODEMODE_WORKER_PATH": _search_path()},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, req_r, 0),
                (os.POSIX_SPAWN_DUP2, rep_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ],
            setsid=True,  # the terminal's Ctrl-C is for the parent
            # As subprocess does: no signal blocked, and the two Python ignores default.
            setsigmask=(),
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except BaseException as exc:
        for fd in ours:
            os.close(fd)
        if isinstance(exc, OSError):
            raise _start_error(exc) from None
        raise
    for fd in theirs:
        os.close(fd)
    return Spawned(pid, req_w, rep_r, err_r, ctl_w)


# Started before the pool existed (``spawn_early``), waiting to be adopted by it.
_early: list[tuple[str, int, Spawned]] = []
# Set by a process that runs one program and exits: the pool then starts no spare
# behind the worker it hands out.
one_program = False


def spawn_early(engine: str, memory_bytes: int) -> None:
    _early.append((engine, memory_bytes, spawn(engine, memory_bytes)))


def adopt(engine: str, memory_bytes: int) -> Spawned | None:
    """A worker ``spawn_early`` started for this engine and cap, handed over once, with
    this process's resource limits (``_given_ours``). The first program decides: workers
    started early for another engine or cap (a warm spare's, booted with the defaults)
    are killed then, never left booting beside it."""
    found = None
    for i, (e, m, spawned) in enumerate(_early):
        if (e, m) == (engine, memory_bytes):
            del _early[i]
            found = spawned
            break
    while _early:
        _kill(_early.pop()[2])
    if found is not None and not _given_ours(found):
        _kill(found)
        return None
    return found


# The limits a worker sets on itself when it boots (its memory backstop, no core file).
_OWN_LIMITS = (resource.RLIMIT_DATA, resource.RLIMIT_CORE)


def _given_ours(spawned: Spawned) -> bool:
    """Give a worker started ahead this process's resource limits, as a worker started
    now would inherit them: a warm spare boots one before its caller is known, and the
    caller's limits (open files, CPU, processes...) are applied to the spare only once
    it becomes the caller's process. False where one cannot be given (the pool then
    starts its own)."""
    for name in dir(resource):
        number = getattr(resource, name)
        if not name.startswith("RLIMIT_") or number in _OWN_LIMITS:
            continue
        try:
            wanted = resource.getrlimit(number)
            if resource.prlimit(spawned.pid, number) != wanted:
                resource.prlimit(spawned.pid, number, wanted)
        except (OSError, ValueError):
            return False
    return True


def discard_early() -> None:
    """Kill the workers ``spawn_early`` started that no pool adopted (a warm server's
    spare booted one for a code-mode host, and its command turned out to be another),
    and let the pool start spares again."""
    global one_program
    one_program = False
    while _early:
        _kill(_early.pop()[2])


def _kill(spawned: Spawned) -> None:
    for fd in (spawned.requests, spawned.replies, spawned.errors, spawned.control):
        os.close(fd)
    try:
        os.kill(spawned.pid, signal.SIGKILL)
        os.waitpid(spawned.pid, 0)
    except OSError:
        pass
