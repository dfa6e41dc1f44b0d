"""Start the tests' Python MCP servers (probe_server.py, decoy_server.py) as forks of one
process that has imported the mcp SDK, instead of a fresh interpreter each: the SDK's
import is ~1 CPU-s, and the MCP tests start some hundred servers.

``python -I -S forked.py launch SOCKET SCRIPT ARGS...`` is the command a test configures:
a stdlib-only launcher (~20 ms) that hands its own stdin, stdout and stderr, arguments,
environment and folder to the zygote listening on SOCKET, and exits with the status of
the server forked for it. The server is a real process reading and writing the pipes the
MCP client made; when the launcher dies (the client stopped or killed it) the zygote
kills the server with SIGKILL, so stopping the launcher stops the server.

``python forked.py serve SOCKET`` is the zygote (``tests/mcp_support.py`` starts one a
test process): it imports the SDK and, for each launcher, forks a child that runs SCRIPT
as ``__main__`` with the launcher's stdio, argv, environment and folder.
"""

from __future__ import annotations

import array
import json
import os
import selectors
import signal
import socket
import sys

_MAX_REQUEST = 1 << 20


def launch(sock_path: str, argv: list[str]) -> int:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    framed = len(request).to_bytes(4, "big") + request
    fds = array.array("i", [0, 1, 2])
    s.sendmsg([framed], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    # The three fds are the server's now: the launcher keeps none of them open, so the
    # client sees the server's end of the pipes alone.
    for fd in (0, 1):
        os.close(fd)
    answer = b""
    while chunk := s.recv(64):
        answer += chunk
    status = json.loads(answer or b'{"exit": 1}')
    if "signal" in status:
        signal.signal(status["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), status["signal"])
    return int(status["exit"])


def _child(request: dict[str, object], fds: list[int]) -> None:
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 65536)  # the zygote's sockets: a launcher waits for its own to close
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    os.chdir(str(request["cwd"]))
    argv = list(request["argv"])  # type: ignore[call-overload]
    sys.argv = argv
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(sock_path: str) -> None:
    import mcp.server.mcpserver
    import mcp.types  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    sel.register(sys.stdin, selectors.EVENT_READ, "stdin")  # EOF: the tests ended
    while True:
        for key, _ in sel.select():
            try:
                sel.get_key(key.fileobj)
            except KeyError:  # unregistered by an event handled just before
                continue
            if key.data is None:
                conn, _ = listener.accept()
                msg, anc, _, _ = conn.recvmsg(_MAX_REQUEST, socket.CMSG_SPACE(3 * 4))
                fds = array.array("i")
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(data[: len(data) - len(data) % 4])
                size = int.from_bytes(msg[:4], "big")
                while len(msg) < 4 + size:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    msg += chunk
                msg = msg[4:]
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    conn.close()
                    _child(json.loads(msg), list(fds))
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                sel.register(conn, selectors.EVENT_READ, ("launcher", pid, pidfd))
                sel.register(pidfd, selectors.EVENT_READ, ("server", pid, conn))
            elif key.data == "stdin":
                return
            elif key.data[0] == "launcher":
                # Readable before the server ended: the launcher is gone.
                _, pid, pidfd = key.data
                sel.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                sel.unregister(pidfd)
                os.close(pidfd)
            else:
                _, pid, conn = key.data
                sel.unregister(key.fileobj)
                os.close(key.fileobj)  # type: ignore[arg-type]
                _, status = os.waitpid(pid, 0)
                sel.unregister(conn)
                if os.WIFSIGNALED(status):
                    answer = {"signal": os.WTERMSIG(status)}
                else:
                    answer = {"exit": os.waitstatus_to_exitcode(status)}
                try:
                    conn.sendall(json.dumps(answer).encode())
                except OSError:
                    pass
                conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        sys.exit(launch(sys.argv[2], sys.argv[3:]))
    serve(sys.argv[2])
