"""The command server: the program that runs inside a session's bubblewrap sandbox and
starts each of the session's commands there, so that a command costs a fork and an exec
instead of a whole new sandbox (``command_servers`` is the host side).

It is started by the host as ``python -I -S -c BOOT FD SOURCE_FD [SUBREAPER]`` and runs
the program read from ``SOURCE_FD``: this module and the few it imports (``proc_files``,
``baseline``, ``tidy``), their texts read once by the host process and passed whole
(``server_program``), so a workspace that holds codemode's own source cannot change what
runs. They import nothing but the standard library and each other. It holds no authority
a command lacks (same user, same mounts, same seccomp filter, no capabilities) and
guards what it does hold, the socket to the host and the requests on it:

- it is PID 1 of the sandbox's PID namespace, which the kernel never signals from
  inside unless a handler is installed (there are none), so a command cannot kill it;
- it is not dumpable: no command can ptrace it (the filter forbids ptrace anyway) or
  read its ``/proc`` entries (``environ``, ``mem``, ``fd``); and ``/proc`` is mounted
  read-only (``bwrap.options``), so no command writes the attribute files every command
  inherits from it (``coredump_filter``, ``oom_score_adj``, ...), not even as root,
  whose those files are: the server is out of reach, not reset attribute by attribute;
- each command's processes end with the command, as they would with a sandbox of its
  own: the command starts in a new session as a *child subreaper* (through the
  ``subreaper`` helper, else a ``preexec_fn``), so every process it orphans — ``setsid``
  and double-forked ones included — is reparented to the command's first process while
  that runs, and to the server once it has exited. A child of the server that is not a
  running command's first process is therefore always something an ended command left
  behind: when a command exits the server kills and reaps every such child (repeatedly,
  as their own children are reparented in turn) before it reports the exit.

Protocol (a SOCK_SEQPACKET socket, one object a message: ``marshal`` from the host,
which the server trusts, JSON from the server, which the host does not):
host → server ``{"op": "run", "id": N, "argv": [...], "cwd": "...", "env": {...}}``
with the command's output descriptor attached (SCM_RIGHTS), ``{"op": "kill", "id": N}``;
server → host ``{"ready": true}`` once, then ``{"id": N, "exit": CODE, "stuck": BOOL}``
per command (CODE as ``os.waitstatus_to_exitcode``: negative for a signal; ``stuck``:
what it left could not all be killed within half a second, and the host ends the whole
sandbox, which the kernel then empties at once). End of the socket from
the host ends the server, and with PID 1 the whole namespace.

Each command starts clean, as in a sandbox of its own: when the last running command has
ended, ``tidy`` empties ``/dev/shm`` (whatever modes a command set on its folders) and
the System V IPC objects, and before each command ``Baseline.restore`` checks that the
server's OOM adjustment (read-only ``/proc``), CPU affinity, nice value, scheduling
policy and I/O priority (which the seccomp filter lets no command change for another
process) are what it started with, and puts back what it can. ``tidy`` runs just after
the command's report, while the host takes in its output: the server reads no request
before it is done, so the next command still finds everything clean. What cannot be put
back makes the server *dirty*: the report says ``"dirty": [...]`` (or, found by
``tidy``, a message ``{"dirty": [...]}`` right after it), a command asked for afterwards
is answered ``{"id": N, "unstarted": true}`` without being run, and the host runs it in
a new server and ends this one.
"""

from __future__ import annotations

# Its start is on the way to a session's first command: the C modules beneath
# ``socket``, ``signal`` and ``selectors`` (which build enums and classes on import), no
# ``json`` or ``contextlib``, and ``subprocess`` only where no ``subreaper`` helper was
# compiled. Half the server's start was imports.
import _signal  # type: ignore[import-not-found]  # (no stub: the C module under signal)
import _socket
import ctypes
import marshal
import os
import select
import sys
import time

# (Resolved in the sandbox from the modules the host passed with this one: see
# ``server_program``.)
from codemode.sandbox.server.baseline import Baseline
from codemode.sandbox.server.proc_files import children
from codemode.sandbox.server.tidy import tidy

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
MAX_MESSAGE = 256 << 10  # the host sends nothing larger (and runs such commands itself)
# What was left behind and did not die at once (it was SIGKILLed: only a process in the
# kernel's D state lingers) is looked at again this often.
_SWEEP_INTERVAL_S = 0.02
# How long the sweep after a command may hold up its report; a fork bomb outrunning it
# is swept again every interval afterwards.
_SWEEP_BUDGET_S = 0.5
# What Python ignores and a command must not inherit ignored (as ``subprocess`` restores).
_DEFAULT_SIGNALS = (_signal.SIGPIPE, _signal.SIGXFSZ)
_SIGKILL = _signal.SIGKILL
_ESCAPES = {'"': '\\"', "\\": "\\\\"}


def to_json(value: object) -> str:
    """JSON of what the server sends (objects of integers, booleans, strings and lists
    of strings), ASCII only: the ``json`` module would cost its import at every start."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(_escaped(ch) for ch in value) + '"'
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{to_json(str(k))}:{to_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not sent: {type(value).__name__}")


def _escaped(ch: str) -> str:
    code = ord(ch)
    if 0x20 <= code < 0x7F:
        return _ESCAPES.get(ch, ch)
    if code > 0xFFFF:  # a surrogate pair, as JSON spells characters past the BMP
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


_Command = tuple[list[str], str, dict[str, str]]


def _command(request: object) -> _Command | None:
    """argv, cwd and env of a "run" request, or None when any of them is malformed."""
    if not isinstance(request, dict):
        return None
    argv, cwd, env = request.get("argv"), request.get("cwd"), request.get("env")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return None
    if not isinstance(cwd, str) or not isinstance(env, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return None
    return argv, cwd, env


class Server:
    """The loop: requests from the host, the ends of the commands it started."""

    def __init__(
        self, sock: _socket.socket, subreaper: str | None, oom_fd: int | None = None
    ) -> None:
        self.sock = sock
        self.subreaper = subreaper
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = self.libc.prctl
        self.epoll = select.epoll(flags=select.EPOLL_CLOEXEC)
        self.epoll.register(sock.fileno(), select.EPOLLIN)
        self.pidfds: dict[int, int] = {}  # pidfd -> command pid
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.mains: dict[int, tuple[int, int]] = {}  # command pid -> (request id, pidfd)
        self.by_id: dict[int, int] = {}  # request id -> command pid
        self.sweep = False  # something left behind may still be alive
        self.baseline = Baseline(self.libc, oom_fd)
        # What could not be made clean again: no command starts here any more, the
        # host replaces the server (``"dirty"`` in a report).
        self.dirty: list[str] = []

    def send(self, message: dict[str, object]) -> None:
        self.sock.send(to_json(message).encode())

    def serve(self) -> None:
        self.send({"ready": True})
        while True:
            try:
                events = self.epoll.poll(_SWEEP_INTERVAL_S if self.sweep else -1)
            except InterruptedError:
                continue
            for fd, _ in events:
                pid = self.pidfds.get(fd)
                if pid is None:
                    if not self.receive():
                        return
                else:
                    self.finished(pid)
            if self.sweep:
                self.sweep_left(0.0)

    def receive(self) -> bool:
        try:
            # (close-on-exec at once: no command may inherit another's descriptor)
            data, ancdata, flags, _ = self.sock.recvmsg(
                MAX_MESSAGE, _socket.CMSG_SPACE(4 * 4), _socket.MSG_CMSG_CLOEXEC
            )
        except InterruptedError:
            return True
        fds = [
            fd
            for level, kind, payload in ancdata
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
            for fd in memoryview(payload).cast("i")[: len(payload) // 4]
        ]
        if not data:
            return False  # the host is gone: PID 1 exits and the namespace ends
        try:
            request = marshal.loads(data)
            op, job = request["op"], int(request["id"])
        except (ValueError, KeyError, TypeError, EOFError):
            op, job = None, -1
        command = _command(request) if op == "run" else None
        whole = not flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC)
        if op == "run" and not self.dirty:
            self.dirty = self.baseline.restore()
        if op == "run" and self.dirty:
            for fd in fds:
                os.close(fd)
            # Not started: the host runs it in a new server.
            self.send({"id": job, "unstarted": True, "dirty": self.dirty})
        elif command is not None and len(fds) == 1 and whole:
            self.start(job, command, fds[0])
        else:
            for fd in fds:
                os.close(fd)
            if op == "kill":
                self.kill(job)
            elif op == "run":
                self.send({"id": job, "exit": 127, "stuck": False})
        return True

    def _become_subreaper(self) -> None:
        self.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def start(self, job: int, command: _Command, out_fd: int) -> None:
        argv, cwd, env = command
        try:
            if self.subreaper is not None and "/" in argv[0]:
                # exec'd through it (it takes a path): no fork of this process
                pid = self._spawn([self.subreaper, *argv], cwd, env, out_fd)
            else:
                import subprocess  # (only without the helper: a C compiler was lacking)

                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out_fd,
                    stderr=out_fd,
                    start_new_session=True,
                    preexec_fn=self._become_subreaper,
                )
                proc.returncode = 0  # reaped by ``finished``: subprocess must never wait
                pid = proc.pid
        except OSError as exc:
            self.failed(job, out_fd, f"{exc.filename or argv[0]}: {exc.strerror or exc}", exc)
            return
        except (ValueError, TypeError) as exc:  # a NUL byte, a name with "=": not run
            self.failed(job, out_fd, f"{argv[0]}: {exc}", exc)
            return
        finally:
            os.close(out_fd)
        pidfd = os.pidfd_open(pid)
        self.mains[pid] = (job, pidfd)
        self.by_id[job] = pid
        self.pidfds[pidfd] = pid
        self.epoll.register(pidfd, select.EPOLLIN)

    def _spawn(self, argv: list[str], cwd: str, env: dict[str, str], out_fd: int) -> int:
        """Start ``argv`` as ``subprocess.Popen`` would (new session, stdin /dev/null,
        stdout and stderr ``out_fd``, the signals Python ignores back to their
        defaults, in ``cwd``), by ``posix_spawn``: a fraction of Popen's cost. Nothing
        else is inherited: every other descriptor here is close-on-exec (``main``,
        ``receive``)."""
        os.chdir(cwd)  # (the server alone runs here, one thing at a time)
        try:
            return os.posix_spawn(
                argv[0],
                argv,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, self.devnull, 0),
                    (os.POSIX_SPAWN_DUP2, out_fd, 1),
                    (os.POSIX_SPAWN_DUP2, out_fd, 2),
                ],
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
            )
        finally:
            os.chdir("/")

    def failed(self, job: int, out_fd: int, message: str, exc: Exception) -> None:
        try:
            os.write(out_fd, f"{message}\n".encode())
        except OSError:
            pass
        code = 126 if isinstance(exc, PermissionError) else 127
        self.send({"id": job, "exit": code, "stuck": False})

    def kill(self, job: int) -> None:
        pid = self.by_id.get(job)
        if pid is not None:
            # The group first (most of what it started), then the command itself: what
            # is left is reparented here and swept when it has exited.
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, _SIGKILL)
                except OSError:
                    pass

    def finished(self, pid: int) -> None:
        job, pidfd = self.mains.pop(pid)
        self.by_id.pop(job, None)
        self.pidfds.pop(pidfd, None)
        self.epoll.unregister(pidfd)
        os.close(pidfd)
        try:
            # its background jobs; before the reap, while the zombie keeps its pid (and
            # so its group id) from being reused
            os.killpg(pid, _SIGKILL)
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        swept = self.sweep_left(_SWEEP_BUDGET_S)
        last = not self.mains and swept and not self.dirty
        if last:
            self.dirty = self.baseline.restore()
        # Not swept (a fork bomb outrunning the kills): the host ends the whole sandbox.
        report: dict[str, object] = {
            "id": job, "exit": os.waitstatus_to_exitcode(status), "stuck": not swept
        }  # fmt: skip
        if self.dirty:
            report["dirty"] = self.dirty
        self.send(report)
        if last and not self.dirty:
            # After the report, while the host reads the output and the program goes
            # on: the next request is read only once this is done, so the next command
            # still starts clean; what could not be made clean is said at once.
            self.dirty = tidy(self.libc)
            if self.dirty:
                self.send({"dirty": self.dirty})

    def sweep_left(self, budget: float) -> bool:
        """Kill and reap every child that is not a running command's first process (what
        ended commands left), for up to ``budget`` seconds of waiting; whether none is
        left."""
        deadline = time.monotonic() + budget
        while True:
            left = [pid for pid in children(os.getpid()) if pid not in self.mains]
            for pid in left:
                try:
                    os.kill(pid, _SIGKILL)
                except OSError:
                    pass
            for pid in left:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            self.sweep = bool(left)
            if not left or time.monotonic() >= deadline:
                return not left
            time.sleep(0.001)  # let the killed die (and their children be reparented)


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    # Opened while the server is still dumpable: afterwards its /proc entries belong to
    # root, and a server that is not root could no longer put its value back. In the
    # sandbox /proc is read-only, so no command can change it either: it is only read
    # (a change found anyway could not be undone, and makes the server dirty).
    oom_fd: int | None = None
    for mode in (os.O_RDWR, os.O_RDONLY):
        try:
            oom_fd = os.open("/proc/self/oom_score_adj", mode | os.O_CLOEXEC)
            break
        except OSError:
            continue
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)  # no handlers: PID 1 is then unkillable
    # Nothing the server was started with (its socket, anything bubblewrap left open)
    # passes to a command: commands are started with every other descriptor closed.
    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2:
                os.set_inheritable(int(name), False)
        except OSError:
            pass
    sock = _socket.socket(fileno=int(sys.argv[1]))
    Server(sock, sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None, oom_fd).serve()
    # The host closed the socket: exit now (no interpreter teardown to wait for); as
    # PID 1 this ends every process left in the namespace.
    os._exit(0)


if __name__ == "__main__":
    main()
