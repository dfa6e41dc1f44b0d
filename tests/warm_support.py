"""Warm servers for tests: each against a private runtime folder (``XDG_RUNTIME_DIR``
pointed into the test's temporary folder), so tests running side by side never share
one, and none outlives its test.

``real_server`` serves `interpreter` commands (``codemode.launch serve``); ``probe_server``
serves the same launcher with a run that reports what its process looks like, so
tests can compare it field by field with a cold process set up the same way.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from codemode.warm import place, start

REPO = Path(__file__).resolve().parents[1]
INTERPRETER = str(Path(sys.executable).with_name("interpreter"))

# A run reporting its own process (mode after `run`): "state" prints it as JSON;
# "signals" prints "ready" and writes each signal it gets to the file named next;
# "sleep" prints "ready" and sleeps; "exit N" exits with N; "writer" appends to the file
# named next until killed (SIGTERM: for 2 s more).
PROBE = r'''
import json, os, resource, signal, sys, tempfile, time

def state(stdin):
    return {
        "argv": sys.argv[1:],
        "env": dict(os.environ),
        "cwd": os.readlink("/proc/self/cwd"),
        "umask": (lambda m: (os.umask(m), m)[1])(os.umask(0)),
        "rlimits": {n: resource.getrlimit(getattr(resource, n))
                    for n in ("RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_AS")},
        "ignored": [int(n) for n in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
                                     signal.SIGTERM, signal.SIGUSR1, signal.SIGPIPE)
                    if signal.getsignal(n) == signal.SIG_IGN],
        "int_handler": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "own_group": os.getpgid(0) == os.getpid(),
        "ttys": [os.isatty(fd) for fd in range(3)],
        "line_buffered": sys.stdout.line_buffering,
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "stdin": sys.stdin.read() if stdin else None,
        "tempdir": tempfile.gettempdir(),
        "tz": list(time.tzname),
        "path0": sys.path[0] if sys.path else None,
        "comm": open("/proc/self/comm").read().strip(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
        "cgroup": open("/proc/self/cgroup").read(),
    }

def run(args):
    mode = args[1]
    if mode == "state":
        print(json.dumps(state(args[2:3] == ["stdin"])))
        return 0
    if mode == "exit":
        sys.exit(int(args[2]))
    if mode == "writer":
        # Writes until killed; SIGTERM makes it finish gracefully, writing on a while
        # (as a command ends a write it has begun).
        path = args[2]
        with open(path, "a") as f:
            f.write("x")  # (before "ready": a kill right after it finds the file)
        def finish(number, frame):
            end = time.monotonic() + 2
            while time.monotonic() < end:
                with open(path, "a") as f:
                    f.write("x")
                time.sleep(0.01)
            sys.exit(0)
        signal.signal(signal.SIGTERM, finish)
        print("ready", flush=True)
        while True:
            with open(path, "a") as f:
                f.write("x")
            time.sleep(0.01)
    if mode == "signals":
        path = args[2]
        def note(number, frame):
            with open(path, "a") as f:
                f.write(f"{number}\n")
        for number in (signal.SIGWINCH, signal.SIGHUP, signal.SIGUSR1, signal.SIGCONT):
            signal.signal(number, note)
    print("ready", flush=True)
    # Short sleeps: Python runs a signal's handler when it next looks, and a signal
    # that lands just before a long sleep begins would wait for that sleep's end.
    end = time.monotonic() + 60
    while time.monotonic() < end:
        time.sleep(0.05)
    return 3
'''

_PROBE_SERVER = PROBE + r'''
from pathlib import Path
tempfile.gettempdir()  # as codemode's server has: Python keeps the answer in the module
from codemode.warm import start
import codemode.warm.server
idle, rest = float(sys.argv[2]), sys.argv[3:]
if rest and rest[0].startswith("max_runs="):
    codemode.warm.server.MAX_RUNS = int(rest.pop(0).split("=")[1])
watched = [Path(p) for p in rest]
sys.exit(start.serve(sys.argv[1], 0, lambda: None, run, idle, watched or None))
'''

_PROBE_COLD = PROBE + r'''
sys.exit(run(sys.argv[1:]))
'''


def warm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for `interpreter` with warm starts on and a runtime folder of
    the test's own."""
    # Short (a socket's path has room for 107 bytes: a long one would fall back to the
    # shared /tmp/codemode-UID) and the test's own; removed when the test run ends.
    runtime = Path(tempfile.mkdtemp(prefix="cmw-"))
    atexit.register(shutil.rmtree, runtime, True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(XDG_RUNTIME_DIR=str(runtime), CODEMODE_WARM="1", CODEMODE_HOME=str(home))
    env.update(extra)
    return env


def socket_of(env: dict[str, str], user: list[str] | None = None) -> str:
    """Asked of a process started with ``env`` (as ``user``: a command prefix such as
    ``AS_NOBODY``): its Python options (-B from PYTHONDONTWRITEBYTECODE...) are part of
    the key, and this one's may differ."""
    return _asked(env, "place.socket_path()", user or [])


def key_of(env: dict[str, str]) -> str:
    """The installation's key (``place.facts``) as a process started with ``env`` has
    it: what a compiled client is given."""
    return _asked(env, "place.facts()", [])


def _asked(env: dict[str, str], expression: str, user: list[str]) -> str:
    done = subprocess.run(
        [*user, sys.executable, "-c", f"from codemode.warm import place; print({expression})"],
        env=env, capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done
    return done.stdout.strip()


def _answers(path: str) -> bool:
    """Whether a server listens on ``path`` (the connection, closed at once, runs
    nothing)."""
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
        except OSError:
            return False
    return True


@contextmanager
def _server(argv: list[str], env: dict[str, str], log: Path, after: list[str],
            user: list[str]) -> Iterator[str]:  # fmt: skip
    path = socket_of(env, user)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            user + argv + [path] + after,
            env=start.server_environment(env), stdin=subprocess.DEVNULL, stdout=out,
            stderr=out, close_fds=True, start_new_session=True, cwd="/",
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _answers(path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no warm server: {log.read_text()}")
            time.sleep(0.05)
        yield path
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def real_server(env: dict[str, str], log: Path) -> AbstractContextManager[str]:
    return _server([sys.executable, "-m", "codemode.launch", "serve"], env, log, ["0"], [])


def probe_server(env: dict[str, str], log: Path, idle: float = 120, watch: Path | None = None,
                 user: list[str] | None = None,
                 max_runs: int | None = None) -> AbstractContextManager[str]:  # fmt: skip
    after = [str(idle)] + ([f"max_runs={max_runs}"] if max_runs else [])
    # A folder of its own to watch unless the test names one: the installation's folders
    # change while other tests run beside it (a first run writes bytecode and caches
    # there), and a server that sees a change stops, which is not what these tests ask.
    if watch is None:
        watch = Path(tempfile.mkdtemp(prefix="cmw-watch-"))
        watch.chmod(0o755)  # (a server of uid 65534 must be able to watch it, or not serve)
        atexit.register(shutil.rmtree, watch, True)
    after += [str(watch)]
    return _server([sys.executable, "-c", _PROBE_SERVER], env, log, after, user or [])


NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def probe_cold(args: list[str]) -> list[str]:
    """The probe started cold with ``args`` (as `interpreter` would get them)."""
    return [sys.executable, "-c", _PROBE_COLD, *args]


def wait_for_server(path: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not _answers(path):
        assert time.monotonic() < deadline, "no warm server"
        time.sleep(0.05)


def served(path: str) -> int:
    return place.served(path)


def caller_limits() -> None:
    """A caller's process state that differs from the server's in every inherited way
    (a ``preexec_fn``): umask, core and open-file limits, SIGHUP ignored as under
    `nohup`, SIGUSR1 ignored, SIGUSR2 blocked."""
    os.umask(0o027)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 777), min(hard, 9999)))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])


def probe_state(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"") -> dict:
    """What a probe run (``PROBE``) reports of its process, started with ``caller_limits``."""
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True,
                          timeout=120, preexec_fn=caller_limits)  # fmt: skip
    assert done.returncode == 0, done
    return json.loads(done.stdout)


_SIGNAL_FIELDS = ("State", "Threads", "SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")


def _process_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().replace(b"\0", b" ")[:80].decode(errors="replace")
    except OSError as exc:
        return f"{pid}: {exc}"
    shown = " ".join(f"{k}={fields.get(k, '?').strip()}" for k in _SIGNAL_FIELDS)
    return f"{pid} [{argv}] {shown} wchan={wchan}"


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (none once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def processes_of(caller: int, sock: str, log: Path) -> str:
    """What a signal test says when a run did not end or hear a signal: the caller, the
    server and each of its children (state, signals pending, blocked, ignored, caught,
    where each waits) and the end of the server's log."""
    lines = [f"caller {_process_line(caller)}"]
    server = place.serving(sock)
    if server > 0:
        lines.append(f"server {_process_line(server)}")
        lines += [f"child {_process_line(child)}" for child in children(server)]
    try:
        lines.append("server log: " + log.read_text(errors="replace")[-3000:])
    except OSError:
        pass
    return "\n".join(lines)
