"""The warm server: one per user and installation, holding every module imported,
forking a process per command (``worker``) and watching over it for its caller.

For each connection: the peer is checked (``peer``: this user, not confined beyond the
server), and the spare (a process forked ahead once no command has run for
``QUIET_S``, made ready for the kind of command last run: ``spare``; Codex's code-mode
host gets one with its engine worker booted) or a process forked now reads the request
and becomes the caller's (a spare is handed a connection of this user at once, and the
rest of the check, the peer's ``/proc``, is made while it reads: it answers the caller
only once told the peer passed, and is killed if not); the
server then reads the caller's signals off the connection and delivers them (the run
is the caller's process group's stand-in), and reports the run's wait status. A caller
that goes away before its run's status ends its run at once (SIGKILL to the run's group):
every signal a caller can catch it passes on and waits, so it went because of one it
could not (SIGKILL, or a crash), which would have ended a cold command there.

The server holds none of a caller's descriptors once it has forked (a server that
outlives a command keeps nothing of the command's pipes), no caller's environment (it
is started with only what Python reads at start, ``start.py``), and ends after
``idle_s`` without a command, on SIGTERM (runs in progress finish), and as soon as any
code it serves changes.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codemode.warm import peer, place, protocol, spare, watch, worker

IDLE_S = 900.0
# Commands running at once, beyond which a caller is refused (and starts cold): a
# client holds a process per connection.
MAX_RUNS = 256
# How often it checks that its socket is still its own (removed, or replaced by another
# server's, it has no callers left to wait for).
CHECK_S = 30.0
# A spare (a process forked ahead, waiting for a caller) is made once no command has
# run for this long: forking while a command runs would slow it on a machine with few
# cores. A caller that finds no spare gets a process forked for it at once.
QUIET_S = 0.5
# A spare that dies this soon after its fork, this many times in a row, means spares
# cannot live here: the server stops making them (and forks per caller).
_SPARE_FAILURES = 5


@dataclass
class _Run:
    conn: socket.socket
    gate: int  # readable once the run has become its caller's
    # "gate": becoming the caller's; "refused": it did not; "caller": the caller's
    # signals are read; "gone": the caller ended (the run is being ended)
    state: str = "gate"


class Server:
    def __init__(self, path: str, run: Callable[[list[str]], int], idle_s: float,
                 folders: list[Path] | watch.Watch, lock: int = -1,
                 kind: spare.Kind = spare.no_kind,
                 prepare: spare.Prepare = spare.prepare_nothing,
                 first_kind: bytes = spare.PLAIN) -> None:  # fmt: skip
        self.path = path
        # What a spare makes ready: for the kind of the last command run (``spare.py``).
        self.kind, self.prepare, self.spare_kind = kind, prepare, spare.one_byte(first_kind)
        self.lock = lock  # its pid and how many commands it ran, for `warm status`
        self.served = 0
        self.run_command = run
        self.idle_s = idle_s
        self.facts = place.facts()
        ours = peer.facts("self")
        if ours is None:
            raise SystemExit("warm: cannot read this process's own /proc entry")
        self.ours = ours
        self.watch = folders if isinstance(folders, watch.Watch) else watch.Watch(folders)
        self.runs: dict[int, _Run] = {}
        self.spare: tuple[int, socket.socket] | None = None  # its pid and channel
        self.spare_born = 0.0
        self.spare_due: float | None = time.monotonic()
        self.spare_failures = 0
        self.selector = selectors.DefaultSelector()
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.stopping = False
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self._wake_w = wake_w
        self.listener = self._listen()

    def _listen(self) -> socket.socket:
        sock, self.identity = place.listen_at(self.path)
        return sock

    # -- a command ----------------------------------------------------------------

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:  # gone before it was taken, or out of descriptors
            return
        # Another user's connection, or one past the bound, goes no further.
        why = peer.other_user(conn)
        if why is None and len(self.runs) >= MAX_RUNS:
            why = f"{MAX_RUNS} commands run already"
        if why is not None:
            _refuse(conn, why)
            return
        gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(gate_r, False)  # (read at a run's end too: never wait on it)
        if self.spare is not None and self._to_spare(conn, gate_r, gate_w):
            return
        if (why := peer.differs(conn, self.ours)) is not None:
            os.close(gate_r)
            os.close(gate_w)
            _refuse(conn, why)
            return
        sys.stderr.flush()
        if threading.active_count() > 1:  # a fork copies no thread: say so, serve anyway
            print("warm: forking beside threads", file=sys.stderr, flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                self._in_child(conn, gate_r, gate_w)
            except BaseException as exc:  # never back into the server's loop
                print(f"warm: a run failed to start: {exc!r}", file=sys.stderr, flush=True)
            finally:
                os._exit(worker.REFUSED_STATUS)
        os.close(gate_w)
        self._started(pid, conn, gate_r)

    def _to_spare(self, conn: socket.socket, gate_r: int, gate_w: int) -> bool:
        """Hand ``conn`` to the spare, then check the peer while the spare reads its
        request and takes on its state: the spare says ``A``, and runs anything, only
        once told here that the peer passed; one that did not is killed. False when the
        spare could not take it (it had ended)."""
        assert self.spare is not None
        pid, channel = self.spare
        self.spare = None
        try:
            socket.send_fds(channel, [b"c"], [conn.fileno(), gate_w])
        except OSError:
            channel.close()  # it ended: a process is forked for the caller instead
            return False
        os.close(gate_w)
        why = peer.differs(conn, self.ours)
        if why is not None:
            _signal(pid, signal.SIGKILL, group=True)  # its worker too; reaped, not a run
            channel.close()
            os.close(gate_r)
            _refuse(conn, why)
            if not self.runs:
                self.spare_due = time.monotonic() + QUIET_S
            return True
        try:
            channel.send(spare.GO)
        except OSError:
            pass  # it ended: its end is reported as a run's
        channel.close()
        self._started(pid, conn, gate_r)
        return True

    def _started(self, pid: int, conn: socket.socket, gate_r: int) -> None:
        self.runs[pid] = _Run(conn, gate_r)
        self.selector.register(gate_r, selectors.EVENT_READ, ("gate", pid))
        self.spare_due = None  # once the commands have ended

    def _forget_the_server(self, keep: set[int]) -> None:
        """In a fork: nothing of the server's (its listener, lock, watch, other callers,
        whatever an import opened) reaches the command, only ``keep``."""
        signal.set_wakeup_fd(-1)
        self.selector.close()
        self.listener.close()
        for other in self.runs.values():
            other.conn.detach()  # closed below, with every other descriptor
        if self.spare is not None:
            self.spare[1].detach()
        worker.close_all_but(keep)

    def _in_child(self, conn: socket.socket, gate_r: int, gate_w: int) -> None:
        self._forget_the_server({conn.fileno(), gate_w})
        worker.become_caller(conn, self.facts, gate_w, self.kind)
        worker.run_and_exit(self.run_command)

    def _fork_spare(self) -> None:
        self.spare_due = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                ours.detach()
                self._forget_the_server({theirs.fileno()})
                kind = self.spare_kind
                conn, gate_w = worker.wait_as_spare(theirs, lambda: self.prepare(kind))
                worker.become_caller(conn, self.facts, gate_w, self.kind, go=theirs)
                worker.run_and_exit(self.run_command)
            except BaseException as exc:  # never back into the server's loop
                print(f"warm: a spare failed: {exc!r}", file=sys.stderr, flush=True)
            finally:
                os._exit(worker.REFUSED_STATUS)
        theirs.close()
        self.spare = (pid, ours)
        self.spare_born = time.monotonic()

    def _gate_opened(self, pid: int) -> None:
        run = self.runs[pid]
        self.selector.unregister(run.gate)
        try:
            taken = os.read(run.gate, 1)
        except OSError:
            taken = b""
        os.close(run.gate)
        if not taken:  # it refused the caller (or died) before the command began
            run.state = "refused"
            return
        run.state = "caller"
        self.spare_kind = taken  # the next spare makes ready for this kind of command
        self.selector.register(run.conn, selectors.EVENT_READ, ("caller", pid))

    def _from_caller(self, pid: int) -> None:
        run = self.runs[pid]
        try:
            data = run.conn.recv(64)
        except OSError:
            data = b""
        if not data:  # the caller ended: so does its run, as a cold one would have with it
            self.selector.unregister(run.conn)
            run.state = "gone"
            _signal(pid, signal.SIGKILL, group=True)  # (stopped by Ctrl-Z too)
            return
        for number in data:
            if number in protocol.TO_GROUP:
                to = signal.SIGSTOP if number == signal.SIGTSTP else number
                _signal(pid, to, group=True)
            elif number in protocol.TO_PROCESS:
                _signal(pid, number, group=False)

    def _reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare[0]:
                self._spare_died()
                continue
            run = self.runs.get(pid)
            if run is None:
                continue
            if run.state == "gate":  # it ended before its gate was read: read it now
                self._gate_opened(pid)
            del self.runs[pid]
            if run.state in ("caller", "gone"):  # it ran a command
                self.served += 1
            if self.lock >= 0:
                os.pwrite(self.lock, f"{os.getpid()} {self.served}\n".encode(), 0)
            if run.state == "caller":
                self.selector.unregister(run.conn)
            try:
                run.conn.send(protocol.status(wait_status), socket.MSG_NOSIGNAL)
            except OSError:
                pass
            run.conn.close()
            if not self.runs and self.spare is None:
                self.spare_due = time.monotonic() + QUIET_S

    def _spare_died(self) -> None:
        assert self.spare is not None
        self.spare[1].close()
        self.spare = None
        quick = time.monotonic() - self.spare_born < 5
        self.spare_failures = self.spare_failures + 1 if quick else 0
        if self.spare_failures < _SPARE_FAILURES:
            self.spare_due = time.monotonic() + QUIET_S

    # -- the server's life ----------------------------------------------------------

    def _stop_listening(self) -> None:
        if self.listener.fileno() < 0:
            return
        self.selector.unregister(self.listener)
        try:
            if os.stat(self.path).st_ino == self.identity:
                os.unlink(self.path)
        except OSError:
            pass
        self.listener.close()
        if self.spare is not None:
            self.spare[1].close()  # the spare sees the end and exits
            self.spare = None

    def serve(self) -> int:
        self.selector.register(self.listener, selectors.EVENT_READ, ("listener", 0))
        self.selector.register(self.wake_r, selectors.EVENT_READ, ("child", 0))
        self.selector.register(self.watch.fd, selectors.EVENT_READ, ("watch", 0))
        idle_since = time.monotonic()
        next_check = idle_since + CHECK_S
        while True:
            listening = self.listener.fileno() >= 0
            if not listening and not self.runs and self.spare is None:
                return 0
            now = time.monotonic()
            deadlines = []
            if listening and not self.runs:
                deadlines.append(idle_since + self.idle_s)
            if listening:
                deadlines.append(next_check)
                if self.spare_due is not None:
                    deadlines.append(self.spare_due)
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            for key, _ in self.selector.select(timeout):
                what, pid = key.data
                if what == "listener" and self.listener.fileno() >= 0:
                    self._accept()
                elif what == "gate":
                    self._gate_opened(pid)
                elif what == "caller":
                    self._from_caller(pid)
                elif what == "child":
                    _drain(self.wake_r)
                elif what == "watch" and self.watch.changed():
                    self._stop_listening()  # stale: never serve older code
            self._reap()
            now = time.monotonic()
            if self.runs:
                idle_since = now
            due = self.spare_due
            if due is not None and now >= due and not self.runs and self.listener.fileno() >= 0:
                self._fork_spare()
            if now >= next_check:
                next_check = now + CHECK_S
                if not self._still_ours():
                    self._stop_listening()
            if self.stopping or (not self.runs and now - idle_since >= self.idle_s):
                self._stop_listening()

    def _still_ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.identity
        except OSError:
            return False


def _drain(fd: int) -> None:
    """Empty the non-blocking wake-up pipe (a multiple of the read's size raises at the
    end: that ended the server once 512 signals had come between two turns)."""
    try:
        while len(os.read(fd, 512)) == 512:
            pass
    except BlockingIOError:
        pass


def _signal(pid: int, number: int, group: bool) -> None:
    """``pid`` is a child not yet reaped: its id is not reused meanwhile."""
    try:
        if group:
            os.killpg(pid, number)
        else:
            os.kill(pid, number)
    except OSError:
        pass


def _refuse(conn: socket.socket, why: str) -> None:
    print(f"warm: refused a connection: {why}", file=sys.stderr, flush=True)
    _say_refused(conn)


def _say_refused(conn: socket.socket) -> None:
    try:
        conn.send(protocol.REFUSED, socket.MSG_NOSIGNAL)
    except OSError:
        pass
    conn.close()
