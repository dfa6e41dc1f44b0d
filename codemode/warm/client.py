"""The caller's side: hand this command to the warm server, pass on its signals, and
return its exit status. Standard library only (the launcher runs it before anything
else is imported).

``run(argv)`` returns None whenever the command should start cold instead: no server
(one is then started for the next command), a server of another user, a refusal, or
anything unexpected before the server took the command. Once taken, the command is the
server's to finish: a server that ends mid-run is an error, never a second run.
"""

from __future__ import annotations

# Compiled modules only (``_signal``, ``_socket``): see ``protocol``'s doc.
import _signal as signal  # type: ignore[import-not-found]  # (no stub: the same names as signal)
import _socket as socket
import errno
import os
import struct
import sys

from codemode.warm import place, protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

# The status when the server ended without reporting the run's (sysexits' EX_SOFTWARE,
# as an internal error).
LOST_STATUS = 70


class _Forwarder:
    """Passes each signal the caller gets on to the run, once the run exists.

    The handlers do nothing in Python: CPython's own C handler writes each signal's
    number to a wake-up pipe (``signal.set_wakeup_fd``), and the caller waits on that
    pipe and its socket together (``reply``). A Python handler that sent the byte itself
    would run only when the interpreter next looked, and a signal that landed just before
    a blocking ``recv`` began waited for that ``recv`` to return: for the run's status,
    which (the signal being the one that was to end the run) never came. A Ctrl-C was
    lost that way about once in 200 under load."""

    def __init__(self, ignored: list[int]) -> None:
        self.wake, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.previous: dict[int, object] = {}
        # (The pipe first: a signal that comes as its handler is put in place is written.)
        self.previous_wake = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self._wake_w = wake_w
        for number in protocol.FORWARDED:
            if number in ignored:
                continue  # ignored by the caller: the run ignores it too
            self.previous[number] = signal.signal(number, _noted)

    def received(self) -> bytes:
        """The numbers of the signals received since last asked."""
        got = b""
        try:
            while chunk := os.read(self.wake, 512):
                got += chunk
        except BlockingIOError:
            pass
        return got

    def reply(self, conn: socket.socket, kind: bytes) -> int | None:
        """``protocol.read_reply``, passing on the signals that come meanwhile."""
        import select

        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        poller.register(self.wake, select.POLLIN)

        def until_readable() -> None:
            while True:
                ready = [fd for fd, _ in poller.poll()]
                if self.wake in ready:
                    for number in self.received():
                        self._send(conn, number)
                if conn.fileno() in ready:
                    return

        return protocol.read_reply(conn, kind, until_readable)

    def _send(self, conn: socket.socket, number: int) -> None:
        try:
            conn.send(bytes([number]), socket.MSG_NOSIGNAL)
        except OSError:
            pass
        if number == signal.SIGTSTP:
            # Stop as a cold process would (the run is being stopped); the shell sees a
            # stopped job, and `fg` sends SIGCONT, which is passed on.
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTSTP)
            signal.signal(signal.SIGTSTP, _noted)

    def restore(self) -> bytes:
        """Put back the caller's handlers; the signals received meanwhile."""
        for number, previous in self.previous.items():
            signal.signal(number, previous)
        signal.set_wakeup_fd(self.previous_wake)
        got = self.received()
        os.close(self.wake)
        os.close(self._wake_w)
        return got


def _noted(number: int, frame: FrameType | None) -> None:
    """The forwarded signals' handler: the wake-up pipe has the number already."""


def _standard_streams_open() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def run(argv: list[str]) -> int | None:
    """The command's exit status, or None: start cold."""
    if not _standard_streams_open():
        return None  # a closed 0-2 would be the socket's number: only a cold start keeps it
    try:
        path = place.socket_path()
    except OSError:
        return None
    if not place.serving(path):
        _start_server(path, argv[1] if len(argv) > 1 else "")
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.connect(path)
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        server, uid, _ = struct.unpack("3i", creds)
        if uid != os.geteuid() or _unlike_us(sock, server):
            sock.close()
            return None  # another user's socket, or a process unlike ours: never used
    except OSError:
        sock.close()
        return None
    ignored = [int(n) for n in protocol.INHERITED if signal.getsignal(n) == signal.SIG_IGN]
    try:
        forwarder = _Forwarder(ignored)
    except OSError:  # no descriptor left for its pipe: nothing was sent yet
        sock.close()
        return None
    try:
        folder = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # (O_PATH needs no permission: this is rare) the cold start says
        _cold(sock, -1, forwarder)
        return None
    request = protocol.Request.of_this_process(place.facts(), argv, ignored)
    try:
        data = request.encode()
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("4i", 0, 1, 2, folder))]
        sent = sock.sendmsg([data[:65536]], rights)
    except (OSError, ValueError):  # nothing went: nothing can run
        _cold(sock, folder, forwarder)
        return None
    os.close(folder)
    folder = -1
    if sent < len(data):
        try:
            sock.sendall(data[sent:])
        except OSError:
            # Whether the command started is the reply's to say, not this error's: a
            # quick run can end, and its server close the connection, before a late
            # send returns. A request cut short is refused.
            _shut_writing(sock)
    # What comes before the run exists waits in the pipe (passed on once it does).
    pid = protocol.read_reply(sock, protocol.ACCEPTED)
    if pid is None:
        _cold(sock, folder, forwarder)
        return None
    wait_status = forwarder.reply(sock, protocol.STATUS)
    if wait_status is None:
        print("interpreter: the warm server ended during the command "
              "(CODEMODE_WARM=0 starts cold)", file=sys.stderr)  # fmt: skip
        return LOST_STATUS
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        _die_of(number)
        return 128 + number
    return os.waitstatus_to_exitcode(wait_status)


def _unlike_us(sock: socket.socket, pid: int) -> bool:
    """Whether the process that listens (``pid``) differs from this one in what the
    server compares of its callers (``place.process_facts``): its confinement
    (no-new-privileges, seccomp, namespaces, capabilities), groups, priority, I/O
    priority, control group... A real server refuses such a caller anyway; a program
    confined further that could write the runtime folder (a sandbox leaving /tmp
    writable) and listens on the socket's name is handed nothing: not this command's
    environment, nor its descriptors. Pid 0 (a listener in another pid namespace), a
    process that is gone or cannot be read: unlike."""
    pidfd = -1
    try:
        pidfd = struct.unpack("i", sock.getsockopt(socket.SOL_SOCKET, place.SO_PEERPIDFD, 4))[0]
    except OSError as exc:
        if exc.errno != errno.ENOPROTOOPT:  # (a kernel before 6.5: the pid alone)
            return True  # the listener has ended
    try:
        theirs = place.process_facts(pid) if pid > 0 else None
        if theirs is None or theirs != place.process_facts("self"):
            return True
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, 0)  # still that process: its pid not reused
        return False
    except OSError:
        return True
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _shut_writing(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _cold(sock: socket.socket, folder: int, forwarder: _Forwarder) -> None:
    sock.close()
    if folder >= 0:
        os.close(folder)
    for number in forwarder.restore():  # what arrived meanwhile, now the cold run's
        os.kill(os.getpid(), number)


def _die_of(number: int) -> None:
    """End as the run ended, killed by ``number`` (a shell tells the two apart)."""
    sys.stdout.flush()
    signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
    os.kill(os.getpid(), number)


def _start_server(path: str, command: str) -> None:
    """Leave a server on ``path`` for the next command; it loads nothing until this
    one has ended (the cold start has the machine to itself). Never raises."""
    try:
        from codemode.warm import start

        start.leave_server(path, command)
    except Exception:
        return
