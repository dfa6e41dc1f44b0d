"""The warm server, its clients and the warm shim beside Codex, attacked from the side
of what shares the machine: a program of the same user confined further than the
server (here ``setpriv --no-new-privs``, as a sandbox's command is) that can write the
runtime folder (a sandbox that leaves /tmp writable, as Codex's does by default); a
repository whose files a confined command wrote; a folder swapped while the server
binds; a previous command that changed the server itself.

Each test is the attack; it fails where the attack works."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from warm_support import (
    INTERPRETER,
    key_of,
    probe_server,
    served,
    socket_of,
    warm_env,
)  # fmt: skip

from codemode.codex_host.warm.beside import HOST_NAME, vendor_with_our_host
from codemode.sandbox.helpers import compiled
from codemode.warm import place, start

needs_setpriv = pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv")

SECRET = "HUSH-a1b2c3"

# A server of the same user, confined further than its callers: it takes the lock, binds
# the socket's name in the (same user's) runtime folder and reports what each
# connection handed it, answering as a server would ("accepted", then status 0).
_IMPOSTOR = r"""
import fcntl, json, os, socket, sys
path, report = sys.argv[1], sys.argv[2]
lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
os.ftruncate(lock, 0)
os.write(lock, (sys.argv[3] if len(sys.argv) > 3 else str(os.getpid())).encode() + b" 0\n")
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
got = []
with open(report + ".tmp", "w") as f:
    json.dump(got, f)
os.rename(report + ".tmp", report)
s.settimeout(300)
while True:
    try:
        conn, _ = s.accept()
    except OSError:
        break
    conn.settimeout(10)
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 8)
    except OSError:
        data, fds = b"", []
    got.append({"bytes": len(data), "fds": len(fds), "secret": b"HUSH-" in data})
    with open(report + ".tmp", "w") as f:
        json.dump(got, f)
    os.rename(report + ".tmp", report)
    if data:
        try:
            conn.sendall(b"A" + os.getpid().to_bytes(4, "big") + b"S" + bytes(4))
        except OSError:
            pass
    for fd in fds:
        os.close(fd)
    conn.close()
"""


def _until(predicate, timeout: float = 60, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


_NO_NEW_PRIVS = ("setpriv", "--no-new-privs", "--")


@contextlib.contextmanager
def _impostor(sock: str, report: Path, env: dict[str, str], pid_to_name: int | None = None,
              unlike: tuple[str, ...] = _NO_NEW_PRIVS,
              ) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """``unlike``: the command prefix that makes it other than its callers."""
    argv = [sys.executable, "-I", "-c", _IMPOSTOR, sock, str(report)]
    if pid_to_name is not None:
        argv.append(str(pid_to_name))
    proc = subprocess.Popen([*unlike, *argv], env=env, cwd="/",
                            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        _until(lambda: report.exists() or proc.poll() is not None, 60, "the impostor")
        assert proc.poll() is None, "the impostor did not start"
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


def _report(report: Path) -> list[dict[str, object]]:
    return json.loads(report.read_text())


@needs_setpriv
def test_the_launcher_hands_nothing_to_a_server_confined_further_than_itself(
    tmp_path: Path,
) -> None:
    """A confined program of the same user that can write the runtime folder takes the
    lock and listens on the socket's name. The launcher's client checks only the
    server's user: it would hand it the command's whole environment (tokens) and its
    stdin, stdout, stderr and working folder. It must start cold instead."""
    env = warm_env(tmp_path)
    sock = socket_of(env)
    report = tmp_path / "report.json"
    with _impostor(sock, report, env):
        done = subprocess.run([INTERPRETER, "policy", "check", "--", "ls"],
                              env=dict(env, API_TOKEN=SECRET), capture_output=True,
                              text=True, timeout=180, cwd=tmp_path)  # fmt: skip
        _until(lambda: _report(report), 30, "the client's connection")
        got = _report(report)
    assert not any(c["secret"] or c["fds"] or c["bytes"] for c in got), got
    assert done.stdout.startswith("decision:"), done  # it ran, cold


@needs_setpriv
def test_the_compiled_client_hands_nothing_to_a_server_confined_further_than_itself(
    tmp_path: Path,
) -> None:
    """The same impostor against the compiled client Codex's shim runs (Codex's whole
    environment, and its host's stdio: the code-mode protocol itself)."""
    client = compiled.path("warm_client.c")
    if client is None:
        pytest.skip("no C compiler here: no compiled warm client")
    env = warm_env(tmp_path)
    sock = socket_of(env)
    report = tmp_path / "report.json"
    with _impostor(sock, report, env):
        done = subprocess.run([client, sock, key_of(env), "2", "/bin/echo", "fell-back"],
                              env=dict(env, API_TOKEN=SECRET), capture_output=True,
                              timeout=60, cwd=tmp_path)  # fmt: skip
        _until(lambda: _report(report), 30, "the client's connection")
        got = _report(report)
    assert not any(c["secret"] or c["fds"] or c["bytes"] for c in got), got
    assert (done.returncode, done.stdout) == (0, b"fell-back\n"), done


def test_the_clients_still_reach_a_real_server_of_their_own(tmp_path: Path) -> None:
    """The check above refuses a server unlike the caller, not the real one: both
    clients are served by it."""
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        done = subprocess.run([INTERPRETER, "run", "exit", "4"], env=env, timeout=120)
        assert done.returncode == 4 and served(sock) == 1
        client = compiled.path("warm_client.c")
        if client is not None:
            done = subprocess.run([client, sock, key_of(env), "1", "interpreter", "run",
                                   "exit", "5"], env=env, timeout=120)  # fmt: skip
            assert done.returncode == 5 and served(sock) == 2


@needs_setpriv
def test_warm_stop_signals_only_the_process_that_holds_the_lock(tmp_path: Path) -> None:
    """The lock file names the pid `interpreter warm stop` sends SIGTERM to. A program
    that can write the runtime folder holds a lock naming another process of the user
    (here a `sleep`; as root, any process of the machine): it must not be signalled."""
    env = warm_env(tmp_path)
    sock = socket_of(env)
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        with _impostor(sock, tmp_path / "report.json", env, pid_to_name=victim.pid):
            assert place.serving(sock) == victim.pid  # what the lock says
            for args in (["warm", "stop"], ["warm", "stop", "--all"]):
                subprocess.run([INTERPRETER, *args], env=env, capture_output=True,
                               timeout=180, cwd="/")  # fmt: skip
                time.sleep(0.5)
                assert victim.poll() is None, f"`{' '.join(args)}` killed pid {victim.pid}"
    finally:
        victim.kill()
        victim.wait()


def test_warm_stop_still_stops_the_real_server(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    with probe_server(env, tmp_path / "log") as sock:
        pid = place.serving(sock)
        assert pid > 0
        assert start.stop(sock, 30) == pid
        _until(lambda: not place.serving(sock), 30, "the server's end")


# -- the warm shim beside Codex -----------------------------------------------------------


def _vendor(tmp_path: Path) -> Path:
    vendor = tmp_path / "vendor"
    (vendor / "bin").mkdir(parents=True)
    (vendor / "bin" / "codex").write_text("not needed here\n")
    return vendor


@pytest.mark.parametrize("warm", [True, False])
def test_the_shim_never_names_its_command_relative_to_where_codex_runs_it(
    tmp_path: Path, warm: bool
) -> None:
    """A command word without a folder (``["interpreter", ...]``, or what
    ``shutil.which`` returns for a relative PATH entry) is run by the compiled client
    with execv, relative to the working folder Codex starts its host in: the
    workspace, where a confined command could have planted ``interpreter``. The writer
    refuses it; had it written it, the planted program must not run."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "pwned"
    planted = work / "interpreter"
    planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
    planted.chmod(0o755)
    try:
        dest = vendor_with_our_host(_vendor(tmp_path), tmp_path / "ours",
                                    ["interpreter", "code-mode-host"], warm=warm)  # fmt: skip
    except ValueError as exc:
        assert "interpreter" in str(exc)
        return
    host = dest / "bin" / HOST_NAME
    env = dict(warm_env(tmp_path), CODEMODE_WARM="0", PATH=f".:{os.environ['PATH']}")
    subprocess.run([str(host), "--listen", "grpc+stdio://"], env=env, cwd=work,
                   capture_output=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert not marker.exists(), "the host ran the workspace's `interpreter`"
    pytest.fail("the writer accepted a command relative to the host's working folder")


def test_the_compiled_client_never_execs_a_command_relative_to_its_working_folder(
    tmp_path: Path,
) -> None:
    """Whoever wrote its words, the client's own exec (no server, a refusal) never runs
    a program named relative to the working folder it was started in."""
    client = compiled.path("warm_client.c")
    if client is None:
        pytest.skip("no C compiler here: no compiled warm client")
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "pwned"
    for name in ("interpreter", "bin/interpreter"):
        planted = work / name
        planted.parent.mkdir(exist_ok=True)
        planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
        planted.chmod(0o755)
        done = subprocess.run([client, str(tmp_path / "none.sock"), "key", "1", name],
                              env=dict(os.environ, CODEMODE_WARM="1"), cwd=work,
                              capture_output=True, timeout=60)  # fmt: skip
        assert not marker.exists(), f"the client ran the working folder's {name}"
        assert done.returncode == 127, done


def _record_writable(home: Path, root: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "writable-roots", "a") as f:
        f.write(f"{os.path.realpath(root)}\n")


def test_the_shim_is_not_written_where_a_confined_command_could_have_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace an earlier session let its commands write (``writable-roots``) may
    hold an `interpreter` they planted, or be where the copy of Codex would go (its
    shim and ``.args`` then rewritten by the next command): the writer refuses both."""
    home = tmp_path / "cm-home"
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    planted = work / "bin" / "interpreter"
    planted.write_text("#!/bin/sh\nexit 0\n")
    planted.chmod(0o755)
    _record_writable(home, work)
    vendor = _vendor(tmp_path)
    with pytest.raises(ValueError, match="writ"):
        vendor_with_our_host(vendor, tmp_path / "ours", [str(planted), "code-mode-host"])
    with pytest.raises(ValueError, match="writ"):
        vendor_with_our_host(vendor, work / "ours", [INTERPRETER, "code-mode-host"])
    assert not (work / "ours").exists()
    # And outside every such root, the same call writes the shim.
    dest = vendor_with_our_host(vendor, tmp_path / "ours", [INTERPRETER, "code-mode-host"])
    assert (dest / "bin" / HOST_NAME).read_text().startswith("#!/bin/sh\nexec ")


# -- the server's socket --------------------------------------------------------------

_SWAP_WHILE_BINDING = r"""
import os, sys
from codemode.warm import place
path, victim = sys.argv[1], sys.argv[2]
folder = os.path.dirname(path)
def attacker(event, args):
    # What another user who may write the folder above the runtime folder does, timed
    # to win the race every time: the private folder renamed aside and a folder of their
    # own put in its place once it was checked; the socket swapped for a symlink before
    # the server sets its mode.
    if event == "socket.bind" and not os.path.exists(folder + ".aside"):
        os.rename(folder, folder + ".aside")
        os.mkdir(folder)
        os.chmod(folder, 0o777)
    if event == "os.chmod" and args[0] == path:
        os.unlink(path)
        os.symlink(victim, path)
sys.addaudithook(attacker)
try:
    sock, _ = place.listen_at(path)
    print(oct(os.lstat(path).st_mode & 0o777))
except SystemExit as exc:
    print("refused:", exc)
"""


def test_a_folder_swapped_while_the_server_binds_never_gets_a_file_chmodded(
    tmp_path: Path,
) -> None:
    """The runtime folder's parent (an ``XDG_RUNTIME_DIR`` others may write) lets
    another user rename the checked folder aside and put theirs in its place before the
    bind, then swap the socket for a symlink: the server's ``chmod`` by name then
    changes the mode of the file the link names (root's server: any file). Simulated
    in the server's own process (an audit hook acts at the very moments a racing
    attacker aims for), with real folders, links and sockets."""
    runtime = tmp_path / "rt"
    runtime.mkdir()
    runtime.chmod(0o777)
    folder = runtime / "codemode"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("x")
    victim.chmod(0o644)
    path = str(folder / "warm-test.sock")
    done = subprocess.run([sys.executable, "-c", _SWAP_WHILE_BINDING, path, str(victim)],
                          capture_output=True, text=True, timeout=120, cwd="/")  # fmt: skip
    assert done.returncode == 0, done
    assert victim.stat().st_mode & 0o777 == 0o644, "the server chmodded the link's target"
    said = done.stdout.strip()
    # Either it saw the swap and would not serve there, or its socket is 0600 whatever
    # the folder (another user cannot connect to it).
    assert said.startswith("refused:") or said == "0o600", done


# -- what a run takes from the server ---------------------------------------------------

# A server whose runs report their scheduling policy; "idle-the-server" first puts the
# server itself (the run's parent) under SCHED_IDLE, as any process of the user may.
_SCHED_SERVER = r"""
import os, sys
from pathlib import Path
from codemode.warm import start
def run(args):
    if args[1:2] == ["idle-the-server"]:
        os.sched_setscheduler(os.getppid(), os.SCHED_IDLE, os.sched_param(0))
    print("policy", os.sched_getscheduler(0), flush=True)
    return 0
sys.exit(start.serve(sys.argv[1], 0, lambda: None, run, float(sys.argv[2]),
                     [Path(sys.argv[3])]))
"""


@contextlib.contextmanager
def _program_server(program: str, env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """A warm server running ``program`` (``_SCHED_SERVER``, ``_IOPRIO_SERVER``)."""
    from warm_support import _server

    watch = tmp_path / "watched"
    watch.mkdir()
    with _server([sys.executable, "-c", program], env, tmp_path / "log",
                 ["120", str(watch)], []) as sock:  # fmt: skip
        yield sock


def test_a_command_that_changes_the_server_does_not_change_the_next_command(
    tmp_path: Path,
) -> None:
    """A run's parent is the server, and a fork takes its scheduling policy: one
    command that puts the server under SCHED_IDLE (or whatever changed it since it
    started) must not have every later command of the user run at idle priority. The
    next caller, which is not under SCHED_IDLE, starts cold instead."""
    env = warm_env(tmp_path)
    with _program_server(_SCHED_SERVER, env, tmp_path) as sock:
        first = subprocess.run([INTERPRETER, "run", "idle-the-server"], env=env,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert first.stdout.strip() == f"policy {os.SCHED_OTHER}" and served(sock) == 1, first
        server = place.serving(sock)
        assert os.sched_getscheduler(server) == os.SCHED_IDLE
        later = subprocess.run([INTERPRETER, "run", "state"], env=env, capture_output=True,
                               text=True, timeout=180)  # fmt: skip
        assert f"policy {os.SCHED_IDLE}" not in later.stdout, "it ran under SCHED_IDLE"
        assert served(sock) == 1, later
        client = compiled.path("warm_client.c")
        if client is not None:
            done = subprocess.run([client, sock, key_of(env), "1", "/bin/echo", "cold"],
                                  env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
            assert done.stdout == "cold\n" and served(sock) == 1, done


def test_a_caller_under_sched_idle_is_not_run_at_the_servers_priority(tmp_path: Path) -> None:
    """`chrt --idle 0 interpreter ...` is a command the user wants at idle priority; a
    fork of the server would run it at the server's. It starts cold instead (as one at
    another nice value does)."""
    if shutil.which("chrt") is None:
        pytest.skip("chrt is not installed")
    env = warm_env(tmp_path)
    with _program_server(_SCHED_SERVER, env, tmp_path) as sock:
        done = subprocess.run(["chrt", "--idle", "0", INTERPRETER, "run", "state"], env=env,
                              capture_output=True, text=True, timeout=180)  # fmt: skip
        assert f"policy {os.SCHED_OTHER}" not in done.stdout, "it ran at the server's priority"
        assert served(sock) == 0, done


# -- the I/O priority a run takes from the server -----------------------------------------
# (No /proc file says it: ``ioprio_get`` does, and `ionice -p` here.)

needs_ionice = pytest.mark.skipif(shutil.which("ionice") is None, reason="needs ionice")
_IDLE_IO = ("ionice", "-c", "3", "--")

# What a command says of its own I/O priority: `ionice -p` of itself.
_SAY_IOPRIO = r"""
import os, subprocess
def say_ioprio(how):
    said = subprocess.run(["ionice", "-p", str(os.getpid())], capture_output=True, text=True)
    print(how, said.stdout.strip(), flush=True)
"""
# A server whose runs say it, warm; "idle-the-server" first puts the server itself (the
# run's parent) in the idle I/O class, as any process of the user may.
_IOPRIO_SERVER = (
    _SAY_IOPRIO
    + r"""
import sys
from pathlib import Path
from codemode.warm import start
def run(args):
    if "idle-the-server" in args:
        subprocess.run(["ionice", "-c", "3", "-p", str(os.getppid())], check=True)
    say_ioprio("warm")
    return 0
sys.exit(start.serve(sys.argv[1], 0, lambda: None, run, float(sys.argv[2]),
                     [Path(sys.argv[3])]))
"""
)
# The command started cold: the same words, of itself.
_IOPRIO_COLD = _SAY_IOPRIO + 'say_ioprio("cold")\n'
# The launcher's client in front of that cold command; "trusting" skips the client's
# check of the server, so that what is left is the server's check of its caller.
_IOPRIO_CALLER = (
    _SAY_IOPRIO
    + r"""
import sys
from codemode.warm import client
if sys.argv[1] == "trusting":
    client._unlike_us = lambda sock, pid: False
status = client.run(["interpreter", "run", *sys.argv[2:]])
if status is None:
    say_ioprio("cold")
sys.exit(status or 0)
"""
)


def _through_launcher_client(env: dict[str, str], *words: str, prefix: tuple[str, ...] = (),
                             trusting: bool = False) -> str:  # fmt: skip
    done = subprocess.run([*prefix, sys.executable, "-c", _IOPRIO_CALLER,
                           "trusting" if trusting else "checking", *words],
                          env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done
    return done.stdout.strip()


def _through_compiled_client(client: str, env: dict[str, str], sock: str,
                             prefix: tuple[str, ...] = ()) -> str:  # fmt: skip
    done = subprocess.run([*prefix, client, sock, key_of(env), "3", sys.executable, "-c",
                           _IOPRIO_COLD], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done
    return done.stdout.strip()


@needs_ionice
def test_a_caller_at_idle_io_priority_is_not_run_at_the_servers(tmp_path: Path) -> None:
    """`ionice -c 3 interpreter ...` is a command the user wants at idle I/O priority; a
    fork of the server would run it at the server's. It starts cold, at its own, through
    either client; and the server, handed such a caller by a client that did not check
    (a client of another version), refuses it itself."""
    env = warm_env(tmp_path)
    with _program_server(_IOPRIO_SERVER, env, tmp_path) as sock:
        assert _through_launcher_client(env) == "warm none: prio 0", "the server is not as ours"
        assert served(sock) == 1
        said = _through_launcher_client(env, prefix=_IDLE_IO)
        assert said == "cold idle", said
        client = compiled.path("warm_client.c")
        if client is not None:
            said = _through_compiled_client(client, env, sock, prefix=_IDLE_IO)
            assert said == "cold idle", said
        said = _through_launcher_client(env, prefix=_IDLE_IO, trusting=True)
        assert said == "cold idle", said
        assert "the peer differs from the server: ioprio" in (tmp_path / "log").read_text()
        assert served(sock) == 1


@needs_setpriv
@needs_ionice
def test_neither_client_hands_anything_to_a_server_at_another_io_priority(
    tmp_path: Path,
) -> None:
    """A program of the user started at idle I/O priority listens on the socket's name
    (a server left by a command under `ionice -c 3`, or one that means to slow every
    later command down): neither client hands it the command."""
    env = warm_env(tmp_path)
    sock = socket_of(env)
    report = tmp_path / "report.json"
    with _impostor(sock, report, env, unlike=_IDLE_IO):
        said = _through_launcher_client(dict(env, API_TOKEN=SECRET))
        assert said == "cold none: prio 0", said
        client = compiled.path("warm_client.c")
        if client is not None:
            said = _through_compiled_client(client, dict(env, API_TOKEN=SECRET), sock)
            assert said == "cold none: prio 0", said
        _until(lambda: _report(report), 30, "the clients' connections")
        got = _report(report)
    assert not any(c["secret"] or c["fds"] or c["bytes"] for c in got), got


@needs_ionice
def test_a_command_that_idles_the_servers_io_does_not_idle_the_next_command(
    tmp_path: Path,
) -> None:
    """A run's parent is the server, and a fork takes its I/O priority: one command that
    puts the server in the idle I/O class (`ionice -c 3 -p $PPID`) must not have every
    later command of the user run at idle I/O priority. The next caller starts cold."""
    env = warm_env(tmp_path)
    with _program_server(_IOPRIO_SERVER, env, tmp_path) as sock:
        said = _through_launcher_client(env, "idle-the-server")
        assert said == "warm none: prio 0" and served(sock) == 1, said
        server = place.serving(sock)
        idle = subprocess.run(["ionice", "-p", str(server)], capture_output=True, text=True)
        assert idle.stdout.strip() == "idle", idle
        said = _through_launcher_client(env)
        assert said == "cold none: prio 0", said
        client = compiled.path("warm_client.c")
        if client is not None:
            said = _through_compiled_client(client, env, sock)
            assert said == "cold none: prio 0", said
        assert served(sock) == 1


def test_an_io_priority_that_cannot_be_read_is_never_taken_for_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where ``ioprio_get`` cannot be made (a machine whose number for it is not known
    here) or fails (a process gone, a security module's no), the process's facts cannot
    be read, and a caller starts cold; only a kernel without I/O priorities (ENOSYS:
    nothing to inherit) gives a fact, which both sides must then share."""
    import _ctypes

    assert place.ioprio(0) is not None and place.process_facts("self") is not None
    assert place.ioprio(2**22 + 1) is None  # (past pid_max: no such process)

    def fails(number: int) -> Callable[[int, int, int], int]:
        def call(*_: int) -> int:
            _ctypes.set_errno(number)
            return -1

        return call

    monkeypatch.setattr(place, "_syscall", fails(errno.EACCES))
    assert place.ioprio(0) is None and place.process_facts("self") is None
    monkeypatch.setattr(place, "_syscall", fails(errno.ENOSYS))
    assert place.ioprio(0) == "none" and place.process_facts("self")["ioprio"] == "none"
    monkeypatch.setattr(place, "_IOPRIO_GET", {})
    assert place.ioprio(0) is None and place.process_facts("self") is None


_BLIND_SERVER = r"""
import sys
from pathlib import Path
from codemode.warm import place, start
place._IOPRIO_GET = {}  # a machine whose number for ioprio_get is not known here
def prepare():
    print("imported everything", flush=True)
sys.exit(start.serve(sys.argv[1], 0, prepare, lambda args: 0, 60, [Path(sys.argv[2])]))
"""


def test_a_server_that_cannot_read_its_own_io_priority_ends_before_its_imports(
    tmp_path: Path,
) -> None:
    """It could serve no caller (each would find it unreadable, and start cold): it
    ends at once, rather than after the imports every command that starts it pays."""
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o700)
    done = subprocess.run([sys.executable, "-c", _BLIND_SERVER, str(folder / "s.sock"),
                           str(tmp_path)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1 and "imported everything" not in done.stdout, done
    assert "cannot read this process's own facts" in done.stderr, done
    assert not (folder / "s.sock").exists()


# -- what is planted in the runtime folder ------------------------------------------------


def test_links_planted_for_the_lock_and_log_are_never_written_through(tmp_path: Path) -> None:
    """Symlinks at the lock's and the log's names (a program that could write the folder
    once) lead to files of the user: a first command, which leaves a server, writes
    through neither (``O_NOFOLLOW``), and still runs."""
    env = warm_env(tmp_path)
    sock = socket_of(env)
    victims = []
    for suffix in (".lock", ".log"):
        victim = tmp_path / f"victim{suffix}"
        victim.write_text("precious\n")
        os.symlink(victim, sock + suffix)
        victims.append(victim)
    done = subprocess.run([INTERPRETER, "policy", "check", "--", "ls"], env=env,
                          capture_output=True, text=True, timeout=180, cwd="/")  # fmt: skip
    assert done.stdout.startswith("decision:"), done
    time.sleep(3)  # (a server it left would have taken the lock by now)
    for victim in victims:
        assert victim.read_text() == "precious\n", victim
    assert place.serving(sock) == 0


def test_a_runtime_folder_that_is_a_link_is_never_used(tmp_path: Path) -> None:
    """``$XDG_RUNTIME_DIR/codemode`` made a link to a folder of the user's that is 0700
    (which could be anywhere, and change): neither the server nor a client takes it."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, runtime / "codemode")
    assert not place.private(runtime / "codemode")  # (so ``runtime_folder`` passes it by)
    with pytest.raises(SystemExit):
        place.listen_at(str(runtime / "codemode" / "warm-x.sock"))
    assert list(elsewhere.iterdir()) == []
