"""The warm server's boundaries, from the attacker's side: another user (its client,
its socket, its folder), a caller confined further than the server (its own
namespaces, no-new-privileges), garbage on the socket, an upgrade while it runs, the
server killed mid-run; and the launcher's own promises (the standard library only; a
first start leaves a server that holds none of its pipes). All of these fail without
``codemode.warm``."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from warm_support import (
    AS_NOBODY,
    INTERPRETER,
    NOBODY,
    children,
    probe_server,
    served,
    socket_of,
    wait_for_server,
    warm_env,
)  # fmt: skip

from codemode.warm import place, protocol

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user (uid 65534)",
)


@pytest.fixture
def public() -> Iterator[Path]:
    """A folder uid 65534 may reach (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="warm-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _until(predicate, timeout: float = 30, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


_INTRUDER = r"""
import os, socket, sys
sys.path.insert(0, sys.argv[2])
from codemode.warm import protocol
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
cwd = os.open(".", os.O_PATH)
request = protocol.Request(sys.argv[3], ["interpreter", "run", "state"], {}, 0o22, {}, [], [])
try:
    socket.send_fds(s, [request.encode()], [0, 1, 2, cwd])
    s.settimeout(30)
    print(repr(s.recv(1)))
except OSError as exc:
    print(type(exc).__name__)
"""


@needs_root
def test_a_client_of_another_user_is_refused(tmp_path: Path, public: Path) -> None:
    """Through a hard link in a folder anyone may enter, the socket's mode loosened,
    a request of uid 65534 (with the server's own facts) runs nothing."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        lair = public / "lair"
        lair.mkdir()
        lair.chmod(0o777)
        os.link(sock, lair / "s.sock")
        os.chmod(lair / "s.sock", 0o666)
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-I", "-c", _INTRUDER, str(lair / "s.sock"),
             str(Path(__file__).resolve().parents[1]), place.facts(env)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd="/",
        )  # fmt: skip
        assert done.stdout.strip() in ("b'R'", "b''", "BrokenPipeError",
                                       "ConnectionResetError"), done  # fmt: skip
        assert served(sock) == 0
        assert "another user (uid 65534)" in (tmp_path / "log").read_text()
        ok = subprocess.run([INTERPRETER, "run", "exit", "0"], env=env, timeout=60)
        assert ok.returncode == 0 and served(sock) == 1  # and it serves us still


@needs_root
def test_a_socket_or_folder_of_another_user_is_never_used(public: Path) -> None:
    """uid 65534's runtime folder is made by root (the attacker here), loosened, with
    a socket listening under every name: 65534's launcher connects to none and runs
    cold."""
    runtime = public / "rt"
    runtime.mkdir()
    runtime.chmod(0o777)
    lair = runtime / "codemode"
    lair.mkdir()
    lair.chmod(0o777)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), CODEMODE_WARM="1",
               CODEMODE_HOME=str(public / "home"), HOME=str(public))  # fmt: skip
    traps = []
    key = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", "from codemode.warm import place; print(place.key())"],
        env=env, capture_output=True, text=True, cwd="/",
    ).stdout.strip()  # fmt: skip
    assert key
    for folder in (lair, Path(f"/tmp/codemode-{NOBODY}")):
        if folder.exists() and folder != lair:
            st = folder.lstat()
            if st.st_uid == NOBODY and not st.st_mode & 0o077 and folder.is_dir():
                continue  # 65534's own private folder (an earlier command made it): its
                # launcher may use it, and no one else can plant anything in it
            pytest.skip(f"{folder} exists already")
        folder.mkdir(exist_ok=True)
        folder.chmod(0o777)
        trap = socket.socket(socket.AF_UNIX)
        trap.bind(str(folder / f"warm-{key}.sock"))
        os.chmod(folder / f"warm-{key}.sock", 0o777)
        trap.listen(4)
        trap.setblocking(False)
        lock = os.open(folder / f"warm-{key}.sock.lock", os.O_CREAT | os.O_RDWR, 0o666)
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)  # "a server runs here"
        traps.append((trap, lock, folder))
    try:
        # (Not `run`: its engine worker cannot start as uid 65534 where the venv's
        # Python lives in root's home, cold or warm.)
        runs = [subprocess.run([*AS_NOBODY, INTERPRETER, "policy", "check", "--", "ls"],
                               env=dict(env, CODEMODE_WARM=mode), capture_output=True,
                               text=True, timeout=120, cwd="/")
                for mode in ("1", "0")]  # fmt: skip
        assert runs[0].stdout.startswith("decision:"), runs[0]
        assert (runs[0].returncode, runs[0].stdout) == (runs[1].returncode, runs[1].stdout)
        for trap, _, _ in traps:
            with pytest.raises(BlockingIOError):
                trap.accept()  # nobody knocked
    finally:
        for trap, lock, folder in traps:
            trap.close()
            os.close(lock)
            if folder != lair:
                shutil.rmtree(folder, ignore_errors=True)


@needs_root
@pytest.mark.parametrize("confinement", [
    ["unshare", "--net", "--"],  # a network namespace of its own (as the sandbox's)
    ["setpriv", "--no-new-privs", "--"],  # as every confined command has
])  # fmt: skip
def test_a_caller_confined_further_than_the_server_is_refused(
    tmp_path: Path, confinement: list[str]
) -> None:
    """It starts cold, still confined (here: the real `run`, which finds no script
    named "state"), and nothing ran in the server's unconfined process."""
    if shutil.which(confinement[0]) is None:
        pytest.skip(f"{confinement[0]} is not installed")
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        done = subprocess.run([*confinement, INTERPRETER, "run", "exit", "5"], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode != 5, done
        assert served(sock) == 0
        log = (tmp_path / "log").read_text()
        assert "the peer differs from the server" in log, (log, done)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_confined_caller_that_reaches_a_ready_spare_gets_nothing_of_it(
    tmp_path: Path,
) -> None:
    """A spare is handed a connection of this user before the rest of the peer's check
    (its /proc, made while the spare reads the request): a caller that fails it gets no
    run (it starts cold, still confined), the spare is killed, and the server makes
    another and serves on."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        assert subprocess.run([INTERPRETER, "run", "exit", "4"], env=env,
                              timeout=60).returncode == 4  # fmt: skip
        server = place.serving(sock)
        _until(lambda: len(children(server)) == 1, 30, "a spare")  # made once quiet
        (spare,) = children(server)
        confined = ["setpriv", "--no-new-privs", "--", INTERPRETER, "run", "exit", "5"]
        done = subprocess.run(confined, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 2 and "exit" in done.stderr, done  # the cold CLI's usage error
        _until(lambda: _gone(spare), 30, "the spare killed")
        assert served(sock) == 1
        log = (tmp_path / "log").read_text()
        assert "the peer differs from the server" in log, (log, done)
        _until(lambda: len(children(server)) == 1, 30, "another spare")
        assert subprocess.run([INTERPRETER, "run", "exit", "6"], env=env,
                              timeout=60).returncode == 6  # fmt: skip
        assert served(sock) == 2


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\n\r\n",
    protocol.MAGIC + b"\xff\xff\xff\xff",  # a length past the bound
    protocol.MAGIC + b"\x00\x00\x00\x05{\"a\":",  # cut short
    protocol.MAGIC + b"\x00\x00\x00\x02[]",
])  # fmt: skip
def test_garbage_is_refused_and_the_server_serves_on(tmp_path: Path, garbage: bytes) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock)
            folder = os.open(".", os.O_PATH)
            socket.send_fds(s, [garbage], [0, 1, 2, folder])
            os.close(folder)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(30)
            assert s.recv(1) == protocol.REFUSED
        assert "Traceback" not in (tmp_path / "log").read_text()
        ok = subprocess.run([INTERPRETER, "run", "exit", "4"], env=env, timeout=60)
        assert ok.returncode == 4 and served(sock) == 1  # ours alone


def test_another_installations_facts_are_refused(tmp_path: Path) -> None:
    """A request naming other facts (another venv, version, priority, locale) runs
    nothing, even on this socket."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        other = place.facts(env).replace("codemode", "codemodf")
        request = protocol.Request(other, ["interpreter", "run", "exit", "9"], {}, 0o22, {}, [], [])
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock)
            folder = os.open(".", os.O_PATH)
            socket.send_fds(s, [request.encode()], [0, 1, 2, folder])
            os.close(folder)
            s.settimeout(30)
            assert s.recv(1) == protocol.REFUSED
        assert "another installation" in (tmp_path / "log").read_text()


def test_python_start_variables_reach_another_server() -> None:
    base = {"PATH": "/usr/bin", "LANG": "C.UTF-8"}
    keys = {place.key(base), place.key({**base, "PYTHONPATH": "/elsewhere"}),
            place.key({**base, "LANG": "de_DE.UTF-8"}), place.key({**base, "PYTHONUTF8": "1"})}
    assert len(keys) == 4
    assert place.key(base) == place.key({**base, "SECRET": "x", "HOME": "/else"})


def test_a_change_to_the_code_it_serves_stops_it_at_once(tmp_path: Path) -> None:
    """An upgrade while it runs: the server stops listening (runs in progress finish)
    and the next command starts cold."""
    env = warm_env(tmp_path)
    code = tmp_path / "code"
    code.mkdir()
    with probe_server(env, tmp_path / "log", watch=code) as sock:
        (code / "new_module.py").write_text("")
        _until(lambda: not os.path.exists(sock), 30, "the stale server to stop listening")
        done = subprocess.run([INTERPRETER, "run", "exit", "3"], env=dict(env, CODEMODE_WARM="0"),
                              capture_output=True, timeout=120)  # fmt: skip
        assert done.returncode != 3  # cold: the real `run`


def test_an_upgraded_installation_never_reaches_the_old_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files an upgrade rewrites are part of the socket's key. (On a copy of them:
    touching the installation's own would, for that moment, send every command of the
    tests running beside this one to another socket, and stop the run's servers.)"""
    package = tmp_path / "codemode"
    for name in ("__init__.py", "version.py", "warm/server.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(place.package_folder()) / name, package / name)
    monkeypatch.setattr(place, "package_folder", lambda: str(package))
    before = place.key()
    for name in ("__init__.py", "version.py", "warm/server.py"):
        st = os.stat(package / name)
        os.utime(package / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert place.key() != before, name
        os.utime(package / name, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert place.key() == before
    (package / "version.py").write_text('__version__ = "99.0"\n')  # a rewrite: another size
    assert place.key() != before


def test_an_idle_server_ends(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log", idle=1) as sock:
        _until(lambda: not place.serving(sock), 30, "the idle server to end")
        assert not os.path.exists(sock)


def test_the_server_killed_mid_run_fails_the_command_and_ends_the_run(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        server = place.serving(sock)
        proc = subprocess.Popen([INTERPRETER, "run", "sleep"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        with open(f"/proc/{server}/task/{server}/children") as f:
            (run,) = [int(p) for p in f.read().split()]
        os.kill(server, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 70
        assert b"the warm server ended during the command" in err and b"Traceback" not in err
        _until(lambda: not os.path.exists(f"/proc/{run}"), 30, "the orphaned run to end")


def test_the_launcher_imports_the_standard_library_only(tmp_path: Path) -> None:
    # The variable, not -X importtime: Python's options are part of the server's key,
    # and so is this variable, so the server is started with it too.
    env = warm_env(tmp_path, PYTHONPROFILEIMPORTTIME="1")
    with probe_server(env, tmp_path / "log") as sock:
        done = subprocess.run([INTERPRETER, "run", "exit", "0"],
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0 and served(sock) == 1, done
    ours = {"codemode", "codemode.launch", "codemode.version", "codemode.warm",
            "codemode.warm.place", "codemode.warm.protocol", "codemode.warm.client"}  # fmt: skip
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line][1:]  # fmt: skip
    others = [m for m in imported if m.split(".")[0] not in sys.stdlib_module_names
              and m not in ours and not m.startswith("_")
              and m not in ("sitecustomize", "usercustomize")]  # the machine's own  # fmt: skip
    assert others == [], others
    assert "codemode.cli" not in imported
    # Nor the standard library's pure-Python modules that cost the most to import (with
    # what they import, about half of the launcher's start): compiled ones only.
    assert not {"json", "socket", "signal", "enum", "re", "functools", "subprocess",
                "selectors", "collections"} & set(imported), imported  # fmt: skip


def test_a_first_start_is_cold_and_leaves_a_server_holding_none_of_its_pipes(
    tmp_path: Path,
) -> None:
    env = warm_env(tmp_path, CODEMODE_WARM_IDLE="60")
    (tmp_path / "hi.js").write_text('console.log("hi")\n')
    sock = socket_of(env)
    try:
        # capture_output: this returns only once every holder of its pipes has closed
        # them, the server left behind included.
        first = subprocess.run([INTERPRETER, "run", "hi.js"], env=env, cwd=tmp_path,
                               capture_output=True, timeout=120)  # fmt: skip
        assert (first.returncode, first.stdout) == (0, b"hi\n")
        wait_for_server(sock)
        second = subprocess.run([INTERPRETER, "run", "hi.js"], env=env, cwd=tmp_path,
                                capture_output=True, timeout=120)  # fmt: skip
        assert (second.returncode, second.stdout) == (0, b"hi\n")
        assert served(sock) == 1
        status = subprocess.run([INTERPRETER, "warm", "status"], env=env, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert "running (pid" in status.stdout and "1 commands run" in status.stdout
    finally:
        stop = subprocess.run([INTERPRETER, "warm", "stop"], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    assert "stopped 1 server" in stop.stdout
    assert not place.serving(sock)


def test_the_warm_commands_are_every_command_but_the_interactive_ones() -> None:
    from codemode.cli.root import COMMAND_MODULES
    from codemode.launch import WARM_COMMANDS

    assert WARM_COMMANDS == set(COMMAND_MODULES) - {"resume", "warm"}


def test_callers_beyond_the_bound_start_cold(tmp_path: Path) -> None:
    """A client holds a process per connection: past the bound (1 here), a caller is
    refused and starts cold (the real `run`, which finds no script "exit")."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log", max_runs=1) as sock:
        first = subprocess.Popen([INTERPRETER, "run", "sleep"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert first.stdout is not None and first.stderr is not None
        line = first.stdout.readline()
        # (seen once in CI, not again: the first caller was not served warm; what the
        # server logged and the command said tell why)
        assert line == b"ready\n", (
            f"{line!r}; server log: {(tmp_path / 'log').read_text(errors='replace')}; "
            f"stderr: {first.stderr.read(4000) if first.poll() is not None else ''!r}")
        second = subprocess.run([INTERPRETER, "run", "exit", "6"], env=env,
                                capture_output=True, timeout=120)  # fmt: skip
        assert second.returncode != 6 and b"Traceback" not in second.stderr
        assert "1 commands run already" in (tmp_path / "log").read_text()
        first.send_signal(signal.SIGINT)
        first.wait(60)
        again = subprocess.run([INTERPRETER, "run", "exit", "6"], env=env, timeout=120)
        assert again.returncode == 6 and served(sock) == 2
