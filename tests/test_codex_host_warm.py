"""The warm code-mode host through the one warm server (``codemode.warm``): the shim
``beside(..., warm=True)`` writes, the compiled client beside the server
(``codemode/warm/warm_client.c``), and the server's spare made ready for a host, all as
real processes, from the attacker's side where there is one.

Each test's server is this user's for the test's own runtime folder, started the way the
launcher starts it (``python -m codemode.launch serve``)."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warm_support import AS_NOBODY, INTERPRETER, served, socket_of, warm_env

from codemode.codex_host.warm.beside import HOST_NAME, vendor_with_our_host, warm_words
from codemode.warm import place, start

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


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(p) for p in f.read().split())
    return found


class Shim:
    """A vendor copy whose host is the warm shim, the environment its Codex would give
    it (warm starts on, the test's own runtime folder), and the server's socket."""

    def __init__(self, host: Path, env: dict[str, str], sock: str, key: str) -> None:
        self.host, self.env, self.sock, self.key = host, env, sock, key
        self.client = str(host)  # the compiled client itself, its words beside it

    def start(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([str(self.host), *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**self.env, **env})  # fmt: skip

    def open(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        """A session that has said hello and been answered."""
        proc = self.start(*args, **env)
        assert proc.stdin is not None
        proc.stdin.write(_frame(HELLO))
        proc.stdin.flush()
        assert _read(proc)["type"] == "connection/ready"
        return proc

    def session(self, **env: str) -> tuple[str, int, bytes]:
        """One framed session: hello, the end of stdin. The program the shim's process
        was while it served, its status and stderr."""
        proc = self.open(**env)
        assert proc.stdin is not None and proc.stderr is not None
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        proc.stdin.close()
        status = proc.wait(60)
        return exe, status, proc.stderr.read()

    def server_pid(self) -> int:
        return place.serving(self.sock)

    def wait_for_spare(self) -> set[int]:
        """The server's spare, once made (a spare for a host has its engine worker).
        Once the server listens: before, while it prepares, a child of the server is a
        program its preparation runs, not a spare."""
        _until(lambda: os.path.exists(self.sock), 60, "the server's socket")
        pid = self.server_pid()
        _until(lambda: _children(pid), 60, "a spare")
        return _children(pid)


@pytest.fixture
def shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shim]:
    env = warm_env(tmp_path)
    for name in ("XDG_RUNTIME_DIR", "CODEMODE_WARM", "CODEMODE_HOME"):
        monkeypatch.setenv(name, env[name])  # the shim's writer: this process
    vendor = tmp_path / "vendor"
    (vendor / "bin").mkdir(parents=True)
    (vendor / "bin" / "codex").write_text("not needed here\n")
    dest = vendor_with_our_host(vendor, tmp_path / "ours", [INTERPRETER, "code-mode-host"],
                                warm=True)  # fmt: skip
    host = dest / "bin" / HOST_NAME
    words = warm_words(host)
    if words is None:
        pytest.skip("no C compiler here: the warm shim is the plain one")
    sock, key = words[0], words[1]
    assert sock == socket_of(env), "the shim names the server `interpreter` would reach"
    made = Shim(host, env, sock, key)
    try:
        yield made
    finally:
        start.stop(sock, 30)


def _warm_up(shim: Shim) -> None:
    """A first (cold) session, which leaves this user's server; then its spare."""
    exe, status, err = shim.session()
    assert status == 0, err
    assert exe != shim.client, "no server ran yet: the launcher must have run the host"
    _until(lambda: shim.server_pid() > 0, 60, "the server the first session leaves")
    shim.wait_for_spare()


def _serving_host(pipe_fd: int, exclude: int) -> int:
    """The process (other than ``exclude``) whose stdin is the pipe ``pipe_fd`` writes."""
    target = os.readlink(f"/proc/self/fd/{pipe_fd}")
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (exclude, os.getpid()):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/fd/0") == target:
                    return int(entry)
    raise AssertionError("no process reads that pipe")


def _status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(name)


def test_the_first_session_is_cold_and_leaves_the_one_server_the_next_ones_are_served_by(
    shim: Shim,
) -> None:
    _warm_up(shim)
    before = served(shim.sock)
    for _ in range(2):
        exe, status, err = shim.session()
        assert (exe, status) == (shim.client, 0), err
        assert b"Traceback" not in err
    assert served(shim.sock) == before + 2
    # One server for commands and hosts: `interpreter warm status` lists it.
    done = subprocess.run([INTERPRETER, "warm", "status"], env=shim.env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert shim.sock in done.stdout and str(shim.server_pid()) in done.stdout, done


def test_a_warm_host_is_its_callers_process_not_the_servers(shim: Shim, tmp_path: Path) -> None:
    """Working folder, umask and limits are the caller's, as a cold host's would be (the
    Codex host's own warm server kept the server's limits and umask, and environment:
    ``test_warm_compiled_client.py`` compares the compiled client's runs field by field,
    environment included; /proc/PID/environ shows the environment a process was exec'd
    with, the server's here, not the one it has)."""
    _warm_up(shim)
    folder = tmp_path / "where codex runs"
    folder.mkdir()
    line = f"umask 027; ulimit -n 777; exec {shlex.quote(str(shim.host))}"
    proc = subprocess.Popen(
        ["/bin/sh", "-c", line], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=folder, env=shim.env,
    )  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(_frame(HELLO))
        proc.stdin.flush()
        assert _read(proc)["type"] == "connection/ready"
        assert os.readlink(f"/proc/{proc.pid}/exe") == shim.client
        host = _serving_host(proc.stdin.fileno(), proc.pid)
        assert os.readlink(f"/proc/{host}/cwd") == str(folder)
        assert _status_field(host, "Umask") == "0027"
        limits = Path(f"/proc/{host}/limits").read_text()
        assert any(line.startswith("Max open files") and "777" in line
                   for line in limits.splitlines()), limits  # fmt: skip
    finally:
        proc.stdin.close()
        assert proc.wait(60) == 0


def test_a_sessions_host_sees_nothing_of_the_previous_session(shim: Shim) -> None:
    """Each session's host is a fresh fork of the server, never the previous one's
    process (its environment, descriptors and cells died with it)."""
    _warm_up(shim)
    first = shim.open()
    assert first.stdin is not None
    first_host = _serving_host(first.stdin.fileno(), first.pid)
    first.stdin.close()
    assert first.wait(60) == 0
    shim.wait_for_spare()
    second = shim.open()
    assert second.stdin is not None
    try:
        host = _serving_host(second.stdin.fileno(), second.pid)
        assert host != first_host
        assert not _alive(first_host)
    finally:
        second.stdin.close()
        assert second.wait(60) == 0


def test_the_spare_has_the_hosts_engine_worker_booted(shim: Shim) -> None:
    """What makes a Codex session start in milliseconds: the spare a host takes was
    forked ahead, with its engine worker (a child of its own) started."""
    _warm_up(shim)
    [spare] = shim.wait_for_spare()
    _until(lambda: _children(spare), 30, "the spare's engine worker")
    [worker] = _children(spare)
    proc = shim.open()
    assert proc.stdin is not None
    try:
        assert _serving_host(proc.stdin.fileno(), proc.pid) == spare
        assert _alive(worker)
    finally:
        proc.stdin.close()
        assert proc.wait(60) == 0


def test_two_sessions_at_once_one_takes_the_spare_the_other_a_fresh_fork(shim: Shim) -> None:
    _warm_up(shim)
    [spare] = shim.wait_for_spare()
    first = shim.open()
    second = shim.open()
    assert first.stdin is not None and second.stdin is not None
    try:
        hosts = {_serving_host(p.stdin.fileno(), p.pid) for p in (first, second)}  # type: ignore[union-attr]
        assert spare in hosts and len(hosts) == 2
        for p in (first, second):
            assert os.readlink(f"/proc/{p.pid}/exe") == shim.client
    finally:
        for p in (first, second):
            p.stdin.close()  # type: ignore[union-attr]
            assert p.wait(60) == 0


def test_a_host_ends_with_its_status_passed_on(shim: Shim) -> None:
    _warm_up(shim)
    proc = shim.open()
    assert proc.stdin is not None and proc.stderr is not None
    # A frame that is not JSON ends a host with status 1, warm or not.
    proc.stdin.write(struct.pack("<I", 9) + b"{not json")
    proc.stdin.flush()
    assert proc.wait(60) == 1
    assert b"Traceback" not in proc.stderr.read()


def test_killing_the_client_ends_the_host_it_was_given(shim: Shim) -> None:
    _warm_up(shim)
    proc = shim.open()
    assert proc.stdin is not None
    host = _serving_host(proc.stdin.fileno(), proc.pid)
    proc.kill()
    proc.wait(10)
    _until(lambda: not _alive(host), 30, "the host of a killed client to end")
    exe, status, err = shim.session()  # and the server serves the next one
    assert (exe, status) == (shim.client, 0), err


def test_the_server_killed_mid_session_takes_the_host_and_the_client_says_so(
    shim: Shim,
) -> None:
    _warm_up(shim)
    proc = shim.open()
    assert proc.stdin is not None
    host = _serving_host(proc.stdin.fileno(), proc.pid)
    os.kill(shim.server_pid(), signal.SIGKILL)
    assert proc.wait(30) == 70  # client.LOST_STATUS
    _until(lambda: not _alive(host), 30, "the host of a killed server to end")


def test_a_client_of_another_installation_is_refused_and_runs_the_command_itself(
    shim: Shim, tmp_path: Path
) -> None:
    """An upgrade while the server runs: a client whose key names other code (the
    package's files changed) is refused by the server, nothing of it runs there, and
    the client runs its command itself (here: a marker)."""
    _warm_up(shim)
    facts = ast.literal_eval(shim.key)  # place.facts: ascii() of a list
    facts[3][0][1] += 1  # __init__.py's inode: another installation's files
    marker = tmp_path / "ran"
    before = served(shim.sock)
    done = subprocess.run(
        [shim.client, shim.sock, ascii(facts), "3", "/bin/sh", "-c",
         f'echo "$0" > {shlex.quote(str(marker))}', "itself"],
        env=shim.env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done
    assert marker.read_text() == "itself\n"
    assert served(shim.sock) == before
    log = Path(shim.sock + ".log").read_text()
    assert "another installation's or process's key" in log, log


def test_a_change_to_the_code_stops_the_server_and_the_client_starts_the_host(
    shim: Shim, tmp_path: Path
) -> None:
    """The server stops listening at once when the code it serves changes; the next
    session is never served by it (the launcher runs it, and leaves a new server)."""
    code = tmp_path / "code"
    code.mkdir()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-c",
             "import sys; from pathlib import Path; from codemode.launch import serve; "
             "from codemode.warm import start;"
             "sys.exit(start.serve(sys.argv[1], 0, serve._prepare, serve._run, 0, "
             "[Path(sys.argv[2])], kind=serve._kind, prepare_spare=serve._prepare_spare, "
             "first_kind=serve.HOST))", shim.sock, str(code)],
            env=start.server_environment(shim.env), stdout=out, stderr=out, cwd="/",
            start_new_session=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        _until(lambda: place.serving(shim.sock) == server.pid, 60, "the server")
        shim.wait_for_spare()
        exe, status, err = shim.session()
        assert (exe, status) == (shim.client, 0), err
        (code / "m.py").write_text("changed = True\n")
        assert server.wait(30) == 0, log.read_text()
        exe, status, err = shim.session()
        assert exe != shim.client and status == 0, err
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_tcp_host_is_served_warm_as_its_callers(shim: Shim) -> None:
    """Served like any command (the caller's environment and limits are its own now):
    it listens, and says so on the caller's stderr."""
    _warm_up(shim)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = shim.start("--listen", f"grpc://127.0.0.1:{port}")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"listening on grpc://127.0.0.1:{port}" in line.decode(), line
        assert os.readlink(f"/proc/{proc.pid}/exe") == shim.client
    finally:
        proc.send_signal(signal.SIGTERM)  # passed on to the host, which ends
        assert proc.wait(30) in (143, -signal.SIGTERM, 0, 1)


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


def _client_copy(shim: Shim, public: Path) -> str:
    client = public / "client"
    shutil.copy(shim.client, client)
    client.chmod(0o755)
    return str(client)


_TRAP = r"""
import os, socket, sys
trap = socket.socket(socket.AF_UNIX)
trap.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
trap.listen(1)
print("listening", flush=True)
trap.settimeout(30)
conn, _ = trap.accept()
conn.settimeout(5)
data, fds, _, _ = socket.recv_fds(conn, 1024, 4)
print(repr((data, len(fds))), flush=True)
"""


@needs_root
def test_a_socket_of_another_user_is_handed_nothing(shim: Shim, public: Path) -> None:
    """A socket uid 65534 planted where our client looks (its folder open to it) gets
    no descriptor and no byte from root's client, which runs its command itself."""
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3 to listen as uid 65534")
    lair = public / "lair"
    lair.mkdir(mode=0o777)
    lair.chmod(0o777)
    path = str(lair / "h.sock")
    trap = subprocess.Popen([*AS_NOBODY, "/usr/bin/python3", "-I", "-c", _TRAP, path],
                            stdout=subprocess.PIPE, text=True, cwd="/")  # fmt: skip
    try:
        assert trap.stdout is not None and trap.stdout.readline() == "listening\n"
        done = subprocess.run(
            [shim.client, path, shim.key, "2", "/bin/echo", "fell-back", "--listen",
             "grpc+stdio://"],
            capture_output=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
        )  # fmt: skip
        assert done.stdout == b"fell-back --listen grpc+stdio://\n", done
        assert trap.stdout.readline() == "(b'', 0)\n"  # connected, then hung up unheard
    finally:
        trap.kill()
        trap.wait()


@needs_root
def test_a_client_of_another_user_is_refused_by_our_server(shim: Shim, public: Path) -> None:
    """Our server reached through a hard link in a folder anyone may enter, its mode
    loosened: uid 65534's compiled client is served nothing (it refuses a server of
    another user before it sends a byte; the server refuses another user's peer in turn:
    tests/test_warm_boundaries.py) and runs its command itself; our server still serves
    us."""
    _warm_up(shim)
    client = _client_copy(shim, public)
    lair = public / "lair"
    lair.mkdir(mode=0o777)
    lair.chmod(0o777)
    os.link(shim.sock, lair / "h.sock")
    os.chmod(lair / "h.sock", 0o666)
    before = served(shim.sock)
    done = subprocess.run(
        [*AS_NOBODY, client, str(lair / "h.sock"), shim.key, "2", "/bin/echo", "fell-back"],
        capture_output=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
    )  # fmt: skip
    assert done.stdout == b"fell-back\n", done
    assert served(shim.sock) == before
    exe, status, err = shim.session()
    assert (exe, status) == (shim.client, 0), err
