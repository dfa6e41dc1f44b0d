"""What goes over a warm server's socket.

Caller to server: one message ``MAGIC`` + a 4-byte length + the request, with the
caller's descriptors 0, 1, 2 and its working folder (an ``O_PATH`` descriptor: a folder
it may no longer name, or enter by name, is still its folder) passed by
``SCM_RIGHTS``; then one byte per signal the caller received and passes on. The end of
the connection is the end of the caller: the run is ended too.

Back to the caller: ``A`` + the pid of the process that runs the command once it has
become the caller's (or ``R``: refused, nothing ran, start cold), then ``S`` + the
process's wait status once it ended.

The request is fields separated by NUL bytes (which no argument, variable or key can
hold): the key, the umask, the resource limits (``number,soft,hard`` joined by ``;``), the
ignored and the blocked signals (numbers joined by ``,``), the number of arguments, the
arguments, then the environment's ``NAME=value`` entries; arguments and environment as
the bytes the caller had (``os.fsencode``).

The caller's side imports compiled modules only (``_signal``, ``_socket``, no ``json``,
``socket``, ``signal`` or ``enum``): those pure-Python modules with what they import
were about half of the launcher's start (12 ms of 24 on these machines).
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # (no stub: the same names as signal)
import os
import resource
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket as Socket
    from collections.abc import Callable
    from socket import socket as ServerSocket

MAGIC = b"codemode-warm/2\0"
# An environment and command line are rarely over 100 KiB; Linux allows a few MiB.
MAX_REQUEST = 8 << 20
FDS = 4  # stdin, stdout, stderr, the working folder
ACCEPTED = b"A"
REFUSED = b"R"
STATUS = b"S"
_HEADER = struct.Struct("!I")
_INT = struct.Struct("!i")

# Signals a caller passes on, and to whom the server delivers each: the terminal sends
# these to the whole foreground process group, so the run's group gets them; SIGTERM
# comes from `kill PID`, which names one process. SIGTSTP is delivered as SIGSTOP: the
# run's group has no parent in its session (it is orphaned), and the kernel drops a
# SIGTSTP sent to an orphaned group.
TO_GROUP = frozenset({signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGWINCH,
                      signal.SIGTSTP, signal.SIGCONT})  # fmt: skip
TO_PROCESS = frozenset({signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2})
FORWARDED = TO_GROUP | TO_PROCESS
# Dispositions a process inherits from its parent that a cold start would keep (`nohup`
# ignores SIGHUP, a shell's background job SIGINT and SIGQUIT).
INHERITED = (
    signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGPIPE,
    signal.SIGUSR1, signal.SIGUSR2, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU,
)  # fmt: skip


class BadRequest(Exception):
    """A request this server does not serve (the caller then starts cold)."""


class Request:
    """A caller's command and the state a cold process would have started with (a
    plain class: ``dataclasses`` costs the launcher ~10 ms of imports)."""

    def __init__(self, key: str, argv: list[str], env: dict[str, str], umask: int,
                 rlimits: dict[int, tuple[int, int]], ignored: list[int],
                 blocked: list[int]) -> None:  # fmt: skip
        self.key = key
        self.argv = argv
        self.env = env
        self.umask = umask
        self.rlimits = rlimits
        self.ignored = ignored
        self.blocked = blocked

    @classmethod
    def of_this_process(cls, key: str, argv: list[str], ignored: list[int]) -> Request:
        mask = os.umask(0o022)
        os.umask(mask)
        limits = {}
        for name in dir(resource):
            if name.startswith("RLIMIT_"):
                number = getattr(resource, name)
                try:
                    limits[number] = resource.getrlimit(number)
                except (OSError, ValueError):
                    pass
        blocked = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return cls(key, argv, dict(os.environ), mask, limits, ignored, blocked)

    def encode(self) -> bytes:
        fields = [
            self.key.encode("ascii"),
            b"%d" % self.umask,
            ";".join(f"{k},{s},{h}" for k, (s, h) in self.rlimits.items()).encode(),
            ",".join(map(str, self.ignored)).encode(),
            ",".join(map(str, self.blocked)).encode(),
            b"%d" % len(self.argv),
            *map(os.fsencode, self.argv),
            *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in self.env.items()),
        ]
        if any(b"\0" in f for f in fields):
            raise ValueError("a NUL byte in the request")
        body = b"\0".join(fields)
        return MAGIC + _HEADER.pack(len(body)) + body

    @classmethod
    def decode(cls, body: bytes) -> Request:
        try:
            key, umask, rlimits, ignored, blocked, argc, *rest = body.split(b"\0")
            count = _count(argc, len(rest))
            env = {}
            for entry in rest[count:]:
                name, sep, value = entry.partition(b"=")
                if not name or not sep:
                    raise BadRequest("malformed request: environment")
                env[os.fsdecode(name)] = os.fsdecode(value)
            request = cls(
                key=key.decode("ascii"),
                argv=[os.fsdecode(a) for a in rest[:count]],
                env=env,
                umask=_int(umask) & 0o777,
                rlimits=dict(_limit(item) for item in _items(rlimits, b";")),
                ignored=[_signal(s) for s in _items(ignored, b",")],
                blocked=[_signal(s) for s in _items(blocked, b",")],
            )
        except ValueError as exc:  # UnicodeDecodeError too
            raise BadRequest(f"malformed request: {exc}") from None
        if not request.argv:
            raise BadRequest("malformed request: argv")
        return request


def _items(field: bytes, sep: bytes) -> list[bytes]:
    return field.split(sep) if field else []


def _int(v: bytes) -> int:
    if not v.lstrip(b"-").isdigit() or len(v) > 24:
        raise ValueError("not an integer")
    return int(v)


def _count(v: bytes, most: int) -> int:
    n = _int(v)
    if not 0 < n <= most:
        raise ValueError("no such count of arguments")
    return n


def _limit(item: bytes) -> tuple[int, tuple[int, int]]:
    number, soft, hard = item.split(b",")
    return _int(number), (_int(soft), _int(hard))


def _signal(v: bytes) -> int:
    n = _int(v)
    if not 0 < n < signal.NSIG:
        raise ValueError("no such signal")
    return n


def read_request(conn: ServerSocket) -> tuple[Request, list[int]]:
    """The request on ``conn`` and the descriptors that came with it (the caller's
    descriptors are closed here if the request is refused)."""
    import socket  # (the server's side)

    fds: list[int] = []
    try:
        data, fds, _, _ = socket.recv_fds(conn, 65536, FDS)
        if len(data) < len(MAGIC) + _HEADER.size or not data.startswith(MAGIC):
            raise BadRequest("not a warm request")
        (length,) = _HEADER.unpack_from(data, len(MAGIC))
        if length > MAX_REQUEST:
            raise BadRequest("request too large")
        if len(fds) != FDS:
            raise BadRequest("expected 4 descriptors")
        body = bytearray(data[len(MAGIC) + _HEADER.size :])
        while len(body) < length:
            chunk = conn.recv(min(length - len(body), 1 << 20))
            if not chunk:
                raise BadRequest("request cut short")
            body += chunk
        if len(body) != length:
            raise BadRequest("request longer than it says")
        return Request.decode(bytes(body)), fds
    except (BadRequest, OSError) as exc:
        for fd in fds:
            os.close(fd)
        raise BadRequest(str(exc)) from None


def accepted(pid: int) -> bytes:
    return ACCEPTED + _INT.pack(pid)


def status(wait_status: int) -> bytes:
    return STATUS + _INT.pack(wait_status)


# A reply: its kind (one byte) and a number.
REPLY_SIZE = 1 + _INT.size


def read_reply(
    conn: Socket, kind: bytes, until_readable: Callable[[], None] | None = None
) -> int | None:
    """The number after a ``kind`` reply, or None if something else (or nothing)
    came. ``until_readable``: waits before each read (the caller's, passing signals on
    meanwhile)."""
    data = b""
    while len(data) < REPLY_SIZE:
        if until_readable is not None:
            until_readable()
        try:
            chunk = conn.recv(REPLY_SIZE - len(data))
        except InterruptedError:
            continue
        except OSError:  # reset: the other end was killed
            return None
        if not chunk:
            return None
        data += chunk
        if data[:1] != kind:
            return None
    return int(_INT.unpack_from(data, 1)[0])
