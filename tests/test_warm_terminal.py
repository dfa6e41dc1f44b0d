"""A terminal session under a pty, through an interactive bash with job control: the
warm run has the terminal as its standard streams, a window resize reaches it, Ctrl-Z
stops it (bash reports a stopped job), `fg` continues it, Ctrl-C ends it with the
status a cold one has. The same probe started cold in the same shell is the reference.
These fail without ``codemode.warm`` (no server; ``interpreter run signals`` is no
script)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from warm_support import INTERPRETER, PROBE, probe_server, served, warm_env

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


class _Terminal:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        # Not pty.fork(): a fork of this threaded test process that runs Python before its
        # exec was once seen spinning for ever. subprocess execs from C; `setsid --ctty`
        # makes the terminal bash's controlling one, as pty.fork did.
        self.fd, terminal = pty.openpty()
        bash = subprocess.Popen(
            ["setsid", "--ctty", "/bin/bash", "--norc", "--noprofile", "-i"],
            stdin=terminal, stdout=terminal, stderr=terminal, cwd=cwd,
            env=dict(env, PS1="$ ", TERM="dumb"),
        )  # fmt: skip
        os.close(terminal)
        self.bash = bash
        self.pid = bash.pid
        self.seen = b""

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def until(self, needle: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {needle!r} in {self.seen[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536)
                except OSError:
                    break
        found = self.seen
        self.seen = self.seen[self.seen.index(needle) + len(needle):]
        return found

    def resize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close(self) -> None:
        self.bash.kill()
        self.bash.wait()
        os.close(self.fd)


def _wait_for(path: Path, line: str) -> None:
    deadline = time.monotonic() + 30
    while line not in (path.read_text().split() if path.exists() else []):
        assert time.monotonic() < deadline, f"{line} never reached the run"
        time.sleep(0.02)


def _session(term: _Terminal, command: str, notes: Path, rows: int) -> str:
    term.send(f"{command} {notes}\n".encode())
    term.until(b"ready")
    term.resize(rows, 100)  # the terminal tells its foreground job (of a new size only)
    _wait_for(notes, str(int(signal.SIGWINCH)))
    term.send(b"\x1a")  # Ctrl-Z
    term.until(b"Stopped")
    term.send(b"fg\n")
    _wait_for(notes, str(int(signal.SIGCONT)))
    term.send(b"\x03")  # Ctrl-C
    term.send(b"echo status=$((1000+$?))\n")  # 1130: not the typed line's echo
    seen = term.until(b"status=1", 60) + term.until(b"\n")
    return seen.decode(errors="replace")


def test_a_terminal_session_warm_and_cold(tmp_path: Path) -> None:
    env = warm_env(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE + "\nsys.exit(run(sys.argv[1:]))\n")
    with probe_server(env, tmp_path / "log") as sock:
        term = _Terminal(env, tmp_path)
        try:
            term.until(b"$ ")
            warm = _session(term, f"{INTERPRETER} run signals", tmp_path / "warm-notes", 40)
            assert served(sock) == 1, (tmp_path / "log").read_text() + warm
            cold = _session(term, f"{sys.executable} {probe} run signals",
                            tmp_path / "cold-notes", 41)  # fmt: skip
        finally:
            term.close()
    assert _status(warm) == _status(cold) == "130"


def _status(seen: str) -> str:
    return str(int(seen.split("status=")[-1].split()[0]) - 1000)
