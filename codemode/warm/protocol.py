"""What goes over a warm server's socket.

Caller to server: one message ``MAGIC`` + a 4-byte length + a JSON request, with the
caller's descriptors 0, 1, 2 and its working folder (an ``O_PATH`` descriptor: a folder
it may no longer name, or enter by name, is still its folder) passed by
``SCM_RIGHTS``; then one byte per signal the caller received and passes on. The end of
the connection is the end of the caller: the run is ended too.

Back to the caller: ``A`` + the pid of the process that runs the command once it has
become the caller's (or ``R``: refused, nothing ran, start cold), then ``S`` + the
process's wait status once it ended.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import struct

MAGIC = b"codemode-warm/1\0"
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
        body = json.dumps({
            "key": self.key, "argv": self.argv, "env": self.env, "umask": self.umask,
            "rlimits": {str(k): list(v) for k, v in self.rlimits.items()},
            "ignored": self.ignored, "blocked": self.blocked,
        }).encode("ascii")  # fmt: skip
        return MAGIC + _HEADER.pack(len(body)) + body

    @classmethod
    def decode(cls, body: bytes) -> Request:
        try:
            d = json.loads(body)
            request = cls(
                key=_str(d["key"]),
                argv=[_str(a) for a in d["argv"]],
                env={_str(k): _str(v) for k, v in d["env"].items()},
                umask=_int(d["umask"]) & 0o777,
                rlimits={int(k): (_int(v[0]), _int(v[1])) for k, v in d["rlimits"].items()},
                ignored=[_signal(s) for s in d["ignored"]],
                blocked=[_signal(s) for s in d["blocked"]],
            )
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise BadRequest(f"malformed request: {exc}") from None
        if not request.argv or any("\0" in a for a in request.argv):
            raise BadRequest("malformed request: argv")
        if any("\0" in k or "=" in k or not k or "\0" in v for k, v in request.env.items()):
            raise BadRequest("malformed request: environment")
        return request


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError("not a string")
    return v


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("not an integer")
    return v


def _signal(v: object) -> int:
    n = _int(v)
    if not 0 < n < signal.NSIG:
        raise ValueError("no such signal")
    return n


def read_request(conn: socket.socket) -> tuple[Request, list[int]]:
    """The request on ``conn`` and the descriptors that came with it (the caller's
    descriptors are closed here if the request is refused)."""
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


def read_reply(conn: socket.socket, kind: bytes) -> int | None:
    """The number after a ``kind`` reply, or None if something else (or nothing)
    came."""
    data = b""
    while len(data) < 1 + _INT.size:
        try:
            chunk = conn.recv(1 + _INT.size - len(data))
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
