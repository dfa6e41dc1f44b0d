"""A command handed to the warm server runs once: a client that has sent its request
starts cold only when the server says it did not take it (``R``, or the connection's end
before ``A``), never because of an error on the way there.

The servers here are fakes on a real Unix socket (they hold the socket's lock as a real
one does) that answer at the moments a real one can: a quick run ends, and its server
closes the connection, while its client may still be sending (the request is larger than
the socket's buffer, so the client is sure to be). Both clients are tested: the
launcher's (``codemode.warm.client``) and the compiled one."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from warm_support import INTERPRETER, key_of, socket_of, warm_env

from codemode.sandbox.helpers import compiled
from codemode.warm import protocol

# Larger than a Unix socket's send buffer (about 208 KiB): the client is still sending
# when the server answers. (One variable holds at most 128 KiB.)
_BIG = {f"BIG{n}": "x" * (100 << 10) for n in range(8)}


@contextmanager
def _fake_server(path: str, answer: bytes) -> Iterator[list[bytes]]:
    """A server on ``path`` that takes one connection, reads only the request's first
    chunk (and its descriptors, closed at once), writes ``answer`` and closes. Yields
    the first chunks it read."""
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.write(lock, b"%d 0\n" % os.getpid())
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data, fds, _, _ = socket.recv_fds(conn, 65536, protocol.FDS)
            for fd in fds:
                os.close(fd)
            seen.append(data)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        listener.close()
        os.close(lock)
        thread.join(10)


def _accepted_then_ended(code: int) -> bytes:
    return protocol.accepted(4242) + protocol.status(code << 8)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return warm_env(tmp_path, **_BIG)


@pytest.fixture
def client() -> str:
    built = compiled.path("warm_client.c")
    if built is None:
        pytest.skip("no C compiler here: no compiled warm client")
    return built


def test_the_launcher_never_runs_cold_what_the_server_took(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = socket_of(env)
    with _fake_server(path, _accepted_then_ended(7)) as seen:
        done = subprocess.run([INTERPRETER, "run", "nothing-here.js"], env=env,
                              cwd=tmp_path, capture_output=True, timeout=60)  # fmt: skip
    assert seen and seen[0].startswith(protocol.MAGIC), "the request reached the server"
    # A cold run would say the script does not exist (status 2).
    assert (done.returncode, done.stdout, done.stderr) == (7, b"", b"")


def test_the_launcher_runs_cold_what_the_server_refused(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = socket_of(env)
    with _fake_server(path, protocol.REFUSED) as seen:
        done = subprocess.run([INTERPRETER, "run", "nothing-here.js"], env=env,
                              cwd=tmp_path, capture_output=True, timeout=60)  # fmt: skip
    assert seen, "the request reached the server"
    assert done.returncode == 2 and b"nothing-here.js" in done.stderr, done.stderr


@pytest.mark.parametrize("answer, status, out", [
    (_accepted_then_ended(7), 7, b""),  # taken: the server's status, nothing run here
    (protocol.REFUSED, 0, b"itself\n"),  # refused: run here
])  # fmt: skip
def test_the_compiled_client_runs_itself_only_what_the_server_refused(
    env: dict[str, str], client: str, answer: bytes, status: int, out: bytes
) -> None:
    path = socket_of(env)
    with _fake_server(path, answer) as seen:
        done = subprocess.run([client, path, key_of(env), "1", "/bin/echo", "itself"], env=env,
                              capture_output=True, timeout=60)  # fmt: skip
    assert seen, "the request reached the server"
    assert (done.returncode, done.stdout) == (status, out), done.stderr


_REAP_BEFORE_GATE = r"""
import os, socket, sys
from pathlib import Path
from codemode.warm import server

watched = Path(sys.argv[2])
s = server.Server(sys.argv[1], lambda argv: 0, 60, [watched])
ours, theirs = socket.socketpair()
gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
os.set_blocking(gate_r, False)
pid = os.fork()
if pid == 0:  # a run that became its caller's and ended at once
    os.write(gate_w, b"k")
    os._exit(5)
os.close(gate_w)
s._started(pid, ours, gate_r)
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
s._reap()  # before the loop saw the gate
print(s.served, s.spare_kind.decode(), theirs.recv(16).hex())
"""


def test_a_run_reaped_before_its_gate_was_read_still_counts(tmp_path: Path) -> None:
    """A quick command can end before the server's loop reads its gate: it ran, so it
    is counted (`warm status`) and says what the next spare makes ready."""
    folder = Path(tempfile.mkdtemp(prefix="cmw-"))
    folder.chmod(0o700)
    watched = tmp_path / "code"
    watched.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _REAP_BEFORE_GATE, str(folder / "s.sock"), str(watched)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    served, kind, reply = done.stdout.split()
    assert (served, kind) == ("1", "k")
    assert bytes.fromhex(reply) == protocol.status(5 << 8)
