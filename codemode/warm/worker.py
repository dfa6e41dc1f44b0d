"""A process forked from the warm server, made into the one a cold start would be.

It reads the caller's request itself (the server never waits on a client), then takes
the caller's descriptors 0-2, working folder, umask, resource limits, signal mask and
ignored signals, environment (``os.environ`` replaced whole: nothing of the server's
stays) and argv; it becomes a session and process group of its own, so the caller's
signals reach it and its children together, and whatever the server held (its
listener, its other clients) is closed before any of the command's code runs.

What a cold start would have that this cannot: its parent (the server, not the shell),
the caller's control group and terminal session. docs/warm.md lists them.
"""

from __future__ import annotations

import io
import os
import resource
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, NoReturn

from codemode.warm import place, protocol, spare

# The status of a process that could not become the caller's after all (nothing of the
# command ran; the caller has been told to start cold).
REFUSED_STATUS = 75


def prepare() -> None:
    """In the server, before it forks: what every run would otherwise do again."""
    _libc()


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor above 2 not in ``keep`` (0-2 are replaced later)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed by now


def wait_as_spare(
    channel: socket.socket, prepare: Callable[[], None]
) -> tuple[socket.socket, int]:
    """A spare forked ahead of its caller: make ready what its command will want
    (``prepare``, ``spare.py``), then wait for the caller's connection and the server's
    gate (exits when the server closes the channel instead). The channel stays open: the
    server's word that the caller may be served comes on it (``become_caller``)."""
    end_with_server()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's handler, not ours
    # Its own session now, not once a caller waits: setsid costs milliseconds on a busy
    # machine (the kernel makes the session's scheduling group).
    os.setsid()
    prepare()
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 2)
    except OSError:
        fds = []
    if len(fds) != 2:
        os._exit(0)  # the server stopped, or made no sense: nothing ran
    return socket.socket(fileno=fds[0]), fds[1]


def become_caller(
    conn: socket.socket, facts: str, gate: int, kind: spare.Kind = spare.no_kind,
    go: socket.socket | None = None,
) -> protocol.Request:  # fmt: skip
    """Read and apply the caller's request on ``conn``; say ``A`` to the caller and
    write the command's kind (one byte, ``spare.py``) to ``gate`` (the server then
    listens to the caller). Exits, having said ``R``, when the request cannot be served
    exactly. ``go``: a spare's channel, on which the server says the caller passed its
    checks (made while this reads and applies the request); nothing is said to the
    caller, nor run, before that."""
    end_with_server()
    conn.settimeout(10)  # a caller sends its request at once
    try:
        request, fds = protocol.read_request(conn)
    except protocol.BadRequest as exc:
        _refuse(conn, str(exc))
    if request.key != facts:
        _refuse(conn, "another installation's or process's key")
    # The key as the caller sent it, and as its environment makes it: a caller that did
    # not compute its key (the compiled client is given one) may run with other start
    # variables (locale, PYTHON*) than the server was started with.
    if place.facts(request.env) != facts:
        _refuse(conn, "another environment's start variables (locale, PYTHON*, TZ)")
    try:
        _take(request, fds)
    except (OSError, ValueError) as exc:
        _refuse(conn, f"cannot become the caller: {exc}")
    conn.settimeout(None)
    if go is not None:
        try:
            said = go.recv(1)
        except OSError:
            said = b""
        go.close()
        if said != spare.GO:  # (a caller that failed them: the server kills this first)
            _refuse(conn, "the server did not clear the caller")
    try:
        conn.sendall(protocol.accepted(os.getpid()))
        os.write(gate, spare.one_byte(kind(request.argv)))
    except OSError:
        os._exit(REFUSED_STATUS)  # the caller went: nothing to serve
    os.close(gate)
    conn.close()  # the server watches the caller; this process only runs
    return request


def end_with_server() -> None:
    """A server killed mid-run takes its runs with it (its callers are told), rather
    than leave them writing to a caller that has gone. SIGKILL, not SIGTERM: a run
    stopped by Ctrl-Z would hold a SIGTERM until continued, and nobody is left to
    continue it."""
    server = os.getppid()
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != server:
        os._exit(REFUSED_STATUS)


def _refuse(conn: socket.socket, why: str) -> NoReturn:
    print(f"warm: refused a caller: {why}", file=sys.stderr, flush=True)
    try:
        conn.sendall(protocol.REFUSED)
    except OSError:
        pass
    os._exit(REFUSED_STATUS)


def _take(request: protocol.Request, fds: list[int]) -> None:
    if os.getsid(0) != os.getpid():  # (a spare is a session leader already)
        os.setsid()  # a group of its own: the caller's signals reach it and its children
    for name, (soft, hard) in request.rlimits.items():
        if resource.getrlimit(name) != (soft, hard):
            resource.setrlimit(name, (soft, hard))  # raising a hard limit fails: cold
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)  # inheritable, as a cold process's 0-2 are
    os.fchdir(fds[3])
    for fd in fds:
        os.close(fd)
    os.umask(request.umask)
    number: int
    for number in protocol.INHERITED:
        wanted = signal.SIG_IGN if number in request.ignored else _default(number)
        signal.signal(number, wanted)
    for number in range(1, signal.NSIG):
        if number not in protocol.INHERITED:
            try:
                if signal.getsignal(number) not in (signal.SIG_DFL, None):
                    signal.signal(number, _default(number))
            except (OSError, ValueError):
                pass
    signal.pthread_sigmask(signal.SIG_SETMASK, request.blocked)
    os.environ.clear()  # unsetenv for each: the C environment follows
    os.environ.update(request.env)
    time.tzset()
    _forget_what_the_environment_gave()
    sys.argv = list(request.argv)
    _name(os.path.basename(sys.argv[0]))
    if not sys.flags.safe_path and sys.path:
        # As Python sets it for a script: its folder, links resolved (the server's is
        # its own working folder, from ``-m``).
        sys.path[0] = os.path.dirname(os.path.realpath(sys.argv[0]))
    _new_standard_streams()


def _forget_what_the_environment_gave() -> None:
    """What the standard library worked out from the server's environment and keeps:
    worked out again from the caller's on first use, as in a cold process (the
    temporary folder, from TMPDIR; the default encoding's locale is the caller's by the
    socket's key)."""
    tempfile.tempdir = None


def _name(name: str) -> None:
    """The process's name (``comm``: what ``ps``, ``pgrep`` and ``top`` show) as a cold
    start's would be: the script's name, not the server's ``python``."""
    _libc().prctl(15, os.fsencode(name)[:15], 0, 0, 0)  # PR_SET_NAME


_LIBC: list[Any] = []


def _libc() -> Any:
    """The C library, opened once in the server (every run and spare shares it)."""
    if not _LIBC:
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _default(number: int) -> Any:
    """A signal's disposition in a freshly started Python."""
    if number == signal.SIGINT:
        return signal.default_int_handler
    if number in (signal.SIGPIPE, signal.SIGXFSZ):
        return signal.SIG_IGN  # Python ignores these at start
    return signal.SIG_DFL


def _new_standard_streams() -> None:
    """sys.stdin/stdout/stderr as Python would make them for the caller's 0-2: line
    buffering follows whether each is a terminal; encodings are the server's, which
    are the caller's (its locale variables are part of the socket's key)."""
    old = (sys.stdin, sys.stdout, sys.stderr)
    new = []
    for fd, stream in enumerate(old):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        errors = getattr(stream, "errors", None) or "strict"
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        tty = raw.isatty()
        buffered: io.BufferedIOBase
        if fd == 0:
            buffered = io.BufferedReader(raw)
        else:
            buffered = io.BufferedWriter(raw)
        # -u and PYTHONUNBUFFERED (part of the key): as the server's own streams are.
        unbuffered = bool(getattr(stream, "write_through", False)) and fd != 0
        new.append(io.TextIOWrapper(buffered, encoding=encoding, errors=errors,
                                    line_buffering=fd == 2 or (tty and fd != 0),
                                    write_through=fd == 2 or unbuffered))  # fmt: skip
    sys.stdin, sys.stdout, sys.stderr = new
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = new  # type: ignore[misc]


def run_and_exit(run: Callable[[list[str]], int]) -> NoReturn:
    """Run the command (``run`` gets argv without the program name) and exit with its
    status as a cold process would: atexit handlers, flushed streams."""
    try:
        code = run(sys.argv[1:])
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        # As Python ends a process on an unhandled Ctrl-C: killed by SIGINT.
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:
        # As Python ends a process on an unhandled exception: the traceback, status 1.
        import traceback

        traceback.print_exc()
        code = 1
    import atexit
    import threading

    shutdown: Callable[[], None] | None = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()  # non-daemon threads joined, as at a cold process's exit
    atexit._run_exitfuncs()
    _flush()
    os._exit(code & 0xFF)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
