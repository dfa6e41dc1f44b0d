"""A warm code-mode host server: a host process ready before it is asked for.

    interpreter code-mode-host --warm-server SOCKET [--idle SECONDS] [--watch DIR]...

Most of a Python host's start is its imports (~80 ms here), and Codex waits for it at
every session. This server imports them once, then keeps one *spare*: a process forked
from it with everything imported, its engine worker booting, waiting. When the
``warm_client`` program (the shim's, ``warm/beside.py``) connects, the server hands the
connection to the spare; the next one is forked once no session has run for
``QUIET_S`` (or at once, for a client that finds none). The spare takes the client's stdin,
stdout, stderr and working folder (SCM_RIGHTS), answers ``A`` and serves the session
exactly as ``interpreter code-mode-host`` would; the server reports its exit status to
the client, which exits with it. A client that goes away (killed) ends its host.

What is not the client's: a warm host keeps the environment, limits and control group
of the process that started the server, and only the stdio modes are served this way
(``--listen grpc://`` is refused: the client then starts the host itself, as it does
when no server answers, and that host sees everything of the client).

Who may connect: the socket is in a folder only this user may enter (``serve/warm_socket.py``),
and a peer of another user is dropped (``SO_PEERCRED``); the client checks the server's
user in turn. The server ends after ``--idle`` seconds without a client (default 900),
and as soon as anything changes in the code it serves (``--watch``: by default
codemode's package folders and the installed packages' folder), so an upgrade is never
served by an older process.
"""

from __future__ import annotations

import argparse
import gc
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from codemode.warm.place import listen_at
from codemode.warm.start import wait_for_end
from codemode.warm.watch import Watch, code_folders

MAGIC = b"codemode-warm-host/1"
MAX_REQUEST = 65536
IDLE_S = 900.0
# The next spare is made once no host has run for this long: making one (a fork, its
# pages, its engine worker's boot: a Python process's start) while a session runs, or
# while its client finishes the turn, would slow them on a machine with few cores. A
# client that finds no spare (a session beside another) gets one made at once.
QUIET_S = 1.0
# A spare that dies this soon after its fork, this many times in a row, means hosts
# cannot start here: the server gives up instead of forking for ever.
_SPARE_FAILURES = 5


# -- the spare: one future host --------------------------------------------------


# Called in a spare once it has a client, before it serves (the command line's crash
# hooks: ``cli/fast_host.py`` passes them, this layer may not import them).
_on_serve: list[Callable[[], None]] = []


def _spare(channel: socket.socket, ahead: bool) -> None:
    """A forked spare: wait for a client, then serve it (never returns). ``ahead``:
    made before a client asked (else one waits for it now)."""
    from codemode.codex_host.serve.start import host_options
    from codemode.js_runtime import prestart

    # Its own engine worker for a host with the default options, booting while it
    # waits (a child of this process, as a host's worker always is).
    defaults = host_options([])
    assert defaults is not None
    prestart.spawn_early(defaults.engine, defaults.memory_mb * 1024 * 1024)
    prestart.one_program = True
    if ahead:
        _own_pages()
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    except OSError:
        fds = []
    if not fds:  # the server went
        os._exit(0)
    channel.close()
    conn = socket.socket(fileno=fds[0])
    _serve_client(conn)


def _own_pages() -> None:
    """Copy now every page shared with the server that writing would copy: a fork
    shares the server's memory until either side writes, and Python writes to every
    object it touches (reference counts), so a fresh spare pays a fault and a copy for
    each page on its first use (~13 MB: several ms of the client's wait). Done while it
    waits instead (MADV_POPULATE_WRITE, Linux 5.14; elsewhere the pages are copied as
    they are touched, as before)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    populate_write = 23
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1] != "rw-p" or (len(fields) > 5 and fields[5].startswith("[v")):
                continue  # [vvar], [vsyscall]: not memory of ours
            start, end = (int(x, 16) for x in fields[0].split("-"))
            libc.madvise(start, end - start, populate_write)


def _refuse(conn: socket.socket, fds: list[int]) -> NoReturn:
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(b"R")
    except OSError:
        pass
    os._exit(0)


def _serve_client(conn: socket.socket) -> None:
    from codemode.codex_host.serve.start import host_options, serve_and_exit

    conn.settimeout(10)  # a client sends its request at once
    try:
        data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 4)
    except OSError:
        os._exit(0)
    args = _request_args(data)
    if args is None or len(fds) != 4:
        _refuse(conn, fds)
    options = host_options(args)
    if options is None or options.warm or options.where.kind == "tcp":
        _refuse(conn, fds)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    try:
        os.fchdir(fds[3])
    except OSError:
        pass  # a folder it may not enter: the host needs none
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    try:
        conn.sendall(b"A")
    except OSError:  # the client went before its answer: nobody to serve
        os._exit(0)
    threading.Thread(target=_end_with_client, args=(conn,), daemon=True).start()
    sys.argv = ["interpreter", "code-mode-host", *args]
    for hook in _on_serve:
        hook()
    serve_and_exit(options, command_process=True)


def _request_args(data: bytes) -> list[str] | None:
    """The host arguments in a client's request, or None if it is not one."""
    parts = data.split(b"\0")
    if len(parts) < 3 or parts[0] != MAGIC or parts[-1] != b"" or not parts[1].isdigit():
        return None
    args = parts[2:-1]
    if len(args) != int(parts[1]):
        return None
    try:
        return [a.decode() for a in args]
    except UnicodeDecodeError:
        return None


def _end_with_client(conn: socket.socket) -> None:
    """The client never writes after its request: anything else is its end (killed,
    or gone), and the host it started must end too."""
    try:
        conn.recv(1)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGTERM)


# -- the server -------------------------------------------------------------------


def _import_what_hosts_use() -> None:
    from codemode.codex_host.serve.start import asyncio_without_tls

    asyncio_without_tls()
    import codemode.codex_host.framed.protocol
    import codemode.codex_host.grpc.service
    import codemode.codex_host.serve.server
    import codemode.codex_host.session.runtime
    import codemode.codex_host.wire.h2_connection
    import codemode.js_runtime.session
    import codemode.js_runtime.worker_process
    import codemode.process.fast_exit  # noqa: F401


def default_watch() -> list[Path]:
    """codemode's folders and the installed packages' (``codemode.warm.watch``, the
    watch every warm server uses)."""
    import codemode

    return code_folders(Path(codemode.__file__).resolve().parent)


class Server:
    def __init__(self, path: str, idle_s: float, watch: list[Path]) -> None:
        self.path = path
        self.idle_s = idle_s
        self.watch = Watch(watch)
        self.listener = self._listen()
        self.hosts: dict[int, socket.socket] = {}  # a serving host's pid -> its client
        self.spare_pid = 0
        self.spare_channel: socket.socket | None = None
        self.spare_started = 0.0
        self.spare_due: float | None = time.monotonic()  # when to make the next spare
        self.failures = 0
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(wake_w, False)
        self.stopping = False
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # Stopped: no new client, the hosts serving finish (their clients get statuses).
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self._wake_w = wake_w

    def _listen(self) -> socket.socket:
        sock, self.identity = listen_at(self.path)  # (the lock is ``main``'s)
        return sock

    def _fork_spare(self, ahead: bool = True) -> None:
        self.spare_due = None
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                for sock in (ours, self.listener, *self.hosts.values()):
                    sock.close()
                for fd in (self.wake_r, self._wake_w, self.watch.fd):
                    os.close(fd)
                _spare(theirs, ahead)
            finally:
                os._exit(70)
        theirs.close()
        self.spare_pid, self.spare_channel = pid, ours
        self.spare_started = time.monotonic()

    def _hand_over(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:  # gone before it was taken, or out of descriptors: it retries
            return
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        except OSError:
            conn.close()
            return
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.geteuid():
            conn.close()
            return
        if self.spare_channel is None:
            self._fork_spare(ahead=False)
        assert self.spare_channel is not None
        try:
            socket.send_fds(self.spare_channel, [b"c"], [conn.fileno()])
        except OSError:
            conn.close()
            return
        self.hosts[self.spare_pid] = conn
        self.spare_channel.close()
        self.spare_channel = None
        self.spare_pid = 0
        self.spare_due = None  # once the hosts have ended

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            conn = self.hosts.pop(pid, None)
            if conn is not None:
                try:
                    status = code if code >= 0 else 128 - code  # -15: SIGTERM: 143
                    conn.send(struct.pack("i", status), socket.MSG_NOSIGNAL)
                except OSError:
                    pass
                conn.close()
                if not self.spare_pid and not self.hosts:
                    self.spare_due = time.monotonic() + QUIET_S
            elif pid == self.spare_pid:
                quick = time.monotonic() - self.spare_started < 5
                self.failures = self.failures + 1 if quick else 0
                self.spare_pid = 0
                if self.spare_channel is not None:
                    self.spare_channel.close()
                    self.spare_channel = None
                self.spare_due = time.monotonic() + QUIET_S

    def _stop_listening(self, selector: selectors.BaseSelector) -> None:
        if self.listener.fileno() < 0:
            return
        selector.unregister(self.listener)
        try:
            if os.stat(self.path).st_ino == self.identity:
                os.unlink(self.path)
        except OSError:
            pass
        self.listener.close()
        if self.spare_channel is not None:
            self.spare_channel.close()  # the spare sees the end and exits
            self.spare_channel = None

    def run(self) -> int:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, "client")
        selector.register(self.wake_r, selectors.EVENT_READ, "child")
        selector.register(self.watch.fd, selectors.EVENT_READ, "watch")
        idle_since = time.monotonic()
        while True:
            listening = self.listener.fileno() >= 0
            if not listening and not self.hosts and not self.spare_pid:
                return 0
            now = time.monotonic()
            deadlines = [] if self.hosts or not listening else [idle_since + self.idle_s]
            if self.spare_due is not None and listening:
                deadlines.append(self.spare_due)
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            for key, _ in selector.select(timeout):
                if key.data == "client" and self.listener.fileno() >= 0:
                    self._hand_over()
                elif key.data == "child":
                    while len(os.read(self.wake_r, 512)) == 512:
                        pass
                elif key.data == "watch" and self.watch.changed():
                    self._stop_listening(selector)  # stale: never serve older code
            self._reap()
            if self.hosts:
                idle_since = time.monotonic()
            due = self.spare_due
            if due is not None and time.monotonic() >= due and self.listener.fileno() >= 0:
                if self.failures < _SPARE_FAILURES:
                    self._fork_spare()
            if self.stopping:
                self._stop_listening(selector)
            elif self.failures >= _SPARE_FAILURES:
                print("warm host: spares keep failing; stopping", file=sys.stderr)
                self._stop_listening(selector)
            elif not self.hosts and time.monotonic() - idle_since >= self.idle_s:
                self._stop_listening(selector)


def main(argv: list[str], on_serve: Callable[[], None] | None = None) -> int:
    """The server's life; ``argv`` after ``--warm-server``. ``on_serve``: run in each
    host before it serves."""
    if on_serve is not None:
        _on_serve.append(on_serve)
    parser = argparse.ArgumentParser(prog="interpreter code-mode-host --warm-server")
    parser.add_argument("socket")
    parser.add_argument("--idle", type=float, default=IDLE_S)
    parser.add_argument("--watch", type=Path, action="append")
    parser.add_argument("--after", type=int, help="start serving once this process ends")
    args = parser.parse_args(argv)
    gc.disable()
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(args.socket + ".lock", flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server has this socket
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who serves it, for whoever must stop it
    os.chdir("/")  # not the first host's folder, which it would keep busy
    if args.after:
        wait_for_end(args.after)  # the host that started this server serves a session
    _import_what_hosts_use()
    gc.freeze()  # shared with every spare, never copied by a collection
    server = Server(args.socket, args.idle, args.watch or default_watch())
    return server.run()
