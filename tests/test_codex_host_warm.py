"""The warm code-mode host: the shim `beside(..., warm=True)` writes, its C client, and
the server it leaves behind (`codex_host/warm/server.py`), all as real processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.codex_host.serve.warm_socket import leave_warm_server, serving
from codemode.codex_host.warm.beside import CLIENT_NAME, HOST_NAME, vendor_with_our_host
from tests.codex_host_support import INTERPRETER, answers, short_private_folder

HELLO = {
    "type": "connection/hello",
    "supportedVersions": [1],
    "requiredCapabilities": [],
    "optionalCapabilities": [],
}


def _frame(message: Any) -> bytes:
    payload = json.dumps(message).encode()
    return struct.pack("<I", len(payload)) + payload


def _read(proc: subprocess.Popen[bytes]) -> Any:
    assert proc.stdout is not None
    head = proc.stdout.read(4)
    assert len(head) == 4, "the host closed its output"
    return json.loads(proc.stdout.read(struct.unpack("<I", head)[0]))


def _until(predicate: Any, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _stop_server(sock: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(sock + ".lock").read_text())
        os.kill(pid, signal.SIGTERM)
        _until(lambda: not _alive(pid), 30, "the warm server to stop")


@pytest.fixture
def shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A vendor copy whose host is the warm shim; its socket in a private folder of
    this test's own. Yields the shim and the socket path."""
    runtime = short_private_folder()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    vendor = tmp_path / "vendor"
    (vendor / "bin").mkdir(parents=True)
    (vendor / "bin" / "codex").write_text("not needed here\n")
    dest = vendor_with_our_host(vendor, tmp_path / "ours", [INTERPRETER, "code-mode-host"],
                                warm=True)  # fmt: skip
    host = dest / "bin" / HOST_NAME
    if not (dest / "bin" / CLIENT_NAME).exists():
        pytest.skip("no C compiler here: the warm shim is the plain one")
    words = host.read_text().split()
    sock = words[words.index("exec") + 2]
    assert sock.startswith(str(runtime / "codemode")), host.read_text()
    try:
        yield host, sock
    finally:
        _stop_server(sock)
        shutil.rmtree(runtime, ignore_errors=True)


def _start(host: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(host), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip


def _open(host: Path, *args: str) -> subprocess.Popen[bytes]:
    """A client through the shim that has said hello and been answered."""
    proc = _start(host, *args)
    assert proc.stdin is not None
    proc.stdin.write(_frame(HELLO))
    proc.stdin.flush()
    assert _read(proc)["type"] == "connection/ready"
    return proc


def _warm_up(host: Path, sock: str) -> None:
    """A first (cold) session, then the server it left answering."""
    _session(host)
    _until(lambda: answers(sock), 60, "the server the first host leaves behind")


def _session(host: Path) -> tuple[str, int, bytes]:
    """One framed session through the shim: hello, a program, the end of stdin. Returns
    the program the shim's process was while it served, its status and stderr."""
    proc = _start(host)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(_frame(HELLO))
    proc.stdin.flush()
    assert _read(proc)["type"] == "connection/ready"
    exe = os.readlink(f"/proc/{proc.pid}/exe")
    proc.stdin.close()
    status = proc.wait(60)
    return exe, status, proc.stderr.read()


def test_the_first_start_is_cold_and_leaves_a_server_the_next_one_is_served_by(
    shim: tuple[Path, str],
) -> None:
    host, sock = shim
    client = str(host.with_name(CLIENT_NAME))
    exe, status, err = _session(host)
    assert status == 0, err
    assert exe != client, "no server ran yet: the client must have started the host itself"
    _until(lambda: answers(sock), 60, "the server the first host leaves behind")
    for _ in range(2):
        exe, status, err = _session(host)
        assert (exe, status) == (client, 0), err
        assert b"Traceback" not in err


def test_a_warm_host_runs_programs_and_passes_its_exit_status_on(
    shim: tuple[Path, str],
) -> None:
    host, sock = shim
    _warm_up(host, sock)
    proc = _open(host)
    assert proc.stdin is not None and proc.stderr is not None
    assert os.readlink(f"/proc/{proc.pid}/exe").endswith(CLIENT_NAME)
    # A frame that is not JSON ends a host with status 1, warm or not.
    proc.stdin.write(struct.pack("<I", 9) + b"{not json")
    proc.stdin.flush()
    assert proc.wait(60) == 1
    assert b"Traceback" not in proc.stderr.read()


def _serving_host(pipe_fd: int, exclude: int) -> int:
    """The process (other than ``exclude``) whose stdin is the pipe ``pipe_fd`` writes."""
    target = os.readlink(f"/proc/self/fd/{pipe_fd}")
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (exclude, os.getpid()):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/fd/0") == target:
                    return int(entry)
    raise AssertionError("no process reads that pipe")


def test_killing_the_client_ends_the_host_it_was_given(shim: tuple[Path, str]) -> None:
    host, sock = shim
    _warm_up(host, sock)
    proc = _open(host)
    assert proc.stdin is not None
    served_by = _serving_host(proc.stdin.fileno(), proc.pid)
    proc.kill()
    proc.wait(10)
    _until(lambda: not _alive(served_by), 30, "the host of a killed client to end")
    # The server is still there for the next client.
    exe, status, err = _session(host)
    assert (exe.endswith(CLIENT_NAME), status) == (True, 0), err


def test_tcp_is_not_served_warm(shim: tuple[Path, str]) -> None:
    """A host listening on TCP is started by the client itself: it must be the client's
    own process, with the client's environment and limits."""
    host, sock = shim
    _warm_up(host, sock)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _start(host, "--listen", f"grpc://127.0.0.1:{port}")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"listening on grpc://127.0.0.1:{port}" in line.decode(), line
        assert os.readlink(f"/proc/{proc.pid}/exe") != str(host.with_name(CLIENT_NAME))
    finally:
        proc.kill()
        proc.wait(10)


def _server(sock: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([INTERPRETER, "code-mode-host", "--warm-server", sock, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip


def test_garbage_is_refused_and_the_server_serves_on(shim: tuple[Path, str]) -> None:
    host, sock = shim
    server = _server(sock)
    try:
        _until(lambda: answers(sock), 60, "the server")
        for junk in (b"", b"hello\0", b"codemode-warm-host/1\x003\0a\0", b"\xff" * 70000):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(30)
                s.connect(sock)
                with contextlib.suppress(OSError):
                    s.sendall(junk)
                if not junk:
                    s.shutdown(socket.SHUT_WR)
                answer = b""
                with contextlib.suppress(OSError):
                    answer = s.recv(1)
                assert answer in (b"", b"R"), answer  # never accepted
        exe, status, err = _session(host)
        assert (exe.endswith(CLIENT_NAME), status) == (True, 0), err
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(30)


def test_a_change_to_the_code_it_serves_stops_it_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    code = tmp_path / "code"
    (code / "__pycache__").mkdir(parents=True)
    sock = str(folder / "h.sock")
    server = _server(sock, "--watch", str(code))
    try:
        _until(lambda: answers(sock), 60, "the server")
        (code / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")  # bytecode: not code
        (code / ".m.py.swp").write_bytes(b"x")
        time.sleep(1)
        assert server.poll() is None and answers(sock)
        (code / "m.py").write_text("changed = True\n")
        assert server.wait(30) == 0
        assert not os.path.exists(sock)
    finally:
        if server.poll() is None:
            server.kill()


def test_an_idle_server_ends(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    sock = str(folder / "h.sock")
    server = _server(sock, "--idle", "1", "--watch", str(tmp_path))
    try:
        assert server.wait(60) == 0
        assert not os.path.exists(sock)
        assert server.stderr is not None and b"Traceback" not in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()


def test_a_folder_others_may_enter_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    server = _server(str(folder / "h.sock"), "--watch", str(tmp_path))
    assert server.wait(60) != 0
    assert server.stderr is not None
    err = server.stderr.read().decode()
    assert "is not a private folder" in err and "Traceback" not in err
    assert not (folder / "h.sock").exists()


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user (uid 65534)",
)


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder uid 65534 may reach (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="warm-host-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _client_copy(shim: tuple[Path, str], public: Path) -> str:
    """The client where uid 65534 may run it."""
    client = public / "client"
    shutil.copy(shim[0].with_name(CLIENT_NAME), client)
    client.chmod(0o755)
    return str(client)


@needs_root
def test_a_server_of_another_user_is_handed_nothing(
    shim: tuple[Path, str], public: Path
) -> None:
    """A socket another user made where ours should be gets no stdio: the client falls
    back to starting the host itself (here: echo)."""
    client = _client_copy(shim, public)
    lair = public / "lair"
    lair.mkdir(mode=0o777)
    lair.chmod(0o777)
    path = str(lair / "h.sock")
    with socket.socket(socket.AF_UNIX) as trap:  # root's: not uid 65534's
        trap.bind(path)
        os.chmod(path, 0o777)
        trap.listen(1)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             client, path, "2", "/bin/echo", "fell-back", "--listen", "grpc+stdio://"],
            capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.stdout == b"fell-back --listen grpc+stdio://\n", done
        trap.settimeout(5)
        conn, _ = trap.accept()  # it did connect, then hung up without a word
        with conn:
            conn.settimeout(5)
            data, fds, _, _ = socket.recv_fds(conn, 1024, 4)
            assert (data, fds) == (b"", [])


# A client of its own (the C client would refuse root's server first), as uid 65534.
_INTRUDER = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
cwd = os.open(".", os.O_RDONLY)
try:
    socket.send_fds(s, [b"codemode-warm-host/1\\x000\\x00"], [0, 1, 2, cwd])
    s.settimeout(30)
    print(repr(s.recv(1)))
except OSError as exc:  # hung up on before the request was sent
    print(type(exc).__name__)
"""


@needs_root
def test_a_client_of_another_user_is_dropped(shim: tuple[Path, str], public: Path) -> None:
    """Reached through a hard link in a folder anyone may enter, with the socket's
    mode loosened, our server still serves no one but us: uid 65534's request is
    dropped unanswered."""
    host, sock = shim
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3 to run a client as uid 65534")
    server = _server(sock)
    try:
        _until(lambda: answers(sock), 60, "the server")
        lair = public / "lair"
        lair.mkdir(mode=0o777)
        lair.chmod(0o777)
        os.link(sock, lair / "h.sock")
        os.chmod(lair / "h.sock", 0o666)  # the socket's own mode loosened too
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "/usr/bin/python3", "-I", "-c", _INTRUDER, str(lair / "h.sock")],
            capture_output=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
        )  # fmt: skip
        assert done.stdout in (b"b''\n", b"BrokenPipeError\n", b"ConnectionResetError\n"), done
        exe, status, err = _session(host)  # and it still serves us
        assert (exe.endswith(CLIENT_NAME), status) == (True, 0), err
    finally:
        server.terminate()
        server.wait(30)


def test_a_session_beside_another_gets_a_host_too(shim: tuple[Path, str]) -> None:
    """The spare is made once no session runs; a client arriving while one does gets a
    host made for it at once."""
    host, sock = shim
    _warm_up(host, sock)
    first = _open(host)
    assert first.stdin is not None
    try:
        for _ in range(2):  # the first took the spare; these find none made
            exe, status, err = _session(host)
            assert (exe.endswith(CLIENT_NAME), status) == (True, 0), err
    finally:
        first.stdin.close()
        assert first.wait(60) == 0


def test_asking_whether_a_server_runs_takes_no_spare(tmp_path: Path) -> None:
    """A host started with --warm beside a running server (a TCP one, refused warm)
    asks whether one runs before starting another: by its lock, since a connection
    would be handed the spare."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    sock = str(folder / "h.sock")
    assert not serving(sock)
    server = _server(sock, "--watch", str(tmp_path))
    try:
        _until(lambda: os.path.exists(sock), 60, "the server's socket")
        spares: set[str] = set()

        def spare_made() -> bool:
            spares.update(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split())
            return bool(spares)

        _until(spare_made, 60, "a spare")
        assert serving(sock)
        leave_warm_server(sock)  # what such a host does: finds one, starts none
        time.sleep(0.5)
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        assert set(children) == spares, "the question took the spare"
    finally:
        server.terminate()
        assert server.wait(30) == 0
    assert not serving(sock)
