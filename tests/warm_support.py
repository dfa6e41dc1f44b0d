"""Warm servers for tests: each against a private runtime folder (``XDG_RUNTIME_DIR``
pointed into the test's temporary folder), so tests running side by side never share
one, and none outlives its test.

``real_server`` serves `interpreter` commands (``codemode.launch serve``); ``probe_server``
serves the same launcher with a run that reports what its process looks like, so
tests can compare it field by field with a cold process set up the same way.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from codemode.warm import place, start

REPO = Path(__file__).resolve().parents[1]
INTERPRETER = str(Path(sys.executable).with_name("interpreter"))

# A run reporting its own process (mode after `run`): "state" prints it as JSON;
# "signals" prints "ready" and writes each signal it gets to the file named next;
# "sleep" prints "ready" and sleeps; "exit N" exits with N.
PROBE = r'''
import json, os, resource, signal, sys, time

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
        "tz": list(time.tzname),
    }

def run(args):
    mode = args[1]
    if mode == "state":
        print(json.dumps(state(args[2:3] == ["stdin"])))
        return 0
    if mode == "exit":
        sys.exit(int(args[2]))
    if mode == "signals":
        path = args[2]
        def note(number, frame):
            with open(path, "a") as f:
                f.write(f"{number}\n")
        for number in (signal.SIGWINCH, signal.SIGHUP, signal.SIGUSR1, signal.SIGCONT):
            signal.signal(number, note)
    print("ready", flush=True)
    time.sleep(60)
    return 3
'''

_PROBE_SERVER = PROBE + r'''
from codemode.warm import start
sys.exit(start.serve(sys.argv[1], 0, lambda: None, run, 120))
'''

_PROBE_COLD = PROBE + r'''
sys.exit(run(sys.argv[1:]))
'''


def warm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for `interpreter` with warm starts on and a runtime folder of
    the test's own."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(XDG_RUNTIME_DIR=str(runtime), CODEMODE_WARM="1", CODEMODE_HOME=str(home))
    env.update(extra)
    return env


def socket_of(env: dict[str, str]) -> str:
    return place.socket_path(env)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def _server(argv: list[str], env: dict[str, str], log: Path) -> Iterator[str]:
    path = socket_of(env)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv + [path] + (["0"] if argv[1] == "-m" else []),
            env=start.server_environment(env), stdin=subprocess.DEVNULL, stdout=out,
            stderr=out, close_fds=True, start_new_session=True, cwd="/",
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _is_socket(path):
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
    return _server([sys.executable, "-m", "codemode.launch", "serve"], env, log)


def probe_server(env: dict[str, str], log: Path) -> AbstractContextManager[str]:
    return _server([sys.executable, "-c", _PROBE_SERVER], env, log)


def probe_cold(args: list[str]) -> list[str]:
    """The probe started cold with ``args`` (as `interpreter` would get them)."""
    return [sys.executable, "-c", _PROBE_COLD, *args]


def served(path: str) -> int:
    return place.served(path)
